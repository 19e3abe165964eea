// RowTally: what a writer accumulates from a new version's rows as it writes
// them: the range of the entity ids (string keys must cover it at Commit),
// that of the codes of category columns (their dictionaries must), and,
// unless the version is written without them, the per-column
// statistics (StatsAccumulator, stats.hpp). Not thread-safe; one writer
// uses it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hpcml/featurecache/stats.hpp"
#include "row_block.hpp"

namespace hpcml::featurecache {

class RowTally {
 public:
  RowTally() = default;
  // `columns`: the feature names, then the label's name when `has_label`;
  // `coded`: per column, whether it holds dictionary codes (a category
  // feature, a class label), whose range is kept. Without `statistics` only
  // the entity and code ranges are kept.
  RowTally(bool statistics, std::vector<std::string> columns, bool has_label,
           std::vector<bool> coded = {});

  void Add(const RowBlock& block);

  // INT64_MAX and INT64_MIN before any row.
  int64_t min_entity() const { return min_entity_; }
  int64_t max_entity() const { return max_entity_; }

  bool coded(size_t column) const { return coded_[column]; }
  // Whether every code of coded column `column` is a whole number in
  // [0, size) (missing cells aside).
  bool CodesWithin(size_t column, uint64_t size) const {
    return !bad_code_[column] && (max_code_[column] < 0 || max_code_[column] < double(size));
  }

  bool has_statistics() const { return stats_.has_value(); }
  // The statistics of the rows added; only when has_statistics().
  VersionStats Statistics() const { return stats_->Finish(); }

 private:
  int64_t min_entity_ = INT64_MAX, max_entity_ = INT64_MIN;
  std::vector<bool> coded_, bad_code_;
  std::vector<double> max_code_;
  std::optional<StatsAccumulator> stats_;
};

}  // namespace hpcml::featurecache
