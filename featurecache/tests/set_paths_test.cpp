#include "set_paths.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;

TEST(SetPaths, NamesEveryFileOfASet) {
  const SetPaths p = SetPaths::For("fs.h5", "/data/ae/fs.h5");
  EXPECT_EQ(p.path, "fs.h5");
  EXPECT_EQ(p.dir, "/data/ae");
  EXPECT_EQ(p.base, "fs.h5");
  EXPECT_EQ(p.vdir, "/data/ae/fs.h5.d");
  EXPECT_EQ(p.LockFile(), "/data/ae/.fs.h5.lock");
  EXPECT_EQ(p.VersionFile("v3"), "/data/ae/fs.h5.d/v3.h5");
  const std::string pid = std::to_string(::getpid());
  const struct {
    std::string name, prefix;
  } temps[] = {
      {p.NewSetTemp(), "/data/ae/.fs.h5.tmp-" + pid + "-"},
      {p.NewVersionTemp("v3"), "/data/ae/fs.h5.d/.v3.h5.tmp-" + pid + "-"},
  };
  for (const auto& t : temps) {
    ASSERT_EQ(t.name.rfind(t.prefix, 0), 0u) << t.name;
    EXPECT_EQ(t.name.size(), t.prefix.size() + 8) << t.name << ": 8 hex digits";
  }
  EXPECT_NE(p.NewSetTemp(), p.NewSetTemp());
}

TEST(SetPaths, RemovesOnlyStaleTemporaries) {
  TempDir dir;
  const SetPaths p = SetPaths::For(dir / "fs.h5", dir / "fs.h5");
  std::filesystem::create_directory(p.vdir);
  const std::string stale[] = {dir / ".fs.h5.tmp-1-0000abcd", p.vdir + "/.v2.h5.tmp-1-0000abcd"};
  const std::string kept[] = {dir / "fs.h5", dir / ".fs.h5.lock", dir / ".other.h5.tmp-1-0",
                              p.vdir + "/v1.h5"};
  for (const auto& f : stale) WriteText(f, "x");
  for (const auto& f : kept) WriteText(f, "x");
  p.RemoveStaleTemps();
  for (const auto& f : stale) EXPECT_FALSE(std::filesystem::exists(f)) << f;
  for (const auto& f : kept) EXPECT_TRUE(std::filesystem::exists(f)) << f;
}

TEST(SetPaths, MakesTheVersionDirectoryOnce) {
  TempDir dir;
  const SetPaths p = SetPaths::For(dir / "fs.h5", dir / "fs.h5");
  ASSERT_TRUE(p.MakeVersionDir(std::nullopt).ok());
  EXPECT_TRUE(std::filesystem::is_directory(p.vdir));
  EXPECT_TRUE(p.MakeVersionDir(std::nullopt).ok());

  // The set's mode, searchable where readable.
  const SetPaths q = SetPaths::For(dir / "g.h5", dir / "g.h5");
  struct stat set_stat {};
  set_stat.st_uid = ::getuid();
  set_stat.st_gid = ::getgid();
  set_stat.st_mode = S_IFREG | 0640;
  ASSERT_TRUE(q.MakeVersionDir(set_stat).ok());
  struct stat st;
  ASSERT_EQ(::stat(q.vdir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750u);
}

TEST(SetPaths, RefusesAVersionDirectoryThatIsNotOne) {
  TempDir dir;
  const SetPaths p = SetPaths::For(dir / "fs.h5", dir / "fs.h5");
  WriteText(p.vdir, "not a directory");
  Status s = p.MakeVersionDir(std::nullopt);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), p.vdir + ": exists but is not a directory (it holds the versions)");
}

}  // namespace
}  // namespace hpcml::featurecache
