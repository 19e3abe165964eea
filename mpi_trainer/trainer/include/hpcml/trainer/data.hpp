// Input to the trainer: one shard of a sample stream, read batch by batch.
//
// Contract: a BatchSource serves the samples of one data-parallel replica.
// Every call to Next() returns the next `rows` samples of that shard; the
// shards of the replicas are disjoint. Ranks of one replica (pipeline stages,
// tensor shards) that call Next() the same number of times get the same
// samples, so the first stage can read features and the last stage labels.
// Targets: the class index (as a float) for classification, or
// target_dim() floats per sample for regression.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "hpcml/common/status.hpp"

namespace hpcml::trainer {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual std::int64_t feature_dim() const = 0;
  // Floats per sample in `targets` (1 for a class index).
  virtual std::int64_t target_dim() const = 0;
  // Number of classes for classification sources, 0 for regression.
  virtual std::int64_t num_classes() const = 0;
  // Fills features [rows, feature_dim] and targets [rows, target_dim]
  // (either may be null when the caller does not need it) and advances.
  virtual Status Next(std::int64_t rows, float* features, float* targets) = 0;
  // An opaque position that RestorePosition() accepts (for checkpoints).
  virtual std::string SavePosition() const = 0;
  virtual Status RestorePosition(std::string_view position) = 0;
};

// A held-out set read once per evaluation, sharded by replica.
//
// Contract: replica r of R reads a fixed part of the set (the parts are
// disjoint and cover every row once) in batches of at most the `rows` given
// at creation; every replica reads batches() batches per pass, the last ones
// short or even empty (0 rows) where its part is smaller, so the replicas
// stay in lock step. After the last batch of a pass the next Next() starts
// the following pass, which holds the same rows in the same order. Ranks of
// one replica get the same rows (the first stage reads features, the last
// labels), as with BatchSource.
class EvalSource {
 public:
  virtual ~EvalSource() = default;
  virtual std::int64_t feature_dim() const = 0;
  virtual std::int64_t target_dim() const = 0;
  virtual std::int64_t num_classes() const = 0;
  // Rows in the whole set (all replicas) and batches per pass.
  virtual std::int64_t rows() const = 0;
  virtual std::int64_t batches() const = 0;
  // Fills the next batch (either pointer may be null), at most `max_rows`
  // rows; returns how many it filled.
  virtual Result<std::int64_t> Next(std::int64_t max_rows, float* features, float* targets) = 0;
};

// A deterministic synthetic data set, so the trainer runs and is tested
// without a feature store.
//
// Sample i (global index) has features x_i ~ N(0, 1)^d drawn from
// (seed, i) with counter-based generation. The targets come from a fixed
// random teacher: a linear map T [k, d] with N(0, 1/d) entries drawn from
// (seed, "teacher"), then either
//   classification: label = argmax_c (T x)_c          (k = classes)
//   regression:     y     = tanh(T x)                 (k = outputs)
// The stream is split into global batches of `global_batch` samples; batch
// t holds samples [t*B, (t+1)*B) modulo `samples` (0 = unbounded), and
// replica r of `replicas` reads rows [r*B/R, (r+1)*B/R) of each batch.
struct SyntheticConfig {
  std::int64_t features = 16;
  std::int64_t outputs = 4;  // classes or regression targets
  bool classification = true;
  std::int64_t samples = 0;  // data set size; 0 = fresh samples forever
  std::uint64_t seed = 1234;
  // The held-out stream: the same teacher (same targets for the same
  // features), features drawn from another stream of (seed, i), so its
  // samples are not the training samples.
  bool held_out = false;
};

Result<std::unique_ptr<BatchSource>> MakeSyntheticSource(const SyntheticConfig& config,
                                                         std::int64_t global_batch, int replica,
                                                         int replicas);

// Samples [0, config.samples) of `config` (usually held_out) as an
// EvalSource: replica r gets the contiguous part the feature cache's shard
// rule gives it (q = N / R rows, one more for the first N % R replicas), in
// batches of `rows` (ceil(ceil(N / R) / rows) batches per pass).
Result<std::unique_ptr<EvalSource>> MakeSyntheticEvalSource(const SyntheticConfig& config,
                                                            std::int64_t rows, int replica,
                                                            int replicas);

}  // namespace hpcml::trainer
