#include "format.hpp"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hpcml/common/strings.hpp"

#include "test_util.hpp"

namespace hpcml::accounting {
namespace {

using testing::Utc;
const bool kUtc = testing::UseUtc();

Report FixtureReport(bool chart = false) {
  PriceTable prices = testing::LoadPrices("prices_untyped.toml");
  ReportOptions o;
  o.groups = {GroupBy::kAccount, GroupBy::kUser, GroupBy::kGpuType};
  o.now = Utc("2026-03-10T00:00:00");
  o.chart = chart;
  CostAggregator agg(prices, o);
  EXPECT_TRUE(testing::RunFixture("typed_untyped.sacct", agg).ok());
  EXPECT_TRUE(testing::RunFixture("requeue.sacct", agg).ok());
  return agg.report();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(AcctFormatMoney, RoundsHalfAwayFromZero) {
  ASSERT_TRUE(kUtc);
  EXPECT_EQ(FormatMoney(1234567, 2), "1.23");
  EXPECT_EQ(FormatMoney(1235000, 2), "1.24");
  EXPECT_EQ(FormatMoney(5000, 2), "0.01");
  EXPECT_EQ(FormatMoney(4999, 2), "0.00");
  EXPECT_EQ(FormatMoney(-1235000, 2), "-1.24");
  EXPECT_EQ(FormatMoney(27658125, 6), "27.658125");
  EXPECT_EQ(FormatMoney(3000000, 0), "3");
}

TEST(AcctFormat, TableIsAlignedAndSaysItReconciles) {
  Report r = FixtureReport();
  std::string t = FormatTable(r);
  EXPECT_NE(t.find("currency USD"), std::string::npos);
  EXPECT_NE(t.find("reconciled: the rows of every grouping sum exactly to the total"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("by gpu_type"), std::string::npos);
  EXPECT_NE(t.find("note: 1 interrupted attempts had no usage record"), std::string::npos) << t;
  // Within one section every line has the same length (right-aligned columns).
  std::vector<std::string> lines = Lines(t);
  size_t i = 0;
  while (i < lines.size() && lines[i] != "by account") ++i;
  ASSERT_LT(i + 4, lines.size());
  const size_t width = lines[i + 1].size();
  for (size_t k = i + 1; k < lines.size() && !lines[k].empty(); ++k) {
    EXPECT_EQ(lines[k].size(), width) << lines[k];
  }
  EXPECT_TRUE(lines[i + 1].starts_with("account"));
}

TEST(AcctFormat, CsvRowsSumToTheTotal) {
  Report r = FixtureReport();
  std::vector<std::string> lines = Lines(FormatCsv(r));
  ASSERT_GE(lines.size(), 3u);
  EXPECT_TRUE(lines[0].starts_with("grouping,key,attempts,"));
  std::map<std::string, double> sums;
  double total = -1;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells;
    std::stringstream ss(lines[i]);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    ASSERT_EQ(cells.size(), 12u) << lines[i];
    double cost = std::stod(cells[7]);
    if (cells[0] == "total")
      total = cost;
    else
      sums[cells[0]] += cost;
  }
  EXPECT_DOUBLE_EQ(total, static_cast<double>(r.total.cost) / 1e6);
  ASSERT_EQ(sums.size(), 3u);
  for (const auto& [g, s] : sums) EXPECT_NEAR(s, total, 1e-9) << g;
}

TEST(AcctFormat, CsvQuotesKeys) {
  Report r;
  r.currency = "USD";
  r.groups.emplace_back(GroupBy::kAccount, MetricsMap{});
  r.groups[0].second["a,\"b\""] = Metrics{};
  std::string csv = FormatCsv(r);
  EXPECT_NE(csv.find("account,\"a,\"\"b\"\"\",0"), std::string::npos) << csv;
}

TEST(AcctFormat, JsonHasGroupsTotalsAndReconciliation) {
  Report r = FixtureReport();
  nlohmann::json j = nlohmann::json::parse(FormatJson(r));
  EXPECT_EQ(j["format"], "hpcml-cost-report/1");
  EXPECT_EQ(j["currency"], "USD");
  EXPECT_TRUE(j["reconciliation"]["reconciled"].get<bool>());
  EXPECT_EQ(j["total"]["cost_micros"].get<int64_t>(), r.total.cost);
  int64_t sum = 0;
  for (const auto& row : j["groups"]["user"]) sum += row["cost_micros"].get<int64_t>();
  EXPECT_EQ(sum, r.total.cost);
  EXPECT_EQ(j["input"]["step_rows_ignored"], 4);
  EXPECT_TRUE(j["period"]["start"].is_null());
  EXPECT_EQ(j["groups"]["gpu_type"][0]["key"], "h100");  // most expensive first
}

TEST(AcctFormat, SvgChartHasABarPerAccountAndLegend) {
  Report r = FixtureReport(/*chart=*/true);
  std::string svg = FormatSvg(r);
  EXPECT_TRUE(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_TRUE(svg.ends_with("</svg>\n"));
  EXPECT_NE(svg.find("Cost by account per hour"), std::string::npos);
  EXPECT_NE(svg.find("<title>ml 2026-03-01T00:00:00"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">fin</text>"), std::string::npos);
  // Every element that opens closes: count tags.
  size_t opens = 0, closes = 0;
  for (size_t p = svg.find("<rect"); p != std::string::npos; p = svg.find("<rect", p + 1)) ++opens;
  for (size_t p = svg.find("</rect>"); p != std::string::npos; p = svg.find("</rect>", p + 1))
    ++closes;
  size_t self_closed = 0;
  for (size_t p = svg.find("<rect"); p != std::string::npos; p = svg.find("<rect", p + 1)) {
    size_t end = svg.find('>', p);
    if (svg[end - 1] == '/') ++self_closed;
  }
  EXPECT_EQ(opens, closes + self_closed);
}

TEST(AcctFormat, SvgEscapesAccountNames) {
  Report r;
  r.currency = "USD";
  r.cost_by_hour[0]["<script>&"] = 1.0;
  std::string svg = FormatSvg(r);
  EXPECT_EQ(svg.find("<script>"), std::string::npos);
  EXPECT_NE(svg.find("&lt;script&gt;&amp;"), std::string::npos);
}

// sacct's text fields are other people's text: a job's account, user or a
// malformed line's value may hold bytes that are not UTF-8 (or control
// bytes). Every format completes; JSON and SVG carry U+FFFD in their place.
Report BadBytesReport() {
  PriceTable prices = testing::LoadPrices("prices_untyped.toml");
  ReportOptions o;
  o.groups = {GroupBy::kAccount, GroupBy::kUser};
  o.now = Utc("2026-03-10T00:00:00");
  o.chart = true;
  CostAggregator agg(prices, o);
  EXPECT_TRUE(testing::RunFixture("bad_bytes.sacct", agg).ok());
  return agg.report();
}

const std::string kReplacement = "\xef\xbf\xbd";  // U+FFFD in UTF-8

TEST(AcctFormat, JsonReplacesInvalidUtf8) {
  Report r = BadBytesReport();
  ASSERT_EQ(r.total.attempts, 3);
  ASSERT_EQ(r.input.malformed, 1);
  std::string text = FormatJson(r);
  EXPECT_FALSE(FindInvalidUtf8(text).has_value());
  nlohmann::json j = nlohmann::json::parse(text);
  std::set<std::string> accounts, users;
  for (const auto& row : j["groups"]["account"]) accounts.insert(row["key"].get<std::string>());
  for (const auto& row : j["groups"]["user"]) users.insert(row["key"].get<std::string>());
  EXPECT_TRUE(accounts.count("ml" + kReplacement)) << text;
  EXPECT_TRUE(accounts.count("ops\x01")) << text;  // valid UTF-8: JSON escapes it
  EXPECT_TRUE(users.count("b" + kReplacement + "ob")) << text;
  EXPECT_NE(j["input"]["first_errors"][0].get<std::string>().find("'36" + kReplacement + "'"),
            std::string::npos);
  EXPECT_TRUE(j["reconciliation"]["reconciled"].get<bool>());
}

TEST(AcctFormat, SvgReplacesInvalidUtf8AndControlBytes) {
  std::string svg = FormatSvg(BadBytesReport());
  EXPECT_FALSE(FindInvalidUtf8(svg).has_value());
  EXPECT_EQ(svg.find('\x01'), std::string::npos);  // not allowed in XML 1.0
  EXPECT_NE(svg.find(">ml" + kReplacement + "</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">ops" + kReplacement + "</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">fin&lt;&amp;&gt;</text>"), std::string::npos) << svg;
}

TEST(AcctFormat, TableAndCsvCompleteOnInvalidUtf8) {
  Report r = BadBytesReport();
  EXPECT_NE(FormatTable(r).find("reconciled:"), std::string::npos);
  EXPECT_NE(FormatCsv(r).find("total,,3,"), std::string::npos);
}

TEST(AcctFormat, ParseFormat) {
  EXPECT_EQ(*ParseFormat("csv"), Format::kCsv);
  EXPECT_FALSE(ParseFormat("xml").ok());
}

TEST(AcctFormat, ParsesPrometheusFormatNames) {
  EXPECT_EQ(*ParseFormat("prometheus"), Format::kPrometheus);
  EXPECT_EQ(*ParseFormat("openmetrics"), Format::kPrometheus);
  EXPECT_NE(ParseFormat("prom").status().message().find("prometheus"), std::string::npos);
}

// The Prometheus output: one series per account, user, partition and GPU
// type, whose sums by any label are the report's groupings and total.
TEST(AcctFormat, PrometheusSeriesSumToTheGroupings) {
  PriceTable prices = testing::LoadPrices("prices_untyped.toml");
  ReportOptions o;
  o.now = Utc("2026-03-10T00:00:00");
  o.cross = true;
  CostAggregator agg(prices, o);
  ASSERT_TRUE(testing::RunFixture("typed_untyped.sacct", agg).ok());
  ASSERT_TRUE(testing::RunFixture("requeue.sacct", agg).ok());
  const Report& r = agg.report();
  std::string detail;
  ASSERT_TRUE(r.Reconcile(&detail)) << detail;
  const std::string text = FormatPrometheus(r);
  // Every sample line: name{labels} value; the cost by account from them.
  std::map<std::string, double> by_account;
  double total = 0;
  int series = 0;
  for (const std::string& line : Lines(text)) {
    if (line.starts_with("#")) {
      EXPECT_TRUE(line.starts_with("# HELP hpcml_cost_") || line.starts_with("# TYPE hpcml_cost_"))
          << line;
      continue;
    }
    if (!line.starts_with("hpcml_cost_currency{")) continue;
    ++series;
    const size_t a = line.find("account=\"") + 9;
    const std::string account = line.substr(a, line.find('"', a) - a);
    const double v = std::stod(line.substr(line.rfind(' ') + 1));
    by_account[account] += v;
    total += v;
    EXPECT_NE(line.find(",currency=\"USD\"}"), std::string::npos) << line;
  }
  EXPECT_EQ(series, static_cast<int>(r.cross.size()));
  EXPECT_NEAR(total, static_cast<double>(r.total.cost) / 1e6, 1e-6);
  for (const auto& [key, m] : r.SortedRows(0)) {  // the account grouping
    EXPECT_NEAR(by_account[key], static_cast<double>(m.cost) / 1e6, 1e-6) << key;
  }
  // Job 102 ran on an a100 and an h100: two series for alice/ml/urgent.
  EXPECT_NE(text.find("hpcml_cost_gpu_seconds{account=\"ml\",user=\"alice\",partition=\"urgent\","
                      "gpu_type=\"a100\"} 3600\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE hpcml_cost_preemption_loss_currency gauge\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE hpcml_cost_idle_gpu_currency gauge\n"), std::string::npos);
  EXPECT_NE(text.find("hpcml_cost_report_period_end_timestamp_seconds 1773100800\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace hpcml::accounting
