// A gradient-boosted tree model as a file: what hpcml-train --model gbdt
// writes and hpcml-infer scores. docs/trainer.md ("Trees") is the reference.
//
// HDF5 layout, readable with h5py:
//   /booster   uint8 [n]: the XGBoost booster, XGBoosterSaveModelToBuffer's
//              UBJSON (load it with xgboost.Booster(model_file=bytearray(...)))
//   root attributes:
//     format      "hpcml-gbdt-1"
//     objective   "binary:logistic", "multi:softprob" or "reg:squarederror"
//     outputs     int64: classes (a classifier) or 1
//     rounds      int64: the trees' boosting rounds kept (the best
//                 validation round's with early stopping)
//     lineage     JSON text, trainer::ModelLineage (model_file.hpp), whose
//                 input.encoding says how a row's cells become XGBoost's
//                 input: numbers as they are (center 0, scale 1), a category
//                 feature's value as its index in the vocabulary (every
//                 training value, in the training version's dictionary
//                 order); a value not in it, or a missing cell, is missing
//                 (NaN) for XGBoost
//     booster_sha256  SHA-256 of /booster, checked on loading
#pragma once

#include <cstdint>
#include <string>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/model_file.hpp"

namespace hpcml::trees {

inline constexpr const char* kGbdtModelFormat = "hpcml-gbdt-1";

struct GbdtModelFile {
  std::string path;
  std::string objective;
  std::int64_t outputs = 0;
  std::int64_t rounds = 0;
  std::string booster;  // UBJSON bytes
  trainer::ModelLineage lineage;
  std::string sha256;  // of the file's bytes (sha256sum), set by LoadGbdtModel
};

// Whether the HDF5 file at `path` is a GBDT model (its format attribute),
// without reading the rest; false for an MLP model or an unreadable file.
bool IsGbdtModelFile(const std::string& path);

// Writes `model` to `path` (a temporary file beside it, fsynced, renamed).
Status SaveGbdtModel(const std::string& path, const GbdtModelFile& model);
// Reads and checks one: format, objective, booster digest, lineage (an
// encoding with every feature) and that XGBoost loads the booster.
Result<GbdtModelFile> LoadGbdtModel(const std::string& path);

}  // namespace hpcml::trees
