#include "test_models.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
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

trainer::ColumnEncoding Number(std::string name, std::string kind, double center, double scale,
                               bool indicator) {
  trainer::ColumnEncoding c;
  c.name = std::move(name);
  c.kind = std::move(kind);
  c.center = center;
  c.scale = scale;
  c.indicator = indicator;
  return c;
}

trainer::ColumnEncoding Category(std::string name, std::vector<std::string> vocabulary,
                                 std::int64_t dim) {
  trainer::ColumnEncoding c;
  c.name = std::move(name);
  c.kind = "category";
  c.vocabulary = std::move(vocabulary);
  c.embed_dim = dim;
  return c;
}

TestCase Encoded(std::string name, std::vector<trainer::ColumnEncoding> columns,
                 std::vector<std::int64_t> hidden, std::int64_t out, Activation act, LossKind loss,
                 std::vector<int> standardized, std::vector<std::string> classes) {
  trainer::InputEncoding enc;
  enc.columns = std::move(columns);
  TestCase tc{std::move(name), Config(enc.width(), std::move(hidden), out, act, loss), true,
              std::move(standardized)};
  tc.encoding = std::move(enc);
  tc.label_classes = std::move(classes);
  return tc;
}

std::vector<TestCase> EncodedCases() {
  return {
      Encoded("encoded_relu_ce",
              {Number("age", "float", 41.5, 12.25, true),
               Category("colour", {"red", "green", "light blue", "NA"}, 3),
               Number("spend", "float", 0.1, 1.2, false),
               Category("plan name", {"basic", "pro", "family, plus"}, 2),
               Number("calls", "int", 4.5, 2.75, true), Number("active", "bool", 0.6, 0.49, false)},
              {16, 8}, 3, Activation::kRelu, LossKind::kCrossEntropy, {2},
              {"stay", "churn", "up,grade"}),
      // Categories only; "one" is a value of the GELU graph's, "2nd level"
      // no ONNX name, and its vocabulary is empty (every value unknown).
      Encoded("encoded_gelu_mse_cats",
              {Category("one", {"x", "y", "z"}, 2), Category("2nd level", {}, 3)}, {12}, 2,
              Activation::kGelu, LossKind::kMse, {}, {}),
      // Numbers only: no string input, no ai.onnx.ml.
      Encoded("encoded_tanh_ce_numbers",
              {Number("a", "float", -3.0, 0.5, true), Number("b", "int", 0.0, 1.0, false)}, {6}, 2,
              Activation::kTanh, LossKind::kCrossEntropy, {1}, {}),
  };
}

trainer::ModelLineage Lineage(const TestCase& tc, std::mt19937_64& rng) {
  trainer::ModelLineage l;
  const auto n =
      tc.encoding ? tc.encoding->columns.size() : static_cast<size_t>(tc.config.input_dim);
  for (size_t j = 0; j < n; ++j) {
    l.input.feature_names.push_back(tc.encoding ? tc.encoding->columns[j].name
                                                : "f" + std::to_string(j));
  }
  l.input.encoding = tc.encoding;
  l.input.label_classes = tc.label_classes;
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
  std::vector<TestCase> cases = {
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
  for (TestCase& tc : EncodedCases()) cases.push_back(std::move(tc));
  return cases;
}

TestCase EncodedCase() {
  return EncodedCases().front();
}

namespace {

// The model in memory, as MakeModel's callers see it.
trainer::ModelFile Build(const TestCase& tc) {
  std::mt19937_64 rng(std::hash<std::string>{}(tc.name));
  trainer::ModelFile m;
  m.path = "/models/" + tc.name + ".h5";
  m.format = !tc.lineage   ? "hpcml-mlp-1"
             : tc.encoding ? trainer::kEncodedModelFormat
                           : trainer::kModelFormat;
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
  if (tc.encoding) {
    m.config.embeddings = tc.encoding->embeddings();
    std::normal_distribution<float> e(0.0f, 1.0f);
    for (size_t j = 0; j < m.config.embeddings.size(); ++j) {
      const trainer::EmbeddingShape& shape = m.config.embeddings[j];
      trainer::FullTensor t{"embed" + std::to_string(j) + ".weight", {shape.rows, shape.dim}, {}};
      for (std::int64_t k = 0; k < shape.rows * shape.dim; ++k) t.data.push_back(e(rng));
      m.tensors.push_back(std::move(t));
    }
  }
  if (tc.lineage) m.lineage = Lineage(tc, rng);
  return m;
}

}  // namespace

Result<trainer::ModelFile> WriteModel(const TestCase& tc, const std::string& path) {
  const trainer::ModelFile m = Build(tc);
  if (!m.lineage) return InvalidArgument("{}: a format-1 model is not written", tc.name);
  HPCML_RETURN_IF_ERROR(SaveModelFile(path, m.config, m.tensors, *m.lineage));
  return trainer::LoadModelFile(path);
}

trainer::ModelFile MakeModel(const TestCase& tc) {
  if (!tc.encoding) return Build(tc);
  std::string dir = (std::filesystem::temp_directory_path() / "hpcml_model_XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) std::abort();
  Result<trainer::ModelFile> m = WriteModel(tc, dir + "/" + tc.name + ".h5");
  std::filesystem::remove_all(dir);
  if (!m.ok()) {
    std::fprintf(stderr, "%s: %s\n", tc.name.c_str(), m.status().Debug().c_str());
    std::abort();
  }
  return std::move(m).value();
}

std::vector<float> MakeRows(const trainer::ModelFile& model, std::int64_t rows,
                            std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> z(0.0, 1.5);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::uniform_real_distribution<double> p(0.0, 1.0);
  const trainer::InputSchema* in = model.lineage ? &model.lineage->input : nullptr;
  const trainer::InputEncoding* enc = in && in->encoding ? &*in->encoding : nullptr;
  const size_t n = enc ? enc->columns.size() : static_cast<size_t>(model.config.input_dim);
  std::vector<float> x;
  x.reserve(static_cast<size_t>(rows) * n);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < n; ++j) {
      const bool derived = in && !in->standardized.empty() && in->standardized[j];
      if (enc && p(rng) < 1.0 / 7) {
        x.push_back(NAN);
        continue;
      }
      const trainer::ColumnEncoding* c = enc ? &enc->columns[j] : nullptr;
      if (c && c->category()) {
        std::uniform_int_distribution<std::int64_t> code(0, c->unknown());
        x.push_back(static_cast<float>(code(rng)));
      } else if (derived) {
        x.push_back(static_cast<float>(in->mean[j] + in->scale[j] * z(rng)));
      } else if (c && c->kind == "bool") {
        x.push_back(p(rng) < 0.5 ? 0.0f : 1.0f);
      } else if (c && c->kind == "int") {
        x.push_back(static_cast<float>(std::round(c->center + c->scale * z(rng))));
      } else if (c) {
        x.push_back(static_cast<float>(c->center + c->scale * z(rng)));
      } else {
        x.push_back(u(rng));
      }
    }
  }
  return x;
}

std::string CategoryText(const trainer::ColumnEncoding& column, float cell) {
  if (std::isnan(cell)) return "";
  const auto code = static_cast<size_t>(cell);
  return code < column.vocabulary.size() ? column.vocabulary[code] : "never kept";
}

}  // namespace hpcml::inference::testing
