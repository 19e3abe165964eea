#include "row_block.hpp"

#include <algorithm>
#include <cstring>

namespace hpcml::featurecache {

RowBlock::RowBlock(uint64_t features, uint64_t int_features, uint64_t chunk_rows, bool labels,
                   bool available)
    : features_(features),
      int_features_(int_features),
      has_labels_(labels),
      has_available_(available) {
  const uint64_t chunk_bytes = chunk_rows * features * 4;
  block_rows_ = chunk_rows * std::max<uint64_t>(1, (4u << 20) / chunk_bytes);
  x_.resize(block_rows_ * features_);
  if (has_labels_) y_.resize(block_rows_);
  e_.resize(block_rows_);
  t_.resize(block_rows_);
  if (has_available_) a_.resize(block_rows_);
  i_.resize(block_rows_ * int_features_);
}

uint64_t RowBlock::Take(const float* x, const float* y, const int64_t* entity_ids,
                        const int64_t* timestamps, const int64_t* ints, const int64_t* available,
                        uint64_t from, uint64_t n) {
  const uint64_t take = std::min(n, block_rows_ - rows_);
  std::memcpy(x_.data() + rows_ * features_, x + from * features_,
              take * features_ * sizeof(float));
  if (y != nullptr) std::memcpy(y_.data() + rows_, y + from, take * sizeof(float));
  std::memcpy(e_.data() + rows_, entity_ids + from, take * sizeof(int64_t));
  std::memcpy(t_.data() + rows_, timestamps + from, take * sizeof(int64_t));
  if (available != nullptr)
    std::memcpy(a_.data() + rows_, available + from, take * sizeof(int64_t));
  if (int_features_ > 0) {
    std::memcpy(i_.data() + rows_ * int_features_, ints + from * int_features_,
                take * int_features_ * sizeof(int64_t));
  }
  rows_ += take;
  return take;
}

const void* RowBlock::data(Column c) const {
  switch (c) {
    case Column::kX:
      return x_.data();
    case Column::kY:
      return y_.data();
    case Column::kEntity:
      return e_.data();
    case Column::kTime:
      return t_.data();
    case Column::kInt:
      return i_.data();
    case Column::kAvailable:
      return a_.data();
  }
  return nullptr;
}

size_t RowBlock::bytes(Column c) const {
  switch (c) {
    case Column::kX:
      return rows_ * features_ * sizeof(float);
    case Column::kY:
      return rows_ * sizeof(float);
    case Column::kEntity:
    case Column::kTime:
    case Column::kAvailable:
      return rows_ * sizeof(int64_t);
    case Column::kInt:
      return rows_ * int_features_ * sizeof(int64_t);
  }
  return 0;
}

}  // namespace hpcml::featurecache
