// The model's configuration and its partition over a grid: which layers are
// split for tensor parallelism and which pipeline stage holds which layers.
// (Where ranks run is the topology planner's business: topology/planner.hpp.)
// Pure functions: no MPI, no allocation of model memory; every rank computes
// the same partition from the same flags, so a bad layout fails identically
// everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/grid.hpp"

namespace hpcml::trainer {

enum class Activation { kRelu, kGelu, kTanh };
enum class LossKind { kCrossEntropy, kMse };

Result<Activation> ParseActivation(std::string_view name);
Result<LossKind> ParseLoss(std::string_view name);
std::string_view Name(Activation a);
std::string_view Name(LossKind l);

// An embedding table's shape: [rows, dim] (encoding.hpp: the kept values of
// a category feature plus its unknown row).
struct EmbeddingShape {
  std::int64_t rows = 0, dim = 0;
  bool operator==(const EmbeddingShape&) const = default;
};

struct ModelConfig {
  std::int64_t input_dim = 0;  // the first layer's input width
  // Category features' tables, held by the first stage; their slots are the
  // last sum(dim) columns of the input, in this order (encoding.hpp).
  std::vector<EmbeddingShape> embeddings;
  std::vector<std::int64_t> hidden;  // widths of the hidden layers, may be empty
  std::int64_t output_dim = 0;       // classes (cross-entropy) or targets (MSE)
  Activation activation = Activation::kRelu;
  LossKind loss = LossKind::kCrossEntropy;
  std::uint64_t seed = 1;

  int num_layers() const { return static_cast<int>(hidden.size()) + 1; }
  std::int64_t embedded_width() const;  // sum of the tables' dims
  std::int64_t in_dim(int layer) const;
  std::int64_t out_dim(int layer) const;
  Status Validate() const;
};

// How one linear layer's weight [out, in] is split across the tensor group.
//  kReplicated: every tp rank holds all of it.
//  kColumn: rows of W (output features) are split; the input is replicated.
//  kRow: columns of W (input features) are split; the partial outputs are
//        summed with one all-reduce; the bias is replicated.
enum class Split { kReplicated, kColumn, kRow };

struct LayerPartition {
  int index = 0;
  std::int64_t in = 0, out = 0;  // global dimensions
  Split split = Split::kReplicated;
  bool activation = true;  // false only for the last layer
  int stage = 0;
};

struct ModelPartition {
  std::vector<LayerPartition> layers;
  std::vector<int> stage_begin;  // first layer of each stage; size pp + 1 (end sentinel)
  int num_stages() const { return static_cast<int>(stage_begin.size()) - 1; }
};

// Pairs layers (2k, 2k+1) as column/row Megatron pairs when tp > 1 (an odd
// last layer stays replicated); a pair is never cut by a stage boundary.
// Stages are balanced by FLOPs. Fails when tp does not divide a column
// layer's output width, or when pp exceeds the number of blocks (a block is
// a pair when tp > 1, a single layer otherwise).
Result<ModelPartition> PartitionModel(const ModelConfig& config, const GridShape& shape);

// Splits `costs` into `parts` contiguous non-empty runs minimising the
// largest run's sum. Returns the first index of each run plus the end
// sentinel. Precondition: 1 <= parts <= costs.size().
std::vector<int> PartitionByCost(const std::vector<double>& costs, int parts);

enum class ScheduleKind { kGpipe, k1F1B };
Result<ScheduleKind> ParseSchedule(std::string_view name);
std::string_view Name(ScheduleKind s);

struct PipeOp {
  bool forward = true;
  int microbatch = 0;
  bool operator==(const PipeOp&) const = default;
};

// The order in which stage `stage` of `stages` runs the forward and backward
// passes of `m` microbatches. GPipe: all forwards, then all backwards.
// 1F1B: min(stages - stage - 1, m) warm-up forwards, then one forward and
// one backward alternately, then the remaining backwards. Backwards always
// run in microbatch order 0..m-1.
std::vector<PipeOp> BuildSchedule(ScheduleKind kind, int stages, int stage, int m);

// Ideal bubble fraction (p - 1) / (m + p - 1).
double IdealBubble(int stages, int m);

}  // namespace hpcml::trainer
