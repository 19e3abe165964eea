#include "hpcml/common/prometheus.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "hpcml/common/strings.hpp"

namespace hpcml {
namespace {

bool NameChar(char c, bool first, bool colon) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (alpha || (colon && c == ':')) return true;
  return !first && c >= '0' && c <= '9';
}

bool ValidName(std::string_view name, bool colon) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!NameChar(name[i], i == 0, colon)) return false;
  }
  return true;
}

// Backslash and newline escaped, and with `quote` the double quote;
// bytes that are not UTF-8 replaced by U+FFFD.
std::string Escape(std::string_view s, bool quote) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    const std::size_t bad = FindInvalidUtf8(s).value_or(s.size());
    for (char c : s.substr(0, bad)) {
      if (c == '\\') {
        out += "\\\\";
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '"' && quote) {
        out += "\\\"";
      } else {
        out += c;
      }
    }
    if (bad == s.size()) break;
    out += kReplacement;
    s.remove_prefix(bad + 1);
  }
  return out;
}

}  // namespace

bool IsMetricName(std::string_view name) {
  return ValidName(name, true);
}

bool IsLabelName(std::string_view name) {
  return ValidName(name, false) && !name.starts_with("__");
}

std::string EscapeLabelValue(std::string_view s) {
  return Escape(s, true);
}

std::string FormatMetricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

void MetricsText::Family(std::string_view name, MetricType type, std::string_view help) {
  if (!IsMetricName(name)) throw std::invalid_argument(fmt::format("bad metric name '{}'", name));
  if ((type == MetricType::kCounter) != name.ends_with("_total"))
    throw std::invalid_argument(
        fmt::format("metric '{}': counters and only counters end in _total", name));
  if (std::find(started_.begin(), started_.end(), name) != started_.end())
    throw std::invalid_argument(fmt::format("metric '{}' started twice", name));
  started_.emplace_back(name);
  family_ = std::string(name);
  text_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, Escape(help, false), name,
                       type == MetricType::kCounter ? "counter" : "gauge");
}

void MetricsText::Sample(const MetricLabels& labels, double value) {
  if (family_.empty()) throw std::invalid_argument("a sample before any metric family");
  text_ += family_;
  if (!labels.empty()) {
    text_ += '{';
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (!IsLabelName(labels[i].first))
        throw std::invalid_argument(fmt::format("bad label name '{}'", labels[i].first));
      text_ += fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first,
                           EscapeLabelValue(labels[i].second));
    }
    text_ += '}';
  }
  text_ += ' ';
  text_ += FormatMetricValue(value);
  text_ += '\n';
}

}  // namespace hpcml
