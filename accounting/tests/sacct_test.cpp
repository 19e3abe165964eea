#include "sacct.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "test_util.hpp"

namespace hpcml::accounting {
namespace {

using testing::DataPath;
const bool kUtc = testing::UseUtc();

// A reader over text written to a temporary file.
class TextInput {
 public:
  explicit TextInput(const std::string& text) {
    char path[] = "/tmp/acct-sacct-test-XXXXXX";
    fd_ = UniqueFd(mkstemp(path));
    unlink(path);
    EXPECT_EQ(write(fd_.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
    lseek(fd_.get(), 0, SEEK_SET);
  }
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
};

TEST(AcctSlurmTime, ParsesSacctTimesAsLocalTime) {
  ASSERT_TRUE(kUtc);
  EXPECT_EQ(*ParseSlurmTime("1970-01-01T00:00:00"), 0);
  EXPECT_EQ(*ParseSlurmTime("2026-03-02T00:59:50"), 1772413190);
  EXPECT_EQ(*ParseSlurmTime("2026-03-02"), 1772409600);
  EXPECT_EQ(*ParseSlurmTime("2026-03-02T00:01"), 1772409660);
  EXPECT_EQ(*ParseSlurmTime("Unknown"), kNoTime);
  EXPECT_EQ(*ParseSlurmTime("None"), kNoTime);
  EXPECT_EQ(*ParseSlurmTime(""), kNoTime);
  EXPECT_EQ(FormatSlurmTime(1772413190), "2026-03-02T00:59:50");
  // Agrees with mktime on a leap day.
  struct tm tm {};
  tm.tm_year = 2028 - 1900;
  tm.tm_mon = 1;
  tm.tm_mday = 29;
  tm.tm_hour = 13;
  tm.tm_isdst = -1;
  EXPECT_EQ(*ParseSlurmTime("2028-02-29T13:00:00"), static_cast<int64_t>(mktime(&tm)));
}

TEST(AcctSlurmTime, RejectsOtherText) {
  for (const char* bad : {"yesterday", "2026-3-1", "2026-03-01 10:00:00", "2026-13-01",
                          "2026-03-01T25:00:00", "2026-03-01T10:00:00Z", "2026-03-01T10"}) {
    EXPECT_FALSE(ParseSlurmTime(bad).ok()) << bad;
  }
}

TEST(AcctSacctReader, HeaderMapsColumnsByNameAndStepsAreRecognised) {
  Result<UniqueFd> fd = OpenFd(DataPath("typed_untyped.sacct"), O_RDONLY);
  ASSERT_TRUE(fd.ok());
  SacctReader r(fd->get(), "typed_untyped.sacct");
  ASSERT_TRUE(*r.Next());
  EXPECT_EQ(r.line_number(), 2);  // the header is line 1
  EXPECT_FALSE(r.IsStep());
  Attempt a;
  ASSERT_TRUE(r.Parse(&a).ok());
  EXPECT_EQ(a.job_id, "100");
  EXPECT_EQ(a.user, "alice");
  EXPECT_EQ(a.account, "ml");
  EXPECT_EQ(a.partition, "batch");
  EXPECT_EQ(a.state, "COMPLETED");
  EXPECT_EQ(a.end - a.start, 7200);
  EXPECT_EQ(a.elapsed, 7200);
  EXPECT_DOUBLE_EQ(a.tres.gpus_of("h100"), 2);
  ASSERT_TRUE(*r.Next());
  EXPECT_TRUE(r.IsStep());  // 100.batch
  ASSERT_TRUE(*r.Next());
  EXPECT_TRUE(r.IsStep());  // 100.0
  int rows = 0;
  while (*r.Next()) {
    if (r.IsStep()) continue;
    ++rows;
    ASSERT_TRUE(r.Parse(&a).ok()) << r.line();
    if (a.job_id == "103") {
      EXPECT_EQ(a.start, kNoTime);      // never started
      EXPECT_EQ(a.state, "CANCELLED");  // "CANCELLED by 0"
    }
  }
  EXPECT_EQ(rows, 4);
  EXPECT_EQ(r.line_number(), 8);
}

TEST(AcctSacctReader, WithoutHeaderUsesTheDefaultFieldOrder) {
  TextInput in(
      "7|dave|ml|urgent|RUNNING|2026-03-01T00:00:00|Unknown|60|cpu=1,gres/gpu=1|hpcml/1,j=7\n");
  SacctReader r(in.fd(), "stdin");
  ASSERT_TRUE(*r.Next());
  EXPECT_EQ(r.line_number(), 1);
  Attempt a;
  ASSERT_TRUE(r.Parse(&a).ok());
  EXPECT_EQ(a.job_id, "7");
  EXPECT_EQ(a.end, kNoTime);
  EXPECT_EQ(a.comment, "hpcml/1,j=7");
  EXPECT_FALSE(*r.Next());
}

TEST(AcctSacctReader, HeaderWithoutARequiredColumnIsAnError) {
  TextInput in("JobID|User|State|Start|End\n1|a|COMPLETED|2026-03-01|2026-03-01\n");
  SacctReader r(in.fd(), "x.sacct");
  Result<bool> next = r.Next();
  ASSERT_FALSE(next.ok());
  EXPECT_NE(next.status().message().find("x.sacct:1"), std::string::npos);
  EXPECT_NE(next.status().message().find("AllocTRES"), std::string::npos);
}

TEST(AcctSacctReader, MalformedLinesAreReportedWithTheirCause) {
  Result<UniqueFd> fd = OpenFd(DataPath("malformed.sacct"), O_RDONLY);
  ASSERT_TRUE(fd.ok());
  SacctReader r(fd->get(), "malformed.sacct");
  std::vector<std::pair<int64_t, std::string>> errors;
  Attempt a;
  while (*r.Next()) {
    Status st = r.Parse(&a);
    if (!st.ok()) errors.emplace_back(r.line_number(), st.message());
  }
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0].first, 3);
  EXPECT_NE(errors[0].second.find("fields"), std::string::npos);
  EXPECT_EQ(errors[1].first, 4);
  EXPECT_NE(errors[1].second.find("Start"), std::string::npos);
  EXPECT_EQ(errors[2].first, 6);  // line 5 is empty and skipped, but counted
  EXPECT_NE(errors[2].second.find("AllocTRES"), std::string::npos);
  EXPECT_EQ(errors[3].first, 7);  // a '|' in the Comment
}

TEST(AcctSacctReader, CrLfTrailingBarAndMissingFinalNewline) {
  TextInput in(
      "JobID|State|Start|End|AllocTRES|\r\n"
      "1|COMPLETED|2026-03-01T00:00:00|2026-03-01T01:00:00|cpu=1|\r\n"
      "2|COMPLETED|2026-03-01T00:00:00|2026-03-01T01:00:00|cpu=2|");
  SacctReader r(in.fd(), "p");
  Attempt a;
  ASSERT_TRUE(*r.Next());
  ASSERT_TRUE(r.Parse(&a).ok()) << r.Parse(&a).ToString();
  EXPECT_DOUBLE_EQ(a.tres.cpus, 1);
  ASSERT_TRUE(*r.Next());
  ASSERT_TRUE(r.Parse(&a).ok());
  EXPECT_DOUBLE_EQ(a.tres.cpus, 2);
  EXPECT_EQ(a.elapsed, -1);  // no ElapsedRaw column
  EXPECT_FALSE(*r.Next());
}

TEST(AcctSacctReader, RepeatedHeaderOfConcatenatedOutputsIsSkipped) {
  TextInput in(
      "JobID|State|Start|End|AllocTRES\n"
      "1|COMPLETED|2026-03-01T00:00:00|2026-03-01T01:00:00|cpu=1\n"
      "JobID|State|Start|End|AllocTRES\n"
      "2|COMPLETED|2026-03-01T00:00:00|2026-03-01T01:00:00|cpu=2\n");
  SacctReader r(in.fd(), "p");
  Attempt a;
  std::vector<std::string> ids;
  while (*r.Next()) {
    ASSERT_TRUE(r.Parse(&a).ok());
    ids.push_back(a.job_id);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(r.line_number(), 4);
}

TEST(AcctSacctReader, EndBeforeStartIsRejected) {
  TextInput in("1|u|a|p|COMPLETED|2026-03-01T02:00:00|2026-03-01T01:00:00|0|cpu=1|\n");
  SacctReader r(in.fd(), "p");
  ASSERT_TRUE(*r.Next());
  Attempt a;
  EXPECT_FALSE(r.Parse(&a).ok());
}

TEST(AcctSacctReader, LinesAcrossReadChunksAreWhole) {
  // More than the 1 MiB read chunk: lines straddle chunk boundaries.
  std::string text = "JobID|State|Start|End|AllocTRES\n";
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    text += fmt::format("{}|COMPLETED|2026-03-01T00:00:00|2026-03-01T00:00:{:02}|cpu={}\n", i,
                        i % 60, i % 7 + 1);
  }
  ASSERT_GT(text.size(), size_t{1} << 20);
  TextInput in(text);
  SacctReader r(in.fd(), "big");
  Attempt a;
  int count = 0;
  double cpus = 0, want = 0;
  for (int i = 0; i < n; ++i) want += i % 7 + 1;
  while (*r.Next()) {
    ASSERT_TRUE(r.Parse(&a).ok()) << r.line_number() << ": " << r.line();
    ASSERT_EQ(a.job_id, std::to_string(count));
    cpus += a.tres.cpus;
    ++count;
  }
  EXPECT_EQ(count, n);
  EXPECT_DOUBLE_EQ(cpus, want);
}

TEST(AcctAttempt, InterruptedStates) {
  Attempt a;
  for (const char* s : {"REQUEUED", "PREEMPTED", "NODE_FAIL"}) {
    a.state = s;
    EXPECT_TRUE(a.interrupted()) << s;
  }
  for (const char* s : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "RUNNING"}) {
    a.state = s;
    EXPECT_FALSE(a.interrupted()) << s;
  }
}

}  // namespace
}  // namespace hpcml::accounting
