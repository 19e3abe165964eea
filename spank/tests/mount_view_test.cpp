#include "hpcml/spank/mount_view.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>

#include <gtest/gtest.h>

namespace hpcml::guard {
namespace {

namespace fs = std::filesystem;
using Kind = MountStep::Kind;

}  // namespace

void PrintTo(const MountStep& s, std::ostream* os) {
  *os << (s.kind == Kind::kCover ? "cover " : "expose ") << s.path;
}

namespace {

Policy MustParse(const std::string& text) {
  auto p = ParsePolicy(text, "view.toml");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(p).value();
}

std::string PolicyOver(const std::string& root) {
  auto entry = [&](const std::string& path, const char* cls) {
    return "[[datasets]]\npath = \"" + root + path + "\"\nzone = \"ae\"\nclassification = \"" +
           cls + "\"\n";
  };
  return "[zones.ae]\n" + entry("/ae", "internal") + entry("/ae/restricted", "restricted") +
         entry("/ae/fraud-*", "restricted") + entry("/eu.h5", "internal") +
         "[[roles]]\nname = \"r\"\nzones = [\"ae\"]\nclassifications = [\"internal\"]\n"
         "max_gpus = 0\n";
}

TEST(MountViewPlan, CoversEveryEntryAndExposesTheAllowedPathsShallowFirst) {
  Policy p = MustParse(PolicyOver("/d"));
  std::map<std::string, std::vector<std::string>> dirs = {
      {"/d/ae", {"fraud-1.h5", "fraud-2", "public", "restricted"}}};
  auto list = [&](const std::string& dir) { return dirs[dir]; };
  auto steps = PlanDatasetView(p, {"/d/ae/public/a.h5", "/d/eu.h5"}, list);
  std::vector<MountStep> want = {
      {Kind::kCover, "/d/ae"},
      {Kind::kExpose, "/d/eu.h5"},
      {Kind::kCover, "/d/ae/fraud-1.h5"},
      {Kind::kCover, "/d/ae/fraud-2"},
      {Kind::kCover, "/d/ae/restricted"},
      {Kind::kExpose, "/d/ae/public/a.h5"},
  };
  EXPECT_EQ(steps, want);
}

TEST(MountViewPlan, NestedEntriesUnderAnExposedDirectoryAreCoveredAfterIt) {
  Policy p = MustParse(PolicyOver("/d"));
  auto none = [](const std::string&) { return std::vector<std::string>{}; };
  auto steps = PlanDatasetView(p, {"/d/ae"}, none);
  ASSERT_GE(steps.size(), 2u);
  EXPECT_EQ(steps[0], (MountStep{Kind::kExpose, "/d/ae"}));  // not also covered
  auto restricted =
      std::find(steps.begin(), steps.end(), MountStep{Kind::kCover, "/d/ae/restricted"});
  EXPECT_NE(restricted, steps.end());
}

// The real thing, in a child process (the mount namespace is the child's).
class MountViewApply : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "mount namespaces need root: run as root";
    root_ = fs::temp_directory_path() / ("hpcml-mount-view-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    for (const char* d : {"ae/public", "ae/restricted", "ae/fraud-x"})
      fs::create_directories(root_ / d);
    for (const char* f :
         {"ae/public/a.h5", "ae/public/b.h5", "ae/restricted/s.h5", "eu.h5", "ae/fraud-x/f.h5"})
      std::ofstream(root_ / f) << "data:" << f;
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }
  std::string R(const std::string& rel) const { return (root_ / rel).string(); }
  fs::path root_;
};

TEST_F(MountViewApply, TheTaskSeesOnlyWhatItWasAllowed) {
  Policy p = MustParse(PolicyOver(root_.string()));
  auto steps = PlanDatasetView(p, {R("ae/public/a.h5")}, ListDirectoryNames);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Exit codes name the failed check; 0 is success.
    if (Status st = ApplyDatasetView(steps); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      ::_exit(10);
    }
    auto exists = [](const std::string& path) {
      struct stat st {};
      return ::stat(path.c_str(), &st) == 0;
    };
    auto first_line = [](const std::string& path) {
      std::ifstream in(path);
      std::string line;
      std::getline(in, line);
      return line;
    };
    if (first_line(R("ae/public/a.h5")) != "data:ae/public/a.h5") ::_exit(11);
    if (exists(R("ae/public/b.h5"))) ::_exit(12);      // sibling hidden
    if (exists(R("ae/restricted/s.h5"))) ::_exit(13);  // nested entry hidden
    if (exists(R("ae/fraud-x/f.h5"))) ::_exit(14);     // prefix entry hidden
    if (!first_line(R("eu.h5")).empty()) ::_exit(15);  // a file entry reads empty
    int fd = ::open(R("ae/public/new.h5").c_str(), O_CREAT | O_WRONLY, 0644);
    if (fd >= 0 || errno != EROFS) ::_exit(16);  // covers are read-only
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "failed check " << WEXITSTATUS(status);
  // This process (the node's view) is untouched.
  EXPECT_TRUE(fs::exists(R("ae/public/b.h5")));
  EXPECT_TRUE(fs::exists(R("ae/restricted/s.h5")));
  EXPECT_GT(fs::file_size(R("eu.h5")), 0u);
  EXPECT_FALSE(fs::exists(R("ae/public/new.h5")));
}

TEST_F(MountViewApply, AnExposedPathThatIsGoneFails) {
  Policy p = MustParse(PolicyOver(root_.string()));
  auto steps = PlanDatasetView(p, {R("ae/public/gone.h5")}, ListDirectoryNames);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Status st = ApplyDatasetView(steps);
    ::_exit(!st.ok() && st.message().find("gone.h5") != std::string::npos ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace hpcml::guard
