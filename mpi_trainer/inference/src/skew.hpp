// Training/serving skew: the scoring input's statistics against those of the
// version the model was trained on (recorded in the model's lineage). Per
// feature, the shift of the mean in training standard deviations, with the
// input brought into the model's space first when the engine standardises
// it (raw input to a model trained on a standardised version). A feature
// with no training spread compares by absolute difference. An encoded
// model's category features are not compared.
#pragma once

#include <string>
#include <vector>

#include "hpcml/featurecache/stats.hpp"
#include "hpcml/inference/engine.hpp"
#include "hpcml/trainer/model_file.hpp"

namespace hpcml::inference {

struct Skew {
  std::string feature;
  double shift = 0;  // |mean_in - mean_train| / std_train
  std::string
      text;  // "amount: mean 12.5 against 10.1 in training (2.40 training standard deviations)"
};

// Features whose shift exceeds `threshold`, largest first. Empty when the
// model records no training statistics.
std::vector<Skew> FindSkew(const trainer::ModelFile& model, Input mode,
                           const featurecache::VersionStats& input, double threshold);

}  // namespace hpcml::inference
