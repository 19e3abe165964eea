// Point-in-time correct training sets (`hpcml-fcache asof`), the analogue of
// Feast's get_historical_features: for each (entity, time) request, the
// newest feature row of that entity whose timestamp is at or before the
// requested time - never after it, so no information from the future leaks
// into training. Ties (same entity and timestamp) go to the row stored last.
//
// Scales by sorting, not by hashing: the feature keys and the requests are
// sorted by (entity, time) with an external merge sort, joined in one merge
// pass, the matches sorted by feature row so the features are read in storage
// order, and the result sorted back into request order. Memory stays near
// `memory_bytes` whatever the number of rows; temporary runs go to `tmpdir`.
//
// The result is a new version of the same feature set: one row per request in
// request order, with the request's entity and time, its label (when a label
// column is named) and the matched features, with their kinds, dictionaries
// and exact integers; parent = the feature version, source = the request
// file. A label of numbers (or true/false) is a number; any other label
// text makes classes, as ingest does (sorted names, the label their index).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "hpcml/common/status.hpp"
#include "hpcml/featurecache/format.hpp"

namespace hpcml::featurecache {

enum class AsofMissing {
  kNan,    // keep the request with nan features (a left join, like Feast)
  kDrop,   // leave the request out
  kError,  // fail, naming the request's line
};
std::string_view Name(AsofMissing m);  // "nan", "drop", "error"

struct AsofOptions {
  std::string from = "latest";
  std::string requests_csv;
  // The source the version records instead of "file://<requests_csv>" (the
  // Python package's "python:pandas.DataFrame"); the checks still apply to
  // requests_csv.
  std::string source_uri;
  std::string entity_column;
  std::string time_column;
  std::string label_column;        // optional
  std::optional<int64_t> max_age;  // microseconds: older matches count as missing
  // "As known at": a row matches a request only once it was also available
  // (its availability time at or before the request's time; the version
  // must have availability times). Among those, the newest by timestamp.
  bool known_at = false;
  AsofMissing missing = AsofMissing::kNan;
  uint64_t memory_bytes = 256ull << 20;
  std::string tmpdir;          // empty: $TMPDIR or /tmp
  std::string classification;  // empty: the parent's; never lower
  uint64_t chunk_rows = 0;
  std::string codec;     // empty and compression -1: the parent's
  int compression = -1;  // -1: the parent's (or the codec's default)
  char delimiter = ',';
  double lock_timeout_s = 600;
  unsigned threads = 0;  // 0: the CPUs this process may use (AvailableCpus)
};

struct AsofStats {
  uint64_t requests = 0;
  uint64_t matched = 0;
  uint64_t missing = 0;
  uint64_t written = 0;
  bool in_memory = false;  // the join ran in memory (else: external sorts)
};

Result<VersionInfo> Asof(const std::string& feature_set_path, const AsofOptions& options,
                         AsofStats* stats = nullptr);

}  // namespace hpcml::featurecache
