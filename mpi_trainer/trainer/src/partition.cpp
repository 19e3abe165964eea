#include "hpcml/trainer/partition.hpp"

#include <algorithm>
#include <limits>

namespace hpcml::trainer {

Result<Activation> ParseActivation(std::string_view name) {
  if (name == "relu") return Activation::kRelu;
  if (name == "gelu") return Activation::kGelu;
  if (name == "tanh") return Activation::kTanh;
  return InvalidArgument("unknown activation '{}' (expected relu, gelu or tanh)", name);
}

Result<LossKind> ParseLoss(std::string_view name) {
  if (name == "ce" || name == "cross-entropy") return LossKind::kCrossEntropy;
  if (name == "mse") return LossKind::kMse;
  return InvalidArgument("unknown loss '{}' (expected ce or mse)", name);
}

std::string_view Name(Activation a) {
  switch (a) {
    case Activation::kRelu:
      return "relu";
    case Activation::kGelu:
      return "gelu";
    case Activation::kTanh:
      return "tanh";
  }
  return "?";
}

std::string_view Name(LossKind l) {
  return l == LossKind::kCrossEntropy ? "ce" : "mse";
}

std::int64_t ModelConfig::in_dim(int layer) const {
  return layer == 0 ? input_dim : hidden[static_cast<size_t>(layer - 1)];
}

std::int64_t ModelConfig::out_dim(int layer) const {
  return layer == num_layers() - 1 ? output_dim : hidden[static_cast<size_t>(layer)];
}

Status ModelConfig::Validate() const {
  if (input_dim < 1) return InvalidArgument("input dimension must be >= 1 (got {})", input_dim);
  if (output_dim < 1) return InvalidArgument("output dimension must be >= 1 (got {})", output_dim);
  if (loss == LossKind::kCrossEntropy && output_dim < 2) {
    return InvalidArgument("cross-entropy needs at least 2 classes (got {})", output_dim);
  }
  for (size_t i = 0; i < hidden.size(); ++i) {
    if (hidden[i] < 1) return InvalidArgument("hidden layer {} has width {}", i, hidden[i]);
  }
  for (size_t j = 0; j < embeddings.size(); ++j) {
    if (embeddings[j].rows < 1 || embeddings[j].dim < 1) {
      return InvalidArgument("embedding {} has shape [{}, {}]", j, embeddings[j].rows,
                             embeddings[j].dim);
    }
  }
  if (embedded_width() > input_dim) {
    return InvalidArgument("the embeddings are {} wide, more than the input's {}", embedded_width(),
                           input_dim);
  }
  return Status::Ok();
}

std::int64_t ModelConfig::embedded_width() const {
  std::int64_t w = 0;
  for (const EmbeddingShape& e : embeddings) w += e.dim;
  return w;
}

std::vector<int> PartitionByCost(const std::vector<double>& costs, int parts) {
  const int n = static_cast<int>(costs.size());
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0.0);
  for (int i = 0; i < n; ++i)
    prefix[static_cast<size_t>(i) + 1] =
        prefix[static_cast<size_t>(i)] + costs[static_cast<size_t>(i)];
  auto sum = [&](int a, int b) {
    return prefix[static_cast<size_t>(b)] - prefix[static_cast<size_t>(a)];
  };
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: minimal max-run over the first i items in k runs.
  std::vector<std::vector<double>> best(static_cast<size_t>(parts) + 1,
                                        std::vector<double>(static_cast<size_t>(n) + 1, inf));
  std::vector<std::vector<int>> cut(static_cast<size_t>(parts) + 1,
                                    std::vector<int>(static_cast<size_t>(n) + 1, 0));
  best[0][0] = 0.0;
  for (int k = 1; k <= parts; ++k) {
    for (int i = k; i <= n; ++i) {
      for (int j = k - 1; j < i; ++j) {
        double v = std::max(best[static_cast<size_t>(k - 1)][static_cast<size_t>(j)], sum(j, i));
        if (v < best[static_cast<size_t>(k)][static_cast<size_t>(i)]) {
          best[static_cast<size_t>(k)][static_cast<size_t>(i)] = v;
          cut[static_cast<size_t>(k)][static_cast<size_t>(i)] = j;
        }
      }
    }
  }
  std::vector<int> begin(static_cast<size_t>(parts) + 1, n);
  int i = n;
  for (int k = parts; k >= 1; --k) {
    i = cut[static_cast<size_t>(k)][static_cast<size_t>(i)];
    begin[static_cast<size_t>(k - 1)] = i;
  }
  return begin;
}

Result<ModelPartition> PartitionModel(const ModelConfig& config, const GridShape& shape) {
  HPCML_RETURN_IF_ERROR(config.Validate());
  const int n = config.num_layers();
  ModelPartition plan;
  plan.layers.resize(static_cast<size_t>(n));
  for (int l = 0; l < n; ++l) {
    LayerPartition& lp = plan.layers[static_cast<size_t>(l)];
    lp.index = l;
    lp.in = config.in_dim(l);
    lp.out = config.out_dim(l);
    lp.activation = l != n - 1;
  }
  // Blocks: the units a stage boundary may not cut.
  std::vector<int> block_first;
  if (shape.tp > 1) {
    for (int l = 0; l + 1 < n; l += 2) {
      LayerPartition& col = plan.layers[static_cast<size_t>(l)];
      plan.layers[static_cast<size_t>(l) + 1].split = Split::kRow;
      col.split = Split::kColumn;
      if (col.out % shape.tp != 0) {
        return InvalidArgument(
            "--tp {} does not divide the width {} of hidden layer {} (tensor parallelism "
            "splits it into equal column shards)",
            shape.tp, col.out, l);
      }
      block_first.push_back(l);
    }
    if (n % 2 == 1) block_first.push_back(n - 1);
  } else {
    for (int l = 0; l < n; ++l) block_first.push_back(l);
  }
  const int blocks = static_cast<int>(block_first.size());
  if (shape.pp > blocks) {
    return InvalidArgument(
        "--pp {} asks for more pipeline stages than the model has {} ({} layers{})", shape.pp,
        shape.tp > 1 ? fmt::format("layer pairs: {}", blocks) : fmt::format("layers: {}", blocks),
        n, shape.tp > 1 ? ", paired for tensor parallelism" : "");
  }
  block_first.push_back(n);
  std::vector<double> costs(static_cast<size_t>(blocks), 0.0);
  for (int b = 0; b < blocks; ++b) {
    for (int l = block_first[static_cast<size_t>(b)]; l < block_first[static_cast<size_t>(b) + 1];
         ++l) {
      // Forward, weight gradient and input gradient, one GEMM of in x out
      // each per row; the first layer has no input gradient (nothing needs it).
      costs[static_cast<size_t>(b)] += (l == 0 ? 2.0 : 3.0) *
                                       static_cast<double>(config.in_dim(l)) *
                                       static_cast<double>(config.out_dim(l));
    }
  }
  std::vector<int> part = PartitionByCost(costs, shape.pp);
  plan.stage_begin.resize(static_cast<size_t>(shape.pp) + 1);
  for (int s = 0; s <= shape.pp; ++s) {
    plan.stage_begin[static_cast<size_t>(s)] =
        block_first[static_cast<size_t>(part[static_cast<size_t>(s)])];
  }
  for (int s = 0; s < shape.pp; ++s) {
    for (int l = plan.stage_begin[static_cast<size_t>(s)];
         l < plan.stage_begin[static_cast<size_t>(s) + 1]; ++l) {
      plan.layers[static_cast<size_t>(l)].stage = s;
    }
  }
  return plan;
}

Result<ScheduleKind> ParseSchedule(std::string_view name) {
  if (name == "gpipe") return ScheduleKind::kGpipe;
  if (name == "1f1b") return ScheduleKind::k1F1B;
  return InvalidArgument("unknown pipeline schedule '{}' (expected gpipe or 1f1b)", name);
}

std::string_view Name(ScheduleKind s) {
  return s == ScheduleKind::kGpipe ? "gpipe" : "1f1b";
}

std::vector<PipeOp> BuildSchedule(ScheduleKind kind, int stages, int stage, int m) {
  std::vector<PipeOp> ops;
  ops.reserve(static_cast<size_t>(2 * m));
  if (kind == ScheduleKind::kGpipe) {
    for (int i = 0; i < m; ++i) ops.push_back({true, i});
    for (int i = 0; i < m; ++i) ops.push_back({false, i});
    return ops;
  }
  const int warmup = std::min(stages - stage - 1, m);
  int f = 0, b = 0;
  for (; f < warmup; ++f) ops.push_back({true, f});
  while (f < m) {
    ops.push_back({true, f++});
    ops.push_back({false, b++});
  }
  while (b < m) ops.push_back({false, b++});
  return ops;
}

double IdealBubble(int stages, int m) {
  return static_cast<double>(stages - 1) / static_cast<double>(m + stages - 1);
}

}  // namespace hpcml::trainer
