#include "hpcml/accounting/usage_record.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "hpcml/common/fs.hpp"

namespace hpcml::accounting {
namespace {

UsageRecord Sample() {
  UsageRecord r;
  r.job_id = "4242";
  r.restart_count = 1;
  r.start_time = 1772409600;
  r.written_at = 1772413190;
  r.gpu_type = "h100";
  r.gpu_count = 4;
  r.gpu_seconds = 14000.5;
  r.steps_done = 1000;
  r.samples_done = 32000;
  r.steps_lost_to_preemption = 250;
  r.checkpoint_seconds = 12.5;
  return r;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/acct-usage-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void ExpectSame(const UsageRecord& a, const UsageRecord& b) {
  EXPECT_EQ(a.job_id, b.job_id);
  EXPECT_EQ(a.restart_count, b.restart_count);
  EXPECT_EQ(a.start_time, b.start_time);
  EXPECT_EQ(a.written_at, b.written_at);
  EXPECT_EQ(a.gpu_type, b.gpu_type);
  EXPECT_EQ(a.gpu_count, b.gpu_count);
  EXPECT_DOUBLE_EQ(a.gpu_seconds, b.gpu_seconds);
  EXPECT_EQ(a.steps_done, b.steps_done);
  EXPECT_EQ(a.samples_done, b.samples_done);
  EXPECT_EQ(a.steps_lost_to_preemption, b.steps_lost_to_preemption);
  EXPECT_DOUBLE_EQ(a.checkpoint_seconds, b.checkpoint_seconds);
  EXPECT_EQ(a.gpu_utilization_pct, b.gpu_utilization_pct);
  EXPECT_EQ(a.gpu_energy_joules, b.gpu_energy_joules);
}

TEST(AcctUsageRecord, JsonRoundTripWithoutMeasurementsOmitsThem) {
  UsageRecord r = Sample();
  std::string json = UsageRecordToJson(r);
  nlohmann::json j = nlohmann::json::parse(json);
  EXPECT_EQ(j["format"], "hpcml-usage/1");
  EXPECT_FALSE(j.contains("gpu_utilization_pct"));  // not measured: absent, never 0
  EXPECT_FALSE(j.contains("gpu_energy_joules"));
  Result<UsageRecord> back = UsageRecordFromJson(json, "x.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSame(r, *back);
}

TEST(AcctUsageRecord, JsonRoundTripWithMeasurements) {
  UsageRecord r = Sample();
  r.gpu_utilization_pct = 87.25;
  r.gpu_energy_joules = 3.6e6;
  Result<UsageRecord> back = UsageRecordFromJson(UsageRecordToJson(r), "x.json");
  ASSERT_TRUE(back.ok());
  ExpectSame(r, *back);
}

TEST(AcctUsageRecord, StrictJson) {
  std::string good = UsageRecordToJson(Sample());
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"{", "not valid JSON"},
      {"[]", "not a JSON object"},
      {R"({"format":"hpcml-usage/1","job_id":"1","gpu_secs":3})", "unknown key 'gpu_secs'"},
      {R"({"format":"hpcml-usage/2","job_id":"1"})", "format"},
      {R"({"job_id":"1"})", "missing \"format\""},
      {R"({"format":"hpcml-usage/1"})", "missing key 'job_id'"},
      {R"({"format":"hpcml-usage/1","job_id":"1","steps_done":"3"})",
       "'steps_done' must be an integer"},
      {R"({"format":"hpcml-usage/1","job_id":"1","gpu_utilization_pct":140})", "outside 0..100"},
      {R"({"format":"hpcml-usage/1","job_id":"1","steps_done":1,"steps_lost_to_preemption":2})",
       "2 steps lost but only 1 done"},
      {R"({"format":"hpcml-usage/1","job_id":"1; rm -rf /"})", "not a Slurm job id"},
  };
  for (const Case& c : cases) {
    Result<UsageRecord> r = UsageRecordFromJson(c.text, "u.json");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("u.json"), std::string::npos);
  }
}

TEST(AcctUsageRecord, CommentSummaryRoundTripAndShape) {
  UsageRecord r = Sample();
  r.gpu_utilization_pct = 50;
  Result<std::string> s = CommentSummary(r);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->starts_with("hpcml/1,j=4242,a=1,"));
  EXPECT_EQ(s->find_first_of(" |\n"), std::string::npos) << *s;
  EXPECT_NE(s->find(",gu=50"), std::string::npos);
  EXPECT_EQ(s->find(",ge="), std::string::npos);  // not measured
  EXPECT_LE(s->size(), kSlurmCommentMaxLen);
  Result<UsageRecord> back = ParseCommentSummary(*s);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSame(r, *back);
}

TEST(AcctUsageRecord, CommentSummaryRespectsTheLengthLimit) {
  UsageRecord r = Sample();
  Result<std::string> s = CommentSummary(r, 40);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("over the limit of 40"), std::string::npos);
  // The longest record the validator allows still fits Slurm's limit.
  r.job_id = std::string(64, '9');
  r.gpu_type = std::string(64, 'x');
  r.gpu_utilization_pct = 99.123456789;
  r.gpu_energy_joules = 1.2345678912345e15;
  r.gpu_seconds = 1.2345678912345e12;
  r.steps_done = r.samples_done = r.steps_lost_to_preemption = INT64_MAX;
  ASSERT_TRUE(CommentSummary(r).ok());
}

TEST(AcctUsageRecord, OtherCommentsAreNotSummaries) {
  EXPECT_EQ(ParseCommentSummary("").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ParseCommentSummary("my experiment 7").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ParseCommentSummary("hpcml/10,j=1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ParseCommentSummary("hpcml/1,j=1,gs=abc").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseCommentSummary("hpcml/1,a=0,gs=3").status().code(),
            StatusCode::kInvalidArgument);  // no job id
  // Every item counts: an empty one is not key=value.
  for (const char* empty_item :
       {"hpcml/1,", "hpcml/1,,j=1,gs=1", "hpcml/1,j=1,gs=1,", "hpcml/1,j=1,,gs=1"}) {
    EXPECT_EQ(ParseCommentSummary(empty_item).status().code(), StatusCode::kInvalidArgument)
        << empty_item;
  }
  // Unknown keys of a newer writer are ignored.
  Result<UsageRecord> r = ParseCommentSummary("hpcml/1,j=5,gs=10,zz=1");
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->gpu_seconds, 10);
}

TEST(AcctUsageRecord, WriteAndReadBack) {
  TempDir dir;
  UsageRecord r0 = Sample();
  r0.restart_count = 0;
  UsageRecord r1 = Sample();
  Result<std::string> p0 = WriteUsageRecord(dir.path(), r0);
  Result<std::string> p1 = WriteUsageRecord(dir.path(), r1);
  ASSERT_TRUE(p0.ok() && p1.ok());
  EXPECT_EQ(*p0, dir.path() + "/usage-4242-r0.json");
  // Writing again replaces the file whole.
  r1.steps_done = 2000;
  ASSERT_TRUE(WriteUsageRecord(dir.path(), r1).ok());
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/notes.txt", "not a record").ok());
  Result<std::vector<UsageRecord>> all = ReadUsageRecordDir(dir.path());
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);
  ExpectSame((*all)[0], r0);
  ExpectSame((*all)[1], r1);
  // No temporary files left behind.
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 3);
}

TEST(AcctUsageRecord, CorruptFileInDirectoryIsNamed) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/usage-1-r0.json", "{\"format\":").ok());
  Result<std::vector<UsageRecord>> all = ReadUsageRecordDir(dir.path());
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.status().message().find("usage-1-r0.json"), std::string::npos);
  EXPECT_FALSE(ReadUsageRecordDir(dir.path() + "/missing").ok());
}

TEST(AcctUsageRecord, InvalidRecordIsNotWritten) {
  TempDir dir;
  UsageRecord r = Sample();
  r.gpu_seconds = -1;
  EXPECT_FALSE(WriteUsageRecord(dir.path(), r).ok());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// scontrol is replaced by a script that records its arguments: the real
// scontrol against a live slurmctld is exercised by the cluster test.
TEST(AcctUsageRecord, PublishWritesJsonThenRunsScontrolUpdate) {
  TempDir dir;
  std::string script = dir.path() + "/fake-scontrol";
  std::string args = dir.path() + "/args.txt";
  ASSERT_TRUE(WriteFileAtomic(
                  script, "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > " + args + "\n", 0755)
                  .ok());
  UsageRecord r = Sample();
  PublishOptions opt;
  opt.scontrol = script;
  Result<std::string> path = PublishUsageRecord(dir.path(), r, opt);
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  Result<std::string> got = ReadFile(args);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "update\nJobId=4242\nComment=" + *CommentSummary(r) + "\n");
}

TEST(AcctUsageRecord, FailingScontrolIsReportedAfterTheJsonIsWritten) {
  TempDir dir;
  std::string script = dir.path() + "/fake-scontrol";
  ASSERT_TRUE(
      WriteFileAtomic(script, "#!/bin/sh\necho 'Invalid job id specified' >&2\nexit 1\n", 0755)
          .ok());
  PublishOptions opt;
  opt.scontrol = script;
  Result<std::string> path = PublishUsageRecord(dir.path(), Sample(), opt);
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.status().message().find("Invalid job id specified"), std::string::npos)
      << path.status().message();
  EXPECT_NE(path.status().message().find("job 4242"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/usage-4242-r1.json"));
  EXPECT_FALSE(UpdateJobComment("1", std::string(kSlurmCommentMaxLen + 1, 'x'), script).ok());
}

}  // namespace
}  // namespace hpcml::accounting
