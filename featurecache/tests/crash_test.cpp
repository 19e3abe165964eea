// A writer killed with SIGKILL, at every step of adding a version and at
// random moments of an ingest, leaves a file that opens, whose older versions
// are intact and verify, and never a half-visible version. Runs the real
// hpcml-fcache binary (HPCML_FCACHE_BIN).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "hpcml/featurecache/feature_set.hpp"
#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

// fork + exec of an ingest; returns the child's pid.
pid_t StartIngest(const std::string& h5, const std::string& csv, const char* crash_point) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (crash_point != nullptr) ::setenv("HPCML_FCACHE_TEST_CRASH", crash_point, 1);
    ::execl(HPCML_FCACHE_BIN, HPCML_FCACHE_BIN, "ingest", h5.c_str(), "--csv", csv.c_str(),
            "--entity", "id", "--timestamp", "ts", "--label", "y", "--classification", "internal",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

int Wait(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return st;
}

std::string MakeCsv(const TempDir& dir, const std::string& name, int rows) {
  std::string text = "id,ts,y,a,b,c,d,e,f,g,h\n";
  text.reserve(static_cast<size_t>(rows) * 64);
  for (int r = 0; r < rows; ++r) {
    text += std::to_string(r % 1000) + "," + std::to_string(1700000000 + r) + "," +
            std::to_string(r % 2);
    for (int j = 0; j < 8; ++j) text += "," + std::to_string(r * 8 + j) + ".5";
    text += "\n";
  }
  WriteText(dir / name, text);
  return dir / name;
}

// The file opens, every version verifies, v1 is what it was, and the
// versions are the ones before or (after the rename) one more.
void CheckIntact(const std::string& h5, const VersionInfo& v1, size_t before, size_t* now) {
  auto fs = FeatureSet::Open(h5);
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();
  ASSERT_TRUE(fs->versions().size() == before || fs->versions().size() == before + 1)
      << fs->versions().size();
  for (const auto& name : fs->versions()) {
    auto v = fs->OpenVersion(name);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    Status st = VerifyVersion(*v);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  auto first = fs->Info("v1");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->data_sha256, v1.data_sha256);
  *now = fs->versions().size();
}

TEST(CrashDuringIngest, AtEveryStep) {
  TempDir dir;
  std::string h5 = dir / "fs.h5";
  VersionInfo v1 = MakeVersion(h5, {.rows = 2000, .features = 8});
  std::string csv = MakeCsv(dir, "in.csv", 60000);
  size_t versions = 1;
  for (const char* point : {"after-lock", "after-copy", "mid-write", "after-version-rename",
                            "before-close", "before-rename", "after-rename"}) {
    std::string before = ReadText(h5);
    int st = Wait(StartIngest(h5, csv, point));
    ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << point << " status " << st;
    size_t now = 0;
    CheckIntact(h5, v1, versions, &now);
    if (std::string(point) == "after-rename") {
      EXPECT_EQ(now, versions + 1) << "published before the kill";
    } else {
      EXPECT_EQ(now, versions) << point;
      EXPECT_EQ(ReadText(h5), before) << "published file untouched: " << point;
    }
    versions = now;
  }
  // The next writer clears the leftovers and succeeds.
  ASSERT_EQ(Wait(StartIngest(h5, csv, nullptr)), 0);
  for (auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
  size_t now = 0;
  CheckIntact(h5, v1, versions + 1, &now);
}

TEST(CrashDuringIngest, AtRandomMoments) {
  TempDir dir;
  std::string h5 = dir / "fs.h5";
  VersionInfo v1 = MakeVersion(h5, {.rows = 2000, .features = 8});
  std::string csv = MakeCsv(dir, "in.csv", 100000);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(Wait(StartIngest(h5, csv, nullptr)), 0);
  const auto full =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  std::mt19937 rng(static_cast<unsigned>(std::random_device{}()));
  size_t versions = 2, killed = 0;
  for (int i = 0; i < 10; ++i) {
    pid_t pid = StartIngest(h5, csv, nullptr);
    std::this_thread::sleep_for(
        std::chrono::microseconds(rng() % static_cast<unsigned>(full.count() + 1)));
    ::kill(pid, SIGKILL);
    int st = Wait(pid);
    if (WIFSIGNALED(st)) ++killed;
    size_t now = 0;
    CheckIntact(h5, v1, versions, &now);
    versions = now;
  }
  EXPECT_GT(killed, 0u);
  std::printf("killed %zu of 10 writers at random moments; %zu versions now\n", killed, versions);
}

}  // namespace
}  // namespace hpcml::featurecache
