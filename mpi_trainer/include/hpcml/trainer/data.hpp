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
};

Result<std::unique_ptr<BatchSource>> MakeSyntheticSource(const SyntheticConfig& config,
                                                         std::int64_t global_batch, int replica,
                                                         int replicas);

}  // namespace hpcml::trainer
