#include "hpcml/guard/mount_view.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>

#include <gtest/gtest.h>

namespace hpcml::guard {

void PrintTo(const DatasetView& v, std::ostream* os) {
  *os << "covers";
  for (const auto& c : v.covers) *os << " " << c;
  *os << "; read-only";
  for (const auto& r : v.read_only) *os << " " << r;
  *os << "; exposed";
  for (const auto& e : v.exposed) *os << " " << e;
}

namespace {

namespace fs = std::filesystem;

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

TEST(MountViewPlan, CoversTheOutermostEntriesAndMountsBackTheAllowedPathsBelowThem) {
  Policy p = MustParse(PolicyOver("/d"));
  std::map<std::string, std::vector<std::string>> dirs = {
      {"/d/ae", {"fraud-1.h5", "fraud-2", "public", "restricted"}}};
  auto list = [&](const std::string& dir) -> Result<std::vector<std::string>> { return dirs[dir]; };
  auto view = *PlanDatasetView(p, {"/d/ae/public/a.h5", "/d/ae/public", "/d/eu.h5", "/d/x"}, list);
  // /d/ae holds restricted and the fraud-* names: one cover hides them all.
  // /d/eu.h5 is allowed: read-only, in place. /d/x is outside every entry:
  // no mount. /d/ae/public/a.h5 is inside the allowed /d/ae/public: mounted
  // back with it.
  EXPECT_EQ(view, (DatasetView{{"/d/ae"}, {"/d/eu.h5"}, {"/d/ae/public"}}));
}

TEST(MountViewPlan, NothingBelowAnAllowedDirectoryIsCovered) {
  // The decision allows a directory only when every entry below it is
  // allowed (decision.hpp), so the view needs no cover inside it.
  Policy p = MustParse(PolicyOver("/d"));
  auto none = [](const std::string&) -> Result<std::vector<std::string>> {
    return std::vector<std::string>{};
  };
  EXPECT_EQ(*PlanDatasetView(p, {"/d/ae"}, none), (DatasetView{{"/d/eu.h5"}, {"/d/ae"}, {}}));
  EXPECT_EQ(*PlanDatasetView(p, {"/"}, none), (DatasetView{{}, {"/d/ae", "/d/eu.h5"}, {}}));
  EXPECT_EQ(*PlanDatasetView(p, {}, none), (DatasetView{{"/d/ae", "/d/eu.h5"}, {}, {}}));
  // A prefix entry's directory that cannot be listed fails the plan.
  auto broken = [](const std::string&) -> Result<std::vector<std::string>> {
    return PermissionDenied("cannot list");
  };
  EXPECT_FALSE(PlanDatasetView(p, {}, broken).ok());
}

TEST(MountViewPlan, ARootIsCoveredWholeWithTheEntriesBelowIt) {
  Policy p = MustParse("[view]\nroots = [\"/d/ae\"]\n" + PolicyOver("/d"));
  auto list = [](const std::string&) -> Result<std::vector<std::string>> {
    return PermissionDenied("a prefix entry below a root needs no listing");
  };
  EXPECT_EQ(*PlanDatasetView(p, {"/d/ae/team1/x.h5"}, list),
            (DatasetView{{"/d/ae", "/d/eu.h5"}, {}, {"/d/ae/team1/x.h5"}}));
}

TEST(MountViewPlan, PrefixEntriesCoverEachMatchingName) {
  Policy p = MustParse(
      "[zones.ae]\n[[datasets]]\npath = \"/d/fraud-*\"\nzone = \"ae\"\nclassification = "
      "\"x\"\n[[roles]]\nname = \"r\"\nzones = [\"ae\"]\nclassifications = [\"x\"]\n"
      "max_gpus = 0\n");
  auto list = [](const std::string& dir) -> Result<std::vector<std::string>> {
    return dir == "/d" ? std::vector<std::string>{"fraud-a", "fraud-b", "other"}
                       : std::vector<std::string>{};
  };
  EXPECT_EQ(*PlanDatasetView(p, {"/d/fraud-a/x.h5"}, list),
            (DatasetView{{"/d/fraud-a", "/d/fraud-b"}, {}, {"/d/fraud-a/x.h5"}}));
}

// The real thing, in a child process (the mount namespace is the child's).
class MountViewApplyTest : public ::testing::Test {
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

// Runs `check` in a child after it built the view of `allowed` (resolved as
// root, in-process); returns the child's exit code (0: every check passed).
int InChildView(const Policy& p, const std::vector<std::string>& allowed,
                const std::function<void()>& between, const std::function<int()>& check,
                std::string* error = nullptr) {
  auto resolved = CanonicalPathsAsUser(UserCredentials{0, 0, {0}}, allowed);
  if (!resolved.ok()) return 100;
  std::vector<ResolvedPath> fds;
  std::vector<std::string> paths;
  for (auto& r : *resolved) {
    if (!r.ok()) return 101;
    paths.push_back(r->path);
    fds.push_back(std::move(r).value());
  }
  auto view = PlanDatasetView(p, paths, ListDirectoryNames);
  if (!view.ok()) {
    if (error) *error = view.status().message();
    return 98;
  }
  between();  // what the user does after the decision
  int pipefd[2];
  if (::pipe(pipefd) != 0) return 102;
  pid_t pid = ::fork();
  if (pid < 0) return 103;
  if (pid == 0) {
    ::close(pipefd[0]);
    if (Status st = ApplyDatasetView(*view, fds); !st.ok()) {
      (void)!::write(pipefd[1], st.message().data(), st.message().size());
      ::_exit(99);
    }
    ::_exit(check());
  }
  ::close(pipefd[1]);
  char buf[512];
  ssize_t n = ::read(pipefd[0], buf, sizeof buf);
  ::close(pipefd[0]);
  if (error && n > 0) error->assign(buf, static_cast<std::size_t>(n));
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 104;
  return WEXITSTATUS(status);
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}
std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST_F(MountViewApplyTest, TheStepSeesOnlyWhatItWasAllowed) {
  Policy p = MustParse(PolicyOver(root_.string()));
  std::string error;
  int rc = InChildView(
      p, {R("ae/public/a.h5")}, [] {},
      [&] {
        // Exit codes name the failed check.
        if (FirstLine(R("ae/public/a.h5")) != "data:ae/public/a.h5") return 11;
        if (Exists(R("ae/public/b.h5"))) return 12;      // sibling hidden
        if (Exists(R("ae/restricted/s.h5"))) return 13;  // nested entry hidden
        if (Exists(R("ae/fraud-x/f.h5"))) return 14;     // prefix entry hidden
        if (!FirstLine(R("eu.h5")).empty()) return 15;   // a file entry reads empty
        int fd = ::open(R("ae/public/new.h5").c_str(), O_CREAT | O_WRONLY, 0644);
        if (fd >= 0 || errno != EROFS) return 16;  // covers are read-only
        fd = ::open(R("ae/public/a.h5").c_str(), O_WRONLY | O_APPEND);
        if (fd >= 0 || errno != EROFS) return 17;  // so is what is mounted back
        return 0;
      },
      &error);
  EXPECT_EQ(rc, 0) << "failed check " << rc << " " << error;
  // The node's view is untouched.
  EXPECT_TRUE(fs::exists(R("ae/public/b.h5")));
  EXPECT_TRUE(fs::exists(R("ae/restricted/s.h5")));
  EXPECT_GT(fs::file_size(R("eu.h5")), 0u);
  EXPECT_FALSE(fs::exists(R("ae/public/new.h5")));
}

TEST_F(MountViewApplyTest, AnAllowedEntryIsReadOnlyWhereItIs) {
  Policy p = MustParse(PolicyOver(root_.string()));
  int rc = InChildView(
      p, {R("eu.h5")}, [] {},
      [&] {
        if (FirstLine(R("eu.h5")) != "data:eu.h5") return 11;
        int fd = ::open(R("eu.h5").c_str(), O_WRONLY | O_APPEND);
        if (fd >= 0 || errno != EROFS) return 12;
        return Exists(R("ae/public/a.h5")) ? 13 : 0;
      });
  EXPECT_EQ(rc, 0) << "failed check " << rc;
}

TEST_F(MountViewApplyTest, WhatWasResolvedIsMountedEvenAfterTheUserSwapsThePath) {
  // The attack: an allowed directory replaced by a symlink to a root-only
  // directory (or another zone's data) between the decision and the view.
  Policy p = MustParse(PolicyOver(root_.string()));
  fs::create_directories(root_ / "ae/public/mine");
  std::ofstream(root_ / "ae/public/mine/own") << "own";
  fs::create_directories(root_ / "rootonly/sub");
  std::ofstream(root_ / "rootonly/sub/secret") << "secret";
  auto swap = [&] {
    fs::rename(root_ / "ae/public/mine", root_ / "ae/public/mine.real");
    fs::create_directory_symlink(root_ / "rootonly/sub", root_ / "ae/public/mine");
  };
  int rc = InChildView(p, {R("ae/public/mine")}, swap, [&] {
    if (FirstLine(R("ae/public/mine/own")) != "own") return 11;
    if (Exists(R("ae/public/mine/secret"))) return 12;
    return 0;
  });
  EXPECT_EQ(rc, 0) << "failed check " << rc;
}

TEST_F(MountViewApplyTest, ACoverThatIsASymlinkIsNotFollowed) {
  // ae/fraud-* names whatever is in ae/: a symlink named fraud-link must not
  // make root mount a cover over its target.
  Policy p = MustParse(PolicyOver(root_.string()));
  fs::create_directories(root_ / "elsewhere");
  std::ofstream(root_ / "elsewhere/keep") << "keep";
  fs::remove_all(root_ / "ae");  // only the prefix entry's names and the link
  fs::create_directories(root_ / "ae");
  fs::create_directory_symlink(root_ / "elsewhere", root_ / "ae/fraud-link");
  Policy prefix_only =
      MustParse("[zones.ae]\n[[datasets]]\npath = \"" + R("ae/fraud-*") +
                "\"\nzone = \"ae\"\nclassification = \"x\"\n[[roles]]\nname = \"r\"\nzones = "
                "[\"ae\"]\nclassifications = [\"x\"]\nmax_gpus = 0\n");
  int rc = InChildView(
      prefix_only, {}, [] {}, [&] { return FirstLine(R("elsewhere/keep")) == "keep" ? 0 : 11; });
  EXPECT_EQ(rc, 0) << "failed check " << rc;
}

TEST_F(MountViewApplyTest, APrefixDirectoryAnyoneCanWriteFails) {
  // Any user could make names there, one mount each on every step.
  Policy p = MustParse(PolicyOver(root_.string()));
  fs::permissions(root_ / "ae", fs::perms::others_write, fs::perm_options::add);
  std::string error;
  EXPECT_EQ(InChildView(
                p, {}, [] {}, [] { return 0; }, &error),
            98);
  EXPECT_NE(error.find("must be root-owned and writable only by root"), std::string::npos) << error;
}

TEST_F(MountViewApplyTest, APolicyPathThroughASymlinkFails) {
  fs::create_directory_symlink(root_ / "ae", root_ / "ae-link");
  Policy p =
      MustParse("[zones.ae]\n[[datasets]]\npath = \"" + R("ae-link/public") +
                "\"\nzone = \"ae\"\nclassification = \"x\"\n[[roles]]\nname = \"r\"\nzones = "
                "[\"ae\"]\nclassifications = [\"x\"]\nmax_gpus = 0\n");
  std::string error;
  EXPECT_EQ(InChildView(
                p, {}, [] {}, [] { return 0; }, &error),
            99);
  EXPECT_NE(error.find("ae-link/public: a symlink on the way"), std::string::npos) << error;
}

}  // namespace
}  // namespace hpcml::guard
