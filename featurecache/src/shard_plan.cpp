#include "hpcml/featurecache/shard_plan.hpp"

#include <algorithm>

namespace hpcml::featurecache {
namespace {

uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

uint64_t CeilDiv(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

__extension__ typedef unsigned __int128 U128;

}  // namespace

uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t s = a;
  uint64_t h = SplitMix(&s);
  for (uint64_t w : {b, c, d}) {
    s = h ^ w;
    h = SplitMix(&s);
  }
  return h;
}

Rng::Rng(uint64_t seed) {
  uint64_t s = seed;
  for (auto& w : s_) w = SplitMix(&s);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

uint64_t Rng::Below(uint64_t bound) {
  U128 m = static_cast<U128>(Next()) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = -bound % bound;
    while (low < threshold) {
      m = static_cast<U128>(Next()) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

Result<ShardPlan> ShardPlan::Make(const ShardSpec& s) {
  if (s.world == 0) return InvalidArgument("world must be at least 1");
  if (s.rank >= s.world) return InvalidArgument("rank {} is not below world {}", s.rank, s.world);
  if (s.batch_rows == 0) return InvalidArgument("batch_rows must be at least 1");
  if (s.chunk_rows == 0) return InvalidArgument("chunk_rows must be at least 1");
  if (s.rows == 0) return InvalidArgument("the version has no rows");
  ShardPlan p;
  p.spec_ = s;
  p.chunks_ = CeilDiv(s.rows, s.chunk_rows);
  const uint64_t q = s.rows / s.world, e = s.rows % s.world;
  p.begin_ = s.rank * q + std::min<uint64_t>(s.rank, e);
  const uint64_t shard = q + (s.rank < e ? 1 : 0);
  if (s.drop_last) {
    p.steps_ = q / s.batch_rows;
    p.len_ = p.steps_ * s.batch_rows;
    if (p.steps_ == 0) {
      return InvalidArgument(
          "{} rows over {} ranks give {} rows per rank, less than one batch of {} (drop_last)",
          s.rows, s.world, q, s.batch_rows);
    }
  } else {
    p.steps_ = CeilDiv(q + (e > 0 ? 1 : 0), s.batch_rows);
    p.len_ = shard;
  }
  p.k_ = std::max<uint64_t>(1, CeilDiv(std::max<uint64_t>(s.window_rows, 1), s.batch_rows));
  if (p.k_ * s.batch_rows > (uint64_t{1} << 31)) return InvalidArgument("shuffle window too large");
  p.spec_.window_rows = p.k_ * s.batch_rows;
  return p;
}

uint64_t ShardPlan::batch_size(uint64_t step) const {
  if (step >= steps_) return 0;
  const uint64_t b = spec_.batch_rows;
  const uint64_t start = step * b;
  if (start >= len_) return 0;
  return std::min(b, len_ - start);
}

uint64_t ShardPlan::window_size(uint64_t w) const {
  const uint64_t first = w * k_ * spec_.batch_rows;
  if (first >= len_) return 0;
  return std::min(k_ * spec_.batch_rows, len_ - first);
}

std::shared_ptr<const EpochOrder> ShardPlan::Order(uint64_t epoch) const {
  auto o = std::make_shared<EpochOrder>();
  o->epoch = epoch;
  o->chunks.resize(chunks_);
  for (uint64_t i = 0; i < chunks_; ++i) o->chunks[i] = i;
  if (spec_.shuffle && chunks_ > 1) {
    Rng rng(MixSeed(spec_.seed, epoch, 0x636875'6e6b'73ull));  // "chunks"
    for (uint64_t i = chunks_ - 1; i > 0; --i) std::swap(o->chunks[i], o->chunks[rng.Below(i + 1)]);
  }
  o->starts.resize(chunks_ + 1);
  uint64_t pos = 0;
  for (uint64_t i = 0; i < chunks_; ++i) {
    o->starts[i] = pos;
    uint64_t c = o->chunks[i];
    pos += std::min(spec_.chunk_rows, spec_.rows - c * spec_.chunk_rows);
  }
  o->starts[chunks_] = pos;
  return o;
}

void ShardPlan::Window(const EpochOrder& order, uint64_t w, std::vector<Piece>* pieces,
                       std::vector<uint32_t>* perm) const {
  pieces->clear();
  perm->clear();
  const uint64_t n = window_size(w);
  if (n == 0) return;
  uint64_t a = begin_ + w * k_ * spec_.batch_rows;  // epoch positions [a, a + n)
  const uint64_t end = a + n;
  // Place holding position a.
  size_t i = static_cast<size_t>(std::upper_bound(order.starts.begin(), order.starts.end(), a) -
                                 order.starts.begin()) -
             1;
  while (a < end) {
    const uint64_t place_start = order.starts[i], place_end = order.starts[i + 1];
    const uint64_t take = std::min(end, place_end) - a;
    const uint64_t row = order.chunks[i] * spec_.chunk_rows + (a - place_start);
    if (!pieces->empty() && pieces->back().row + pieces->back().count == row) {
      pieces->back().count += take;  // adjacent chunks in order: one piece
    } else {
      pieces->push_back({row, take});
    }
    a += take;
    ++i;
  }
  if (spec_.shuffle && n > 1) {
    perm->resize(n);
    for (uint64_t j = 0; j < n; ++j) (*perm)[j] = static_cast<uint32_t>(j);
    Rng rng(MixSeed(spec_.seed, order.epoch, spec_.rank, w));
    for (uint64_t j = n - 1; j > 0; --j) std::swap((*perm)[j], (*perm)[rng.Below(j + 1)]);
  }
}

std::vector<uint64_t> ShardPlan::EpochRows(uint64_t epoch) const {
  std::vector<uint64_t> out;
  out.reserve(len_);
  auto order = Order(epoch);
  std::vector<Piece> pieces;
  std::vector<uint32_t> perm;
  for (uint64_t w = 0; w < windows_per_epoch(); ++w) {
    Window(*order, w, &pieces, &perm);
    std::vector<uint64_t> rows;
    for (const auto& p : pieces) {
      for (uint64_t r = 0; r < p.count; ++r) rows.push_back(p.row + r);
    }
    if (perm.empty()) {
      out.insert(out.end(), rows.begin(), rows.end());
    } else {
      for (uint32_t j : perm) out.push_back(rows[j]);
    }
  }
  return out;
}

}  // namespace hpcml::featurecache
