// RowTally: what a writer accumulates from a new version's rows as it writes
// them: the range of the entity ids (string keys must cover it at Commit)
// and, unless the version is written without them, the per-column
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
  // `columns`: the feature names, then the label's name when `has_label`.
  // Without `statistics` only the entity range is kept.
  RowTally(bool statistics, std::vector<std::string> columns, bool has_label);

  void Add(const RowBlock& block);

  // INT64_MAX and INT64_MIN before any row.
  int64_t min_entity() const { return min_entity_; }
  int64_t max_entity() const { return max_entity_; }

  bool has_statistics() const { return stats_.has_value(); }
  // The statistics of the rows added; only when has_statistics().
  VersionStats Statistics() const { return stats_->Finish(); }

 private:
  int64_t min_entity_ = INT64_MAX, max_entity_ = INT64_MIN;
  std::optional<StatsAccumulator> stats_;
};

}  // namespace hpcml::featurecache
