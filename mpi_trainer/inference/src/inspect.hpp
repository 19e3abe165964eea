// `hpcml-infer inspect`: what a model file is and where it came from, as
// text for people or JSON for tools (an auditor's walk from a prediction
// to the exact training rows). A GBDT model shows its objective, rounds and
// outputs, and its features with their kinds (a category's value count).
#pragma once

#include <string>

#include "hpcml/trainer/model_file.hpp"
#include "hpcml/trees/model_file.hpp"

namespace hpcml::inference {

std::string InspectText(const trainer::ModelFile& model);
std::string InspectJson(const trainer::ModelFile& model);
std::string InspectText(const trees::GbdtModelFile& model);
std::string InspectJson(const trees::GbdtModelFile& model);
// A model another program wrote, by its lineage record (model_file.hpp).
std::string InspectText(const trainer::LineageRecord& record);
std::string InspectJson(const trainer::LineageRecord& record);

}  // namespace hpcml::inference
