// CSV -> a new version (`hpcml-fcache ingest`). Streams: memory is bounded by
// one write block, whatever the size of the CSV.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/featurecache/csv.hpp"
#include "hpcml/featurecache/format.hpp"
#include "hpcml/featurecache/stats.hpp"

namespace hpcml::featurecache {

struct IngestOptions {
  std::string csv_path;
  std::string entity_column;  // required
  // "int" (int64 ids), "string" (any text: entity_keys.hpp) or "auto": the
  // first row decides (an integer: int; a later non-integer is an error).
  std::string entity_type = "auto";
  std::string timestamp_column;              // required: ISO 8601 or epoch seconds
  std::string label_column;                  // optional: float label
  std::vector<std::string> feature_columns;  // empty: every other column, in file order
  std::string zone;                          // required for a new file; must match an existing one
  std::string classification;                // required
  uint64_t chunk_rows = 0;                   // 0: automatic (about 1 MiB chunks)
  std::string codec;                         // format.hpp's kCodecs; empty: ResolveCodec
  int compression = 0;                       // the codec's level 0..9
  char delimiter = ',';
  // Feature cells that are missing (stored as NaN): empty ones and these
  // words. A label cell must hold a value.
  NaValues na_values = NaValues::Default();
  double lock_timeout_s = 600;
  bool statistics = true;  // per-column statistics while writing (stats.hpp)
  // Called with the new version's statistics before it is published; an
  // error aborts the ingest and nothing is added (validation rules).
  std::function<Status(const VersionStats&)> before_publish;
};

// Errors name the CSV, line and column of the first bad cell. `warnings`
// (optional) receives notes such as integer columns that float32 cannot hold
// exactly.
Result<VersionInfo> Ingest(const std::string& feature_set_path, const IngestOptions& options,
                           std::vector<std::string>* warnings = nullptr);

}  // namespace hpcml::featurecache
