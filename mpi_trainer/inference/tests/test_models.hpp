// In-memory model files for the ONNX export's tests: random weights of the
// trainer's init scale, every activation and loss, with and without
// standardisation, and a linear model without hidden layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpcml/trainer/model_file.hpp"

namespace hpcml::inference::testing {

struct TestCase {
  std::string name;
  trainer::ModelConfig config;
  bool lineage = true;  // false: a format-1 file
  // Columns standardised with a non-trivial mean and scale; the lineage's
  // other columns are identity.
  std::vector<int> standardized;
  // Means are drawn from [-mean_range, mean_range), scales from [0.5, 40).
  double mean_range = 500;
};

// The cases every ONNX test runs.
std::vector<TestCase> Cases();

// Deterministic for a case: weights from its name's hash.
trainer::ModelFile MakeModel(const TestCase& tc);

// Raw input rows (before standardisation) for `model`, row-major: values
// around each standardised column's mean at its scale, [-2, 2) elsewhere.
std::vector<float> MakeRows(const trainer::ModelFile& model, std::int64_t rows, std::uint64_t seed);

}  // namespace hpcml::inference::testing
