// Rendering a Report: aligned text table, CSV, JSON, an SVG chart of cost
// by account over time, and Prometheus metrics. Pure functions of the report; thread-safe.
//
// Table and chart round money to cents for reading; CSV and JSON carry the
// exact micro-unit sums (six decimals), which is what reconciles.
#pragma once

#include <string>
#include <string_view>

#include "report.hpp"

namespace hpcml::accounting {

enum class Format { kTable, kCsv, kJson, kSvg, kPrometheus };
// "table", "csv", "json", "svg", "prometheus" (also "openmetrics").
Result<Format> ParseFormat(std::string_view name);

std::string FormatTable(const Report& r);
// Header "grouping,key,attempts,...", one line per row of every grouping,
// then one "total" line. Keys are quoted when they hold ',', '"' or newlines.
std::string FormatCsv(const Report& r);
std::string FormatJson(const Report& r);
// Stacked bars, one per time bucket (hour, day or week, chosen so there are
// at most ~60 bars), one colour per account, with a legend. Valid standalone SVG.
std::string FormatSvg(const Report& r);
// The Prometheus text format (docs/monitoring.md): gauges of the period's
// cost, GPU-seconds, preemption loss and idle GPU cost, one series per
// account, user, partition and GPU type (Report::cross, which must have been
// kept: ReportOptions::cross), and the report's period and input.
std::string FormatPrometheus(const Report& r);

std::string Render(const Report& r, Format f);

// Money as text with `decimals` decimals: 1234567 micro-units, 2 -> "1.23".
std::string FormatMoney(Micros m, int decimals);

}  // namespace hpcml::accounting
