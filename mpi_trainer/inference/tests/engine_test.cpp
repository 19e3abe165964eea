#include "hpcml/inference/engine.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "test_models.hpp"

namespace hpcml::inference {
namespace {

using trainer::Activation;
using trainer::LossKind;

trainer::ModelFile RandomModel(std::int64_t in, std::vector<std::int64_t> hidden, std::int64_t out,
                               Activation act, LossKind loss, unsigned seed) {
  trainer::ModelFile m;
  m.path = "test.h5";
  m.config.input_dim = in;
  m.config.hidden = std::move(hidden);
  m.config.output_dim = out;
  m.config.activation = act;
  m.config.loss = loss;
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int l = 0; l < m.config.num_layers(); ++l) {
    const std::int64_t i = m.config.in_dim(l), o = m.config.out_dim(l);
    trainer::FullTensor w{fmt::format("layer{}.weight", l), {o, i}, {}};
    trainer::FullTensor b{fmt::format("layer{}.bias", l), {o}, {}};
    for (std::int64_t k = 0; k < o * i; ++k)
      w.data.push_back(nd(gen) / std::sqrt(static_cast<float>(i)));
    for (std::int64_t k = 0; k < o; ++k) b.data.push_back(0.1f * nd(gen));
    m.tensors.push_back(std::move(w));
    m.tensors.push_back(std::move(b));
  }
  return m;
}

double Act(Activation a, double z) {
  switch (a) {
    case Activation::kRelu:
      return z > 0 ? z : 0;
    case Activation::kTanh:
      return std::tanh(z);
    case Activation::kGelu:
      return 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
  }
  return z;
}

// The same function in double with plain loops: the independent reference.
std::vector<double> Reference(const trainer::ModelFile& m, const float* x, std::int64_t rows) {
  const trainer::ModelConfig& c = m.config;
  std::vector<double> out;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<double> cur(x + r * c.input_dim, x + (r + 1) * c.input_dim);
    if (m.lineage && m.lineage->input.any_standardized()) {
      const auto& in = m.lineage->input;
      for (size_t j = 0; j < cur.size(); ++j)
        if (in.standardized[j]) cur[j] = (cur[j] - in.mean[j]) / in.scale[j];
    }
    for (int l = 0; l < c.num_layers(); ++l) {
      const auto& w = m.tensors[static_cast<size_t>(2 * l)].data;
      const auto& b = m.tensors[static_cast<size_t>(2 * l + 1)].data;
      std::vector<double> next(static_cast<size_t>(c.out_dim(l)));
      for (size_t o = 0; o < next.size(); ++o) {
        double z = b[o];
        for (size_t i = 0; i < cur.size(); ++i) z += w[o * cur.size() + i] * cur[i];
        next[o] = l + 1 < c.num_layers() ? Act(c.activation, z) : z;
      }
      cur = std::move(next);
    }
    if (c.loss == LossKind::kCrossEntropy) {
      double mx = cur[0], sum = 0;
      for (double v : cur) mx = std::max(mx, v);
      for (double& v : cur) sum += (v = std::exp(v - mx));
      for (double& v : cur) v /= sum;
    }
    out.insert(out.end(), cur.begin(), cur.end());
  }
  return out;
}

std::vector<float> RandomRows(std::int64_t rows, std::int64_t cols, float scale, float shift) {
  std::mt19937 gen(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (float& v : x) v = shift + scale * nd(gen);
  return x;
}

struct Case {
  Activation act;
  LossKind loss;
  std::vector<std::int64_t> hidden;
};

class EngineMatchesReference : public ::testing::TestWithParam<Case> {};

TEST_P(EngineMatchesReference, OnOddBatchesAndSlices) {
  const Case& c = GetParam();
  trainer::ModelFile m =
      RandomModel(13, c.hidden, c.loss == LossKind::kMse ? 3 : 5, c.act, c.loss, 3);
  const std::int64_t rows = 301;
  const std::vector<float> x = RandomRows(rows, 13, 1.0f, 0.0f);
  const std::vector<double> want = Reference(m, x.data(), rows);
  for (std::int64_t max_batch : {1, 64, 4096}) {
    auto e = Engine::Create(m, {2, max_batch});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    std::vector<float> got(want.size());
    ASSERT_TRUE((*e)->Score(x.data(), rows, got.data(), Input::kRaw).ok());
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    EXPECT_LT(worst, 2e-5) << "max_batch " << max_batch;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, EngineMatchesReference,
    ::testing::Values(Case{Activation::kRelu, LossKind::kCrossEntropy, {32, 16}},
                      Case{Activation::kGelu, LossKind::kCrossEntropy, {24}},
                      Case{Activation::kTanh, LossKind::kMse, {8, 8, 8}},
                      Case{Activation::kRelu, LossKind::kMse, {}}));

// Raw input with the model's standardisation equals input standardised
// beforehand as the derive does it (double, then rounded to float): bitwise.
TEST(Engine, StandardisesRawInputAsTheDeriveDid) {
  trainer::ModelFile m = RandomModel(4, {16}, 2, Activation::kRelu, LossKind::kCrossEntropy, 5);
  trainer::ModelLineage lin;
  lin.input.feature_names = {"a", "b", "c", "d"};
  lin.input.standardized = {true, false, true, true};
  lin.input.mean = {100.25, 0, -3.5, 7};
  lin.input.scale = {20.5, 1, 0.75, 1};
  m.lineage = lin;
  const std::int64_t rows = 50;
  const std::vector<float> raw = RandomRows(rows, 4, 20.0f, 100.0f);
  std::vector<float> pre = raw;
  for (std::int64_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < 4; ++j)
      if (lin.input.standardized[j]) {
        float& v = pre[static_cast<size_t>(r) * 4 + j];
        v = static_cast<float>((v - lin.input.mean[j]) / lin.input.scale[j]);
      }
  auto e = Engine::Create(m, {1, 4096});
  ASSERT_TRUE(e.ok());
  std::vector<float> a(rows * 2), b(rows * 2);
  ASSERT_TRUE((*e)->Score(raw.data(), rows, a.data(), Input::kRaw).ok());
  ASSERT_TRUE((*e)->Score(pre.data(), rows, b.data(), Input::kStandardized).ok());
  EXPECT_EQ(a, b);
  const std::vector<double> want = Reference(m, raw.data(), rows);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], want[i], 2e-5);
}

// int8 against the double reference: probabilities within 0.03, and the
// same class for nearly every row (random inputs, so some rows sit on a
// class boundary). The figures print, as the bench reports them.
TEST(Engine, Int8StaysCloseToFloat) {
  for (Activation act : {Activation::kRelu, Activation::kGelu, Activation::kTanh}) {
    // Layers 0 and 1 have 128k and 256k weights (int8); the last 4k (fp32).
    trainer::ModelFile m = RandomModel(256, {512, 512}, 8, act, LossKind::kCrossEntropy, 11);
    const std::int64_t rows = 2000;
    const std::vector<float> x = RandomRows(rows, 256, 1.0f, 0.0f);
    const std::vector<double> want = Reference(m, x.data(), rows);
    auto e = Engine::Create(m, {1, 512, Precision::kInt8});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_EQ((*e)->int8_layers(), 2);
    std::vector<float> got(want.size());
    ASSERT_TRUE((*e)->Score(x.data(), rows, got.data(), Input::kRaw).ok());
    double worst = 0;
    int same = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const auto* g = got.data() + r * 8;
      const auto* w = want.data() + r * 8;
      for (int c = 0; c < 8; ++c) worst = std::max(worst, std::abs(g[c] - w[c]));
      same += std::max_element(g, g + 8) - g == std::max_element(w, w + 8) - w;
    }
    std::printf("int8 %s: max |p - p_ref| %.4f, same class %.4f\n", std::string(Name(act)).c_str(),
                worst, static_cast<double>(same) / rows);
    EXPECT_LT(worst, 0.03);
    EXPECT_GT(same, rows * 97 / 100);
  }
}

// An encoded model in double with plain loops: the derive's standardisation
// (double, rounded to float, as the derive stored it), then per feature its
// number ((x - center) / scale, 0 and the indicator where missing) or its
// embedding row (the unknown row where missing), then the layers.
std::vector<double> EncodedReference(const trainer::ModelFile& m, const float* x,
                                     std::int64_t rows) {
  const trainer::InputSchema& in = m.lineage->input;
  const trainer::InputEncoding& enc = *in.encoding;
  const size_t f = enc.columns.size();
  std::vector<float> encoded;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<double> numbers, indicators, embedded;
    size_t table = static_cast<size_t>(2 * m.config.num_layers());
    for (size_t j = 0; j < f; ++j) {
      const trainer::ColumnEncoding& c = enc.columns[j];
      float v = x[static_cast<size_t>(r) * f + j];
      if (!in.standardized.empty() && in.standardized[j])
        v = static_cast<float>((v - in.mean[j]) / in.scale[j]);
      if (c.category()) {
        const auto code = std::isnan(v) ? c.unknown() : static_cast<std::int64_t>(v);
        const auto& t = m.tensors[table++].data;
        for (std::int64_t d = 0; d < c.embed_dim; ++d)
          embedded.push_back(t[static_cast<size_t>(code * c.embed_dim + d)]);
        continue;
      }
      numbers.push_back(std::isnan(v) ? 0.0 : (v - c.center) / c.scale);
      if (c.indicator) indicators.push_back(std::isnan(v) ? 1.0 : 0.0);
    }
    for (const auto* part : {&numbers, &indicators, &embedded})
      for (double v : *part) encoded.push_back(static_cast<float>(v));
  }
  trainer::ModelFile plain = m;
  plain.lineage.reset();  // the layers only
  return Reference(plain, encoded.data(), rows);
}

double WorstDifference(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  return worst;
}

// Raw rows (engine.hpp) of every encoded test model: numbers with NaN,
// codes up to the unknown one, NaN categories, a derive standardisation.
TEST(Engine, EncodedModelsMatchTheReference) {
  int cases = 0;
  for (const testing::TestCase& tc : testing::Cases()) {
    if (!tc.encoding) continue;
    SCOPED_TRACE(tc.name);
    ++cases;
    const trainer::ModelFile m = testing::MakeModel(tc);
    const std::int64_t rows = 301;
    const std::vector<float> x = testing::MakeRows(m, rows, 5);
    ASSERT_TRUE(std::any_of(x.begin(), x.end(), [](float v) { return std::isnan(v); }));
    const std::vector<double> want = EncodedReference(m, x.data(), rows);
    for (std::int64_t max_batch : {1, 64, 4096}) {
      auto e = Engine::Create(m, {2, max_batch});
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      EXPECT_EQ((*e)->inputs(), static_cast<std::int64_t>(tc.encoding->columns.size()));
      std::vector<float> got(want.size());
      ASSERT_TRUE((*e)->Score(x.data(), rows, got.data(), Input::kRaw).ok());
      EXPECT_LT(WorstDifference(got, want), 2e-5) << "max_batch " << max_batch;
    }
  }
  EXPECT_EQ(cases, 3);
}

// The derive's standardisation is skipped for input standardised already:
// the same scores, bitwise; the encoding still applies.
TEST(Engine, EncodedModelTakesStandardisedInput) {
  const trainer::ModelFile m = testing::MakeModel(testing::EncodedCase());
  const trainer::InputSchema& in = m.lineage->input;
  const std::int64_t rows = 40;
  const size_t f = in.feature_names.size();
  const std::vector<float> raw = testing::MakeRows(m, rows, 9);
  std::vector<float> pre = raw;
  for (size_t i = 0; i < pre.size(); ++i) {
    const size_t j = i % f;
    if (in.standardized[j]) pre[i] = static_cast<float>((pre[i] - in.mean[j]) / in.scale[j]);
  }
  auto e = Engine::Create(m, {1, 16});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  std::vector<float> a(rows * 3), b(rows * 3);
  ASSERT_TRUE((*e)->Score(raw.data(), rows, a.data(), Input::kRaw).ok());
  ASSERT_TRUE((*e)->Score(pre.data(), rows, b.data(), Input::kStandardized).ok());
  EXPECT_EQ(a, b);
}

// int8 runs the layers only: the encoding and embeddings stay float.
TEST(Engine, EncodedModelInInt8) {
  testing::TestCase tc = testing::EncodedCase();
  tc.name += "_int8";
  tc.config.hidden = {512, 256};  // 512 x 256 weights: int8
  const trainer::ModelFile m = testing::MakeModel(tc);
  const std::int64_t rows = 1000;
  const std::vector<float> x = testing::MakeRows(m, rows, 3);
  const std::vector<double> want = EncodedReference(m, x.data(), rows);
  auto e = Engine::Create(m, {1, 256, Precision::kInt8});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ((*e)->int8_layers(), 1);
  std::vector<float> got(want.size());
  ASSERT_TRUE((*e)->Score(x.data(), rows, got.data(), Input::kRaw).ok());
  const double worst = WorstDifference(got, want);
  std::printf("int8, encoded: max |p - p_ref| %.4f\n", worst);
  EXPECT_LT(worst, 0.03);
}

// A category cell that is not a code, or an infinite number: named by row
// (0-based, from the first row of the call) and column.
TEST(Engine, EncodedModelRefusesBadCells) {
  const trainer::ModelFile m = testing::MakeModel(testing::EncodedCase());
  const std::int64_t rows = 10;
  const size_t f = m.lineage->input.feature_names.size();
  std::vector<float> x = testing::MakeRows(m, rows, 4);
  std::vector<float> out(rows * 3);
  auto e = Engine::Create(m, {1, 4});
  ASSERT_TRUE(e.ok());
  x[6 * f + 1] = 5;  // colour keeps 4 values: codes 0 to 4
  Status st = (*e)->Score(x.data(), rows, out.data(), Input::kRaw);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("rows 4 to 7 (0-based): row 2, column 2 (\"colour\"): 5 is not a "
                              "code"),
            std::string::npos)
      << st.message();
  x[6 * f + 1] = 1.5f;
  EXPECT_FALSE((*e)->Score(x.data(), rows, out.data(), Input::kRaw).ok());
  x[6 * f + 1] = 4;  // the unknown code
  EXPECT_TRUE((*e)->Score(x.data(), rows, out.data(), Input::kRaw).ok());
  x[f + 4] = INFINITY;
  st = (*e)->Score(x.data(), rows, out.data(), Input::kRaw);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("\"calls\""), std::string::npos) << st.message();
}

TEST(Engine, EncodedModelWithoutItsTablesIsRefused) {
  trainer::ModelFile m = testing::MakeModel(testing::EncodedCase());
  m.tensors.back().shape = {4, 3};
  m.tensors.back().data.resize(12);
  auto e = Engine::Create(m, {});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("embed1.weight does not have the shape [4, 2]"),
            std::string::npos)
      << e.status().message();
  m.tensors.pop_back();
  e = Engine::Create(m, {});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("2 embeddings"), std::string::npos) << e.status().message();
}

TEST(Engine, RefusesTensorsThatDoNotFitTheConfig) {
  trainer::ModelFile m = RandomModel(4, {8}, 2, Activation::kRelu, LossKind::kCrossEntropy, 1);
  m.tensors[2].data.pop_back();
  auto e = Engine::Create(m, {});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("layer 1"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace hpcml::inference
