#include "row_tally.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace hpcml::featurecache {

RowTally::RowTally(bool statistics, std::vector<std::string> columns, bool has_label,
                   std::vector<bool> coded)
    : coded_(std::move(coded)) {
  coded_.resize(columns.size(), false);
  bad_code_.assign(coded_.size(), false);
  max_code_.assign(coded_.size(), -1);
  if (statistics) {
    stats_.emplace(std::move(columns), has_label);
    stats_->CountCodes(coded_);
  }
}

void RowTally::Add(const RowBlock& block) {
  const int64_t* ids = block.entity_ids();
  for (uint64_t i = 0; i < block.rows(); ++i) {
    min_entity_ = std::min(min_entity_, ids[i]);
    max_entity_ = std::max(max_entity_, ids[i]);
  }
  const size_t cols = coded_.size();
  const size_t nfeat = cols - (block.labels() != nullptr ? 1 : 0);
  for (size_t c = 0; c < cols; ++c) {
    if (!coded_[c]) continue;
    for (uint64_t i = 0; i < block.rows(); ++i) {
      const float v = c < nfeat ? block.features()[i * nfeat + c] : block.labels()[i];
      if (std::isnan(v)) continue;
      bad_code_[c] = bad_code_[c] || v < 0 || v != std::floor(v);
      max_code_[c] = std::max(max_code_[c], double(v));
    }
  }
  if (stats_) stats_->Add(block.features(), block.labels(), block.rows());
}

}  // namespace hpcml::featurecache
