// The MLP as held by one rank: the layers of its pipeline stage, each weight
// either whole or the rank's tensor-parallel shard.
//
// Parameters live in one flat backend buffer (gradients in a second one of
// the same layout), layer by layer, weight [out_local, in_local] row-major
// then bias. params() enumerates them with their global shapes and the slice
// this rank owns, which is what checkpoints and the HDF5 export need.
//
// Initialisation contract: the global weight of layer l is drawn from
// DeriveSeed(seed, l) element by element (counter = row * in + col), scaled
// by 1/sqrt(in); biases start at 0. A rank computes only its slice, and every
// layout starts from the same model.
//
// Embeddings (config.embeddings, encoding.hpp): the first stage holds every
// table whole, replicated over the tensor group (a table is small and its
// rows are gathered, not multiplied), at the start of the flat buffer,
// named embed<j>.weight. Table j is drawn from DeriveSeed(seed, 2^32 + j)
// (counter = row * dim + col), unscaled (the numbers beside it are
// standardised); its last row, the unknown code's, starts at 0. Their
// gradient is the first layer's input gradient over the embedding columns:
// one GEMM of rows x embedded_width x out_local per microbatch and, with a
// column-split first layer, an all-reduce of rows x embedded_width over the
// tensor group (docs/trainer.md).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/backend.hpp"
#include "hpcml/trainer/partition.hpp"

namespace hpcml::trainer {

struct ParamInfo {
  std::string name;  // "layer2.weight", "layer2.bias", "embed0.weight"
  int layer = 0;     // -1: an embedding table
  bool is_bias = false;
  std::vector<std::int64_t> global_shape;   // {out, in} or {out}
  std::int64_t row_begin = 0, row_end = 0;  // owned rows of the global tensor
  std::int64_t col_begin = 0, col_end = 1;  // owned columns (biases: 0..1)
  bool tp_replicated = false;               // identical on every rank of the tensor group
  std::size_t offset = 0, size = 0;         // in the flat parameter/gradient buffers
};

// Where this rank sits: its stage and tensor-parallel coordinates.
struct Placement {
  int stage = 0;
  int tp = 1;
  int tp_idx = 0;
};

class Model {
 public:
  // `backend` is borrowed and must outlive the model.
  static Result<std::unique_ptr<Model>> Create(const ModelConfig& config,
                                               const ModelPartition& plan, const Placement& where,
                                               Backend* backend);

  const ModelConfig& config() const { return config_; }
  const std::vector<ParamInfo>& params() const { return params_; }
  float* param_data() const { return params_buf_.data(); }
  float* grad_data() const { return grads_buf_.data(); }
  std::size_t num_params() const { return params_buf_.size(); }
  int first_layer() const { return first_; }
  int num_local_layers() const { return static_cast<int>(layers_.size()); }
  // [offset, offset + size) of local layer i's weight and bias in the flat buffers.
  std::size_t layer_offset(int i) const { return layers_[static_cast<size_t>(i)].w_off; }
  std::size_t layer_size(int i) const;

  std::int64_t input_width() const;   // features entering the stage (replicated)
  std::int64_t output_width() const;  // features leaving the stage (replicated)

  // Activation storage for `microbatches` microbatches of `rows` rows.
  void Reserve(int microbatches, std::int64_t rows);
  void ZeroGrad();
  // Same effect for the next Backward of every layer, without a pass over
  // the gradient buffer: each layer's first Backward overwrites its gradients
  // instead of adding to them. Gradients read before that are stale.
  void ZeroGradOnNextBackward();

  // First stage with embeddings: fills microbatch mb's embedding slots of
  // `input` [rows, input_width()] in place (the codes they held are kept for
  // Backward). Call before Forward(mb, input); a no-op without embeddings.
  void Embed(int mb, float* input);
  // Forward pass of microbatch `mb`; `input` [rows, input_width()] must stay
  // valid until Backward(mb) returns.
  void Forward(int mb, const float* input);
  const float* Output(int mb) const;  // [rows, output_width()]

  // Backward pass of `mb` given dLoss/dOutput: the input gradient and the
  // bias gradients (accumulated). The weight gradients wait for
  // WeightGrads: the previous stage needs only the input gradient, so the
  // pipeline's critical path carries no weight-gradient GEMM. `dout` must
  // stay valid until WeightGrads returns.
  void Backward(int mb, const float* dout, bool need_dinput);
  // Weight gradients of the microbatches whose Backward ran and whose weight
  // gradients did not, for at most `max_layers` layers: each time the layer
  // with the most such microbatches (the later layer on a tie), all of them
  // in one GEMM per run of microbatches whose rows lie back to back, added
  // in microbatch order. `layer_done(i)` is called once local layer i's
  // gradients are complete for every microbatch of the step (for overlapping
  // data-parallel reduction).
  void WeightGrads(const std::function<void(int)>& layer_done = {},
                   int max_layers = std::numeric_limits<int>::max());
  // The most microbatches any layer has waiting for WeightGrads.
  std::size_t most_pending() const {
    std::size_t n = 0;
    for (const auto& p : pending_) n = std::max(n, p.size());
    return n;
  }
  const float* InputGrad(int mb) const;  // [rows, input_width()], valid until next Backward(mb)

 private:
  struct Layer {
    LayerPartition plan;
    std::int64_t in_l = 0, out_l = 0;  // local dimensions
    std::size_t w_off = 0, b_off = 0;
  };
  // Per local layer, slices of the per-layer buffers below: microbatch
  // mb's rows follow microbatch mb-1's, so WeightGrads can run one GEMM
  // over consecutive microbatches.
  struct MicroState {
    const float* input = nullptr;
    std::vector<float*> z, a;      // a null when the layer has no activation
    std::vector<float*> dz;        // dLoss/dz, when the layer has an activation
    std::vector<const float*> gz;  // dLoss/dz as Backward found it, for WeightGrads
    Buffer dinput;
    Buffer codes;  // per table, rows codes (Embed), for the embeddings' gradient
  };
  struct Table {
    EmbeddingShape shape;
    std::size_t off = 0;    // in the flat buffers
    std::int64_t slot = 0;  // first input column
  };
  void EmbeddingGrads(MicroState& st, const Layer& first, const float* gz);
  std::vector<Buffer> z_all_, a_all_, dz_all_;  // per local layer, all microbatches

  Model(ModelConfig config, Backend* backend) : config_(std::move(config)), backend_(backend) {}
  const float* LayerOut(const MicroState& st, int i) const;
  void StartWeightGrads();  // no microbatch pending, none done (a new step)

  ModelConfig config_;
  Backend* backend_;
  Placement where_;
  int first_ = 0;
  std::vector<Layer> layers_;
  std::vector<Table> tables_;     // first stage only
  bool overwrite_embed_ = false;  // next Backward overwrites the tables' gradients
  Buffer demb_;                   // [rows, embedded width]: their input gradient
  std::vector<ParamInfo> params_;
  Buffer params_buf_, grads_buf_;
  std::vector<char> overwrite_grad_;   // per local layer: next Backward overwrites the bias grad
  std::vector<char> overwrite_wgrad_;  // per local layer: next WeightGrads overwrites
  // Per local layer: microbatches waiting for WeightGrads (Backward order),
  // and how many of this step's are done.
  std::vector<std::vector<int>> pending_;
  std::vector<int> wgrads_done_;
  std::size_t pending_count_ = 0;
  int next_done_ = -1;  // the next layer layer_done reports (they go last to first)
  std::int64_t rows_ = 0;
  std::vector<MicroState> states_;
  Buffer dx_;  // the input gradient between two local layers
};

}  // namespace hpcml::trainer
