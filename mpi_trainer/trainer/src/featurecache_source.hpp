// BatchSource over a feature-cache version (hpcml::featurecache::Loader).
//
// Replica r of R reads shard r of R with batches of global_batch / R rows
// (drop_last, so every batch is full and every replica does the same number
// of steps per epoch). Rows are encoded (encoding.hpp) with an encoding
// built from the training version's kinds and stored statistics, which the
// lineage records; a validation version is encoded with the training one. Classification
// (num_classes > 0): the label of each row must be an integer in [0, num_classes), else Next()
// fails naming the file and the source row. Regression (num_classes == 0): the label is the single
// regression target. Positions are the loader's Position strings. Available when hpcml-train was
// built with the featurecache library (FeatureCacheAvailable()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/data.hpp"
#include "hpcml/trainer/encoding.hpp"
#include "hpcml/trainer/model_file.hpp"

namespace hpcml::trainer {

struct FeatureCacheConfig {
  std::string path;     // the feature set file (.h5)
  std::string version;  // "", "latest" or "v3"
  std::int64_t num_classes = 0;
  std::uint64_t seed = 0;  // shuffle seed
  bool shuffle = true;
  EncodingOptions encoding;  // how the training version's encoding is built
};

bool FeatureCacheAvailable();

// `lineage` (optional) receives what the model file records about the
// opened version: its data (canonical path, version, digest, zone,
// classification, rows) and its input schema (feature names, label, and the
// standardisation its derive recorded).
Result<std::unique_ptr<BatchSource>> OpenFeatureCache(const FeatureCacheConfig& config,
                                                      std::int64_t global_batch, int replica,
                                                      int replicas,
                                                      ModelLineage* lineage = nullptr);

// A validation version (--val-data/--val-version) through the same loader
// and access checks as the training data, unshuffled and without dropping
// rows: replica r of R reads shard r of R (every row of the version once per
// pass) in batches of `rows` rows, the last ones short or empty. The version
// must have labels (classes checked as for training), the training
// version's feature names in the same order, the same label name and the
// same recorded standardisation (`training`: the training version's
// lineage); otherwise InvalidArgument names both versions. `described`
// (optional) receives the version's path, name, digest, zone,
// classification and rows.
Result<std::unique_ptr<EvalSource>> OpenFeatureCacheEval(const FeatureCacheConfig& config,
                                                         std::int64_t rows, int replica,
                                                         int replicas, const ModelLineage& training,
                                                         TrainingData* described = nullptr);

}  // namespace hpcml::trainer
