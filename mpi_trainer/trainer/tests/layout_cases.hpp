// Shared pieces of the MPI layout tests: a named model and training
// configuration, the grid layouts of a world size, and the synthetic data
// every layout reads.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "hpcml/trainer/data.hpp"
#include "hpcml/trainer/grid.hpp"
#include "hpcml/trainer/model.hpp"
#include "hpcml/trainer/trainer.hpp"

namespace hpcml::trainer {

struct Case {
  const char* name;
  ModelConfig model;
  TrainConfig train;
};

// Every dp x pp x tp layout of n ranks with at least `min_dp` replicas.
inline std::vector<GridShape> Layouts(int n, int min_dp = 1) {
  std::vector<GridShape> out;
  for (int dp = min_dp; dp <= n; ++dp)
    for (int pp = 1; pp <= n; ++pp)
      for (int tp = 1; tp <= n; ++tp)
        if (dp * pp * tp == n) out.push_back({dp, pp, tp});
  return out;
}

// The synthetic data of a case: its dense features (the input without the
// embedding slots).
inline SyntheticConfig DataFor(const ModelConfig& mc) {
  SyntheticConfig sc;
  sc.features = mc.input_dim - mc.embedded_width();
  sc.outputs = mc.output_dim;
  sc.classification = mc.loss == LossKind::kCrossEntropy;
  sc.seed = 4242;
  return sc;
}

// Synthetic rows with embedding slots after their dense features, laid out
// as encoding.hpp's encoded rows: table j's slot holds a code derived from
// the row's dense features, so a sample has the same codes in every layout.
class CodedSource final : public BatchSource {
 public:
  CodedSource(std::unique_ptr<BatchSource> inner, std::vector<EmbeddingShape> tables)
      : inner_(std::move(inner)), tables_(std::move(tables)) {}
  std::int64_t feature_dim() const override {
    std::int64_t w = inner_->feature_dim();
    for (const EmbeddingShape& t : tables_) w += t.dim;
    return w;
  }
  std::int64_t target_dim() const override { return inner_->target_dim(); }
  std::int64_t num_classes() const override { return inner_->num_classes(); }
  Status Next(std::int64_t rows, float* features, float* targets) override {
    const std::int64_t dense = inner_->feature_dim(), width = feature_dim();
    dense_.resize(static_cast<size_t>(rows * dense));
    HPCML_RETURN_IF_ERROR(inner_->Next(rows, features ? dense_.data() : nullptr, targets));
    if (features == nullptr) return Status::Ok();
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* x = dense_.data() + r * dense;
      float* y = features + r * width;
      std::fill(y, y + width, 0.0f);
      std::copy(x, x + dense, y);
      std::int64_t at = dense;
      for (size_t j = 0; j < tables_.size(); ++j) {
        const auto code = static_cast<std::int64_t>(std::fabs(x[j % dense]) * 1000.0f);
        y[at] = static_cast<float>(code % tables_[j].rows);
        at += tables_[j].dim;
      }
    }
    return Status::Ok();
  }
  std::string SavePosition() const override { return inner_->SavePosition(); }
  Status RestorePosition(std::string_view p) override { return inner_->RestorePosition(p); }

 private:
  std::unique_ptr<BatchSource> inner_;
  std::vector<EmbeddingShape> tables_;
  std::vector<float> dense_;
};

// The case's training data: synthetic, with embedding slots when it has tables.
inline Result<std::unique_ptr<BatchSource>> MakeCaseSource(const ModelConfig& mc,
                                                           std::int64_t global_batch, int replica,
                                                           int replicas) {
  HPCML_ASSIGN_OR_RETURN(auto inner,
                         MakeSyntheticSource(DataFor(mc), global_batch, replica, replicas));
  if (mc.embeddings.empty()) return inner;
  return std::unique_ptr<BatchSource>(
      std::make_unique<CodedSource>(std::move(inner), mc.embeddings));
}

// A classifier with two embedding tables (3 and 5 rows) beside 4 dense
// features, class weights, clipping and weight decay, 1F1B over 2
// microbatches.
inline Case EmbeddedCe(std::int64_t lr_steps) {
  Case c{"embedded_ce_weighted", {}, {}};
  c.model.embeddings = {{3, 2}, {5, 3}};
  c.model.input_dim = 4 + 2 + 3;
  c.model.hidden = {8, 8, 8};  // 4 layers: up to 4 stages, two tensor-parallel pairs
  c.model.output_dim = 3;
  c.model.seed = 11;
  c.train.global_batch = 16;
  c.train.microbatches = 2;
  c.train.schedule = ScheduleKind::k1F1B;
  c.train.lr = {0.02, 0.002, 1, lr_steps};
  c.train.clip = 0.5f;
  c.train.weight_decay = 0.05f;
  c.train.class_weights = {0.5f, 2.0f, 1.0f};
  return c;
}

// A GELU classifier (cross-entropy) under GPipe with 2 microbatches, gradient
// clipping and weight decay; the learning rate decays over `lr_steps` steps.
inline Case GeluCeGpipe(const char* name, std::vector<std::int64_t> hidden, std::int64_t lr_steps) {
  Case c{name, {}, {}};
  c.model.input_dim = 6;
  c.model.hidden = std::move(hidden);
  c.model.output_dim = 3;
  c.model.activation = Activation::kGelu;
  c.model.seed = 7;
  c.train.global_batch = 16;
  c.train.microbatches = 2;
  c.train.schedule = ScheduleKind::kGpipe;
  c.train.lr = {0.02, 0.002, 1, lr_steps};
  c.train.clip = 0.5f;  // with sharded gradients the global norm is summed over shards
  c.train.weight_decay = 0.05f;
  return c;
}

// A tanh regression network (MSE) under 1F1B with 4 microbatches, no clip;
// the learning rate decays over `lr_steps` steps.
inline Case TanhMse1F1B(std::int64_t lr_steps) {
  Case c{"tanh_mse_1f1b", {}, {}};
  c.model.input_dim = 5;
  c.model.hidden = {8, 4, 8};
  c.model.output_dim = 2;
  c.model.activation = Activation::kTanh;
  c.model.loss = LossKind::kMse;
  c.model.seed = 8;
  c.train.global_batch = 16;
  c.train.microbatches = 4;
  c.train.schedule = ScheduleKind::k1F1B;
  c.train.lr = {0.02, 0.0, 0, lr_steps};
  c.train.clip = 0.0f;
  return c;
}

}  // namespace hpcml::trainer
