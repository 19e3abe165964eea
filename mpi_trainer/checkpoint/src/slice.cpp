#include "hpcml/checkpoint/slice.hpp"

#include <algorithm>
#include <cstring>

namespace hpcml::checkpoint {

std::int64_t Slice::elements() const {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

std::string Slice::ToString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += fmt::format("{}{}:{}", i ? ", " : "", offset[i], offset[i] + shape[i]);
  }
  return s + "]";
}

Slice Whole(const Shape& global) {
  return Slice{Shape(global.size(), 0), global};
}

Result<Slice> SplitAlong(const Shape& global, int dim, int index, int parts) {
  if (dim < 0 || dim >= static_cast<int>(global.size())) {
    return InvalidArgument("split dimension {} out of range for a {}-d tensor", dim, global.size());
  }
  if (parts < 1 || index < 0 || index >= parts)
    return InvalidArgument("part {} of {} is invalid", index, parts);
  auto d = static_cast<size_t>(dim);
  if (global[d] % parts != 0) {
    return InvalidArgument("dimension {} of size {} does not split into {} equal parts", dim,
                           global[d], parts);
  }
  Slice s = Whole(global);
  s.shape[d] = global[d] / parts;
  s.offset[d] = s.shape[d] * index;
  return s;
}

std::optional<Slice> Intersect(const Slice& a, const Slice& b) {
  if (a.shape.size() != b.shape.size()) return std::nullopt;
  Slice r;
  for (size_t i = 0; i < a.shape.size(); ++i) {
    std::int64_t lo = std::max(a.offset[i], b.offset[i]);
    std::int64_t hi = std::min(a.offset[i] + a.shape[i], b.offset[i] + b.shape[i]);
    if (hi <= lo) return std::nullopt;
    r.offset.push_back(lo);
    r.shape.push_back(hi - lo);
  }
  return r;
}

namespace {

// Row-major strides of a slice's own buffer.
Shape Strides(const Shape& shape) {
  Shape st(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * shape[i];
  return st;
}

}  // namespace

void CopyRegion(const Slice& region, const Slice& src, const float* src_data, const Slice& dst,
                float* dst_data) {
  size_t nd = region.shape.size();
  if (nd == 0) {
    *dst_data = *src_data;
    return;
  }
  Shape ss = Strides(src.shape), ds = Strides(dst.shape);
  // Iterate over every index of the region except the last dimension, and
  // copy each contiguous innermost run with memcpy.
  Shape idx(nd, 0);
  const std::int64_t run = region.shape[nd - 1];
  for (;;) {
    std::int64_t so = 0, dof = 0;
    for (size_t i = 0; i < nd; ++i) {
      so += (region.offset[i] + idx[i] - src.offset[i]) * ss[i];
      dof += (region.offset[i] + idx[i] - dst.offset[i]) * ds[i];
    }
    std::memcpy(dst_data + dof, src_data + so, static_cast<size_t>(run) * sizeof(float));
    size_t k = nd - 1;
    for (;;) {
      if (k == 0) return;
      --k;
      if (++idx[k] < region.shape[k]) break;
      idx[k] = 0;
    }
  }
}

}  // namespace hpcml::checkpoint
