#include "temp_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "test_util.hpp"

namespace hpcml::featurecache {
namespace {

using namespace testing;
namespace fs = std::filesystem;

TEST(TempFile, DiscardedUnlessRenamed) {
  TempDir dir;
  {
    TempFile t(dir / ".a.tmp", dir / "a");
    WriteText(t.path(), "draft");
  }
  EXPECT_FALSE(fs::exists(dir / ".a.tmp"));
  EXPECT_FALSE(fs::exists(dir / "a"));

  TempFile never_created(dir / ".b.tmp", dir / "b");
  never_created.Discard();  // nothing there: nothing to do
  EXPECT_TRUE(never_created.path().empty());
}

TEST(TempFile, RenameHandsTheFileToItsFinalName) {
  TempDir dir;
  TempFile t(dir / ".a.tmp", dir / "a");
  WriteText(t.path(), "done");
  ASSERT_TRUE(t.Sync().ok());
  ASSERT_TRUE(t.Rename().ok());
  EXPECT_TRUE(t.path().empty());
  t.Discard();
  EXPECT_EQ(ReadText(dir / "a"), "done");
  EXPECT_FALSE(fs::exists(dir / ".a.tmp"));
}

TEST(TempFile, AFailedRenameKeepsTheTemporaryOwned) {
  TempDir dir;
  TempFile t(dir / ".a.tmp", dir / "no-such-dir/a");
  WriteText(t.path(), "x");
  Status s = t.Rename();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("rename to " + dir / "no-such-dir/a", 0), 0u) << s.message();
  EXPECT_EQ(t.path(), dir / ".a.tmp");
  t.Discard();
  EXPECT_FALSE(fs::exists(dir / ".a.tmp"));
}

TEST(TempFile, MovesTransferOwnership) {
  TempDir dir;
  TempFile a(dir / ".a.tmp", dir / "a");
  WriteText(a.path(), "a");
  TempFile b(std::move(a));
  EXPECT_TRUE(a.path().empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  a.Discard();
  EXPECT_TRUE(fs::exists(dir / ".a.tmp"));

  TempFile c(dir / ".c.tmp", dir / "c");
  WriteText(c.path(), "c");
  c = std::move(b);  // c's own temporary is discarded
  EXPECT_FALSE(fs::exists(dir / ".c.tmp"));
  EXPECT_EQ(c.path(), dir / ".a.tmp");
  EXPECT_EQ(c.final_path(), dir / "a");
}

TEST(TempFile, CopyFromCopiesBytesAndMode) {
  TempDir dir;
  std::string data(3 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131);
  WriteText(dir / "src", data);
  ASSERT_EQ(::chmod((dir / "src").c_str(), 0640), 0);
  struct stat st;
  ASSERT_EQ(::stat((dir / "src").c_str(), &st), 0);

  TempFile t(dir / ".copy.tmp", dir / "copy");
  ASSERT_TRUE(t.CopyFrom(dir / "src", st).ok());
  EXPECT_EQ(ReadText(t.path()), data);
  struct stat out;
  ASSERT_EQ(::stat(t.path().c_str(), &out), 0);
  EXPECT_EQ(out.st_mode & 07777, 0640u);

  // Exclusive: never overwrites a file already there.
  EXPECT_FALSE(t.CopyFrom(dir / "src", st).ok());
}

}  // namespace
}  // namespace hpcml::featurecache
