// Model files for the inference tests: random weights of the trainer's init
// scale, every activation and loss, with and without standardisation, a
// linear model without hidden layers, and encoded models (format 3: number
// and category features, missing indicators, embedding tables, class names).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/encoding.hpp"
#include "hpcml/trainer/model_file.hpp"

namespace hpcml::inference::testing {

struct TestCase {
  std::string name;
  trainer::ModelConfig config;  // an encoded case's input_dim is its encoding's width
  bool lineage = true;          // false: a format-1 file
  // Features standardised by a derive with a non-trivial mean and scale;
  // the lineage's other features are identity.
  std::vector<int> standardized;
  // Means are drawn from [-mean_range, mean_range), scales from [0.5, 40).
  double mean_range = 500;
  // An encoded model (format 3): how its features become the first layer's
  // input; and its class names (may be empty).
  std::optional<trainer::InputEncoding> encoding = std::nullopt;
  std::vector<std::string> label_classes = {};
};

// The cases every ONNX test runs.
std::vector<TestCase> Cases();
// The first encoded case of Cases(): numbers, indicators, categories (with
// a kept "NA" and a comma in a value), a derive standardisation, class names.
TestCase EncodedCase();

// Deterministic for a case: weights from its name's hash. An encoded case
// is written with SaveModelFile to a temporary file and read back with
// LoadModelFile (the file is removed; aborts if either fails).
trainer::ModelFile MakeModel(const TestCase& tc);

// The same model written to `path` (kept) and read back.
Result<trainer::ModelFile> WriteModel(const TestCase& tc, const std::string& path);

// Raw input rows (engine.hpp) for `model`, row-major [rows, engine inputs]:
// values around each standardised feature's mean at its scale, [-2, 2)
// elsewhere; an encoded model's numbers around their center (NaN for about
// one cell in seven), its category cells any code up to the unknown one
// (NaN for about one in seven).
std::vector<float> MakeRows(const trainer::ModelFile& model, std::int64_t rows, std::uint64_t seed);

// A category cell of MakeRows as text: its value for a kept code, "" for a
// missing cell, and a value the model never kept for the unknown code.
std::string CategoryText(const trainer::ColumnEncoding& column, float cell);

}  // namespace hpcml::inference::testing
