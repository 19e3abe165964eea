// Where hpcml-infer's predictions go, in row order: a new version of a
// feature set (rows keep their entity, timestamp and label, so results join
// back; the lineage names the input version, its digest and the model's
// digest) or a CSV (the input's identifying columns, then the predictions).
// Both are published atomically by Finish(); nothing is left on failure.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/inference/engine.hpp"
#include "inputs.hpp"

namespace hpcml::inference {

class Output {
 public:
  virtual ~Output() = default;
  // Predictions of rows [first, first + n) of the input (n x outputs).
  virtual Status Append(std::uint64_t first, std::uint64_t n, const float* predictions) = 0;
  // Publishes the output; returns what was written ("out.h5 v2", "out.csv").
  virtual Result<std::string> Finish() = 0;
};

// The output's columns: for a ce model p_<class name> per class (the
// lineage's label_classes; p_0, p_1, ... when it has none) and class (in a
// CSV the class's name when there are names, else its index; in a feature
// set always the index, an int feature); <label>_pred (one target with a
// known label) or pred_<i> for an mse model.
std::vector<std::string> OutputNames(const trainer::ModelFile& model);

struct OutputOptions {
  std::string classification;  // of a new version: may raise the input's, never lower it
  Precision precision = Precision::kFloat32;  // recorded in the lineage
};

// `path` ending in ".csv" gives a CSV, anything else a feature set (which
// needs a feature-set input).
Result<std::unique_ptr<Output>> OpenOutput(const std::string& path, const InputData& input,
                                           const trainer::ModelFile& model,
                                           const OutputOptions& options);

}  // namespace hpcml::inference
