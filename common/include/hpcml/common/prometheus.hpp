// Metrics as text in the Prometheus exposition format 0.0.4: what Prometheus
// scrapes and what node_exporter's textfile collector reads (*.prom files).
// Names are also valid OpenMetrics names: a counter's ends in "_total", a
// gauge's does not.
//
// One builder per file; not thread-safe. Families are written in the order
// they are started, each with its HELP and TYPE lines.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hpcml {

enum class MetricType { kGauge, kCounter };

// Label names and values, in the order they are written.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsMetricName(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved for Prometheus).
bool IsLabelName(std::string_view name);

// A label value between double quotes: backslash, double quote and newline
// escaped; bytes that are not UTF-8 replaced by U+FFFD (Prometheus refuses
// invalid UTF-8, and the value may be any account or path).
std::string EscapeLabelValue(std::string_view value);

// A sample value: the shortest text that reads back as the same double;
// NaN, +Inf, -Inf as Prometheus spells them.
std::string FormatMetricValue(double value);

class MetricsText {
 public:
  // Starts a family. `name` must be a metric name (a counter's ending in
  // "_total") not started before: a bad one is a programming error and
  // throws std::invalid_argument.
  void Family(std::string_view name, MetricType type, std::string_view help);

  // One sample of the family last started. Label names must be label names
  // (throws std::invalid_argument otherwise); no two samples of a family may
  // have the same labels (the caller's duty: Prometheus drops the scrape).
  void Sample(const MetricLabels& labels, double value);

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::string family_;
  std::vector<std::string> started_;
};

}  // namespace hpcml
