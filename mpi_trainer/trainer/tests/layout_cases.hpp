// Shared pieces of the MPI layout tests: a named model and training
// configuration, the grid layouts of a world size, and the synthetic data
// every layout reads.
#pragma once

#include <cstdint>
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

inline SyntheticConfig DataFor(const ModelConfig& mc) {
  SyntheticConfig sc;
  sc.features = mc.input_dim;
  sc.outputs = mc.output_dim;
  sc.classification = mc.loss == LossKind::kCrossEntropy;
  sc.seed = 4242;
  return sc;
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
