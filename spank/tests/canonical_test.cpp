#include "hpcml/guard/canonical.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "hpcml/common/unique_fd.hpp"

namespace hpcml::guard {
namespace {

namespace fs = std::filesystem;

class CanonicalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("guard_canonical_test." + std::to_string(::getpid()));
    fs::create_directories(root_ / "allowed");
    fs::create_directories(root_ / "forbidden");
    std::ofstream(root_ / "forbidden" / "secret.h5") << "x";
    std::ofstream(root_ / "allowed" / "ok.h5") << "x";
    fs::create_symlink(root_ / "forbidden" / "secret.h5", root_ / "allowed" / "link.h5");
    fs::create_directory_symlink("../forbidden", root_ / "allowed" / "dirlink");
    ::chmod(root_.c_str(), 0755);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string P(const std::string& rel) { return (root_ / rel).string(); }
  fs::path root_;
};

TEST_F(CanonicalTest, ResolvesSymlinksAndDotDot) {
  std::string real_root = fs::canonical(root_).string();
  EXPECT_EQ(*CanonicalPath(P("allowed/ok.h5")), real_root + "/allowed/ok.h5");
  EXPECT_EQ(*CanonicalPath(P("allowed/link.h5")), real_root + "/forbidden/secret.h5");
  EXPECT_EQ(*CanonicalPath(P("allowed/dirlink/secret.h5")), real_root + "/forbidden/secret.h5");
  EXPECT_EQ(*CanonicalPath(P("allowed/../forbidden/secret.h5")),
            real_root + "/forbidden/secret.h5");
  EXPECT_EQ(*CanonicalPath(P("allowed/./ok.h5")), real_root + "/allowed/ok.h5");
}

TEST_F(CanonicalTest, MissingPathIsAnErrorNamingIt) {
  auto r = CanonicalPath(P("allowed/absent.h5"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("absent.h5"), std::string::npos);
}

TEST_F(CanonicalTest, AsUserSeesWhatTheUserSees) {
  ASSERT_EQ(::geteuid(), 0u) << "the unit tests run as root";
  struct passwd* nobody = ::getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  ::chmod((root_ / "forbidden").c_str(), 0700);  // root only
  UserCredentials user{nobody->pw_uid, nobody->pw_gid, {}};
  std::vector<std::string> paths = {P("allowed/ok.h5"), P("allowed/link.h5"),
                                    P("forbidden/secret.h5"), P("allowed/absent")};
  auto r = CanonicalPathsAsUser(user, paths);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 4u);
  std::string real_root = fs::canonical(root_).string();
  ASSERT_TRUE((*r)[0].ok());
  EXPECT_EQ((*r)[0]->path, real_root + "/allowed/ok.h5");
  // The descriptor is the object that was resolved.
  struct stat by_fd {
  }, by_path{};
  ASSERT_EQ(::fstat((*r)[0]->fd.get(), &by_fd), 0);
  ASSERT_EQ(::stat(P("allowed/ok.h5").c_str(), &by_path), 0);
  EXPECT_EQ(by_fd.st_ino, by_path.st_ino);
  // nobody cannot search forbidden/: neither the link nor the path resolves.
  ASSERT_FALSE((*r)[1].ok());
  EXPECT_NE((*r)[1].status().message().find("Permission denied"), std::string::npos);
  EXPECT_FALSE((*r)[2].ok());
  EXPECT_NE((*r)[3].status().message().find("No such file"), std::string::npos);
  // Root, in-process, does resolve it: the difference is the user's view.
  EXPECT_TRUE(CanonicalPath(P("allowed/link.h5")).ok());
  // Root's credentials are back.
  EXPECT_EQ(::geteuid(), 0u);
  EXPECT_EQ(::getuid(), 0u);
  EXPECT_EQ(::getegid(), 0u);
}

TEST_F(CanonicalTest, AsUserSupplementaryGroupsCount) {
  ASSERT_EQ(::geteuid(), 0u) << "the unit tests run as root";
  struct passwd* nobody = ::getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  const gid_t team = 4242;  // any gid nobody is not in
  ASSERT_EQ(::chown((root_ / "forbidden").c_str(), 0, team), 0);
  ::chmod((root_ / "forbidden").c_str(), 0750);
  std::vector<std::string> paths = {P("allowed/link.h5")};
  UserCredentials outsider{nobody->pw_uid, nobody->pw_gid, {}};
  auto denied = CanonicalPathsAsUser(outsider, paths);
  ASSERT_TRUE(denied.ok()) << denied.status().message();
  EXPECT_FALSE((*denied)[0].ok());
  UserCredentials member{nobody->pw_uid, nobody->pw_gid, {team}};
  auto allowed = CanonicalPathsAsUser(member, paths);
  ASSERT_TRUE(allowed.ok()) << allowed.status().message();
  ASSERT_TRUE((*allowed)[0].ok()) << (*allowed)[0].status().message();
  EXPECT_EQ((*allowed)[0]->path, fs::canonical(root_).string() + "/forbidden/secret.h5");
  std::vector<gid_t> mine(static_cast<std::size_t>(::getgroups(0, nullptr)));
  ASSERT_EQ(::getgroups(static_cast<int>(mine.size()), mine.data()), static_cast<int>(mine.size()));
  EXPECT_EQ(std::count(mine.begin(), mine.end(), team), 0) << "the caller's groups changed";
}

TEST_F(CanonicalTest, ProcMagicLinksAreRefused) {
  // /proc/self/fd/N would name this (root) process's open files.
  UniqueFd held(::open(P("forbidden/secret.h5").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(held.valid());
  std::string magic = "/proc/self/fd/" + std::to_string(held.get());
  auto direct = CanonicalPath(magic);
  ASSERT_FALSE(direct.ok());
  EXPECT_NE(direct.status().message().find("/proc link"), std::string::npos)
      << direct.status().message();
  fs::create_symlink(magic, root_ / "allowed" / "via_proc");  // the same, through a symlink
  struct passwd* nobody = ::getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  auto as_user = CanonicalPathsAsUser({nobody->pw_uid, nobody->pw_gid, {}},
                                      {P("allowed/via_proc"), "/proc/self/cwd"});
  ASSERT_TRUE(as_user.ok()) << as_user.status().message();
  EXPECT_FALSE((*as_user)[0].ok());
  EXPECT_FALSE((*as_user)[1].ok());
  // A plain /proc file is not a magic link: it resolves (and matches no dataset).
  EXPECT_TRUE(CanonicalPath("/proc/self/status").ok());
}

TEST_F(CanonicalTest, AsRootMatchesInProcess) {
  UserCredentials root{0, 0, {0}};
  auto r = CanonicalPathsAsUser(root, {P("allowed/link.h5")});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0]->path, *CanonicalPath(P("allowed/link.h5")));
  auto empty = CanonicalPathsAsUser(root, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

}  // namespace
}  // namespace hpcml::guard
