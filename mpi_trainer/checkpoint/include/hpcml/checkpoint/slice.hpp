// Slices of row-major float tensors: what a rank owns of a global tensor,
// and copying the overlap between two slices. This arithmetic is what lets
// a checkpoint saved in one parallel layout be loaded into any other.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml::checkpoint {

using Shape = std::vector<std::int64_t>;

// A box [offset, offset + shape) inside a tensor.
struct Slice {
  Shape offset;
  Shape shape;

  std::int64_t elements() const;
  std::string ToString() const;  // "[0:4, 8:16]"
  bool operator==(const Slice&) const = default;
};

// The whole tensor of `global` shape.
Slice Whole(const Shape& global);

// Part `index` of `parts` equal parts along dimension `dim`. Fails unless
// `parts` divides global[dim] (tensor-parallel splits are always exact).
Result<Slice> SplitAlong(const Shape& global, int dim, int index, int parts);

// The common box of two slices of the same tensor, if any.
std::optional<Slice> Intersect(const Slice& a, const Slice& b);

// Copies the elements of `region` from `src_data` (laid out row-major as the
// slice `src`) into `dst_data` (laid out as `dst`). Precondition: region lies
// inside both src and dst.
void CopyRegion(const Slice& region, const Slice& src, const float* src_data, const Slice& dst,
                float* dst_data);

}  // namespace hpcml::checkpoint
