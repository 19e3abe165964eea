#include "row_tally.hpp"

#include <algorithm>
#include <utility>

namespace hpcml::featurecache {

RowTally::RowTally(bool statistics, std::vector<std::string> columns, bool has_label) {
  if (statistics) stats_.emplace(std::move(columns), has_label);
}

void RowTally::Add(const RowBlock& block) {
  const int64_t* ids = block.entity_ids();
  for (uint64_t i = 0; i < block.rows(); ++i) {
    min_entity_ = std::min(min_entity_, ids[i]);
    max_entity_ = std::max(max_entity_, ids[i]);
  }
  if (stats_) stats_->Add(block.features(), block.labels(), block.rows());
}

}  // namespace hpcml::featurecache
