// The model hpcml-infer scores with, of either kind: an MLP model file
// (trainer/model_file.hpp) or a GBDT one (trees/model_file.hpp), told apart
// by the file's format attribute.
//
// The input, schema, output and skew pieces (inputs.hpp, schema.hpp,
// outputs.hpp, skew.hpp) read `file`: an MLP's file itself, or a GBDT
// model's description (DescribeGbdt). Only the engine is made from the
// GBDT file itself.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "hpcml/common/status.hpp"
#include "hpcml/inference/engine.hpp"
#include "hpcml/trainer/model_file.hpp"
#include "hpcml/trees/model_file.hpp"

namespace hpcml::inference {

struct ScoringModel {
  trainer::ModelFile file;                   // an MLP, or a GBDT model's description
  std::optional<trees::GbdtModelFile> gbdt;  // set for a GBDT model
};

// A GBDT model as the scoring pieces read a model: its path, sha256,
// format and lineage (feature names from the encoding when it records
// none), and a config whose input width is the features, output_dim the
// outputs and loss cross-entropy (a classifier) or MSE; no tensors (the
// MLP engine refuses it).
trainer::ModelFile DescribeGbdt(const trees::GbdtModelFile& model);

// Loads and checks the model file at `path`, of either kind.
Result<ScoringModel> LoadScoringModel(const std::string& path);

// The engine for the model's kind.
Result<std::unique_ptr<Engine>> MakeEngine(const ScoringModel& model, const EngineOptions& options);

}  // namespace hpcml::inference
