// The trainer's input: sharded, prefetched batches from one version of a
// feature set.
//
//   LoaderOptions opt;
//   opt.rank = rank; opt.world = world; opt.batch_rows = 256; opt.seed = 42;
//   auto loader = Loader::Open("/data/ae/fraud.h5", "v3", opt);   // Result<Loader>
//   if (!loader.ok()) ...
//   while (!loader->done()) {
//     auto batch = loader->Next();            // Result<Batch>
//     if (!batch.ok()) ...                    // I/O or corruption: stop
//     train(batch->x(), batch->y(), batch->rows());
//     if (checkpoint_now) manifest.position = loader->Save().ToString();
//   }
//   // on restart: loader->Restore(Position::Parse(manifest.position).value());
//
// Which rows a rank reads and in which order is ShardPlan's rule
// (shard_plan.hpp): disjoint shards that cover every row each epoch, a
// deterministic order from (seed, epoch) at chunk granularity plus an
// in-buffer shuffle, the same number of batches on every rank. Uneven
// divisions: see ShardPlan / docs/featurecache.md (drop_last).
//
// Background threads (`threads`, default 1) read and shuffle windows of
// batches into a bounded queue (`prefetch_depth` batches); Next() only hands
// out the next batch, blocking when the queue is empty. The loader needs no
// MPI: rank and world are plain numbers.
//
// Thread safety: one consumer thread calls Next/Save/Restore. A Batch stays
// valid after the loader is gone (it shares its buffer).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "hpcml/common/status.hpp"
#include "hpcml/featurecache/format.hpp"
#include "hpcml/featurecache/shard_plan.hpp"

namespace hpcml::featurecache {

struct LoaderOptions {
  uint32_t rank = 0;
  uint32_t world = 1;
  uint64_t batch_rows = 256;
  uint64_t seed = 0;
  bool shuffle = true;
  bool drop_last = false;
  // In-buffer shuffle window in rows (rounded up to whole batches). 0: about
  // 4 MiB of features and at least two chunks. Without shuffle: the read unit.
  uint64_t shuffle_window_rows = 0;
  uint32_t prefetch_depth = 8;  // batches kept ready ahead of the consumer
  uint32_t threads = 1;         // background reader threads
  uint64_t epochs = 0;          // 0: endless; else done() after this many
  bool verify = false;          // recompute the version's digests before the first batch
  bool direct_io = true;        // false: every read through H5Dread (slower; for checks)
};

// Where a loader is: the next batch is batch `step` of epoch `epoch`. The
// fingerprint ties it to the data and the sharding (version digest, rows,
// world, batch, window, shuffle, drop_last, seed), so a position is never
// applied to a different layout by accident. All ranks are at the same
// position at a step boundary, so one position serves every rank.
struct Position {
  uint64_t epoch = 0;
  uint64_t step = 0;
  uint64_t fingerprint = 0;  // 0: "any layout" (valid only with step 0)

  // "epoch=3 step=120 fingerprint=9f1c2a..." and back.
  std::string ToString() const;
  static Result<Position> Parse(std::string_view text);
  // The start of an epoch, accepted by any loader (for example after
  // changing the number of ranks).
  static Position EpochStart(uint64_t epoch) { return Position{epoch, 0, 0}; }
};

class Batch {
 public:
  Batch() = default;

  uint64_t epoch() const { return epoch_; }
  uint64_t step() const { return step_; }  // index of the batch within its epoch
  size_t rows() const { return rows_; }    // batch_rows, fewer for a short last batch, or 0
  size_t features() const { return features_; }
  // rows x features, row-major, contiguous.
  std::span<const float> x() const { return {x_, rows_ * features_}; }
  std::span<float> mutable_x() { return {x_, rows_ * features_}; }
  // One label per row; empty when the version has no labels.
  std::span<const float> y() const { return {y_, y_ != nullptr ? rows_ : 0}; }
  // The source row of each row (its index in the version).
  std::span<const uint64_t> row_ids() const { return {ids_, rows_}; }

 private:
  friend class Loader;
  std::shared_ptr<void> keep_;
  float* x_ = nullptr;
  const float* y_ = nullptr;
  const uint64_t* ids_ = nullptr;
  uint64_t epoch_ = 0, step_ = 0;
  size_t rows_ = 0, features_ = 0;
};

class Loader {
 public:
  // Opens `version` ("", "latest", "v3") of the feature set at `path`, with
  // the access check of access.hpp, and starts the reader threads at epoch 0.
  static Result<Loader> Open(const std::string& path, std::string_view version,
                             const LoaderOptions& options);

  Loader(Loader&&) noexcept;
  Loader& operator=(Loader&&) noexcept;
  ~Loader();

  // The next batch. Errors (I/O, corruption) are final for this loader. After
  // the last of `epochs` epochs: FailedPrecondition (check done()).
  Result<Batch> Next();
  bool done() const;

  uint64_t epoch() const;  // of the next batch
  uint64_t step() const;   // of the next batch within its epoch
  Position Save() const;
  // Continues exactly at `position`: the batches that follow are those an
  // uninterrupted loader would have delivered from there.
  Status Restore(const Position& position);

  uint64_t batches_per_epoch() const;
  uint64_t rows() const;  // in the version
  size_t features() const;
  bool has_labels() const;
  const VersionInfo& info() const;
  const ShardPlan& plan() const;
  bool direct_io() const;  // whether the fast path is in use

  struct Stats {
    uint64_t batches = 0;
    uint64_t rows = 0;
    double wait_seconds = 0;  // time Next() spent waiting for data
  };
  Stats stats() const;

 private:
  struct Impl;
  explicit Loader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hpcml::featurecache
