// GBDT model files for the inference tests, trained in the test itself
// through XGBoost's C API (nothing from hpcml-train): rows of four features,
// age (float), colour (a category of four values), spend (float) and visits
// (int); about one number cell in ten and one colour in twenty missing
// (NaN). hist trees with categorical splits, max_depth 3, 20 rounds, a
// fixed seed; the file's lineage carries the input encoding as the trees
// trainer writes it (trees/model_file.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/trees/model_file.hpp"
#include "hpcml/trees/xgb.hpp"

namespace hpcml::inference::testing {

// binary:logistic (classes stay, churn), multi:softprob (low, mid, high)
// or reg:squarederror (label amount).
enum class GbdtKind { kBinary, kMulti, kRegression };
std::string Name(GbdtKind kind);  // "binary", "multi", "regression"

inline constexpr std::int64_t kGbdtFeatures = 4;
inline constexpr std::int64_t kGbdtRounds = 20;
inline constexpr int kColour = 1;  // the category feature's position
// colour's vocabulary, by code (the training dictionary's order).
const std::vector<std::string>& GbdtColours();

struct GbdtCase {
  trees::GbdtModelFile model;  // as LoadGbdtModel read it back
  std::vector<float> rows;     // [n, kGbdtFeatures]: XGBoost's input, and the engine's raw rows
  std::vector<float> labels;
  std::int64_t n = 0;
  trees::Booster booster;  // as trained
  trees::DMatrix train;    // the training rows, with the features' names and types
};

// Trains a `kind` model on `n` rows drawn from `seed` and writes it to
// `path` with SaveGbdtModel.
Result<GbdtCase> TrainGbdtCase(GbdtKind kind, std::int64_t n, const std::string& path,
                               std::uint64_t seed = 11);

// XGBoost's normal prediction on `m` (type 0, strict shape): rows x 1, or
// rows x classes for multi:softprob.
Result<std::vector<float>> XgbPredict(BoosterHandle booster, DMatrixHandle m);

// A DMatrix over `rows` (XGBoost copies them) with the test features' names
// and types.
Result<trees::DMatrix> GbdtMatrix(const std::vector<float>& rows);

}  // namespace hpcml::inference::testing
