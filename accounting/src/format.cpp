#include "format.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "hpcml/common/json.hpp"
#include "hpcml/common/prometheus.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/common/text_table.hpp"

namespace hpcml::accounting {

namespace {

std::string Hours(double seconds) {
  return fmt::format("{:.2f}", seconds / 3600.0);
}

std::string PeriodText(const Report& r) {
  const ReportOptions& o = r.options;
  return fmt::format("{} .. {}",
                     o.period_start == kNoTime ? "(open)" : FormatSlurmTime(o.period_start),
                     o.period_end == kNoTime ? "(open)" : FormatSlurmTime(o.period_end));
}

std::string ReconcileText(const Report& r) {
  std::string detail;
  if (r.Reconcile(&detail)) {
    return fmt::format(
        "reconciled: the rows of every grouping sum exactly to the total (cost {} {}, preemption "
        "loss {}, idle GPU cost {}, {} GPU-hours)",
        FormatMoney(r.total.cost, 2), r.currency, FormatMoney(r.total.preemption_loss, 2),
        FormatMoney(r.total.idle_gpu_cost, 2), Hours(r.total.gpu_seconds));
  }
  return "NOT reconciled: " + detail;
}

std::string InputText(const InputStats& in) {
  std::string s = fmt::format(
      "input: {}: {} lines, {} allocation rows priced, {} step rows ignored, {} malformed lines "
      "skipped",
      in.source, in.lines, in.rows, in.steps, in.malformed);
  if (in.filtered) s += fmt::format(", {} filtered out", in.filtered);
  if (in.never_started) s += fmt::format(", {} never started", in.never_started);
  if (in.outside_period) s += fmt::format(", {} outside the period", in.outside_period);
  return s;
}

// Text for XML content and attribute values: markup characters escaped, and
// what XML 1.0 cannot hold (bytes that are not UTF-8, control characters
// other than tab and newlines) replaced by U+FFFD, so the SVG stays
// well-formed whatever an account is called.
std::string XmlEscape(std::string_view s) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  while (!s.empty()) {
    const size_t bad = FindInvalidUtf8(s).value_or(s.size());
    for (char c : s.substr(0, bad)) {
      switch (c) {
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '&':
          out += "&amp;";
          break;
        case '"':
          out += "&quot;";
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
            out += kReplacement;
          else
            out += c;
      }
    }
    if (bad == s.size()) break;
    out += kReplacement;
    s.remove_prefix(bad + 1);
  }
  return out;
}

nlohmann::ordered_json MetricsJson(const Metrics& m) {
  nlohmann::ordered_json j;
  j["attempts"] = m.attempts;
  j["interrupted_attempts"] = m.interrupted;
  j["attempts_with_usage_record"] = m.with_usage;
  j["interrupted_without_usage_record"] = m.loss_without_usage;
  j["gpu_hours"] = m.gpu_seconds / 3600.0;
  j["cpu_hours"] = m.cpu_seconds / 3600.0;
  j["cost"] = static_cast<double>(m.cost) / 1e6;
  j["gpu_cost"] = static_cast<double>(m.gpu_cost) / 1e6;
  j["preemption_loss"] = static_cast<double>(m.preemption_loss) / 1e6;
  j["idle_gpu_cost"] = static_cast<double>(m.idle_gpu_cost) / 1e6;
  j["cost_micros"] = m.cost;
  return j;
}

}  // namespace

Result<Format> ParseFormat(std::string_view name) {
  if (name == "table") return Format::kTable;
  if (name == "csv") return Format::kCsv;
  if (name == "json") return Format::kJson;
  if (name == "svg") return Format::kSvg;
  if (name == "prometheus" || name == "openmetrics") return Format::kPrometheus;
  return InvalidArgument("unknown format '{}' (expected table, csv, json, svg, prometheus)", name);
}

std::string FormatMoney(Micros m, int decimals) {
  // Round half away from zero in integers: no binary floating point on money.
  Micros unit = 1;
  for (int i = decimals; i < 6; ++i) unit *= 10;
  Micros v = m < 0 ? -m : m;
  v = (v + unit / 2) / unit;
  Micros scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  std::string s = fmt::format("{}{}", m < 0 && v != 0 ? "-" : "", v / scale);
  if (decimals > 0) s += fmt::format(".{:0{}}", v % scale, decimals);
  return s;
}

std::string FormatTable(const Report& r) {
  std::string out = fmt::format("hpcml-cost: period {}, currency {}, prices {}\n", PeriodText(r),
                                r.currency, r.prices_source);
  out += InputText(r.input) + "\n";
  const std::vector<std::string> headers = {"attempts", "requeued", "GPU-hours",    "CPU-hours",
                                            "cost",     "GPU cost", "preempt loss", "idle GPU"};
  for (size_t g = 0; g < r.groups.size(); ++g) {
    std::vector<std::vector<std::string>> rows;
    auto cells = [&](const std::string& key, const Metrics& m) {
      rows.push_back({key, std::to_string(m.attempts), std::to_string(m.interrupted),
                      Hours(m.gpu_seconds), Hours(m.cpu_seconds), FormatMoney(m.cost, 2),
                      FormatMoney(m.gpu_cost, 2), FormatMoney(m.preemption_loss, 2),
                      FormatMoney(m.idle_gpu_cost, 2)});
    };
    for (const auto& [key, m] : r.SortedRows(g)) cells(key.empty() ? "(none)" : key, m);
    cells("TOTAL", r.total);
    TextTable table;
    table.headers.emplace_back(GroupByName(r.groups[g].first));
    table.headers.insert(table.headers.end(), headers.begin(), headers.end());
    table.align.assign(table.headers.size(), Align::kRight);
    table.align[0] = Align::kLeft;
    table.rows = std::move(rows);
    table.rule_before = table.rows.size() - 1;  // the TOTAL row
    out += fmt::format("\nby {}\n", GroupByName(r.groups[g].first));
    out += table.Format();
  }
  out += "\n" + ReconcileText(r) + "\n";
  if (r.total.loss_without_usage > 0) {
    out += fmt::format(
        "note: {} interrupted attempts had no usage record; their whole cost is counted as "
        "preemption loss (an upper bound)\n",
        r.total.loss_without_usage);
  }
  if (r.total.attempts > r.total.with_usage) {
    out += fmt::format(
        "note: {} of {} attempts had no usage record: their idle GPU cost is unknown "
        "and not included\n",
        r.total.attempts - r.total.with_usage, r.total.attempts);
  }
  for (const std::string& e : r.input.first_errors) out += "skipped: " + e + "\n";
  return out;
}

std::string FormatCsv(const Report& r) {
  std::string out =
      "grouping,key,attempts,interrupted_attempts,attempts_with_usage_record,gpu_hours,cpu_hours,"
      "cost,gpu_cost,preemption_loss,idle_gpu_cost,currency\n";
  auto line = [&](std::string_view by, std::string_view key, const Metrics& m) {
    out += fmt::format("{},{},{},{},{},{:.6f},{:.6f},{},{},{},{},{}\n", by, CsvField(key),
                       m.attempts, m.interrupted, m.with_usage, m.gpu_seconds / 3600.0,
                       m.cpu_seconds / 3600.0, FormatMoney(m.cost, 6), FormatMoney(m.gpu_cost, 6),
                       FormatMoney(m.preemption_loss, 6), FormatMoney(m.idle_gpu_cost, 6),
                       CsvField(r.currency));
  };
  for (size_t g = 0; g < r.groups.size(); ++g) {
    for (const auto& [key, m] : r.SortedRows(g)) line(GroupByName(r.groups[g].first), key, m);
  }
  line("total", "", r.total);
  return out;
}

std::string FormatJson(const Report& r) {
  nlohmann::ordered_json j;
  j["format"] = "hpcml-cost-report/1";
  j["currency"] = r.currency;
  j["prices"] = r.prices_source;
  j["period"] = {{"start", r.options.period_start == kNoTime
                               ? nlohmann::ordered_json(nullptr)
                               : nlohmann::ordered_json(FormatSlurmTime(r.options.period_start))},
                 {"end", r.options.period_end == kNoTime
                             ? nlohmann::ordered_json(nullptr)
                             : nlohmann::ordered_json(FormatSlurmTime(r.options.period_end))}};
  const InputStats& in = r.input;
  j["input"] = {{"source", in.source},
                {"lines", in.lines},
                {"rows", in.rows},
                {"step_rows_ignored", in.steps},
                {"malformed_skipped", in.malformed},
                {"filtered", in.filtered},
                {"never_started", in.never_started},
                {"outside_period", in.outside_period},
                {"first_errors", in.first_errors}};
  j["total"] = MetricsJson(r.total);
  nlohmann::ordered_json groups = nlohmann::ordered_json::object();
  for (size_t g = 0; g < r.groups.size(); ++g) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const auto& [key, m] : r.SortedRows(g)) {
      nlohmann::ordered_json row;
      row["key"] = key;
      const nlohmann::ordered_json metrics = MetricsJson(m);
      for (auto it = metrics.begin(); it != metrics.end(); ++it) row[it.key()] = it.value();
      rows.push_back(std::move(row));
    }
    groups[std::string(GroupByName(r.groups[g].first))] = std::move(rows);
  }
  j["groups"] = std::move(groups);
  std::string detail;
  bool ok = r.Reconcile(&detail);
  j["reconciliation"] = {{"reconciled", ok}, {"detail", ok ? ReconcileText(r) : detail}};
  return JsonText(j, 2) + "\n";
}

namespace {

// The chart's data: cost per time bucket per account.
struct Chart {
  int64_t first = 0, last = 0;  // hours covered, [first, last)
  int64_t bucket = 3600;        // seconds per bar
  std::map<int64_t, std::map<std::string, double>> buckets;
  std::vector<std::string> accounts;  // sorted; an account's colour is its index
  double max_total = 0;               // the highest bar
};

Chart BucketCosts(const Report& r) {
  Chart c;
  // Bucket size: the smallest of hour, day, week giving at most 60 buckets.
  c.first = r.cost_by_hour.empty() ? 0 : r.cost_by_hour.begin()->first;
  c.last = r.cost_by_hour.empty() ? 0 : r.cost_by_hour.rbegin()->first + 3600;
  for (int64_t b : {int64_t{3600}, int64_t{86400}, int64_t{7 * 86400}}) {
    c.bucket = b;
    if ((c.last - c.first) / b <= 60) break;
  }
  std::set<std::string> accounts;
  for (const auto& [hour, per_account] : r.cost_by_hour) {
    int64_t b = hour - (((hour - c.first) % c.bucket) + c.bucket) % c.bucket;
    for (const auto& [acct, cost] : per_account) {
      c.buckets[b][acct] += cost;
      accounts.insert(acct);
    }
  }
  c.accounts.assign(accounts.begin(), accounts.end());
  for (const auto& [b, per_account] : c.buckets) {
    double t = 0;
    for (const auto& [a, cost] : per_account) t += cost;
    c.max_total = std::max(c.max_total, t);
  }
  return c;
}

constexpr const char* kColours[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr int kWidth = 900, kHeight = 420, kLeft = 80, kRight = 200, kTop = 40, kBottom = 60;
constexpr int kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;

// The opening tag, background, title, axes and the cost scale.
std::string SvgFrame(const Report& r, const Chart& c) {
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n",
      kWidth, kHeight, kWidth, kHeight);
  out += fmt::format("<rect width=\"{}\" height=\"{}\" fill=\"white\"/>\n", kWidth, kHeight);
  out += fmt::format(
      "<text x=\"{}\" y=\"24\" font-size=\"16\">Cost by account per {} ({}), total {} {}</text>\n",
      kLeft,
      c.bucket == 3600    ? "hour"
      : c.bucket == 86400 ? "day"
                          : "week",
      XmlEscape(r.currency), FormatMoney(r.total.cost, 2), XmlEscape(r.currency));
  out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", kLeft,
                     kTop + kPlotH, kLeft + kPlotW, kTop + kPlotH);
  out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", kLeft,
                     kTop, kLeft, kTop + kPlotH);
  if (c.max_total > 0) {
    for (int i = 0; i <= 4; ++i) {
      double v = c.max_total * i / 4.0;
      int y = kTop + kPlotH - static_cast<int>(std::lround(kPlotH * i / 4.0));
      out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.2f}</text>\n", kLeft - 6,
                         y + 4, v);
      out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#ddd\"/>\n", kLeft,
                         y, kLeft + kPlotW, y);
    }
  }
  return out;
}

// One stacked bar per bucket, then the time axis's labels.
std::string SvgBars(const Report& r, const Chart& c) {
  std::string out;
  const size_t nb =
      std::max<size_t>(1, static_cast<size_t>((c.last - c.first + c.bucket - 1) / c.bucket));
  const double slot = static_cast<double>(kPlotW) / static_cast<double>(nb);
  for (const auto& [b, per_account] : c.buckets) {
    double x = kLeft + slot * static_cast<double>((b - c.first) / c.bucket) + slot * 0.1;
    double y = kTop + kPlotH;
    for (size_t ai = 0; ai < c.accounts.size(); ++ai) {
      auto it = per_account.find(c.accounts[ai]);
      if (it == per_account.end() || it->second <= 0) continue;
      double h = kPlotH * it->second / c.max_total;
      y -= h;
      out += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
          "<title>{} {}: {:.2f} {}</title></rect>\n",
          x, y, slot * 0.8, h, kColours[ai % 10], XmlEscape(c.accounts[ai]), FormatSlurmTime(b),
          it->second, XmlEscape(r.currency));
    }
  }
  if (!c.buckets.empty()) {
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", kLeft, kTop + kPlotH + 20,
                       FormatSlurmTime(c.first));
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", kLeft + kPlotW,
                       kTop + kPlotH + 20, FormatSlurmTime(c.last));
  } else if (r.chart_too_long) {
    out += fmt::format(
        "<text x=\"{}\" y=\"{}\">too long a span to chart by hour (over {} days): narrow it with "
        "--start and --end</text>\n",
        kLeft + 20, kTop + kPlotH / 2, kMaxChartHours / 24);
  } else {
    out += fmt::format("<text x=\"{}\" y=\"{}\">no cost in the period</text>\n", kLeft + 20,
                       kTop + kPlotH / 2);
  }
  return out;
}

std::string SvgLegend(const Chart& c) {
  std::string out;
  for (size_t ai = 0; ai < c.accounts.size(); ++ai) {
    int y = kTop + 10 + static_cast<int>(ai) * 20;
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n",
                       kLeft + kPlotW + 20, y, kColours[ai % 10]);
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", kLeft + kPlotW + 38, y + 10,
                       XmlEscape(c.accounts[ai].empty() ? "(none)" : c.accounts[ai]));
  }
  return out;
}

}  // namespace

std::string FormatSvg(const Report& r) {
  const Chart c = BucketCosts(r);
  return SvgFrame(r, c) + SvgBars(r, c) + SvgLegend(c) + "</svg>\n";
}

std::string FormatPrometheus(const Report& r) {
  // Gauges, not counters: each is a sum over the report's period, which the
  // caller chooses (--start/--end), and goes down when the period moves on.
  MetricsText m;
  const struct {
    const char* name;
    const char* help;
    bool money;  // labelled with the currency
    double (*value)(const Metrics&);
  } series[] = {
      {"hpcml_cost_currency",
       "Cost of the allocations in the report's period, in units of the label currency", true,
       [](const Metrics& x) { return static_cast<double>(x.cost) / 1e6; }},
      {"hpcml_cost_gpu_seconds", "GPU-seconds allocated in the report's period", false,
       [](const Metrics& x) { return x.gpu_seconds; }},
      {"hpcml_cost_preemption_loss_currency",
       "Part of the cost spent on work redone after preemption, in units of the label currency",
       true, [](const Metrics& x) { return static_cast<double>(x.preemption_loss) / 1e6; }},
      {"hpcml_cost_idle_gpu_currency",
       "Part of the cost spent on allocated GPUs left idle, in units of the label currency "
       "(attempts with a usage record only)",
       true, [](const Metrics& x) { return static_cast<double>(x.idle_gpu_cost) / 1e6; }},
  };
  for (const auto& s : series) {
    m.Family(s.name, MetricType::kGauge,
             fmt::format("{}; per account, user, partition and GPU type ({}: not a GPU).", s.help,
                         kNonGpuLabel));
    for (const auto& [key, metrics] : r.cross) {
      MetricLabels labels = {{"account", key.account},
                             {"user", key.user},
                             {"partition", key.partition},
                             {"gpu_type", key.gpu_type}};
      if (s.money) labels.emplace_back("currency", r.currency);
      m.Sample(labels, s.value(metrics));
    }
  }
  const ReportOptions& o = r.options;
  if (o.period_start != kNoTime) {
    m.Family("hpcml_cost_report_period_start_timestamp_seconds", MetricType::kGauge,
             "Start of the report's period, seconds since the epoch.");
    m.Sample({}, static_cast<double>(o.period_start));
  }
  const int64_t end = o.period_end != kNoTime ? o.period_end : o.now;
  m.Family("hpcml_cost_report_period_end_timestamp_seconds", MetricType::kGauge,
           "End of the report's period (--end, else the time running attempts were priced "
           "to), seconds since the epoch.");
  m.Sample({}, static_cast<double>(end));
  m.Family("hpcml_cost_report_rows", MetricType::kGauge,
           "sacct allocation rows priced in the report.");
  m.Sample({}, static_cast<double>(r.input.rows));
  m.Family("hpcml_cost_report_malformed_lines", MetricType::kGauge,
           "sacct lines skipped as malformed.");
  m.Sample({}, static_cast<double>(r.input.malformed));
  return m.text();
}

std::string Render(const Report& r, Format f) {
  switch (f) {
    case Format::kTable:
      return FormatTable(r);
    case Format::kCsv:
      return FormatCsv(r);
    case Format::kJson:
      return FormatJson(r);
    case Format::kSvg:
      return FormatSvg(r);
    case Format::kPrometheus:
      return FormatPrometheus(r);
  }
  return {};
}

}  // namespace hpcml::accounting
