#include "gbdt_models.hpp"

#include <cmath>
#include <limits>
#include <random>

namespace hpcml::inference::testing {
namespace {

const char* const kNames[] = {"age", "colour", "spend", "visits"};
const char* const kTypes[] = {"q", "c", "q", "q"};
const char* const kKinds[] = {"float", "category", "float", "int"};

std::string Objective(GbdtKind k) {
  switch (k) {
    case GbdtKind::kBinary:
      return "binary:logistic";
    case GbdtKind::kMulti:
      return "multi:softprob";
    case GbdtKind::kRegression:
      return "reg:squarederror";
  }
  return "";
}

std::vector<std::string> Classes(GbdtKind k) {
  switch (k) {
    case GbdtKind::kBinary:
      return {"stay", "churn"};
    case GbdtKind::kMulti:
      return {"low", "mid", "high"};
    case GbdtKind::kRegression:
      return {};
  }
  return {};
}

trainer::ModelLineage Lineage(GbdtKind kind, std::int64_t n) {
  trainer::ModelLineage l;
  l.data.path = "/data/ae/churn.h5";
  l.data.version = "v1";
  l.data.data_sha256 = std::string(64, 'a');
  l.data.zone = "ae";
  l.data.classification = "internal";
  l.data.rows = static_cast<std::uint64_t>(n);
  l.created_at = "2024-01-01T00:00:00Z";
  l.created_by = "test@localhost";
  l.tool = "inference gbdt test";
  l.settings = R"({"model": "gbdt", "rounds": 20, "max_depth": 3})";
  l.steps = kGbdtRounds;
  trainer::InputEncoding enc;
  for (int j = 0; j < kGbdtFeatures; ++j) {
    trainer::ColumnEncoding c;
    c.name = kNames[j];
    c.kind = kKinds[j];
    if (c.category()) {
      c.vocabulary = GbdtColours();
      c.embed_dim = 1;
    }
    enc.columns.push_back(std::move(c));
    l.input.feature_names.emplace_back(kNames[j]);
  }
  l.input.encoding = std::move(enc);
  l.input.label_name = kind == GbdtKind::kRegression ? "amount" : "class";
  l.input.label_classes = Classes(kind);
  return l;
}

}  // namespace

std::string Name(GbdtKind kind) {
  switch (kind) {
    case GbdtKind::kBinary:
      return "binary";
    case GbdtKind::kMulti:
      return "multi";
    case GbdtKind::kRegression:
      return "regression";
  }
  return "";
}

const std::vector<std::string>& GbdtColours() {
  static const std::vector<std::string> colours{"red", "green", "blue", "violet"};
  return colours;
}

Result<trees::DMatrix> GbdtMatrix(const std::vector<float>& rows) {
  const std::string data = fmt::format(
      R"({{"data": [{}, true], "shape": [{}, {}], "typestr": "<f4", "version": 3}})",
      reinterpret_cast<std::uintptr_t>(rows.data()), rows.size() / kGbdtFeatures, kGbdtFeatures);
  DMatrixHandle h = nullptr;
  HPCML_RETURN_IF_ERROR(trees::XgbCheck(
      XGDMatrixCreateFromDense(data.c_str(), R"({"missing": NaN, "nthread": 1})", &h), "matrix"));
  trees::DMatrix m(h);
  const char* names[kGbdtFeatures];
  const char* types[kGbdtFeatures];
  for (int j = 0; j < kGbdtFeatures; ++j) {
    names[j] = kNames[j];
    types[j] = kTypes[j];
  }
  HPCML_RETURN_IF_ERROR(trees::XgbCheck(
      XGDMatrixSetStrFeatureInfo(m.get(), "feature_name", names, kGbdtFeatures), "names"));
  HPCML_RETURN_IF_ERROR(trees::XgbCheck(
      XGDMatrixSetStrFeatureInfo(m.get(), "feature_type", types, kGbdtFeatures), "types"));
  return m;
}

Result<std::vector<float>> XgbPredict(BoosterHandle booster, DMatrixHandle m) {
  const bst_ulong* shape = nullptr;
  bst_ulong dims = 0;
  const float* p = nullptr;
  HPCML_RETURN_IF_ERROR(trees::XgbCheck(
      XGBoosterPredictFromDMatrix(booster, m,
                                  R"({"type": 0, "training": false, "iteration_begin": 0, )"
                                  R"("iteration_end": 0, "strict_shape": true})",
                                  &shape, &dims, &p),
      "predict"));
  bst_ulong total = 1;
  for (bst_ulong d = 0; d < dims; ++d) total *= shape[d];
  return std::vector<float>(p, p + total);
}

Result<GbdtCase> TrainGbdtCase(GbdtKind kind, std::int64_t n, const std::string& path,
                               std::uint64_t seed) {
  GbdtCase c;
  c.n = n;
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float effect[] = {1.0f, -1.0f, 0.3f, -0.2f};  // per colour
  std::vector<float> z;
  for (std::int64_t r = 0; r < n; ++r) {
    const float age = 40.0f + 12.0f * normal(gen);
    const auto colour = static_cast<int>(unit(gen) * 4.0f) % 4;
    const float spend = 500.0f * unit(gen);
    const float visits = std::floor(10.0f * unit(gen));
    z.push_back(0.05f * (age - 40.0f) + effect[colour] + 0.002f * (spend - 250.0f) +
                0.1f * (visits - 4.5f) + 0.5f * normal(gen));
    float row[] = {age, static_cast<float>(colour), spend, visits};
    for (int j = 0; j < kGbdtFeatures; ++j) {
      if (unit(gen) < (j == kColour ? 0.05f : 0.1f)) row[j] = nan;
    }
    c.rows.insert(c.rows.end(), row, row + kGbdtFeatures);
  }
  for (float v : z) {
    switch (kind) {
      case GbdtKind::kBinary:
        c.labels.push_back(v > 0.0f ? 1.0f : 0.0f);
        break;
      case GbdtKind::kMulti:
        c.labels.push_back(v < -0.5f ? 0.0f : v < 0.5f ? 1.0f : 2.0f);
        break;
      case GbdtKind::kRegression:
        c.labels.push_back(10.0f * v + 3.0f);
        break;
    }
  }
  HPCML_ASSIGN_OR_RETURN(c.train, GbdtMatrix(c.rows));
  HPCML_RETURN_IF_ERROR(trees::XgbCheck(
      XGDMatrixSetFloatInfo(c.train.get(), "label", c.labels.data(), static_cast<bst_ulong>(n)),
      "labels"));
  DMatrixHandle train = c.train.get();
  BoosterHandle b = nullptr;
  HPCML_RETURN_IF_ERROR(trees::XgbCheck(XGBoosterCreate(&train, 1, &b), "booster"));
  c.booster = trees::Booster(b);
  // As python3-xgboost's train does: the booster keeps the features' names
  // and types (the C API does not copy them from the matrix).
  const char* names[kGbdtFeatures];
  const char* types[kGbdtFeatures];
  for (int j = 0; j < kGbdtFeatures; ++j) {
    names[j] = kNames[j];
    types[j] = kTypes[j];
  }
  HPCML_RETURN_IF_ERROR(trees::XgbCheck(
      XGBoosterSetStrFeatureInfo(b, "feature_name", names, kGbdtFeatures), "booster names"));
  HPCML_RETURN_IF_ERROR(trees::XgbCheck(
      XGBoosterSetStrFeatureInfo(b, "feature_type", types, kGbdtFeatures), "booster types"));
  const std::string objective = Objective(kind);
  std::vector<std::pair<std::string, std::string>> params{
      {"objective", objective}, {"tree_method", "hist"}, {"max_depth", "3"},
      {"eta", "0.3"},           {"seed", "7"},           {"nthread", "1"}};
  if (kind == GbdtKind::kMulti) params.emplace_back("num_class", "3");
  for (const auto& [k, v] : params) {
    HPCML_RETURN_IF_ERROR(trees::XgbCheck(XGBoosterSetParam(b, k.c_str(), v.c_str()), k));
  }
  for (int i = 0; i < kGbdtRounds; ++i) {
    HPCML_RETURN_IF_ERROR(trees::XgbCheck(XGBoosterUpdateOneIter(b, i, train), "round"));
  }
  trees::GbdtModelFile m;
  m.objective = objective;
  m.outputs = kind == GbdtKind::kRegression ? 1 : kind == GbdtKind::kMulti ? 3 : 2;
  m.rounds = kGbdtRounds;
  HPCML_ASSIGN_OR_RETURN(m.booster, trees::SaveBooster(b));
  m.lineage = Lineage(kind, n);
  HPCML_RETURN_IF_ERROR(trees::SaveGbdtModel(path, m));
  HPCML_ASSIGN_OR_RETURN(c.model, trees::LoadGbdtModel(path));
  return c;
}

}  // namespace hpcml::inference::testing
