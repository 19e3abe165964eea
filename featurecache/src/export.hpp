// A version as CSV (`hpcml-fcache export`): header entity, timestamp
// (ISO 8601 UTC), label (when present), then the features, each as its kind
// says: floats in the shortest form that reads back to the same float32
// ("nan" when missing), integers exactly, true/false, category and class
// names (an empty field when missing), so export -> ingest round-trips the
// data exactly. Streams; memory bounded.
#pragma once

#include <cstdint>
#include <string>

#include "hpcml/common/status.hpp"
#include "hpcml/featurecache/feature_set.hpp"

namespace hpcml::featurecache {

struct ExportOptions {
  std::string version = "latest";
  uint64_t limit = 0;  // 0: every row
};

// Writes to the file descriptor `fd` (not closed); `fd_name` names it in errors.
Status ExportCsv(const FeatureSet& fs, const ExportOptions& options, int fd,
                 const std::string& fd_name);

}  // namespace hpcml::featurecache
