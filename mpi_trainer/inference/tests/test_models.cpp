#include "test_models.hpp"

#include <cmath>
#include <functional>
#include <random>

namespace hpcml::inference::testing {

using trainer::Activation;
using trainer::LossKind;
using trainer::ModelConfig;

namespace {

ModelConfig Config(std::int64_t in, std::vector<std::int64_t> hidden, std::int64_t out,
                   Activation act, LossKind loss) {
  ModelConfig c;
  c.input_dim = in;
  c.hidden = std::move(hidden);
  c.output_dim = out;
  c.activation = act;
  c.loss = loss;
  c.seed = 0;
  return c;
}

trainer::ModelLineage Lineage(const TestCase& tc, std::mt19937_64& rng) {
  trainer::ModelLineage l;
  const auto n = static_cast<size_t>(tc.config.input_dim);
  for (size_t j = 0; j < n; ++j) l.input.feature_names.push_back("f" + std::to_string(j));
  l.input.label_name = "y";
  l.data.path = "/data/test/" + tc.name + ".h5";
  l.data.version = "v1";
  l.tool = "onnx_export_test";
  if (tc.standardized.empty()) return l;
  l.input.standardized.assign(n, false);
  l.input.mean.assign(n, 0.0);
  l.input.scale.assign(n, 1.0);
  l.input.standardized_by = "v2";
  std::uniform_real_distribution<double> mean(-tc.mean_range, tc.mean_range), scale(0.5, 40.0);
  for (int j : tc.standardized) {
    l.input.standardized[static_cast<size_t>(j)] = true;
    l.input.mean[static_cast<size_t>(j)] = mean(rng);
    l.input.scale[static_cast<size_t>(j)] = scale(rng);
  }
  return l;
}

}  // namespace

std::vector<TestCase> Cases() {
  return {
      {"relu_ce_std",
       Config(7, {16, 8}, 3, Activation::kRelu, LossKind::kCrossEntropy),
       true,
       {0, 2, 3, 6}},
      {"gelu_mse", Config(5, {12}, 2, Activation::kGelu, LossKind::kMse), true, {}},
      {"gelu_ce_std",
       Config(6, {10, 10}, 4, Activation::kGelu, LossKind::kCrossEntropy),
       true,
       {1, 4}},
      {"tanh_ce_std_all",
       Config(4, {6, 6, 6}, 5, Activation::kTanh, LossKind::kCrossEntropy),
       true,
       {0, 1, 2, 3}},
      {"tanh_mse_format1", Config(3, {9}, 2, Activation::kTanh, LossKind::kMse), false, {}},
      {"linear_mse_std", Config(6, {}, 1, Activation::kGelu, LossKind::kMse), true, {0, 5}},
      {"linear_ce", Config(3, {}, 4, Activation::kRelu, LossKind::kCrossEntropy), true, {}},
      // |mean| / scale in the thousands: standardising in float32 would be
      // off by about 1e-4 (2^-24 of the ratio); in double it is exact.
      {"relu_mse_large_mean",
       Config(5, {8}, 2, Activation::kRelu, LossKind::kMse),
       true,
       {1, 2, 3},
       1e5},
  };
}

trainer::ModelFile MakeModel(const TestCase& tc) {
  std::mt19937_64 rng(std::hash<std::string>{}(tc.name));
  trainer::ModelFile m;
  m.path = "/models/" + tc.name + ".h5";
  m.format = tc.lineage ? trainer::kModelFormat : "hpcml-mlp-1";
  m.config = tc.config;
  m.sha256 = std::string(64, 'a');
  for (int i = 0; i < tc.config.num_layers(); ++i) {
    const std::int64_t in = tc.config.in_dim(i), out = tc.config.out_dim(i);
    // Wider than the trainer's init, so activations leave their linear range.
    std::uniform_real_distribution<float> w(-2.0f / std::sqrt(float(in)),
                                            2.0f / std::sqrt(float(in)));
    trainer::FullTensor weight{"layer" + std::to_string(i) + ".weight", {out, in}, {}};
    trainer::FullTensor bias{"layer" + std::to_string(i) + ".bias", {out}, {}};
    for (std::int64_t k = 0; k < out * in; ++k) weight.data.push_back(w(rng));
    for (std::int64_t k = 0; k < out; ++k) bias.data.push_back(w(rng));
    m.tensors.push_back(std::move(weight));
    m.tensors.push_back(std::move(bias));
  }
  if (tc.lineage) m.lineage = Lineage(tc, rng);
  return m;
}

std::vector<float> MakeRows(const trainer::ModelFile& model, std::int64_t rows,
                            std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> z(0.0, 1.5);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  const auto n = static_cast<size_t>(model.config.input_dim);
  std::vector<float> x;
  x.reserve(static_cast<size_t>(rows) * n);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < n; ++j) {
      const trainer::InputSchema* in = model.lineage ? &model.lineage->input : nullptr;
      if (in && !in->standardized.empty() && in->standardized[j]) {
        x.push_back(static_cast<float>(in->mean[j] + in->scale[j] * z(rng)));
      } else {
        x.push_back(u(rng));
      }
    }
  }
  return x;
}

}  // namespace hpcml::inference::testing
