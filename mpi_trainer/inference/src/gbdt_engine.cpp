// The GBDT engine (engine.hpp): raw rows into an XGBoost DMatrix per slice,
// then the booster's own prediction. XGBoost does the trees' work; this
// file turns the encoding's codes into XGBoost's input (a category's index
// in the vocabulary, missing as NaN) and the predictions into hpcml's
// outputs, and checks, once, that the booster is the one the file says.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpcml/inference/engine.hpp"
#include "hpcml/trees/xgb.hpp"

namespace hpcml::inference {
namespace {

enum class Objective { kBinary, kMulti, kRegression };

Objective ObjectiveOf(const std::string& name) {
  if (name == "binary:logistic") return Objective::kBinary;
  if (name == "multi:softprob") return Objective::kMulti;
  return Objective::kRegression;  // LoadGbdtModel admits only these three
}

// XGBoost's feature type of an encoding's column: "c" for a category, "q"
// (quantitative) for a number (float, int or bool).
const char* FeatureType(const trainer::ColumnEncoding& c) {
  return c.category() ? "c" : "q";
}

// A string feature field the booster stored ("feature_name",
// "feature_type"); empty when it stored none.
Result<std::vector<std::string>> BoosterStrings(BoosterHandle b, const char* field) {
  bst_ulong n = 0;
  const char** p = nullptr;
  HPCML_RETURN_IF_ERROR(trees::XgbCheck(XGBoosterGetStrFeatureInfo(b, field, &n, &p),
                                        fmt::format("reading the booster's {}", field)));
  return std::vector<std::string>(p, p + n);
}

// A string of XGBoost's JSON config (it writes every value as one), or ""
// where there is none.
std::string ConfigText(const nlohmann::json& config, const char* pointer) {
  const nlohmann::json::json_pointer at(pointer);
  if (!config.contains(at) || !config[at].is_string()) return "";
  return config[at].get<std::string>();
}

// The booster against the file: its objective, classes and features, and
// the names and types it stored when it stored some.
Status CheckBooster(BoosterHandle b, const trees::GbdtModelFile& m) {
  const trainer::InputEncoding& enc = *m.lineage.input.encoding;
  bst_ulong len = 0;
  const char* text = nullptr;
  HPCML_RETURN_IF_ERROR(
      trees::XgbCheck(XGBoosterSaveJsonConfig(b, &len, &text), "reading the booster's config"));
  const auto config = nlohmann::json::parse(text, text + len, nullptr, /*allow_exceptions=*/false);
  const std::string objective = ConfigText(config, "/learner/objective/name");
  const std::string num_class = ConfigText(config, "/learner/learner_model_param/num_class");
  const std::string num_feature = ConfigText(config, "/learner/learner_model_param/num_feature");
  if (objective != m.objective) {
    return Corrupt("{}: the booster's objective is \"{}\", the file says \"{}\"", m.path, objective,
                   m.objective);
  }
  // One output group unless multi:softprob (num_class 0, or 1 if set so).
  const bool multi = ObjectiveOf(m.objective) == Objective::kMulti;
  if (multi ? num_class != std::to_string(m.outputs) : num_class != "0" && num_class != "1") {
    return Corrupt("{}: the booster has num_class {}, the file says {} outputs", m.path, num_class,
                   m.outputs);
  }
  if (num_feature != std::to_string(enc.columns.size())) {
    return InvalidArgument("{}: the booster takes {} features, the input encoding has {}", m.path,
                           num_feature, enc.columns.size());
  }
  HPCML_ASSIGN_OR_RETURN(std::vector<std::string> names, BoosterStrings(b, "feature_name"));
  HPCML_ASSIGN_OR_RETURN(std::vector<std::string> types, BoosterStrings(b, "feature_type"));
  for (size_t j = 0; j < enc.columns.size(); ++j) {
    const trainer::ColumnEncoding& c = enc.columns[j];
    if (j < names.size() && names[j] != c.name) {
      return Corrupt("{}: the booster's feature {} is \"{}\", the input encoding's \"{}\"", m.path,
                     j + 1, names[j], c.name);
    }
    if (j < types.size() && (types[j] == "c") != c.category()) {
      return Corrupt(
          "{}: the booster takes feature \"{}\" as type \"{}\", the input encoding as {}", m.path,
          c.name, types[j], c.kind);
    }
  }
  return Status::Ok();
}

// What the engine reads of the encoding: numbers as they are, each
// category's vocabulary as its codes.
Status CheckEncoding(const trees::GbdtModelFile& m) {
  const trainer::InputEncoding& enc = *m.lineage.input.encoding;
  HPCML_RETURN_IF_ERROR(enc.Validate(m.path + ": the input encoding"));
  const trainer::InputSchema& in = m.lineage.input;
  for (size_t j = 0; j < enc.columns.size(); ++j) {
    const trainer::ColumnEncoding& c = enc.columns[j];
    if (!c.category() && (c.center != 0.0 || c.scale != 1.0 || c.indicator)) {
      return InvalidArgument(
          "{}: number feature \"{}\" has center {}, scale {}{}; a GBDT model takes numbers as "
          "they are",
          m.path, c.name, c.center, c.scale, c.indicator ? " and a missing indicator" : "");
    }
    if (c.category() && j < in.standardized.size() && in.standardized[j]) {
      return InvalidArgument("{}: category feature \"{}\" has a recorded standardisation", m.path,
                             c.name);
    }
  }
  if (in.any_standardized() &&
      (in.standardized.size() != enc.columns.size() || in.mean.size() != enc.columns.size() ||
       in.scale.size() != enc.columns.size())) {
    return InvalidArgument("{}: the recorded standardisation does not have one entry per feature",
                           m.path);
  }
  return Status::Ok();
}

class GbdtEngine final : public Engine {
 public:
  GbdtEngine(trees::Booster booster, const trees::GbdtModelFile& m, const EngineOptions& o)
      : Engine(static_cast<std::int64_t>(m.lineage.input.encoding->columns.size()), m.outputs),
        booster_(std::move(booster)),
        encoding_(*m.lineage.input.encoding),
        objective_(ObjectiveOf(m.objective)),
        max_batch_(std::max<std::int64_t>(1, o.max_batch)),
        threads_(o.threads) {
    if (m.lineage.input.any_standardized()) scaling_ = m.lineage.input;
    for (const trainer::ColumnEncoding& c : encoding_.columns) {
      names_.push_back(c.name.c_str());
      types_.push_back(FeatureType(c));
    }
    x_.resize(static_cast<size_t>(max_batch_ * inputs()));
  }

  int int8_layers() const override { return 0; }

  Status Score(const float* x, std::int64_t rows, float* out, Input input) override {
    if (rows < 0) return InvalidArgument("cannot score {} rows", rows);
    for (std::int64_t first = 0; first < rows; first += max_batch_) {
      const std::int64_t n = std::min(max_batch_, rows - first);
      Status st = ScoreSlice(x + first * inputs(), n, out + first * outputs(), input, first);
      if (!st.ok()) return std::move(st).At();
    }
    return Status::Ok();
  }

  // The booster's threads (its nthread parameter).
  Status SetThreads() {
    return trees::XgbCheck(
        XGBoosterSetParam(booster_.get(), "nthread", std::to_string(threads_).c_str()),
        "setting nthread");
  }

 private:
  // Rows into x_ as XGBoost takes them: a category's code as it is (its
  // index in the vocabulary) and the unknown code as NaN; a number as it is,
  // standardised first when raw input meets a model trained on a
  // standardised version (in double, rounded to float, as the derive did).
  // `first` numbers the rows in messages.
  Status Prepare(const float* x, std::int64_t rows, Input input, std::int64_t first) {
    const std::int64_t f = inputs();
    const bool standardize = input == Input::kRaw && scaling_.any_standardized();
    constexpr float kMissing = std::numeric_limits<float>::quiet_NaN();
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t j = 0; j < f; ++j) {
        const auto k = static_cast<size_t>(j);
        const trainer::ColumnEncoding& c = encoding_.columns[k];
        const float v = x[r * f + j];
        float& y = x_[static_cast<size_t>(r * f + j)];
        if (std::isnan(v)) {
          y = kMissing;
        } else if (c.category()) {
          const auto unknown = static_cast<float>(c.unknown());
          if (!(v >= 0.0f) || v > unknown || v != std::floor(v)) {
            return InvalidArgument("row {}, column {} (\"{}\"): {} is not a code of the column",
                                   first + r, j + 1, c.name, v);
          }
          y = v == unknown ? kMissing : v;
        } else if (!std::isfinite(v)) {
          return InvalidArgument("row {}, column {} (\"{}\"): an infinite value", first + r, j + 1,
                                 c.name);
        } else {
          y = standardize && scaling_.standardized[k]
                  ? static_cast<float>((v - scaling_.mean[k]) / scaling_.scale[k])
                  : v;
        }
      }
    }
    return Status::Ok();
  }

  // A DMatrix over x_'s first `rows` rows (XGBoost copies them), with the
  // features' names and types.
  Result<trees::DMatrix> Matrix(std::int64_t rows) {
    const std::string data =
        fmt::format(R"({{"data": [{}, true], "shape": [{}, {}], "typestr": "<f4", "version": 3}})",
                    reinterpret_cast<std::uintptr_t>(x_.data()), rows, inputs());
    const std::string config = fmt::format(R"({{"missing": NaN, "nthread": {}}})", threads_);
    DMatrixHandle h = nullptr;
    HPCML_RETURN_IF_ERROR(trees::XgbCheck(
        XGDMatrixCreateFromDense(data.c_str(), config.c_str(), &h), "XGDMatrixCreateFromDense"));
    trees::DMatrix m(h);
    const auto n = static_cast<bst_ulong>(names_.size());
    HPCML_RETURN_IF_ERROR(trees::XgbCheck(
        XGDMatrixSetStrFeatureInfo(m.get(), "feature_name", names_.data(), n), "feature names"));
    HPCML_RETURN_IF_ERROR(trees::XgbCheck(
        XGDMatrixSetStrFeatureInfo(m.get(), "feature_type", types_.data(), n), "feature types"));
    return m;
  }

  Status ScoreSlice(const float* x, std::int64_t rows, float* out, Input input,
                    std::int64_t first) {
    if (rows == 0) return Status::Ok();
    HPCML_RETURN_IF_ERROR(Prepare(x, rows, input, first));
    HPCML_ASSIGN_OR_RETURN(trees::DMatrix m, Matrix(rows));
    const bst_ulong* shape = nullptr;
    bst_ulong dims = 0;
    const float* p = nullptr;
    HPCML_RETURN_IF_ERROR(trees::XgbCheck(
        XGBoosterPredictFromDMatrix(booster_.get(), m.get(), kPredict, &shape, &dims, &p),
        "XGBoosterPredictFromDMatrix"));
    // Per row: one value (binary: p of class 1; regression) or k.
    const std::int64_t per_row = objective_ == Objective::kMulti ? outputs() : 1;
    bst_ulong total = dims > 0 ? 1 : 0;
    for (bst_ulong d = 0; d < dims; ++d) total *= shape[d];
    if (total != static_cast<bst_ulong>(rows * per_row)) {
      return Internal("XGBoost predicted {} values for {} rows x {}", total, rows, per_row);
    }
    if (objective_ == Objective::kBinary) {
      for (std::int64_t r = 0; r < rows; ++r) {
        out[2 * r] = 1.0f - p[r];
        out[2 * r + 1] = p[r];
      }
    } else {
      std::copy_n(p, rows * per_row, out);
    }
    return Status::Ok();
  }

  static constexpr const char* kPredict =
      R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0, )"
      R"("strict_shape": true})";

  trees::Booster booster_;
  trainer::InputEncoding encoding_;
  Objective objective_;
  std::int64_t max_batch_;
  int threads_;
  trainer::InputSchema scaling_;            // the recorded standardisation, if any
  std::vector<const char*> names_, types_;  // per feature, into encoding_ and literals
  std::vector<float> x_;                    // a slice as XGBoost takes it
};

}  // namespace

Result<std::unique_ptr<Engine>> Engine::Create(const trees::GbdtModelFile& model,
                                               const EngineOptions& options) {
  if (options.precision == Precision::kInt8) {
    return InvalidArgument("{}: a GBDT model scores in fp32 only (int8 quantises an MLP's layers)",
                           model.path);
  }
  if (options.threads < 1) return InvalidArgument("threads must be at least 1");
  if (!model.lineage.input.encoding) {
    return InvalidArgument("{}: the lineage has no input encoding", model.path);
  }
  HPCML_RETURN_IF_ERROR(CheckEncoding(model));
  auto booster = trees::LoadBooster(model.booster);
  if (!booster.ok()) return booster.status().WithContext(model.path);
  HPCML_RETURN_IF_ERROR(CheckBooster(booster->get(), model));
  auto engine = std::make_unique<GbdtEngine>(std::move(booster).value(), model, options);
  HPCML_RETURN_IF_ERROR(engine->SetThreads());
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace hpcml::inference
