#include "report.hpp"

#include <gtest/gtest.h>

#include "format.hpp"
#include "test_util.hpp"

namespace hpcml::accounting {
namespace {

using testing::LoadPrices;
using testing::RunFixture;
using testing::Utc;
const bool kUtc = testing::UseUtc();

constexpr Micros M(double amount) {
  return static_cast<Micros>(amount * 1e6 + 0.5);
}

const Metrics& RowOf(const Report& r, GroupBy by, const std::string& key) {
  for (const auto& [g, rows] : r.groups) {
    if (g != by) continue;
    auto it = rows.find(key);
    if (it != rows.end()) return it->second;
  }
  static const Metrics kNone{};
  ADD_FAILURE() << "no row " << key << " in " << GroupByName(by);
  return kNone;
}

ReportOptions AllGroups() {
  ReportOptions o;
  o.groups = {GroupBy::kJob, GroupBy::kUser, GroupBy::kAccount, GroupBy::kPartition,
              GroupBy::kGpuType};
  o.now = Utc("2026-03-10T00:00:00");
  return o;
}

// Expected values are derived in the comments from the fixture rows and
// tests/data/prices_untyped.toml (batch = spot: h100 2.0, cpu 0.05, mem 0.005
// per GiB-hour; urgent = on demand: h100 4.0, a100 3.0, untyped 1.0, cpu 0.1,
// mem 0.01).
TEST(AcctCostAggregator, TypedAndUntypedGpusWithoutDoubleCounting) {
  ASSERT_TRUE(kUtc);
  PriceTable prices = LoadPrices("prices_untyped.toml");
  CostAggregator agg(prices, AllGroups());
  ASSERT_TRUE(RunFixture("typed_untyped.sacct", agg).ok());
  const Report& r = agg.report();
  // 100: batch, 2 h100 x 2 h = 4 GPU-h x 2.0 = 8; 8 cpu x 2 h x 0.05 = 0.8; 64 GiB x 2 h x 0.005 =
  // 0.64
  const Micros job100 = M(8 + 0.8 + 0.64);
  // 101: urgent, 1 untyped x 0.5 h x 1.0 = 0.5; 4 cpu x 0.5 x 0.1 = 0.2; 15.625 GiB x 0.5 x 0.01
  const Micros job101 = M(0.5 + 0.2 + 15.625 * 0.5 * 0.01);
  // 102: urgent, a100 1 h x 3.0 + h100 1 h x 4.0 (gres/gpu=2 is the same 2 GPUs); 2 cpu x 0.1;
  // 1 TiB = 1024 GiB x 1 h x 0.01
  const Micros job102 = M(3 + 4 + 0.2 + 10.24);
  EXPECT_EQ(RowOf(r, GroupBy::kJob, "100").cost, job100);
  EXPECT_EQ(RowOf(r, GroupBy::kJob, "101").cost, job101);
  EXPECT_EQ(RowOf(r, GroupBy::kJob, "102").cost, job102);
  EXPECT_EQ(RowOf(r, GroupBy::kJob, "104").cost, 0);  // zero seconds
  EXPECT_EQ(r.total.cost, job100 + job101 + job102);
  EXPECT_DOUBLE_EQ(r.total.gpu_seconds, (4 + 0.5 + 2) * 3600);
  EXPECT_EQ(r.total.attempts, 4);
  EXPECT_EQ(r.input.rows, 4);
  EXPECT_EQ(r.input.steps, 2);
  EXPECT_EQ(r.input.never_started, 1);  // 103
  EXPECT_EQ(r.input.malformed, 0);
  EXPECT_EQ(r.input.lines, 8);

  EXPECT_EQ(RowOf(r, GroupBy::kUser, "alice").cost, job100 + job102);
  EXPECT_EQ(RowOf(r, GroupBy::kAccount, "fin").cost, job101);
  EXPECT_EQ(RowOf(r, GroupBy::kPartition, "urgent").cost, job101 + job102);
  // Per GPU type: GPU cost only; CPU and memory go to their own row.
  EXPECT_EQ(RowOf(r, GroupBy::kGpuType, "h100").cost, M(8 + 4));
  EXPECT_DOUBLE_EQ(RowOf(r, GroupBy::kGpuType, "h100").gpu_seconds, 5 * 3600);
  EXPECT_EQ(RowOf(r, GroupBy::kGpuType, "a100").cost, M(3));
  EXPECT_EQ(RowOf(r, GroupBy::kGpuType, std::string(kUntypedLabel)).cost, M(0.5));
  EXPECT_EQ(RowOf(r, GroupBy::kGpuType, std::string(kNonGpuLabel)).gpu_cost, 0);
  EXPECT_EQ(r.total.gpu_cost, M(8 + 4 + 3 + 0.5));
  std::string detail;
  EXPECT_TRUE(r.Reconcile(&detail)) << detail;
}

TEST(AcctCostAggregator, UnpricedUntypedGpuIsAnErrorNamingTheJob) {
  PriceTable prices = LoadPrices("prices.toml");  // no gpu_type = "*"
  CostAggregator agg(prices, AllGroups());
  Status st = RunFixture("typed_untyped.sacct", agg);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("job 101"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("(untyped)"), std::string::npos) << st.message();
}

TEST(AcctCostAggregator, UnknownGpuTypeListsKnownTypes) {
  PriceTable prices = LoadPrices("prices.toml");
  CostAggregator agg(prices, AllGroups());
  Status st = RunFixture("unknown_gpu.sacct", agg);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("job 500"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'mi300x'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("a100, h100"), std::string::npos) << st.message();
}

// requeue.sacct with prices.toml, all in batch (spot: h100 2.0, cpu 0.05).
TEST(AcctCostAggregator, RequeuedAttemptsPreemptionLossAndIdleFromComment) {
  PriceTable prices = LoadPrices("prices.toml");
  CostAggregator agg(prices, AllGroups());
  ASSERT_TRUE(RunFixture("requeue.sacct", agg).ok());
  const Report& r = agg.report();
  // Job 200, two attempts of 4 h100 + 4 cpu for 1 h: 8 + 0.2 each.
  const Metrics& j200 = RowOf(r, GroupBy::kJob, "200");
  EXPECT_EQ(j200.attempts, 2);
  EXPECT_EQ(j200.interrupted, 1);
  EXPECT_EQ(j200.cost, 2 * M(8.2));
  // Attempt 0's Comment: 250 of 1000 steps lost -> a quarter of 8.2.
  // Attempt 1 carries the same Comment, written before it started: not its record.
  EXPECT_EQ(j200.with_usage, 1);
  EXPECT_EQ(j200.preemption_loss, M(8 * 0.25) + M(0.2 * 0.25));
  // Idle: busy = 14000 GPU-s x 50 % = 7000 of 4 x 3600 allocated.
  EXPECT_EQ(j200.idle_gpu_cost, static_cast<Micros>(std::llround(8e6 * (1 - 7000.0 / 14400))));
  // Job 201: requeued, no record: all of 1 GPU x 0.5 h x 2.0 + 1 cpu x 0.5 h x 0.05 is lost.
  const Metrics& j201 = RowOf(r, GroupBy::kJob, "201");
  EXPECT_EQ(j201.cost, M(1.025));
  EXPECT_EQ(j201.preemption_loss, M(1.025));
  EXPECT_EQ(j201.loss_without_usage, 1);
  EXPECT_EQ(r.total.interrupted, 2);
  EXPECT_EQ(r.input.steps, 2);
  EXPECT_EQ(RowOf(r, GroupBy::kUser, "alice").preemption_loss, j200.preemption_loss);
  std::string detail;
  EXPECT_TRUE(r.Reconcile(&detail)) << detail;
}

TEST(AcctCostAggregator, JsonUsageRecordsMatchTheirAttempt) {
  PriceTable prices = LoadPrices("prices.toml");
  CostAggregator agg(prices, AllGroups());
  UsageRecord second;
  second.job_id = "200";
  second.restart_count = 1;
  second.written_at = Utc("2026-03-02T02:09:00");  // during attempt 1
  second.gpu_type = "h100";
  second.gpu_count = 4;
  second.gpu_seconds = 7200;  // held half the allocation, utilisation not measured
  second.steps_done = 500;
  UsageRecord other_job = second;
  other_job.job_id = "999";
  agg.AddUsageRecords({second, other_job});
  ASSERT_TRUE(RunFixture("requeue.sacct", agg).ok());
  const Metrics& j200 = RowOf(agg.report(), GroupBy::kJob, "200");
  EXPECT_EQ(j200.with_usage, 2);
  const Micros idle0 = static_cast<Micros>(std::llround(8e6 * (1 - 7000.0 / 14400)));
  EXPECT_EQ(j200.idle_gpu_cost, idle0 + M(8 * 0.5));
  EXPECT_EQ(j200.preemption_loss, M(2) + M(0.05));  // attempt 1 lost nothing
}

// period.sacct, urgent (on demand: h100 4.0, cpu 0.1), 1 GPU + 1 cpu = 4.1 per hour.
TEST(AcctCostAggregator, ClipsToThePeriod) {
  PriceTable prices = LoadPrices("prices.toml");
  ReportOptions o = AllGroups();
  o.period_start = Utc("2026-03-04T00:00:00");
  o.period_end = Utc("2026-03-05T00:00:00");
  o.now = Utc("2026-03-05T01:00:00");
  CostAggregator agg(prices, o);
  ASSERT_TRUE(RunFixture("period.sacct", agg).ok());
  const Report& r = agg.report();
  EXPECT_EQ(RowOf(r, GroupBy::kJob, "300").cost, M(2 * 4.1));  // 2 of its 4 hours
  EXPECT_EQ(RowOf(r, GroupBy::kJob, "301").cost, M(1 * 4.1));  // running: until the period end
  EXPECT_EQ(r.input.outside_period, 3);  // before, at the end edge, ending at the start edge
  EXPECT_EQ(r.input.rows, 2);
  EXPECT_DOUBLE_EQ(r.total.gpu_seconds, 3 * 3600);
  EXPECT_EQ(r.first_time, o.period_start);
  EXPECT_EQ(r.last_time, o.period_end);
}

TEST(AcctCostAggregator, OpenPeriodRunsToNow) {
  PriceTable prices = LoadPrices("prices.toml");
  ReportOptions o = AllGroups();
  o.now = Utc("2026-03-05T01:00:00");
  CostAggregator agg(prices, o);
  ASSERT_TRUE(RunFixture("period.sacct", agg).ok());
  // 4 h + 2 h (running until now) + 1 h + 0.5 h + 1 h = 8.5 h at 4.1.
  EXPECT_EQ(agg.report().total.cost, M(8.5 * 4.1));
  EXPECT_EQ(agg.report().input.outside_period, 0);
}

TEST(AcctCostAggregator, Filters) {
  PriceTable prices = LoadPrices("prices_untyped.toml");
  ReportOptions o = AllGroups();
  o.accounts = "fin";
  CostAggregator agg(prices, o);
  ASSERT_TRUE(RunFixture("typed_untyped.sacct", agg).ok());
  EXPECT_EQ(agg.report().input.rows, 1);
  EXPECT_EQ(agg.report().input.filtered, 3);
  EXPECT_EQ(agg.report().input.never_started, 1);
  o.accounts = "";
  o.users = "alice,carol";
  o.partitions = "batch";
  CostAggregator agg2(prices, o);
  ASSERT_TRUE(RunFixture("typed_untyped.sacct", agg2).ok());
  EXPECT_EQ(agg2.report().input.rows, 2);  // 100 and 104
  // Lists as typed on a command line: blanks trimmed, empty items dropped.
  o.users = " alice, ,carol ,";
  CostAggregator agg3(prices, o);
  ASSERT_TRUE(RunFixture("typed_untyped.sacct", agg3).ok());
  EXPECT_EQ(agg3.report().input.rows, 2);
}

TEST(AcctStreamSacct, MalformedLinesAreCountedOrFatal) {
  PriceTable prices = LoadPrices("prices.toml");
  CostAggregator agg(prices, AllGroups());
  ASSERT_TRUE(RunFixture("malformed.sacct", agg).ok());
  const Report& r = agg.report();
  EXPECT_EQ(r.input.malformed, 4);
  EXPECT_EQ(r.input.rows, 2);
  ASSERT_EQ(r.input.first_errors.size(), 4u);
  EXPECT_TRUE(r.input.first_errors[0].starts_with("malformed.sacct:3: "))
      << r.input.first_errors[0];
  EXPECT_EQ(r.total.cost, M(2 * 4.1));

  CostAggregator strict(prices, AllGroups());
  Status st = RunFixture("malformed.sacct", strict, /*strict=*/true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("malformed.sacct:3:"), std::string::npos) << st.message();
}

TEST(AcctCostAggregator, ChartSpreadsCostOverHours) {
  PriceTable prices = LoadPrices("prices.toml");
  ReportOptions o = AllGroups();
  o.chart = true;
  o.now = Utc("2026-03-05T01:00:00");
  CostAggregator agg(prices, o);
  ASSERT_TRUE(RunFixture("period.sacct", agg).ok());
  const Report& r = agg.report();
  double sum = 0;
  for (const auto& [hour, per_account] : r.cost_by_hour) {
    EXPECT_EQ(hour % 3600, 0);
    for (const auto& [a, c] : per_account) sum += c;
  }
  EXPECT_NEAR(sum, static_cast<double>(r.total.cost) / 1e6, 1e-6);
  // Job 300 ran 22:00-02:00: 4.1 in the 23:00 hour of ml.
  EXPECT_NEAR(r.cost_by_hour.at(Utc("2026-03-03T23:00:00")).at("ml"), 4.1, 1e-9);
}

// Found by sacct_fuzzer: a Start a thousand years back (a corrupt record)
// made the chart spread the cost over 8.9 million hours and run out of
// memory. A chart spanning more than kMaxChartHours is dropped instead; the
// report itself is unchanged.
TEST(AcctCostAggregator, ChartOfTooLongASpanIsDropped) {
  PriceTable prices = LoadPrices("prices_untyped.toml");
  ReportOptions o = AllGroups();
  o.chart = true;
  CostAggregator agg(prices, o);
  Attempt a;
  a.job_id = "1";
  a.user = "u";
  a.account = "ml";
  a.partition = "urgent";
  a.state = "COMPLETED";
  a.tres.cpus = 1;
  a.start = Utc("2026-03-01T00:00:00");
  a.end = Utc("2026-03-01T02:00:00");
  ASSERT_TRUE(agg.Add(a).ok());
  EXPECT_EQ(agg.report().cost_by_hour.size(), 2u);
  EXPECT_FALSE(agg.report().chart_too_long);
  a.job_id = "2";
  a.start = Utc("1013-03-06T00:00:00");
  ASSERT_TRUE(agg.Add(a).ok());
  EXPECT_TRUE(agg.report().chart_too_long);
  EXPECT_TRUE(agg.report().cost_by_hour.empty());
  a.job_id = "3";  // later attempts are not charted either
  a.start = Utc("2026-03-01T00:00:00");
  ASSERT_TRUE(agg.Add(a).ok());
  const Report& r = agg.report();
  EXPECT_TRUE(r.cost_by_hour.empty());
  EXPECT_EQ(r.total.attempts, 3);
  EXPECT_TRUE(r.Reconcile(nullptr));
  EXPECT_NE(FormatSvg(r).find("too long a span to chart"), std::string::npos);
}

// The longest span still charted by hour: kMaxChartHours hours.
TEST(AcctCostAggregator, ChartOfTheLongestSpanIsKept) {
  PriceTable prices = LoadPrices("prices_untyped.toml");
  ReportOptions o = AllGroups();
  o.chart = true;
  CostAggregator agg(prices, o);
  Attempt a;
  a.job_id = "1";
  a.account = "ml";
  a.partition = "urgent";
  a.state = "COMPLETED";
  a.tres.cpus = 1;
  a.start = Utc("2026-03-01T00:00:00");
  a.end = a.start + kMaxChartHours * 3600;
  ASSERT_TRUE(agg.Add(a).ok());
  EXPECT_FALSE(agg.report().chart_too_long);
  EXPECT_EQ(agg.report().cost_by_hour.size(), static_cast<size_t>(kMaxChartHours));
}

// Found by sacct_fuzzer: an absurd TRES count (cpu=1e300) priced to an
// infinite cost, which rounded to INT64_MIN micro-units and broke every sum.
// An attempt priced over kMaxAttemptCost, or a total past what micro-units
// can hold, is an error naming the job, like a missing price.
TEST(AcctCostAggregator, CostsBeyondRangeAreErrors) {
  PriceTable prices = LoadPrices("prices_untyped.toml");
  CostAggregator agg(prices, AllGroups());
  Attempt a;
  a.job_id = "7";
  a.user = "u";
  a.account = "ml";
  a.partition = "urgent";
  a.state = "COMPLETED";
  a.start = Utc("2026-03-01T00:00:00");
  a.end = Utc("2026-03-01T01:00:00");
  a.tres.cpus = 1e300;
  Status st = agg.Add(a);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("job 7"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("beyond"), std::string::npos) << st.message();
  EXPECT_EQ(agg.report().total.attempts, 0);
  // 9e11 per attempt (cpu at 0.1 an hour): the eleventh passes INT64_MAX micro-units.
  a.tres.cpus = 9e12;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(agg.Add(a).ok()) << i;
  st = agg.Add(a);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("beyond"), std::string::npos) << st.message();
  EXPECT_EQ(agg.report().total.attempts, 10);
  EXPECT_TRUE(agg.report().Reconcile(nullptr));
}

TEST(AcctReport, ReconcileDetectsAMismatch) {
  Report r;
  r.groups.emplace_back(GroupBy::kUser, MetricsMap{});
  Metrics m;
  m.cost = 5;
  r.groups[0].second["a"] = m;
  r.total.cost = 6;
  std::string detail;
  EXPECT_FALSE(r.Reconcile(&detail));
  EXPECT_NE(detail.find("user: cost rows sum to 5"), std::string::npos) << detail;
}

TEST(AcctGroupBy, Names) {
  EXPECT_EQ(*ParseGroupBy("gpu-type"), GroupBy::kGpuType);
  EXPECT_EQ(GroupByName(*ParseGroupBy("account")), "account");
  EXPECT_FALSE(ParseGroupBy("qos").ok());
}

}  // namespace
}  // namespace hpcml::accounting
