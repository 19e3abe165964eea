// The HDF5 layout the model file and the checkpoints share: a root
// `format` attribute, /booster (XGBoost's UBJSON bytes) and its
// `booster_sha256`, each kind with its own attributes beside them.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "hpcml/common/h5.hpp"
#include "hpcml/common/status.hpp"

namespace hpcml::trees {

// Writes `path` whole: a temporary file beside it with the format, the
// booster and its digest, then `attrs(file)` for the rest, fsynced and
// renamed (common/fs CommitFile).
Status WriteBoosterFile(const std::string& path, const char* format, const std::string& booster,
                        const std::function<Status(hid_t)>& attrs);

// A booster file opened read-only. `format` is its format attribute ("" when
// it has none); the caller checks it before reading further.
struct BoosterFile {
  h5::File file;
  std::string format;
};
Result<BoosterFile> OpenBoosterFile(const std::string& path);

// Its /booster bytes, checked against booster_sha256 (Corrupt if not).
Result<std::string> ReadBooster(hid_t file, const std::string& path);

}  // namespace hpcml::trees
