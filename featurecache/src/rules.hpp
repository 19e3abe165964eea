// Validation rules for a version: `hpcml-fcache validate FILE [V] --rules R`
// and `hpcml-fcache ingest ... --rules R` (checked before publishing, so a
// bad batch never becomes a version). Strict TOML:
//
//   [rows]
//   min = 1000                  # expected row count range
//   max = 10_000_000
//   [features.age]              # one table per feature, by name
//   min = 0.0                   # every value within [min, max]
//   max = 130.0
//   max_missing = 0.01          # at most this share of NaN cells
//   [features.grade]            # a category column
//   allowed = ["A", "B", "C"]   # every category present is one of these
//   max_categories = 20         # at most this many distinct categories present
//   max_missing = 0.05
//   [label]
//   min_share = 0.05            # each class at least this share of the labelled rows
//   max_missing = 0.0
//
// Checked against the version's statistics (stats.hpp), not its rows: the
// counts, missing values, ranges and categories are exact; class shares are
// exact for class labels (named) and come from the 4096-row sample for
// numeric labels (within about 1.5 points). min and max do not apply to a
// category column, nor allowed and max_categories to a number. Unknown tables or keys, wrong
// types, a feature the version lacks: errors naming the file and line.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/featurecache/stats.hpp"

namespace hpcml::featurecache {

struct ColumnRule {
  std::optional<double> min, max, max_missing, min_share, max_categories;
  std::optional<std::vector<std::string>> allowed;
  int64_t line = 0;
};

struct Rules {
  std::string source;
  std::optional<double> rows_min, rows_max;
  int64_t rows_line = 0;
  std::map<std::string, ColumnRule> features;
  std::optional<ColumnRule> label;

  static Result<Rules> Load(const std::string& path);
  static Result<Rules> Parse(std::string_view text, std::string source);
};

// One line per broken rule, naming the column, the rule and where it is
// written ("age: max is 150, the rule allows 130 (rules.toml:5)"). An error
// when a rule names a feature the version does not have, or a label rule
// meets a version without labels.
Result<std::vector<std::string>> CheckRules(const Rules& rules, const VersionStats& stats,
                                            bool has_label);

}  // namespace hpcml::featurecache
