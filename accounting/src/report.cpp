#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "hpcml/common/strings.hpp"

namespace hpcml::accounting {

namespace {

constexpr size_t kMaxRememberedErrors = 5;
// A usage record belongs to an attempt when it was written between the
// attempt's start and shortly after its end (the trainer may finish writing
// while slurmd is already tearing the job down).
constexpr int64_t kRecordSlackBefore = 60;
constexpr int64_t kRecordSlackAfter = 600;

bool Allowed(const std::vector<std::string>& list, std::string_view v) {
  return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
}

Micros ToMicros(double amount) {
  return static_cast<Micros>(std::llround(amount * 1e6));
}

Metrics& Row(MetricsMap& map, std::string_view key) {
  auto it = map.find(key);
  if (it == map.end()) it = map.emplace(std::string(key), Metrics{}).first;
  return it->second;
}

// One priced part of an attempt: one GPU type, or everything that is not a GPU.
struct Component {
  std::string_view label;
  double gpu_seconds = 0;
  Micros cost = 0;
  Micros loss = 0;
  Micros idle = 0;
};

}  // namespace

std::string_view GroupByName(GroupBy g) {
  switch (g) {
    case GroupBy::kJob:
      return "job";
    case GroupBy::kUser:
      return "user";
    case GroupBy::kAccount:
      return "account";
    case GroupBy::kPartition:
      return "partition";
    case GroupBy::kGpuType:
      return "gpu_type";
  }
  return "?";
}

Result<GroupBy> ParseGroupBy(std::string_view name) {
  if (name == "job") return GroupBy::kJob;
  if (name == "user") return GroupBy::kUser;
  if (name == "account") return GroupBy::kAccount;
  if (name == "partition") return GroupBy::kPartition;
  if (name == "gpu_type" || name == "gpu-type") return GroupBy::kGpuType;
  return InvalidArgument("unknown grouping '{}' (expected job, user, account, partition, gpu_type)",
                         name);
}

void Metrics::Add(const Metrics& o) {
  attempts += o.attempts;
  interrupted += o.interrupted;
  with_usage += o.with_usage;
  loss_without_usage += o.loss_without_usage;
  gpu_seconds += o.gpu_seconds;
  cpu_seconds += o.cpu_seconds;
  cost += o.cost;
  gpu_cost += o.gpu_cost;
  preemption_loss += o.preemption_loss;
  idle_gpu_cost += o.idle_gpu_cost;
}

std::vector<std::pair<std::string, Metrics>> Report::SortedRows(size_t group_index) const {
  std::vector<std::pair<std::string, Metrics>> rows(groups[group_index].second.begin(),
                                                    groups[group_index].second.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    if (a.second.cost != b.second.cost) return a.second.cost > b.second.cost;
    return a.first < b.first;
  });
  return rows;
}

bool Report::Reconcile(std::string* detail) const {
  bool ok = true;
  std::string out;
  // Each grouping's rows, then the cross rows (when kept), against the total.
  std::vector<std::pair<std::string_view, Metrics>> sums;
  for (const auto& group : groups) {
    Metrics sum;
    for (const auto& [key, m] : group.second) sum.Add(m);
    sums.emplace_back(GroupByName(group.first), sum);
  }
  if (options.cross) {
    Metrics sum;
    for (const auto& [key, m] : cross) sum.Add(m);
    sums.emplace_back("account+user+partition+gpu_type", sum);
  }
  for (const auto& entry : sums) {
    const std::string_view by =
        entry.first;  // not a structured binding: clang 14 cannot capture one
    const Metrics& sum = entry.second;
    auto check = [&](std::string_view what, Micros got, Micros want) {
      if (got != want) {
        ok = false;
        out += fmt::format("{}: {} rows sum to {} micro-units, total is {}; ", by, what, got, want);
      }
    };
    check("cost", sum.cost, total.cost);
    check("GPU cost", sum.gpu_cost, total.gpu_cost);
    check("preemption loss", sum.preemption_loss, total.preemption_loss);
    check("idle GPU cost", sum.idle_gpu_cost, total.idle_gpu_cost);
    if (std::fabs(sum.gpu_seconds - total.gpu_seconds) > 1e-6 * std::max(1.0, total.gpu_seconds)) {
      ok = false;
      out += fmt::format("{}: GPU-seconds rows sum to {}, total is {}; ", by, sum.gpu_seconds,
                         total.gpu_seconds);
    }
  }
  if (detail) *detail = out;
  return ok;
}

CostAggregator::CostAggregator(const PriceTable& prices, ReportOptions options) : prices_(prices) {
  report_.currency = prices.currency();
  report_.prices_source = prices.source();
  report_.options = std::move(options);
  for (GroupBy g : report_.options.groups) report_.groups.emplace_back(g, MetricsMap{});
  accounts_ = SplitList(report_.options.accounts);
  users_ = SplitList(report_.options.users);
  partitions_ = SplitList(report_.options.partitions);
  jobs_ = SplitList(report_.options.jobs);
}

void CostAggregator::AddUsageRecords(std::vector<UsageRecord> records) {
  for (UsageRecord& r : records) usage_[r.job_id].push_back(std::move(r));
}

const UsageRecord* CostAggregator::FindUsage(const Attempt& a, int64_t end,
                                             UsageRecord* scratch) const {
  auto written_during = [&](const UsageRecord& r) {
    return r.written_at == 0 || (r.written_at >= a.start - kRecordSlackBefore &&
                                 r.written_at <= end + kRecordSlackAfter);
  };
  auto it = usage_.find(a.job_id);
  if (it != usage_.end()) {
    for (const UsageRecord& r : it->second) {
      if (written_during(r)) return &r;
    }
  }
  // The Comment is this row's own, so its job id is not compared (array jobs
  // show "123_4" here but the trainer sees the raw id); its time is, because
  // a requeued attempt starts with the previous attempt's Comment.
  if (a.comment.starts_with(kCommentTag)) {
    Result<UsageRecord> r = ParseCommentSummary(a.comment);
    if (r.ok() && written_during(*r)) {
      *scratch = std::move(r).value();
      return scratch;
    }
  }
  return nullptr;
}

bool CostAggregator::Window(const Attempt& a, int64_t* end, int64_t* s, int64_t* e) {
  InputStats& in = report_.input;
  const ReportOptions& opt = report_.options;
  if (!Allowed(accounts_, a.account) || !Allowed(users_, a.user) ||
      !Allowed(partitions_, a.partition) || !Allowed(jobs_, a.job_id)) {
    ++in.filtered;
    return false;
  }
  if (a.start == kNoTime) {
    ++in.never_started;
    return false;
  }
  *end = a.end == kNoTime ? std::max(opt.now, a.start) : a.end;
  // ElapsedRaw excludes time suspended; trust it when shorter.
  if (a.end != kNoTime && a.elapsed >= 0 && a.elapsed < *end - a.start) *end = a.start + a.elapsed;
  *s = a.start;
  *e = *end;
  if (opt.period_start != kNoTime) *s = std::max(*s, opt.period_start);
  if (opt.period_end != kNoTime) *e = std::min(*e, opt.period_end);
  if (*e < *s || (*e == *s && *end > a.start)) {  // entirely outside the period
    ++in.outside_period;
    return false;
  }
  ++in.rows;
  return true;
}

namespace {

// The shares of an attempt's cost lost to preemption and spent on idle GPUs.
struct Shares {
  double loss = 0;
  bool loss_without_usage = false;
  double idle = 0;
};

Shares SharesOf(const Attempt& a, const UsageRecord* usage, int64_t end) {
  Shares sh;
  if (usage) {
    if (usage->steps_done > 0) {
      sh.loss = std::min(1.0, static_cast<double>(usage->steps_lost_to_preemption) /
                                  static_cast<double>(usage->steps_done));
    }
  } else if (a.interrupted()) {
    sh.loss = 1;
    sh.loss_without_usage = true;
  }
  const double gpus = a.tres.gpu_total();
  const double allocated_gpu_seconds = gpus * static_cast<double>(end - a.start);
  if (usage && allocated_gpu_seconds > 0) {
    double busy = usage->gpu_seconds;
    if (usage->gpu_utilization_pct) busy *= *usage->gpu_utilization_pct / 100.0;
    sh.idle = std::clamp(1.0 - busy / allocated_gpu_seconds, 0.0, 1.0);
  }
  return sh;
}

// The attempt's metrics: its components summed, each with its loss.
Metrics SumComponents(const Attempt& a, const Shares& sh, bool with_usage, double seconds,
                      std::vector<Component>& parts) {
  Metrics m;
  m.attempts = 1;
  m.interrupted = a.interrupted() ? 1 : 0;
  m.with_usage = with_usage ? 1 : 0;
  m.loss_without_usage = sh.loss_without_usage ? 1 : 0;
  m.cpu_seconds = a.tres.cpus * seconds;
  for (Component& c : parts) {
    c.loss = static_cast<Micros>(std::llround(static_cast<double>(c.cost) * sh.loss));
    m.gpu_seconds += c.gpu_seconds;
    m.cost += c.cost;
    if (c.label != kNonGpuLabel) m.gpu_cost += c.cost;
    m.preemption_loss += c.loss;
    m.idle_gpu_cost += c.idle;
  }
  return m;
}

// One component's row of the GPU-type grouping.
Metrics ComponentMetrics(const Metrics& m, const Component& c) {
  Metrics cm;
  cm.attempts = 1;
  cm.interrupted = m.interrupted;
  cm.with_usage = m.with_usage;
  cm.loss_without_usage = m.loss_without_usage;
  cm.gpu_seconds = c.gpu_seconds;
  cm.cpu_seconds = c.label == kNonGpuLabel ? m.cpu_seconds : 0;
  cm.cost = c.cost;
  cm.gpu_cost = c.label == kNonGpuLabel ? 0 : c.cost;
  cm.preemption_loss = c.loss;
  cm.idle_gpu_cost = c.idle;
  return cm;
}

// The attempt's priced components over [s, e): one per GPU type, then
// everything else.
Result<std::vector<Component>> Price(const PriceTable& prices, const Attempt& a, int64_t s,
                                     int64_t e, double idle_share) {
  const double seconds = static_cast<double>(e - s);
  auto context = [&](const Status& st) {
    return Status(st.code(), fmt::format("job {} (partition {}, user {}): {}", a.job_id,
                                         a.partition, a.user, st.message()));
  };
  double total = 0;  // of the attempt, checked against kMaxAttemptCost as it grows
  auto in_range = [&](double cost) {
    total += cost;
    return total <= kMaxAttemptCost;  // false for inf and nan too
  };
  auto beyond = [&] {
    return context(InvalidArgument("a cost of {} {} is beyond the report's range ({} at most)",
                                   total, prices.currency(), kMaxAttemptCost));
  };
  std::vector<Component> parts;
  parts.reserve(a.tres.gpus.size() + 1);
  for (const auto& [type, count] : a.tres.gpus) {
    Result<double> c = prices.Cost(Resource::kGpu, type, a.partition, s, e, count);
    if (!c.ok()) return context(c.status());
    if (!in_range(*c)) return beyond();
    Component comp;
    comp.label = type.empty() ? kUntypedLabel : std::string_view(type);
    comp.gpu_seconds = count * seconds;
    comp.cost = ToMicros(*c);
    comp.idle = static_cast<Micros>(std::llround(static_cast<double>(comp.cost) * idle_share));
    parts.push_back(comp);
  }
  Component other;
  other.label = kNonGpuLabel;
  double other_cost = 0;
  const struct {
    Resource r;
    double quantity;
  } others[] = {{Resource::kCpu, a.tres.cpus},
                {Resource::kMem, a.tres.mem_mib / 1024.0},
                {Resource::kBilling, a.tres.billing}};
  for (const auto& o : others) {
    if (o.quantity <= 0 || !prices.Charges(o.r)) continue;
    Result<double> c = prices.Cost(o.r, "", a.partition, s, e, o.quantity);
    if (!c.ok()) return context(c.status());
    if (!in_range(*c)) return beyond();
    other_cost += *c;
  }
  other.cost = ToMicros(other_cost);
  parts.push_back(other);
  return parts;
}

// Whether a component is a row of the GPU-type grouping: a job without
// GPUs still counts as an attempt of the non-GPU row.
bool GpuTypeRow(const Component& c, size_t parts) {
  return !(c.label == kNonGpuLabel && c.cost == 0 && parts > 1);
}

void AddToGroups(Report& report, const Attempt& a, const Metrics& m,
                 const std::vector<Component>& parts) {
  const size_t n = parts.size();
  if (report.options.cross) {
    for (const Component& c : parts) {
      if (!GpuTypeRow(c, n)) continue;
      report.cross[CrossKey{a.account, a.user, a.partition, std::string(c.label)}].Add(
          ComponentMetrics(m, c));
    }
  }
  for (auto& [by, rows] : report.groups) {
    switch (by) {
      case GroupBy::kJob:
        Row(rows, a.job_id).Add(m);
        break;
      case GroupBy::kUser:
        Row(rows, a.user).Add(m);
        break;
      case GroupBy::kAccount:
        Row(rows, a.account).Add(m);
        break;
      case GroupBy::kPartition:
        Row(rows, a.partition).Add(m);
        break;
      case GroupBy::kGpuType:
        for (const Component& c : parts) {
          if (!GpuTypeRow(c, n)) continue;
          Row(rows, c.label).Add(ComponentMetrics(m, c));
        }
        break;
    }
  }
}

int64_t HourOf(int64_t t) {
  return t - (((t % 3600) + 3600) % 3600);
}

// The extent of the priced intervals, and the cost per account per hour
// while the chart spans at most kMaxChartHours.
void AddToTimeline(Report& report, const Attempt& a, int64_t s, int64_t e, Micros cost) {
  if (report.first_time == kNoTime || s < report.first_time) report.first_time = s;
  if (report.last_time == kNoTime || e > report.last_time) report.last_time = e;
  if (!report.options.chart || report.chart_too_long || cost <= 0 || e <= s) return;
  int64_t first = HourOf(s), last = HourOf(e - 1);
  if (!report.cost_by_hour.empty()) {
    first = std::min(first, report.cost_by_hour.begin()->first);
    last = std::max(last, report.cost_by_hour.rbegin()->first);
  }
  if ((last - first) / 3600 + 1 > kMaxChartHours) {
    report.chart_too_long = true;
    report.cost_by_hour.clear();
    return;
  }
  // Spread the cost over the hours it was incurred, by seconds.
  const double per_second = static_cast<double>(cost) / 1e6 / static_cast<double>(e - s);
  for (int64_t t = s; t < e;) {
    int64_t next = std::min(e, HourOf(t) + 3600);
    report.cost_by_hour[HourOf(t)][a.account] += per_second * static_cast<double>(next - t);
    t = next;
  }
}

}  // namespace

Status CostAggregator::Add(const Attempt& a) {
  int64_t end = 0, s = 0, e = 0;  // the attempt's end; its interval inside the period
  if (!Window(a, &end, &s, &e)) return Status::Ok();
  UsageRecord scratch;
  const UsageRecord* usage = FindUsage(a, end, &scratch);
  const Shares shares = SharesOf(a, usage, end);
  HPCML_ASSIGN_OR_RETURN(std::vector<Component> parts, Price(prices_, a, s, e, shares.idle));
  const Metrics m = SumComponents(a, shares, usage != nullptr, static_cast<double>(e - s), parts);
  // Every other sum is part of the total: it is the one that can overflow.
  if (m.cost > std::numeric_limits<Micros>::max() - report_.total.cost) {
    return InvalidArgument(
        "job {} (partition {}, user {}): the report's total cost would be beyond its range ({} "
        "micro-units at most)",
        a.job_id, a.partition, a.user, std::numeric_limits<Micros>::max());
  }
  report_.total.Add(m);
  AddToGroups(report_, a, m, parts);
  AddToTimeline(report_, a, s, e, m.cost);
  return Status::Ok();
}

Status StreamSacct(SacctReader& reader, CostAggregator& agg, bool strict) {
  InputStats& in = agg.input();
  in.source = reader.source();
  Attempt attempt;
  for (;;) {
    HPCML_ASSIGN_OR_RETURN(bool more, reader.Next());
    in.lines = reader.line_number();
    if (!more) break;
    if (reader.IsStep()) {
      ++in.steps;
      continue;
    }
    Status st = reader.Parse(&attempt);
    if (!st.ok()) {
      std::string where =
          fmt::format("{}:{}: {}", reader.source(), reader.line_number(), st.message());
      if (strict) return InvalidArgument("{} (malformed sacct line)", where);
      ++in.malformed;
      if (in.first_errors.size() < kMaxRememberedErrors) in.first_errors.push_back(where);
      continue;
    }
    HPCML_RETURN_IF_ERROR(agg.Add(attempt));
  }
  return Status::Ok();
}

}  // namespace hpcml::accounting
