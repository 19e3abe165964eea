#include "scoring_model.hpp"

namespace hpcml::inference {

trainer::ModelFile DescribeGbdt(const trees::GbdtModelFile& m) {
  trainer::ModelFile f;
  f.path = m.path;
  f.format = trees::kGbdtModelFormat;
  f.sha256 = m.sha256;
  f.lineage = m.lineage;
  // Scoring input is matched by these names (a CSV's columns, a version's).
  if (f.lineage->input.feature_names.empty() && m.lineage.input.encoding) {
    for (const trainer::ColumnEncoding& c : m.lineage.input.encoding->columns)
      f.lineage->input.feature_names.push_back(c.name);
  }
  f.config.input_dim = m.lineage.input.encoding
                           ? static_cast<std::int64_t>(m.lineage.input.encoding->columns.size())
                           : static_cast<std::int64_t>(m.lineage.input.feature_names.size());
  f.config.output_dim = m.outputs;
  f.config.loss = m.objective == "reg:squarederror" ? trainer::LossKind::kMse
                                                    : trainer::LossKind::kCrossEntropy;
  return f;
}

Result<ScoringModel> LoadScoringModel(const std::string& path) {
  ScoringModel m;
  if (trees::IsGbdtModelFile(path)) {
    HPCML_ASSIGN_OR_RETURN(trees::GbdtModelFile g, trees::LoadGbdtModel(path));
    m.file = DescribeGbdt(g);
    m.gbdt = std::move(g);
  } else {
    HPCML_ASSIGN_OR_RETURN(m.file, trainer::LoadModelFile(path));
  }
  return m;
}

Result<std::unique_ptr<Engine>> MakeEngine(const ScoringModel& model,
                                           const EngineOptions& options) {
  return model.gbdt ? Engine::Create(*model.gbdt, options) : Engine::Create(model.file, options);
}

}  // namespace hpcml::inference
