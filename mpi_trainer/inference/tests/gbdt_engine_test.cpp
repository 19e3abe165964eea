// The GBDT engine against XGBoost's own prediction on the training matrix
// (the reference: the same booster, the rows as XGBoost took them), to
// 1e-6, for the three objectives; the unknown code as missing; refusals.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "gbdt_models.hpp"
#include "hpcml/inference/engine.hpp"

namespace hpcml::inference {
namespace {

using testing::GbdtCase;
using testing::GbdtKind;

constexpr std::int64_t kRows = 500;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class GbdtFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hpcml_gbdt_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  GbdtCase Train(GbdtKind kind) {
    auto c = testing::TrainGbdtCase(kind, kRows, dir_ + "/model.h5");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }

  static std::unique_ptr<Engine> Make(const trees::GbdtModelFile& m, EngineOptions o = {}) {
    auto e = Engine::Create(m, o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e).value() : nullptr;
  }

  static std::vector<float> Score(Engine& e, const std::vector<float>& rows,
                                  Input input = Input::kRaw) {
    const auto n = static_cast<std::int64_t>(rows.size()) / e.inputs();
    std::vector<float> out(static_cast<size_t>(n * e.outputs()));
    Status s = e.Score(rows.data(), n, out.data(), input);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  // XGBoost's prediction as the engine's outputs: [1 - p, p] for a binary
  // model, as it is otherwise.
  static std::vector<float> Reference(const GbdtCase& c, DMatrixHandle m) {
    auto p = testing::XgbPredict(c.booster.get(), m);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (c.model.objective != "binary:logistic") return *p;
    std::vector<float> out;
    for (float v : *p) {
      out.push_back(1.0f - v);
      out.push_back(v);
    }
    return out;
  }

  std::string dir_;
};

class GbdtEngineTest : public GbdtFixture, public ::testing::WithParamInterface<GbdtKind> {};

TEST_P(GbdtEngineTest, MatchesXgboostOnTheTrainingRows) {
  const GbdtCase c = Train(GetParam());
  auto engine = Make(c.model, {.threads = 2});
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->inputs(), testing::kGbdtFeatures);
  EXPECT_EQ(engine->outputs(), c.model.outputs);
  EXPECT_EQ(engine->int8_layers(), 0);
  const std::vector<float> got = Score(*engine, c.rows);
  const std::vector<float> want = Reference(c, c.train.get());
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(got.size(), static_cast<size_t>(kRows * c.model.outputs));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "value " << i;
  if (c.model.objective == "multi:softprob") {
    for (std::int64_t r = 0; r < kRows; ++r) {
      EXPECT_NEAR(got[3 * r] + got[3 * r + 1] + got[3 * r + 2], 1.0f, 1e-5) << "row " << r;
    }
  }
}

TEST_P(GbdtEngineTest, SlicesAndThreadsGiveTheSameValues) {
  const GbdtCase c = Train(GetParam());
  auto whole = Make(c.model, {.threads = 1});
  auto sliced = Make(c.model, {.threads = 2, .max_batch = 37});
  ASSERT_TRUE(whole && sliced);
  EXPECT_EQ(Score(*whole, c.rows), Score(*sliced, c.rows));
}

// A colour the vocabulary does not hold (the unknown code) is missing for
// XGBoost, as a missing cell is: it goes the learned default way.
TEST_P(GbdtEngineTest, UnknownCodeScoresAsMissing) {
  const GbdtCase c = Train(GetParam());
  auto engine = Make(c.model);
  ASSERT_NE(engine, nullptr);
  std::vector<float> unknown = c.rows, missing = c.rows;
  const auto code = static_cast<float>(testing::GbdtColours().size());
  for (std::int64_t r = 0; r < kRows; ++r) {
    unknown[static_cast<size_t>(r * testing::kGbdtFeatures + testing::kColour)] = code;
    missing[static_cast<size_t>(r * testing::kGbdtFeatures + testing::kColour)] = kNaN;
  }
  const std::vector<float> a = Score(*engine, unknown), b = Score(*engine, missing);
  EXPECT_EQ(a, b);
  auto m = testing::GbdtMatrix(missing);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::vector<float> want = Reference(c, m->get());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], want[i], 1e-6) << "value " << i;
  // The colour matters to the model: the known codes score otherwise.
  EXPECT_NE(a, Score(*engine, c.rows));
}

INSTANTIATE_TEST_SUITE_P(Objectives, GbdtEngineTest,
                         ::testing::Values(GbdtKind::kBinary, GbdtKind::kMulti,
                                           GbdtKind::kRegression),
                         [](const auto& p) { return testing::Name(p.param); });

using GbdtEngineRefusals = GbdtFixture;
using GbdtEngineInput = GbdtFixture;

TEST_F(GbdtEngineRefusals, Int8) {
  const GbdtCase c = Train(GbdtKind::kBinary);
  auto e = Engine::Create(c.model, {.precision = Precision::kInt8});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("fp32 only"), std::string::npos) << e.status().message();
}

TEST_F(GbdtEngineRefusals, CellsThatAreNotCodesOrFinite) {
  const GbdtCase c = Train(GbdtKind::kBinary);
  auto engine = Make(c.model, {.max_batch = 2});
  ASSERT_NE(engine, nullptr);
  std::vector<float> out(static_cast<size_t>(4 * engine->outputs()));
  const struct {
    int column;
    float value;
    const char* message;
  } cases[] = {
      {testing::kColour, 5.0f, R"(row 3, column 2 ("colour"): 5 is not a code of the column)"},
      {testing::kColour, 1.5f, R"(row 3, column 2 ("colour"): 1.5 is not a code)"},
      {testing::kColour, -1.0f, R"(row 3, column 2 ("colour"): -1 is not a code)"},
      {0, std::numeric_limits<float>::infinity(), R"(row 3, column 1 ("age"): an infinite value)"},
  };
  for (const auto& k : cases) {
    std::vector<float> rows(c.rows.begin(), c.rows.begin() + 4 * testing::kGbdtFeatures);
    rows[static_cast<size_t>(3 * testing::kGbdtFeatures + k.column)] = k.value;
    Status s = engine->Score(rows.data(), 4, out.data(), Input::kRaw);
    ASSERT_FALSE(s.ok()) << k.message;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(k.message), std::string::npos) << s.message();
  }
}

TEST_F(GbdtEngineRefusals, EncodingThatIsNotTheBoosters) {
  const GbdtCase c = Train(GbdtKind::kBinary);
  auto expect = [](const trees::GbdtModelFile& m, const std::string& text) {
    auto e = Engine::Create(m, {});
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_NE(e.status().message().find(text), std::string::npos) << e.status().message();
  };
  trees::GbdtModelFile wider = c.model;
  trainer::ColumnEncoding extra;
  extra.name = "extra";
  extra.kind = "float";
  wider.lineage.input.encoding->columns.push_back(extra);
  expect(wider, "the booster takes 4 features, the input encoding has 5");

  trees::GbdtModelFile renamed = c.model;
  renamed.lineage.input.encoding->columns[2].name = "amount";
  expect(renamed, R"(the booster's feature 3 is "spend", the input encoding's "amount")");

  trees::GbdtModelFile number = c.model;
  number.lineage.input.encoding->columns[testing::kColour] = extra;
  number.lineage.input.encoding->columns[testing::kColour].name = "colour";
  expect(number, R"(the booster takes feature "colour" as type "c", the input encoding as float)");

  trees::GbdtModelFile centered = c.model;
  centered.lineage.input.encoding->columns[0].center = 40;
  expect(centered, R"(number feature "age" has center 40, scale 1; a GBDT model takes numbers)");

  trees::GbdtModelFile objective = c.model;
  objective.objective = "reg:squarederror";
  objective.outputs = 1;
  expect(objective, R"(the booster's objective is "binary:logistic", the file says)");
}

// A model trained on a standardised version: raw input is standardised as
// the derive did (in double, rounded to float) before XGBoost sees it.
TEST_F(GbdtEngineInput, RecordedStandardisation) {
  GbdtCase c = Train(GbdtKind::kRegression);
  trainer::InputSchema& in = c.model.lineage.input;
  in.standardized = {true, false, true, false};
  in.mean = {40.0, 0.0, 250.0, 0.0};
  in.scale = {12.0, 1.0, 150.0, 1.0};
  in.standardized_by = "v2";
  auto engine = Make(c.model);
  ASSERT_NE(engine, nullptr);
  std::vector<float> scaled = c.rows;
  for (size_t i = 0; i < scaled.size(); ++i) {
    const size_t j = i % testing::kGbdtFeatures;
    if (in.standardized[j]) scaled[i] = static_cast<float>((scaled[i] - in.mean[j]) / in.scale[j]);
  }
  auto m = testing::GbdtMatrix(scaled);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::vector<float> want = Reference(c, m->get());
  EXPECT_EQ(Score(*engine, c.rows, Input::kRaw), want);
  EXPECT_EQ(Score(*engine, scaled, Input::kStandardized), want);
}

}  // namespace
}  // namespace hpcml::inference
