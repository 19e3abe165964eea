#include "schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace hpcml::inference {
namespace {

std::string List(const std::vector<std::string>& names) {
  return fmt::format("{}", fmt::join(names, ", "));
}

Status CheckNames(const trainer::ModelFile& model, const std::string& what,
                  const std::vector<std::string>& features) {
  const std::vector<std::string>* want =
      model.lineage ? &model.lineage->input.feature_names : nullptr;
  if (want == nullptr || want->empty()) {
    // No recorded names (a format-1 or synthetic-data model): the width only.
    if (static_cast<std::int64_t>(features.size()) == model.config.input_dim) return Status::Ok();
    return InvalidArgument("{} has {} features, the model {} takes {}", what, features.size(),
                           model.path, model.config.input_dim);
  }
  for (size_t i = 0; i < std::max(want->size(), features.size()); ++i) {
    if (i < want->size() && i < features.size() && (*want)[i] == features[i]) continue;
    const std::string have = i < features.size() ? "\"" + features[i] + "\"" : "missing";
    const std::string need = i < want->size() ? "\"" + (*want)[i] + "\"" : "nothing";
    return InvalidArgument(
        "{}: feature {} is {}, but the model {} was trained with {} there (the model's features, "
        "in order: {})",
        what, i + 1, have, model.path, need, List(*want));
  }
  return Status::Ok();
}

// An encoded model reads a category's cells as codes of a dictionary and a
// number's as values: the input must agree on which is which.
Status CheckKinds(const trainer::ModelFile& model, const std::string& what,
                  const std::vector<std::string>& kinds) {
  if (kinds.empty() || !model.lineage || !model.lineage->input.encoding) return Status::Ok();
  const std::vector<trainer::ColumnEncoding>& cols = model.lineage->input.encoding->columns;
  for (size_t j = 0; j < cols.size() && j < kinds.size(); ++j) {
    const bool category = kinds[j] == "category";
    if (category == cols[j].category()) continue;
    return InvalidArgument(
        "{}: feature \"{}\" is a {} column, but the model {} takes it as {}", what, cols[j].name,
        kinds[j], model.path,
        cols[j].category() ? "a category (give the version whose column holds its values by name)"
                           : fmt::format("a number ({})", cols[j].kind));
  }
  return Status::Ok();
}

}  // namespace

Result<Input> MatchSchema(const trainer::ModelFile& model, const std::string& what,
                          const std::vector<std::string>& features,
                          const std::vector<std::string>& kinds,
                          const std::vector<featurecache::ColumnScaling>& scaling) {
  HPCML_RETURN_IF_ERROR(CheckNames(model, what, features));
  HPCML_RETURN_IF_ERROR(CheckKinds(model, what, kinds));
  const trainer::InputSchema* in = model.lineage ? &model.lineage->input : nullptr;
  const bool model_scales = in != nullptr && in->any_standardized();
  // Per feature: was it standardised in the input, and does that agree?
  std::optional<Input> mode;
  for (size_t j = 0; j < features.size(); ++j) {
    auto it = std::find_if(scaling.begin(), scaling.end(),
                           [&](const auto& c) { return c.column == features[j]; });
    const bool model_j = model_scales && in->standardized[j];
    if (it == scaling.end() && !model_j) continue;  // raw in both
    std::optional<Input> here;
    if (it == scaling.end()) {
      here = Input::kRaw;  // the engine applies the model's standardisation
    } else if (model_j && it->mean == in->mean[j] && it->scale == in->scale[j]) {
      here = Input::kStandardized;
    } else {
      return InvalidArgument(
          "{}: feature \"{}\" was standardised with mean {} and scale {}, but the model {} {}; "
          "score the raw version instead, and the model applies its own standardisation",
          what, features[j], it->mean, it->scale, model.path,
          model_j ? fmt::format("was trained with mean {} and scale {} (from {})", in->mean[j],
                                in->scale[j], in->standardized_by)
                  : "was trained on its raw values");
    }
    if (mode && *mode != *here) {
      return InvalidArgument(
          "{}: feature \"{}\" is {} while an earlier one is {}; give a version whose features are "
          "all raw, or all standardised as the model's training version",
          what, features[j], *here == Input::kRaw ? "raw" : "standardised",
          *mode == Input::kRaw ? "raw" : "standardised");
    }
    mode = here;
  }
  return mode.value_or(Input::kRaw);
}

}  // namespace hpcml::inference
