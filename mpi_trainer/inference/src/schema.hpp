// Whether scoring input is what the model was trained on: the same feature
// names in the same order, and either raw values (the model's recorded
// standardisation is applied) or values standardised with exactly the
// model's parameters. Anything else is an error naming the feature.
// For a model with an input encoding, a feature is also a category in both
// or a number in both.
#pragma once

#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/featurecache/format.hpp"
#include "hpcml/inference/engine.hpp"
#include "hpcml/trainer/model_file.hpp"

namespace hpcml::inference {

// `what` names the input in messages ("/data/ae/x.h5 v3", "in.csv").
// `kinds` are the input's feature kinds (InputData::kinds; empty: read by
// the model's, a CSV). `scaling` is the input's recorded standardisation
// (empty for raw input).
Result<Input> MatchSchema(const trainer::ModelFile& model, const std::string& what,
                          const std::vector<std::string>& features,
                          const std::vector<std::string>& kinds,
                          const std::vector<featurecache::ColumnScaling>& scaling);

}  // namespace hpcml::inference
