#include "hpcml/spank/job_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace hpcml::guard {
namespace {

namespace fs = std::filesystem;

constexpr JobKey kJob7{7, 0};

class JobCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the cache trusts only root-owned files: run as root";
    root_ = fs::temp_directory_path() / ("hpcml-job-cache-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    dir_ = (root_ / "cache").string();
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }
  static JobFacts Facts() { return JobFacts{1001, "hpcml-ml", "batch", "c1", 2}; }

  fs::path root_;
  std::string dir_;
};

TEST_F(JobCacheTest, RoundTripForTheSameUid) {
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001).has_value());  // no directory yet
  ASSERT_TRUE(WriteCachedJobFacts(dir_, kJob7, Facts()).ok());
  EXPECT_EQ(fs::status(dir_).permissions() & fs::perms::all, fs::perms::owner_all);
  auto got = ReadCachedJobFacts(dir_, kJob7, 1001);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, Facts());
  EXPECT_FALSE(ReadCachedJobFacts(dir_, JobKey{8, 0}, 1001).has_value());  // another job
  ASSERT_TRUE(RemoveCachedJobFacts(dir_, 7).ok());
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001).has_value());
  EXPECT_TRUE(RemoveCachedJobFacts(dir_, 7).ok());  // already gone
}

TEST_F(JobCacheTest, AnotherUidMisses) {
  ASSERT_TRUE(WriteCachedJobFacts(dir_, kJob7, Facts()).ok());
  std::string why;
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1002, &why).has_value());
  EXPECT_NE(why.find("written for uid 1001, not 1002"), std::string::npos) << why;
}

TEST_F(JobCacheTest, AnOpenDirectoryIsNeitherReadNorWritten) {
  ASSERT_TRUE(WriteCachedJobFacts(dir_, kJob7, Facts()).ok());
  fs::permissions(dir_, fs::perms::others_write | fs::perms::others_exec, fs::perm_options::add);
  std::string why;
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001, &why).has_value());
  EXPECT_NE(why.find("expected 0700"), std::string::npos) << why;
  EXPECT_FALSE(WriteCachedJobFacts(dir_, JobKey{8, 0}, Facts()).ok());
}

TEST_F(JobCacheTest, ASymlinkedDirectoryMisses) {
  ASSERT_TRUE(WriteCachedJobFacts(dir_, kJob7, Facts()).ok());
  fs::create_directory_symlink(dir_, root_ / "link");
  std::string why;
  EXPECT_FALSE(ReadCachedJobFacts((root_ / "link").string(), kJob7, 1001, &why).has_value());
  EXPECT_NE(why.find("not a directory"), std::string::npos) << why;
}

TEST_F(JobCacheTest, AWritableOrForeignOrMalformedEntryMisses) {
  ASSERT_TRUE(WriteCachedJobFacts(dir_, kJob7, Facts()).ok());
  std::string entry = dir_ + "/job-7.0.json";
  std::string why;

  ::chmod(entry.c_str(), 0622);
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001, &why).has_value());
  EXPECT_NE(why.find("writable only by root"), std::string::npos) << why;

  ::chmod(entry.c_str(), 0600);
  ASSERT_EQ(::chown(entry.c_str(), 1001, 0), 0);
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001).has_value());

  ASSERT_EQ(::chown(entry.c_str(), 0, 0), 0);
  std::ofstream(entry) << R"({"job_id": 7, "uid": 1001, "account": "a"})";
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001, &why).has_value());
  EXPECT_NE(why.find("job-7.0.json"), std::string::npos) << why;

  std::ofstream(entry) << "not json";
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001).has_value());

  // An entry renamed from another job's file does not answer for this job.
  ASSERT_TRUE(WriteCachedJobFacts(dir_, JobKey{9, 0}, Facts()).ok());
  fs::rename(dir_ + "/job-9.0.json", entry);
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001, &why).has_value());
  EXPECT_NE(why.find("another job"), std::string::npos) << why;
}

TEST_F(JobCacheTest, EachAttemptHasItsOwnEntryAndRemovalTakesAll) {
  // A requeued job may have been moved to another partition while pending.
  ASSERT_TRUE(WriteCachedJobFacts(dir_, kJob7, Facts()).ok());
  EXPECT_FALSE(ReadCachedJobFacts(dir_, JobKey{7, 1}, 1001).has_value());
  JobFacts moved = Facts();
  moved.partition = "urgent";
  ASSERT_TRUE(WriteCachedJobFacts(dir_, JobKey{7, 1}, moved).ok());
  EXPECT_EQ(ReadCachedJobFacts(dir_, JobKey{7, 1}, 1001)->partition, "urgent");
  ASSERT_TRUE(WriteCachedJobFacts(dir_, JobKey{70, 0}, Facts()).ok());
  ASSERT_TRUE(RemoveCachedJobFacts(dir_, 7).ok());
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001).has_value());
  EXPECT_FALSE(ReadCachedJobFacts(dir_, JobKey{7, 1}, 1001).has_value());
  EXPECT_TRUE(ReadCachedJobFacts(dir_, JobKey{70, 0}, 1001).has_value()) << "job 70 is not job 7";
}

TEST_F(JobCacheTest, WritingSweepsEntriesOlderThanTheMaximumAge) {
  ASSERT_TRUE(WriteCachedJobFacts(dir_, kJob7, Facts()).ok());
  fs::last_write_time(dir_ + "/job-7.0.json", fs::file_time_type::clock::now() -
                                                  std::chrono::hours(24 * kMaxEntryAgeDays + 1));
  ASSERT_TRUE(WriteCachedJobFacts(dir_, JobKey{8, 0}, Facts()).ok());
  EXPECT_FALSE(fs::exists(dir_ + "/job-7.0.json"));
  EXPECT_TRUE(ReadCachedJobFacts(dir_, JobKey{8, 0}, 1001).has_value());
}

}  // namespace
}  // namespace hpcml::guard
