// `hpcml-infer inspect`: what a model file is and where it came from, as
// text for people or JSON for tools (an auditor's walk from a prediction
// to the exact training rows).
#pragma once

#include <string>

#include "hpcml/trainer/model_file.hpp"

namespace hpcml::inference {

std::string InspectText(const trainer::ModelFile& model);
std::string InspectJson(const trainer::ModelFile& model);

}  // namespace hpcml::inference
