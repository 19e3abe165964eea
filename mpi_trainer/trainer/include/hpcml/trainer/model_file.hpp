// The trained model as a file: what hpcml-train writes, hpcml-infer scores
// with and the ONNX export reads. docs/inference.md is the reference.
//
// HDF5 layout (all float32, row-major), readable with h5py:
//   /layer<i>/weight [out, in]     /layer<i>/bias [out]
//   /embed<j>/weight [rows, dim]   (format 3: category feature j's table)
//   root attributes:
//     format      "hpcml-mlp-3" with an input encoding (lineage.input.encoding,
//                 encoding.hpp), "hpcml-mlp-2" without, "hpcml-mlp-1": the
//                 same without lineage
//     activation, loss, dims (int64 [layers + 1]: input, hidden..., output)
//     lineage     JSON text, ModelLineage below (format 2 only)
//
// An auditor walks from a prediction to the model (the scoring version's
// lineage names the model file's SHA-256) and from the model to the exact
// training rows (lineage.data: feature set, version, data digest).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/encoding.hpp"
#include "hpcml/trainer/partition.hpp"

namespace hpcml::featurecache {
struct VersionStats;
struct VersionInfo;
}  // namespace hpcml::featurecache

namespace hpcml::trainer {

inline constexpr const char* kModelFormat = "hpcml-mlp-2";
inline constexpr const char* kEncodedModelFormat = "hpcml-mlp-3";

struct FullTensor {
  std::string name;  // "layer0.weight", "layer0.bias"
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

// What the model's input columns are. Scoring input must have the same
// feature names in the same order. A standardised column was fed to the
// model as (raw - mean) / scale, computed in double and rounded to float (the
// feature cache's derive); scale is the population standard deviation, or 1
// for a constant column.
struct InputSchema {
  std::vector<std::string> feature_names;
  std::string label_name;           // empty: unknown (synthetic data)
  std::vector<bool> standardized;   // per feature; empty: none
  std::vector<double> mean, scale;  // per feature; identity (0, 1) where not standardised
  std::string standardized_by;      // the version whose derive recorded them ("v2")
  // The training version's statistics per feature, as stored with it
  // (featurecache stats.hpp; empty when it had none): what scoring input is
  // compared with for training/serving skew.
  struct Stats {
    std::vector<double> mean, std, min, max, missing;  // missing: share of NaN cells
  };
  std::optional<Stats> stats;
  // How rows become the model's input (feature-set training; absent for a
  // model trained on synthetic data or written before encodings).
  std::optional<InputEncoding> encoding;
  // The label's class names, by class index (a string label's classes);
  // empty: the classes are the indices 0..outputs-1.
  std::vector<std::string> label_classes;

  bool any_standardized() const;
};

// A training version's statistics (the first `features` columns) as a
// model's lineage records them, for skew checks when scoring. Defined with
// the feature-cache source (builds with the feature cache only).
InputSchema::Stats SkewStats(const featurecache::VersionStats& stats, std::size_t features);
// The standardisation the version's derive recorded (featurecache's
// RecordedStandardization) into `in` (standardized, mean, scale, by
// feature; standardized_by); nothing when there is none. `path` names the
// set in errors. Defined with the feature-cache source too.
Status RecordStandardization(const featurecache::VersionInfo& v, const std::string& path,
                             InputSchema* in);

// Where the training rows came from. Empty path: synthetic data.
struct TrainingData {
  std::string path;  // canonical path of the feature set
  std::string version;
  std::string data_sha256;  // the version's digest (docs/featurecache.md)
  std::string zone;
  std::string classification;
  std::uint64_t rows = 0;
  std::vector<std::uint64_t> class_rows;  // rows per class (a string label's statistics)
};

// The held-out evaluation a model file's validation figures come from.
struct ValidationRecord {
  TrainingData data;      // the validation version; empty path: a synthetic held-out set
  std::int64_t rows = 0;  // rows evaluated
  std::int64_t step = 0;  // the step whose weights were evaluated (and are in the file)
  std::string selected;   // "best": the best evaluation's model; "final": the last step's
  std::string monitor;    // "log_loss" (ce) or "rmse" (mse): lower is better
  std::string metrics;    // JSON object: log_loss, accuracy[, auc] (ce) or mse, rmse (mse)
};

struct ModelLineage {
  TrainingData data;
  InputSchema input;
  std::string created_at;  // ISO 8601 UTC
  std::string created_by;  // user@host
  std::string job_id;      // SLURM_JOB_ID, empty outside Slurm
  std::string attempt;     // SLURM_RESTART_COUNT ("0" for the first run)
  std::string tool;        // "hpcml-train <version>"
  std::string settings;    // JSON object: the training options that shaped the model
  std::int64_t steps = 0;
  double first_loss = 0, final_loss = 0;
  std::optional<ValidationRecord> validation;  // absent: no validation ran
};

struct ModelFile {
  std::string path;
  std::string format;                   // kEncodedModelFormat, kModelFormat or "hpcml-mlp-1"
  ModelConfig config;                   // seed is not stored (0)
  std::vector<FullTensor> tensors;      // layer order, weight then bias; then embed<j>.weight
  std::optional<ModelLineage> lineage;  // absent in format 1
  std::string sha256;                   // of the file's bytes (sha256sum)
};

// Writes the tensors (from GatherModel) and the lineage to `path`: a
// temporary file beside it, fsynced, renamed over `path`.
Status SaveModelFile(const std::string& path, const ModelConfig& config,
                     const std::vector<FullTensor>& tensors, const ModelLineage& lineage);

// Reads and checks a model file: the format, the dims against every tensor's
// shape, the lineage's JSON. Corrupt or InvalidArgument name the file and
// what is wrong.
Result<ModelFile> LoadModelFile(const std::string& path);

// The lineage as JSON text and back (the `lineage` attribute).
std::string LineageJson(const ModelLineage& lineage);
Result<ModelLineage> ParseLineageJson(std::string_view text);

// A model file another program wrote (a Python job's PyTorch or XGBoost
// file) carries its lineage beside it, in "<model>.lineage.json":
//   {"format": "hpcml-lineage-1", "model": "<file name>",
//    "model_sha256": "<hex>", "framework": "...", "lineage": {LineageJson}}
// written by the Python package (hpcml.record_lineage), read by hpcml-infer
// inspect, which checks the model's SHA-256 against the record.
inline constexpr const char* kLineageRecordFormat = "hpcml-lineage-1";
struct LineageRecord {
  std::string model_path;
  std::string model_sha256;  // of the model file now, equal to the record's
  std::string framework;
  ModelLineage lineage;
};
std::string LineageRecordPath(const std::string& model_path);
// Writes the record for `model_path` (hashing the file) atomically.
Status SaveLineageRecord(const std::string& model_path, const std::string& framework,
                         const ModelLineage& lineage);
// Reads the record of `model_path`; NotFound without one, Corrupt when it
// is malformed or the model's SHA-256 differs from the recorded one.
Result<LineageRecord> LoadLineageRecord(const std::string& model_path);

// The data and input schema of a model trained on `version` of the feature
// set at `path` by another program, as hpcml-train records them: the set
// opened with the access checks, its canonical path, digest, zone,
// classification, rows, feature names, label and classes, rows per class,
// statistics and standardisation. Defined with the feature-cache source.
Result<ModelLineage> LineageOfVersion(const std::string& path, const std::string& version);

}  // namespace hpcml::trainer
