// A new version computed from an existing one by a recorded transform
// (`hpcml-fcache derive`): keep rows in a time range, keep only complete
// rows, select feature columns, standardise numeric columns ((x - mean) / std
// over the kept rows' present values; a missing cell stays missing), fill
// missing cells (numbers: the mean, rounded for int columns; bool and
// category columns: the most frequent value). Columns keep their kinds and
// dictionaries; a standardised column becomes float. The transform, its parameters (including each
// mean and std) and the parent are recorded, so the lineage says exactly how the data was made. A
// column the parent's own transform had standardised keeps that scaling in the child's record
// (composed with the child's, when it is standardised again), so a time split of a standardised
// version is still known to be standardised. Two streaming passes; memory bounded.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/featurecache/format.hpp"

namespace hpcml::featurecache {

struct DeriveOptions {
  std::string from = "latest";
  std::vector<std::string> select;  // feature columns to keep, in this order; empty: all
  bool drop_missing = false;        // keep only rows with every kept feature and the label present
  bool standardize = false;
  // Empty with standardize: every kept float and int column. A bool or
  // category column named here is an error.
  std::vector<std::string> standardize_columns;
  bool impute = false;  // fill missing cells of the kept columns (recorded)
  // A version of the same set whose derive recorded a standardisation and
  // fill values (the training split): apply exactly those, to its columns,
  // instead of computing them from this version's rows (validation and test
  // splits). Excludes select, standardize and impute.
  std::string transform_from;
  std::optional<int64_t> since;  // keep timestamps >= since (microseconds)
  std::optional<int64_t> until;  // keep timestamps < until
  std::string classification;    // empty: the parent's; never lower than it
  uint64_t chunk_rows = 0;       // 0: the parent's
  std::string codec;             // empty and compression -1: the parent's
  int compression = -1;          // -1: the parent's (or the codec's default)
  double lock_timeout_s = 600;
};

Result<VersionInfo> Derive(const std::string& feature_set_path, const DeriveOptions& options);

}  // namespace hpcml::featurecache
