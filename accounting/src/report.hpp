// Cost aggregation: priced attempts summed per job, user, account, partition
// and GPU type, with the cost lost to preemption and the cost of idle GPUs.
//
// Money is kept in integer micro-units of the currency (Micros): every
// attempt is priced and rounded once, then only added, so each grouping's
// rows add up to the total exactly, and Report::Reconcile can say so.
//
// Memory grows with the number of distinct group keys (and with jobs only
// when grouping by job), never with the number of input lines.
//
// Preemption loss of an attempt = its cost x the share of its work that was
// redone: steps_lost_to_preemption / steps_done from its usage record; with
// no record, an attempt that ended REQUEUED, PREEMPTED or NODE_FAIL counts as
// lost whole (an upper bound; the report counts such attempts).
// Idle GPU cost = GPU cost x (1 - busy / allocated GPU-seconds), where busy =
// the record's gpu_seconds x measured utilisation (when measured). Without a
// record the idle cost is unknown and not counted; the report says how many
// attempts had no record.
//
// Not thread-safe: one aggregator per report.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hpcml/accounting/usage_record.hpp"
#include "hpcml/common/status.hpp"
#include "prices.hpp"
#include "sacct.hpp"

namespace hpcml::accounting {

using Micros = int64_t;  // 1e-6 of the currency unit

// The most one attempt may cost, in currency units: above it (an absurd TRES
// count or price) the attempt is an error, so that every sum of Micros stays
// exact and in range.
inline constexpr double kMaxAttemptCost = 1e12;

enum class GroupBy { kJob, kUser, kAccount, kPartition, kGpuType };
std::string_view GroupByName(GroupBy g);
// "job", "user", "account", "partition", "gpu_type" (also "gpu-type").
Result<GroupBy> ParseGroupBy(std::string_view name);

// The longest span the chart keeps cost by hour for: two years. Past it the
// chart is dropped (Report::chart_too_long), so a corrupt Start centuries
// back cannot exhaust memory; the report's sums are not affected.
inline constexpr int64_t kMaxChartHours = 2 * 366 * 24;

// Row labels of the GPU-type grouping that are not GPU types.
inline constexpr std::string_view kNonGpuLabel = "(cpu/mem)";
inline constexpr std::string_view kUntypedLabel = "(untyped)";

struct Metrics {
  int64_t attempts = 0;
  int64_t interrupted = 0;         // attempts that ended REQUEUED/PREEMPTED/NODE_FAIL
  int64_t with_usage = 0;          // attempts with a usage record
  int64_t loss_without_usage = 0;  // interrupted attempts counted lost whole (no record)
  double gpu_seconds = 0;          // allocated GPU-seconds inside the period
  double cpu_seconds = 0;
  Micros cost = 0;
  Micros gpu_cost = 0;
  Micros preemption_loss = 0;
  Micros idle_gpu_cost = 0;

  void Add(const Metrics& o);
};

// Group rows by key; lookups by string_view do not allocate.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using MetricsMap = std::unordered_map<std::string, Metrics, StringHash, std::equal_to<>>;

struct ReportOptions {
  int64_t period_start = kNoTime;  // kNoTime: open
  int64_t period_end = kNoTime;    // kNoTime: open (running attempts end at `now`)
  int64_t now = 0;                 // end of attempts still running
  std::vector<GroupBy> groups = {GroupBy::kAccount, GroupBy::kUser, GroupBy::kPartition,
                                 GroupBy::kGpuType};
  // Filters applied to input rows (empty = all); comma-separated lists.
  std::string accounts, users, partitions, jobs;
  bool chart = false;  // keep cost per account per hour for the SVG chart
  // Keep Report::cross: one row per account, user, partition and GPU type
  // together (the Prometheus output's series, which PromQL sums by any label).
  bool cross = false;
};

// A row of Report::cross: account, user, partition, GPU-type label.
struct CrossKey {
  std::string account, user, partition, gpu_type;
  auto operator<=>(const CrossKey&) const = default;
};

struct InputStats {
  std::string source;
  int64_t lines = 0;          // lines read, header included
  int64_t rows = 0;           // allocation rows used
  int64_t steps = 0;          // step rows ignored (their cost is the allocation's)
  int64_t malformed = 0;      // lines skipped as malformed
  int64_t filtered = 0;       // rows outside --account/--user/--partition
  int64_t never_started = 0;  // rows with no Start (pending, cancelled before start)
  int64_t outside_period = 0;
  std::vector<std::string> first_errors;  // up to 5 "source:line: message"
};

struct Report {
  std::string currency;
  std::string prices_source;
  ReportOptions options;
  InputStats input;
  Metrics total;
  // One map per requested grouping, in ReportOptions::groups order.
  std::vector<std::pair<GroupBy, MetricsMap>> groups;
  // Cost per account per hour (hour start, seconds since the epoch).
  std::map<int64_t, std::map<std::string, double>> cost_by_hour;
  // With ReportOptions::cross: the attempts' parts by all four keys at once,
  // split by GPU type as the gpu_type grouping is (rows sum to the total).
  std::map<CrossKey, Metrics> cross;
  bool chart_too_long = false;  // the chart would span over kMaxChartHours: cost_by_hour empty
  int64_t first_time = kNoTime, last_time = kNoTime;  // extent of the priced intervals

  // Rows of one grouping, sorted by cost (highest first), then key.
  std::vector<std::pair<std::string, Metrics>> SortedRows(size_t group_index) const;
  // True if every grouping's rows add up to the total: money exactly,
  // GPU-hours within rounding. `detail` says which sums differ otherwise.
  bool Reconcile(std::string* detail) const;
};

class CostAggregator {
 public:
  CostAggregator(const PriceTable& prices, ReportOptions options);

  // Usage records from JSON files; they take precedence over Comments.
  // Matched to an attempt by job id and time (written during the attempt).
  void AddUsageRecords(std::vector<UsageRecord> records);

  // Prices one attempt and adds it. Errors (unpriced GPU type, missing rate)
  // are about the price table, not the row: the report cannot be completed.
  Status Add(const Attempt& a);

  InputStats& input() { return report_.input; }
  const Report& report() const { return report_; }

 private:
  // Counts the attempt in the input stats; false when it is filtered out,
  // never started or outside the period. Otherwise sets its `end` and its
  // interval [s, e) inside the period.
  bool Window(const Attempt& a, int64_t* end, int64_t* s, int64_t* e);
  const UsageRecord* FindUsage(const Attempt& a, int64_t end, UsageRecord* scratch) const;
  const PriceTable& prices_;
  Report report_;
  std::unordered_map<std::string, std::vector<UsageRecord>> usage_;
  std::vector<std::string> accounts_, users_, partitions_, jobs_;
};

// Reads every row of `reader` into `agg`. A malformed line is counted and
// skipped, or with `strict` is an error naming the source and line number.
// Step rows are counted and ignored.
Status StreamSacct(SacctReader& reader, CostAggregator& agg, bool strict);

}  // namespace hpcml::accounting
