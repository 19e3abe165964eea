#include "inspect.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "hpcml/common/json.hpp"
#include "hpcml/trainer/encoding.hpp"

namespace hpcml::inference {
namespace {

std::string Architecture(const trainer::ModelConfig& c) {
  std::string s = std::to_string(c.input_dim);
  for (std::int64_t h : c.hidden) s += fmt::format(" -> {}", h);
  return s + fmt::format(" -> {}", c.output_dim);
}

std::int64_t Parameters(const trainer::ModelFile& m) {
  std::int64_t n = 0;
  for (const auto& t : m.tensors) n += static_cast<std::int64_t>(t.data.size());
  return n;
}

// The features, one a line; `trees`: a GBDT model's encoding (numbers as
// they are, categories by their vocabulary's size).
std::string InputText(const trainer::InputSchema& in, bool trees) {
  std::string s;
  for (size_t j = 0; j < in.feature_names.size(); ++j) {
    s += fmt::format("    {:>3}  {}", j + 1, in.feature_names[j]);
    if (!in.standardized.empty() && in.standardized[j]) {
      s += fmt::format("  (standardised: mean {:.9g}, scale {:.9g})", in.mean[j], in.scale[j]);
    }
    if (in.encoding && j < in.encoding->columns.size()) {
      const trainer::ColumnEncoding& c = in.encoding->columns[j];
      if (trees) {
        s += c.category() ? fmt::format("  [category: {} values]", c.vocabulary.size())
                          : fmt::format("  [{}]", c.kind);
      } else {
        s += c.category() ? fmt::format("  [category: {} values kept, embedding width {}]",
                                        c.vocabulary.size(), c.embed_dim)
                          : fmt::format("  [{}: encoded (x - {:.9g}) / {:.9g}{}]", c.kind, c.center,
                                        c.scale, c.indicator ? ", missing indicator" : "");
      }
    }
    s += '\n';
  }
  return s;
}

// Where the model came from: the training data, who made it and how.
std::string OriginText(const trainer::ModelLineage& l) {
  std::string s;
  if (l.data.path.empty()) {
    s += "trained on  synthetic data (no feature set)\n";
  } else {
    s += fmt::format(
        "trained on  {} {} ({} rows, zone {}, classification {})\n            data_sha256 {}\n",
        l.data.path, l.data.version, l.data.rows, l.data.zone, l.data.classification,
        l.data.data_sha256);
  }
  s += fmt::format("created     {} by {} with {}\n", l.created_at, l.created_by, l.tool);
  if (!l.job_id.empty()) s += fmt::format("slurm job   {} (attempt {})\n", l.job_id, l.attempt);
  return s;
}

// The features (with the label and any recorded standardisation), then the
// class names.
std::string FeaturesText(const trainer::ModelLineage& l, bool trees) {
  std::string s;
  if (!l.input.feature_names.empty()) {
    s += fmt::format("input       {} features{}{}:\n", l.input.feature_names.size(),
                     l.input.label_name.empty() ? "" : ", label " + l.input.label_name,
                     l.input.any_standardized()
                         ? ", standardisation recorded by " + l.input.standardized_by
                         : "");
    s += InputText(l.input, trees);
  }
  if (!l.input.label_classes.empty()) {
    s += fmt::format("classes     {}\n", fmt::join(l.input.label_classes, ", "));
  }
  return s;
}

}  // namespace

std::string InspectText(const trainer::ModelFile& m) {
  std::string s = fmt::format(
      "model       {}\nsha256      {}\nformat      {}\narchitecture {} ({}, {} loss), {} "
      "parameters\n",
      m.path, m.sha256, m.format, Architecture(m.config), Name(m.config.activation),
      Name(m.config.loss), Parameters(m));
  if (!m.lineage) return s + "lineage     none (format hpcml-mlp-1 records none)\n";
  const trainer::ModelLineage& l = *m.lineage;
  s += OriginText(l);
  s += fmt::format("training    {} steps, loss {:.6f} -> {:.6f}\nsettings    {}\n", l.steps,
                   l.first_loss, l.final_loss, l.settings);
  return s + FeaturesText(l, /*trees=*/false);
}

std::string InspectJson(const trainer::ModelFile& m) {
  nlohmann::ordered_json j = {{"path", m.path}, {"sha256", m.sha256}, {"format", m.format}};
  j["architecture"] = {{"dims", Architecture(m.config)},
                       {"activation", Name(m.config.activation)},
                       {"loss", Name(m.config.loss)},
                       {"parameters", Parameters(m)}};
  j["lineage"] = m.lineage ? nlohmann::ordered_json::parse(trainer::LineageJson(*m.lineage))
                           : nlohmann::ordered_json(nullptr);
  return JsonText(j, 2) + "\n";
}

std::string InspectText(const trees::GbdtModelFile& m) {
  const trainer::ModelLineage& l = m.lineage;
  std::string s = fmt::format(
      "model       {}\nsha256      {}\nformat      {}\ntrees       {}, {} rounds, {} "
      "output(s), booster {} bytes (XGBoost UBJSON)\n",
      m.path, m.sha256, trees::kGbdtModelFormat, m.objective, m.rounds, m.outputs,
      m.booster.size());
  s += OriginText(l);
  s += fmt::format("settings    {}\n", l.settings);
  if (l.validation) {
    const trainer::ValidationRecord& v = *l.validation;
    s += fmt::format(
        "validation  {} rows{}, {} model, {} {}\n", v.rows,
        v.data.path.empty() ? "" : fmt::format(" of {} {}", v.data.path, v.data.version),
        v.selected, v.monitor, v.metrics);
  }
  return s + FeaturesText(l, /*trees=*/true);
}

std::string InspectJson(const trees::GbdtModelFile& m) {
  nlohmann::ordered_json j = {
      {"path", m.path}, {"sha256", m.sha256}, {"format", trees::kGbdtModelFormat}};
  j["trees"] = {{"objective", m.objective},
                {"rounds", m.rounds},
                {"outputs", m.outputs},
                {"booster_bytes", m.booster.size()}};
  j["lineage"] = nlohmann::ordered_json::parse(trainer::LineageJson(m.lineage));
  return JsonText(j, 2) + "\n";
}

std::string InspectText(const trainer::LineageRecord& r) {
  const trainer::ModelLineage& l = r.lineage;
  std::string s = fmt::format(
      "model       {}\nsha256      {} (as its lineage record says)\nformat      {} ({}), "
      "lineage in {}\n",
      r.model_path, r.model_sha256, r.framework.empty() ? "a model file" : r.framework, l.tool,
      trainer::LineageRecordPath(r.model_path));
  s += OriginText(l);
  s += fmt::format("training    {} steps, loss {:.6f} -> {:.6f}\nsettings    {}\n", l.steps,
                   l.first_loss, l.final_loss, l.settings);
  if (l.validation) s += fmt::format("validation  {}\n", l.validation->metrics);
  return s + FeaturesText(l, /*trees=*/false);
}

std::string InspectJson(const trainer::LineageRecord& r) {
  nlohmann::ordered_json j = {{"path", r.model_path},
                              {"sha256", r.model_sha256},
                              {"format", trainer::kLineageRecordFormat},
                              {"framework", r.framework}};
  j["lineage"] = nlohmann::ordered_json::parse(trainer::LineageJson(r.lineage));
  return JsonText(j, 2) + "\n";
}

}  // namespace hpcml::inference
