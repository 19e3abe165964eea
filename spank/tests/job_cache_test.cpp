#include "job_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "hpcml/common/fs.hpp"

namespace hpcml::guard {
namespace {

namespace fs = std::filesystem;

const JobKey kJob7{"c1", 7, "node1"};

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
  // The prolog's part, then the write.
  Status Write(const JobKey& key, const JobFacts& facts) {
    if (Status st = BeginJobAttempt(dir_, key, ""); !st.ok()) return st;
    return WriteCachedJobFacts(dir_, key, facts);
  }
  static JobFacts Facts() {
    return JobFacts{1001, "hpcml-ml", "batch", "c1", 2, true, "zone-ae,big", true};
  }

  fs::path root_;
  std::string dir_;
};

TEST_F(JobCacheTest, RoundTripForTheSameUid) {
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001).has_value());  // no directory yet
  ASSERT_TRUE(Write(kJob7, Facts()).ok());
  EXPECT_EQ(fs::status(dir_).permissions() & fs::perms::all, fs::perms::owner_all);
  auto got = ReadCachedJobFacts(dir_, kJob7, 1001);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, Facts());
  EXPECT_FALSE(
      ReadCachedJobFacts(dir_, JobKey{"c1", 8, "node1"}, 1001).has_value());  // another job
  ASSERT_TRUE(RemoveCachedJobFacts(dir_, kJob7).ok());
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001).has_value());
  EXPECT_TRUE(RemoveCachedJobFacts(dir_, kJob7).ok());  // already gone
}

// Two nodes whose cache directories are one (a shared file system, as in
// this project's test cluster): each node's prolog and its step write under
// the same job. Whatever the order, a node reads only its own entry, so one
// node's features never decide another node's zone (before the node was
// part of the key, node3 could decide with node1's "zone-ae").
TEST_F(JobCacheTest, NodesSharingADirectoryNeverReadEachOthersEntries) {
  const JobKey on1{"c1", 7, "node1"}, on3{"c1", 7, "node3"};
  JobFacts ae = Facts(), eu = Facts();
  eu.node_features = "zone-eu";
  ASSERT_TRUE(BeginJobAttempt(dir_, on1, "").ok());
  ASSERT_TRUE(BeginJobAttempt(dir_, on3, "").ok());  // the later prolog
  ASSERT_TRUE(WriteCachedJobFacts(dir_, on1, ae).ok());
  std::string why;
  EXPECT_FALSE(ReadCachedJobFacts(dir_, on3, 1001, &why).has_value()) << "node1's entry";
  ASSERT_TRUE(WriteCachedJobFacts(dir_, on3, eu).ok());
  auto got1 = ReadCachedJobFacts(dir_, on1, 1001), got3 = ReadCachedJobFacts(dir_, on3, 1001);
  ASSERT_TRUE(got1.has_value() && got3.has_value());
  EXPECT_EQ(got1->node_features, "zone-ae,big");
  EXPECT_EQ(got3->node_features, "zone-eu");
  // An entry copied to another node's name is refused for its recorded node.
  fs::copy_file(dir_ + "/job-c1-7@node1.json", dir_ + "/job-c1-7@node3.json",
                fs::copy_options::overwrite_existing);
  EXPECT_FALSE(ReadCachedJobFacts(dir_, on3, 1001, &why).has_value());
  EXPECT_NE(why.find("written on another node"), std::string::npos) << why;
}

TEST_F(JobCacheTest, AnotherUidMisses) {
  ASSERT_TRUE(Write(kJob7, Facts()).ok());
  std::string why;
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1002, &why).has_value());
  EXPECT_NE(why.find("written for uid 1001, not 1002"), std::string::npos) << why;
}

TEST_F(JobCacheTest, AnOpenDirectoryIsNeitherReadNorWritten) {
  ASSERT_TRUE(Write(kJob7, Facts()).ok());
  fs::permissions(dir_, fs::perms::others_write | fs::perms::others_exec, fs::perm_options::add);
  std::string why;
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001, &why).has_value());
  EXPECT_NE(why.find("expected 0700"), std::string::npos) << why;
  EXPECT_FALSE(Write(JobKey{"c1", 8, "node1"}, Facts()).ok());
}

TEST_F(JobCacheTest, ASymlinkedDirectoryMisses) {
  ASSERT_TRUE(Write(kJob7, Facts()).ok());
  fs::create_directory_symlink(dir_, root_ / "link");
  std::string why;
  EXPECT_FALSE(ReadCachedJobFacts((root_ / "link").string(), kJob7, 1001, &why).has_value());
  EXPECT_NE(why.find("not a directory"), std::string::npos) << why;
}

TEST_F(JobCacheTest, AWritableOrForeignOrMalformedEntryMisses) {
  ASSERT_TRUE(Write(kJob7, Facts()).ok());
  std::string entry = dir_ + "/job-c1-7@node1.json";
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
  EXPECT_NE(why.find("job-c1-7@node1.json"), std::string::npos) << why;

  std::ofstream(entry) << "not json";
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001).has_value());

  // An entry renamed from another job's file does not answer for this job.
  ASSERT_TRUE(Write(JobKey{"c1", 9, "node1"}, Facts()).ok());
  fs::rename(dir_ + "/job-c1-9@node1.json", entry);
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001, &why).has_value());
  EXPECT_NE(why.find("another job"), std::string::npos) << why;
}

TEST_F(JobCacheTest, EntriesArePerClusterAndRemovalTakesOnlyTheJobs) {
  // Two clusters (or one whose job ids started again) never share an entry.
  ASSERT_TRUE(Write(kJob7, Facts()).ok());
  EXPECT_FALSE(ReadCachedJobFacts(dir_, JobKey{"c2", 7, "node1"}, 1001).has_value());
  EXPECT_FALSE(ReadCachedJobFacts(dir_, JobKey{"", 7, "node1"}, 1001).has_value());
  JobFacts other = Facts();
  other.partition = "urgent";
  other.associations_enforced.reset();
  ASSERT_TRUE(Write(JobKey{"", 7, "node1"}, other).ok());
  EXPECT_EQ(*ReadCachedJobFacts(dir_, JobKey{"", 7, "node1"}, 1001), other);
  // An entry renamed to another cluster's name does not answer for it.
  ASSERT_TRUE(BeginJobAttempt(dir_, JobKey{"c2", 7, "node1"}, "").ok());
  fs::rename(dir_ + "/job-7@node1.json", dir_ + "/job-c2-7@node1.json");
  EXPECT_FALSE(ReadCachedJobFacts(dir_, JobKey{"c2", 7, "node1"}, 1001).has_value());
  ASSERT_TRUE(Write(JobKey{"c1", 70, "node1"}, Facts()).ok());
  ASSERT_TRUE(RemoveCachedJobFacts(dir_, kJob7).ok());
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001).has_value());
  EXPECT_TRUE(ReadCachedJobFacts(dir_, JobKey{"c1", 70, "node1"}, 1001).has_value())
      << "job 70 is not 7";
}

// Issue 31, finding 4: the prolog records the datasets the job was
// submitted with, per attempt and node, where only root writes; steps are
// decided against that record, never against their own options.
TEST_F(JobCacheTest, TheAttemptRecordsTheJobsDeclaredDatasets) {
  EXPECT_FALSE(JobDeclaredDatasets(dir_, kJob7).ok()) << "no directory, no record";
  ASSERT_TRUE(BeginJobAttempt(dir_, kJob7, "/d/ae/churn.h5,/d/ae/b c").ok());
  auto got = JobDeclaredDatasets(dir_, kJob7);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, "/d/ae/churn.h5,/d/ae/b c");
  auto other_node = JobDeclaredDatasets(dir_, JobKey{"c1", 7, "node2"});
  ASSERT_FALSE(other_node.ok());
  EXPECT_EQ(other_node.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(other_node.status().message().find("restart slurmd"), std::string::npos);
  ASSERT_TRUE(BeginJobAttempt(dir_, kJob7, "").ok());  // the next attempt, submitted with none
  got = JobDeclaredDatasets(dir_, kJob7);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, "");
  // The epilog (at a requeue too) keeps it: slurmd may skip the next
  // attempt's prolog.
  ASSERT_TRUE(BeginJobAttempt(dir_, kJob7, "/d/ae/churn.h5").ok());
  ASSERT_TRUE(RemoveCachedJobFacts(dir_, kJob7).ok());
  got = JobDeclaredDatasets(dir_, kJob7);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, "/d/ae/churn.h5");
  // A record anyone could have written is not a record.
  ::chmod((dir_ + "/job-c1-7@node1.datasets").c_str(), 0666);
  EXPECT_FALSE(JobDeclaredDatasets(dir_, kJob7).ok());
  { std::ofstream(dir_ + "/job-c1-7@node1.datasets", std::ios::trunc) << "0123abcd"; }
  ::chmod((dir_ + "/job-c1-7@node1.datasets").c_str(), 0600);
  EXPECT_FALSE(JobDeclaredDatasets(dir_, kJob7).ok()) << "not a record";
}

TEST_F(JobCacheTest, AnEntryServesOnlyTheAttemptThatWroteIt) {
  // The first attempt's entry survives a crash (no epilog); the job, moved
  // to another partition while requeued, starts again here: the prolog's new
  // marker makes the old entry a miss even if it were written back.
  ASSERT_TRUE(Write(kJob7, Facts()).ok());
  std::string old_entry = *ReadFile(dir_ + "/job-c1-7@node1.json");
  ASSERT_TRUE(BeginJobAttempt(dir_, kJob7, "").ok());
  EXPECT_FALSE(fs::exists(dir_ + "/job-c1-7@node1.json"));
  { std::ofstream(dir_ + "/job-c1-7@node1.json") << old_entry; }
  ::chmod((dir_ + "/job-c1-7@node1.json").c_str(), 0600);
  std::string why;
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001, &why).has_value());
  EXPECT_NE(why.find("from an earlier attempt"), std::string::npos) << why;
  JobFacts moved = Facts();
  moved.partition = "urgent";
  ASSERT_TRUE(WriteCachedJobFacts(dir_, kJob7, moved).ok());
  EXPECT_EQ(ReadCachedJobFacts(dir_, kJob7, 1001)->partition, "urgent");
}

TEST_F(JobCacheTest, WithoutAPrologNothingIsCached) {
  std::filesystem::create_directories(dir_);
  ::chmod(dir_.c_str(), 0700);
  Status st = WriteCachedJobFacts(dir_, kJob7, Facts());
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.message();
  EXPECT_NE(st.message().find("restart slurmd"), std::string::npos) << st.message();
  ASSERT_TRUE(Write(kJob7, Facts()).ok());
  ASSERT_TRUE(RemoveCachedJobFacts(dir_, kJob7).ok());  // the epilog: entry and marker
  EXPECT_FALSE(fs::exists(dir_ + "/job-c1-7.attempt"));
  std::string why;
  EXPECT_FALSE(ReadCachedJobFacts(dir_, kJob7, 1001, &why).has_value());
}

TEST_F(JobCacheTest, WritingSweepsEntriesOlderThanTheMaximumAge) {
  ASSERT_TRUE(Write(kJob7, Facts()).ok());
  fs::last_write_time(
      dir_ + "/job-c1-7@node1.json",
      fs::file_time_type::clock::now() - std::chrono::hours(24 * kMaxEntryAgeDays + 1));
  ASSERT_TRUE(Write(JobKey{"c1", 8, "node1"}, Facts()).ok());
  EXPECT_FALSE(fs::exists(dir_ + "/job-c1-7@node1.json"));
  EXPECT_TRUE(ReadCachedJobFacts(dir_, JobKey{"c1", 8, "node1"}, 1001).has_value());
}

}  // namespace
}  // namespace hpcml::guard
