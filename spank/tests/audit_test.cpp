#include "hpcml/spank/audit.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hpcml/common/fs.hpp"

namespace hpcml::guard {
namespace {

namespace fs = std::filesystem;

AuditRecord Rec(int i) {
  AuditRecord r;
  r.context = "node";
  r.cluster = "c";
  r.node = "n1";
  r.job_id = std::to_string(100 + i);
  r.step_id = "0";
  r.uid = 1001;
  r.user = "alice";
  r.role = "ml-engineer";
  r.zone = "ae";
  r.datasets = {"/data/ae/x.h5"};
  r.allow = i % 2 == 0;
  r.reason = "reason " + std::to_string(i);
  return r;
}

class AuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("guard_audit_test." + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "audit.jsonl").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<std::string> Lines() {
    std::ifstream in(path_);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  void WriteLines(const std::vector<std::string>& lines) {
    std::string text;
    for (const auto& l : lines) text += l + "\n";
    ASSERT_TRUE(WriteFileAtomic(path_, text).ok());
  }
  fs::path dir_;
  std::string path_;
};

TEST(Sha256, KnownVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(AuditTest, LinesCarryEveryFieldAndChain) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i), /*sync=*/i == 1).ok());
  auto lines = Lines();
  ASSERT_EQ(lines.size(), 3u);
  auto j0 = nlohmann::json::parse(lines[0]);
  auto j1 = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(j0["seq"], 0);
  EXPECT_EQ(j0["prev"], std::string(64, '0'));
  EXPECT_EQ(j1["seq"], 1);
  EXPECT_EQ(j1["prev"], Sha256Hex(lines[0]));
  for (const char* key : {"time", "context", "cluster", "node", "job_id", "step_id", "uid", "user",
                          "role", "zone", "datasets", "decision", "reason"})
    EXPECT_TRUE(j1.contains(key)) << key;
  EXPECT_EQ(j0["decision"], "allow");
  EXPECT_EQ(j1["decision"], "deny");
  // "YYYY-MM-DDTHH:MM:SS.mmmZ", UTC, now.
  const std::string when = j1["time"].get<std::string>();
  struct tm tm {};
  int ms = -1;
  ASSERT_EQ(std::sscanf(when.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon,
                        &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms),
            7)
      << when;
  EXPECT_EQ(when.size(), 24u) << when;
  EXPECT_GE(ms, 0);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  EXPECT_LE(std::llabs(static_cast<long long>(::timegm(&tm)) -
                       static_cast<long long>(std::time(nullptr))),
            5)
      << when;
  EXPECT_EQ(fs::status(path_).permissions() & fs::perms::others_all, fs::perms::none);
  auto rep = VerifyAuditLog(path_);
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->intact) << rep->reason;
  EXPECT_EQ(rep->lines, 3u);
  EXPECT_EQ(rep->head, Sha256Hex(lines[2]));
}

TEST_F(AuditTest, DetectsAnEditedLine) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  auto lines = Lines();
  auto j = nlohmann::json::parse(lines[2]);
  j["decision"] = "allow";
  j["reason"] = "edited";
  lines[2] = j.dump();
  WriteLines(lines);
  auto rep = VerifyAuditLog(path_);
  ASSERT_TRUE(rep.ok());
  EXPECT_FALSE(rep->intact);
  EXPECT_EQ(rep->bad_line, 3u);
  EXPECT_NE(rep->reason.find("line 3 was edited"), std::string::npos) << rep->reason;
}

TEST_F(AuditTest, DetectsARemovedLine) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  auto lines = Lines();
  lines.erase(lines.begin() + 1);
  WriteLines(lines);
  auto rep = VerifyAuditLog(path_);
  ASSERT_TRUE(rep.ok());
  EXPECT_FALSE(rep->intact);
  EXPECT_EQ(rep->bad_line, 2u);
  EXPECT_NE(rep->reason.find("removed"), std::string::npos);
}

TEST_F(AuditTest, DetectsReorderedLines) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(AppendAudit(path_, Rec(i)).ok());
  auto lines = Lines();
  std::swap(lines[3], lines[4]);
  WriteLines(lines);
  auto rep = VerifyAuditLog(path_);
  ASSERT_TRUE(rep.ok());
  EXPECT_FALSE(rep->intact);
  EXPECT_EQ(rep->bad_line, 4u);
}

TEST_F(AuditTest, DetectsGarbageAndTornLines) {
  EXPECT_EQ(VerifyAuditText("not json\n").bad_line, 1u);
  EXPECT_FALSE(VerifyAuditText("{\"seq\":0}\n").intact);
  ASSERT_TRUE(AppendAudit(path_, Rec(0)).ok());
  {
    std::ofstream out(path_, std::ios::app);
    out << "{\"seq\":1,\"tor";  // a crash mid-write
  }
  auto torn = VerifyAuditLog(path_);
  ASSERT_TRUE(torn.ok());
  EXPECT_EQ(torn->bad_line, 2u);
  // The next append starts on a fresh line; the torn one stays visible.
  ASSERT_TRUE(AppendAudit(path_, Rec(1)).ok());
  EXPECT_EQ(Lines().size(), 3u);
  EXPECT_EQ(VerifyAuditLog(path_)->bad_line, 2u);
  EXPECT_TRUE(VerifyAuditText("").intact);
}

TEST_F(AuditTest, ConcurrentWritersNeverInterleave) {
  constexpr int kProcs = 4, kThreads = 2, kEach = 25;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::vector<std::thread> threads;
      bool ok = true;
      for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
          for (int i = 0; i < kEach; ++i) {
            AuditRecord r = Rec(i);
            r.reason = std::string(3000, static_cast<char>('a' + (p * kThreads + t) % 26));
            if (!AppendAudit(path_, r).ok()) ok = false;
          }
        });
      for (auto& th : threads) th.join();
      ::_exit(ok ? 0 : 1);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto rep = VerifyAuditLog(path_);
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->intact) << "line " << rep->bad_line << ": " << rep->reason;
  EXPECT_EQ(rep->lines, static_cast<std::size_t>(kProcs * kThreads * kEach));
}

TEST_F(AuditTest, HostileStringsStayOneLine) {
  AuditRecord r = Rec(0);
  r.datasets = {"/data/a\nb", std::string("/data/\xff\xfe")};
  r.reason = "x\"}\n{\"seq\":99";
  ASSERT_TRUE(AppendAudit(path_, r).ok());
  EXPECT_EQ(Lines().size(), 1u);
  EXPECT_TRUE(VerifyAuditLog(path_)->intact);
}

TEST_F(AuditTest, MissingDirectoryIsAnError) {
  auto r = AppendAudit((dir_ / "nodir" / "audit.jsonl").string(), Rec(0));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nodir"), std::string::npos);
}

}  // namespace
}  // namespace hpcml::guard
