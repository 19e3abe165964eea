// Which rows each rank reads, in which order, each epoch. Pure arithmetic: no
// I/O, no MPI; every rank computes the same plan from the same spec.
//
// The rule (docs/featurecache.md has it with examples):
//  1. Epoch order. The N rows form C = ceil(N / R) chunks of R rows (the HDF5
//     chunks; the last may be short). With shuffle, the chunks are permuted
//     by a generator seeded from (seed, epoch); without, they stay in order.
//     The rows of the permuted chunks, concatenated, are the epoch order.
//  2. Shards. Positions of the epoch order are split contiguously: with
//     q = N / W and e = N % W, rank r gets q + 1 positions if r < e, else q,
//     starting at r * q + min(r, e). The shards are disjoint and cover all N.
//  3. Batches, equal in number on every rank (lock-step training needs that):
//       drop_last = true:  S = floor(q / B) batches of exactly B rows; each
//                          rank skips the rest of its shard this epoch (when
//                          shuffling, different rows every epoch).
//       drop_last = false: S = ceil(ceil(N / W) / B) batches; every row is
//                          read exactly once; a rank's last batch may be short
//                          and, when its shard is one row shorter than the
//                          longest, may even be empty (0 rows).
//  4. Windows. Consecutive batches are grouped K = ceil(window_rows / B) at a
//     time. With shuffle, the rows of a window are permuted by a generator
//     seeded from (seed, epoch, rank, window) (the in-buffer shuffle).
// So the order is a deterministic function of (seed, epoch) for a given
// (N, R, W, B, window), and the position (epoch, step) identifies exactly where
// a rank is.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml::featurecache {

struct ShardSpec {
  uint64_t rows = 0;        // N
  uint64_t chunk_rows = 0;  // R
  uint32_t rank = 0;
  uint32_t world = 1;        // W
  uint64_t batch_rows = 0;   // B
  uint64_t window_rows = 0;  // rounded up to K * B
  bool shuffle = true;
  bool drop_last = false;
  uint64_t seed = 0;
};

// Source rows [row, row + count).
struct Piece {
  uint64_t row = 0;
  uint64_t count = 0;
};

// The chunk permutation of one epoch and where each chunk starts in it.
struct EpochOrder {
  uint64_t epoch = 0;
  std::vector<uint64_t> chunks;  // chunk index at each place
  std::vector<uint64_t> starts;  // epoch position of each place; size C + 1
};

class ShardPlan {
 public:
  static Result<ShardPlan> Make(const ShardSpec& spec);

  const ShardSpec& spec() const { return spec_; }
  uint64_t batches_per_epoch() const { return steps_; }
  uint64_t batches_per_window() const { return k_; }
  uint64_t windows_per_epoch() const { return (steps_ + k_ - 1) / k_; }
  // Rows this rank reads each epoch (its shard, trimmed for drop_last).
  uint64_t rows_per_epoch() const { return len_; }
  // First epoch position of this rank's shard.
  uint64_t shard_begin() const { return begin_; }
  // Rows of this rank's batch `step` (B, fewer, or 0; see rule 3).
  uint64_t batch_size(uint64_t step) const;
  // Rows of window w (the sum of its batch sizes).
  uint64_t window_size(uint64_t w) const;

  std::shared_ptr<const EpochOrder> Order(uint64_t epoch) const;
  // Window w of an epoch: source pieces in window order, and with shuffle the
  // permutation (output row i is window row perm[i]); perm is empty without.
  void Window(const EpochOrder& order, uint64_t w, std::vector<Piece>* pieces,
              std::vector<uint32_t>* perm) const;
  // The source row of every position this rank reads in an epoch, in the
  // order batches deliver them (tests and tools).
  std::vector<uint64_t> EpochRows(uint64_t epoch) const;

 private:
  ShardSpec spec_;
  uint64_t chunks_ = 0, steps_ = 0, k_ = 1, begin_ = 0, len_ = 0;
};

// The project's deterministic generator: xoshiro256** seeded through
// splitmix64. Defined exactly here (not std::) so the order is the same on
// every platform and library version.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  // Uniform in [0, bound), bound > 0 (Lemire's method, unbiased).
  uint64_t Below(uint64_t bound);

 private:
  uint64_t s_[4];
};

// splitmix64-based mixing of several words into one seed.
uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0);

}  // namespace hpcml::featurecache
