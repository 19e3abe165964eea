#include "skew.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hpcml::inference {

std::vector<Skew> FindSkew(const trainer::ModelFile& m, Input mode,
                           const featurecache::VersionStats& in, double threshold) {
  std::vector<Skew> out;
  if (!m.lineage || !m.lineage->input.stats) return out;
  const trainer::InputSchema& schema = m.lineage->input;
  const trainer::InputSchema::Stats& train = *schema.stats;
  const std::optional<trainer::InputEncoding>& enc = schema.encoding;
  for (size_t j = 0; j < train.mean.size() && j < in.columns.size(); ++j) {
    // A category's codes have no mean to compare (nor the same dictionary).
    if (enc && j < enc->columns.size() && enc->columns[j].category()) continue;
    double mean = in.columns[j].mean;
    if (mode == Input::kRaw && schema.any_standardized() && schema.standardized[j]) {
      mean = (mean - schema.mean[j]) / schema.scale[j];  // into the model's space
    }
    if (std::isnan(mean) || std::isnan(train.mean[j])) continue;
    const double spread = train.std[j] > 0 ? train.std[j] : 1.0;
    const double shift = std::abs(mean - train.mean[j]) / spread;
    if (!(shift > threshold)) continue;
    out.push_back(
        {schema.feature_names[j], shift,
         fmt::format("{}: mean {:.6g} against {:.6g} in training ({:.2f} training "
                     "standard deviations{})",
                     schema.feature_names[j], mean, train.mean[j], shift,
                     mode == Input::kRaw && schema.any_standardized() && schema.standardized[j]
                         ? ", after the model's standardisation"
                         : "")});
  }
  std::sort(out.begin(), out.end(), [](const Skew& a, const Skew& b) { return a.shift > b.shift; });
  return out;
}

}  // namespace hpcml::inference
