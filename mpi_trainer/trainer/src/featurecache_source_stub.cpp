// Built when the featurecache library is not part of the build.
#include "featurecache_source.hpp"

namespace hpcml::trainer {

bool FeatureCacheAvailable() {
  return false;
}

Result<std::unique_ptr<BatchSource>> OpenFeatureCache(const FeatureCacheConfig& config,
                                                      std::int64_t, int, int, ModelLineage*) {
  return Unavailable(
      "--data {}: this hpcml-train was built without the featurecache library; "
      "use --synthetic",
      config.path);
}

Result<std::unique_ptr<EvalSource>> OpenFeatureCacheEval(const FeatureCacheConfig& config,
                                                         std::int64_t, int, int,
                                                         const ModelLineage&, TrainingData*) {
  return Unavailable(
      "--val-data {}: this hpcml-train was built without the featurecache library; "
      "use --synthetic with --val-samples",
      config.path);
}

}  // namespace hpcml::trainer
