#include "hpcml/common/fs.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

namespace hpcml {
namespace {

namespace fs = std::filesystem;

class FsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("hpcml_fs_test_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(FsTest, WriteThenRead) {
  std::string path = dir_ / "a.json";
  ASSERT_TRUE(WriteFileAtomic(path, "hello\n").ok());
  auto r = ReadFile(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "hello\n");
}

TEST_F(FsTest, ReplaceLeavesNoTemporaries) {
  std::string path = dir_ / "m";
  ASSERT_TRUE(WriteFileAtomic(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "two").ok());
  EXPECT_EQ(*ReadFile(path), "two");
  int entries = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST_F(FsTest, ModeIsApplied) {
  std::string path = dir_ / "secret";
  ASSERT_TRUE(WriteFileAtomic(path, "x", 0600).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(FsTest, LargeWrite) {
  std::string big(5 << 20, 'z');
  std::string path = dir_ / "big";
  ASSERT_TRUE(WriteFileAtomic(path, big).ok());
  EXPECT_EQ(ReadFile(path)->size(), big.size());
}

TEST_F(FsTest, MissingDirectoryFailsAndNamesPath) {
  std::string path = dir_ / "no/such/dir/file";
  Status s = WriteFileAtomic(path, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no/such/dir"), std::string::npos) << s.message();
  EXPECT_FALSE(ReadFile(path).ok());
}

}  // namespace
}  // namespace hpcml
