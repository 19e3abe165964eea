// What hpcml-infer scores: a feature-cache version or a CSV, as rows of the
// model's features plus the columns that identify each row in the output.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/featurecache/feature_set.hpp"
#include "hpcml/featurecache/stats.hpp"
#include "hpcml/trainer/model_file.hpp"

namespace hpcml::inference {

class InputData {
 public:
  virtual ~InputData() = default;
  // Names the input in messages: "/data/ae/x.h5 v3" or "in.csv".
  virtual const std::string& what() const = 0;
  virtual std::uint64_t rows() const = 0;
  virtual const std::vector<std::string>& features() const = 0;
  // The standardisation the input's own derive recorded (empty: raw).
  virtual const std::vector<featurecache::ColumnScaling>& scaling() const = 0;
  // Features of rows [first, first + n) into x (n x features(), row-major).
  virtual Status Read(std::uint64_t first, std::uint64_t n, float* x) const = 0;
  // Columns that identify a row in a CSV output, and their text for rows
  // [first, first + n) (n x id_names().size() cells).
  virtual std::vector<std::string> id_names() const = 0;
  virtual Status Ids(std::uint64_t first, std::uint64_t n,
                     std::vector<std::string>* cells) const = 0;
  // What a prediction's lineage names: "file:///abs/x.h5#v3" and the
  // version's data digest, or "file:///abs/in.csv" and the file's SHA-256.
  virtual const std::string& uri() const = 0;
  virtual const std::string& digest() const = 0;
  // The input's per-column statistics (a version's stored ones; a CSV's
  // computed while reading it); none for a version written without them.
  virtual std::optional<featurecache::VersionStats> stats() const = 0;
  // The version, when the input is one (a feature-set output needs it).
  virtual const featurecache::VersionReader* version() const { return nullptr; }
};

// Opens `version` of the feature set at `path` through the feature cache's
// access checks.
Result<std::unique_ptr<InputData>> OpenVersionInput(const std::string& path,
                                                    const std::string& version);

// Reads the CSV at `path` (after the access check, by the checked path):
// the model's features by name (any column order; without recorded names,
// every column but `keep`, in file order) and the `keep` columns as text.
// Every feature cell must be a number; errors name the line and column.
Result<std::unique_ptr<InputData>> OpenCsvInput(const std::string& path,
                                                const trainer::ModelFile& model,
                                                const std::vector<std::string>& keep);

}  // namespace hpcml::inference
