// CSV -> a new version (`hpcml-fcache ingest`). Streams: memory is bounded by
// one write block and the category dictionaries, whatever the size of the
// CSV. A table goes in as R's write.csv or pandas' to_csv wrote it: each
// feature column's kind (format.hpp) is given, or inferred from all its
// cells in a first pass over the file (only integers: int; other numbers:
// float; only true/false words: bool; any other text: category; quoted
// numbers are numbers); a string label becomes classes.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/featurecache/csv.hpp"
#include "hpcml/featurecache/format.hpp"
#include "hpcml/featurecache/stats.hpp"

namespace hpcml::featurecache {

struct IngestOptions {
  std::string csv_path;
  // The source the version records instead of "file://<csv_path>" (with the
  // CSV's SHA-256): the Python package's "python:pandas.DataFrame", whose
  // rendering as CSV is a temporary file. Every check still applies to
  // csv_path.
  std::string source_uri;
  std::string entity_column;  // required
  // "int" (int64 ids), "string" (any text: entity_keys.hpp) or "auto": the
  // first row decides (an integer: int; a later non-integer is an error).
  std::string entity_type = "auto";
  std::string timestamp_column;  // required: ISO 8601 or epoch seconds
  // Optional: when each row became known (arrived, or was corrected), as the
  // timestamp is written; every row needs one. Kept with the version for
  // asof --known-at.
  std::string available_column;
  // Optional: a number (int, float, bool as 0/1), or class names, each row's
  // label then the index of its class among the sorted names.
  std::string label_column;
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
  // Per column name: its missing words instead of na_values (a column where
  // "NA" is a real category, say).
  std::map<std::string, NaValues> column_na_values;
  // Per column name (features, label): its kind, as kKinds; a cell that
  // breaks it is an error naming it. The other columns' kinds are inferred.
  std::map<std::string, std::string> column_kinds;
  double lock_timeout_s = 600;
  // Threads that parse the CSV (pieces of it at once) and write; 0: the
  // CPUs this process may use (AvailableCpus). The result is the same.
  unsigned threads = 0;
  bool statistics = true;  // per-column statistics while writing (stats.hpp)
  // Called with the new version's statistics before it is published; an
  // error aborts the ingest and nothing is added (validation rules).
  std::function<Status(const VersionStats&)> before_publish;
};

// "a=int,b=category" -> {a: int, b: category}; errors name the bad entry.
Result<std::map<std::string, std::string>> ParseColumnKinds(std::string_view list);
// A schema file: TOML, one `column = "kind"` per line (a [columns] table,
// or top level); errors name the file and line.
Result<std::map<std::string, std::string>> LoadColumnKinds(const std::string& path);
// "col=NA,null" -> (col, its words); "col=" means empty cells only.
Result<std::pair<std::string, NaValues>> ParseColumnNaValues(std::string_view entry);

// Errors name the CSV, line and column of the first bad cell. `warnings`
// (optional) receives notes such as columns with no value at all.
Result<VersionInfo> Ingest(const std::string& feature_set_path, const IngestOptions& options,
                           std::vector<std::string>* warnings = nullptr);

}  // namespace hpcml::featurecache
