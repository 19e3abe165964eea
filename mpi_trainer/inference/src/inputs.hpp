// What hpcml-infer scores: a feature-cache version or a CSV, as rows of the
// model's features plus the columns that identify each row in the output.
//
// For a model with an input encoding (trainer/encoding.hpp) the rows are the
// engine's raw rows (engine.hpp): a category cell is the model's code (the
// input's own dictionary or text mapped through the model's vocabulary; the
// unknown code for a value it did not keep) and a missing cell is NaN, for
// the encoding to impute. For other models every cell must be a finite
// number, as before.
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
  // Per feature, its kind as the input stores it ("float", "int", "bool",
  // "category"); empty for a CSV, whose cells are read by the model's kinds.
  virtual std::vector<std::string> kinds() const = 0;
  // The standardisation the input's own derive recorded (empty: raw).
  virtual const std::vector<featurecache::ColumnScaling>& scaling() const = 0;
  // Features of rows [first, first + n) into x (n x features(), row-major).
  // A version's category codes are mapped to the model's only where its
  // column matches the model's by position, name and kind: MatchSchema
  // (schema.hpp) must accept the input first.
  virtual Status Read(std::uint64_t first, std::uint64_t n, float* x) const = 0;
  // Columns that identify a row in a CSV output, and their text, quoted for
  // a CSV where needed, for rows [first, first + n) (n x id_names().size()
  // cells).
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
// access checks; `model` says how to read it (see the top of this file).
// For an encoded model, each category column's code map (its dictionary to
// the model's codes, trainer::CodeMap) is built here, once.
Result<std::unique_ptr<InputData>> OpenVersionInput(const std::string& path,
                                                    const std::string& version,
                                                    const trainer::ModelFile& model);

// Reads the CSV at `path` (after the access check, by the checked path):
// the model's features by name (any column order; without recorded names,
// every column but `keep`, in file order) and the `keep` columns as text.
// A model without an encoding needs a finite number in every feature cell.
// An encoded model's number cells are numbers (bool features: also
// true/false words) or missing (empty or featurecache's default missing
// words: NA, N/A, NaN, nan, NAN, null, NULL, None); its category cells are
// text, trimmed as ingest trims it, looked up in the model's vocabulary
// (one hash map per column; a kept value wins over a missing word), else
// missing as for numbers, else the unknown code. Errors name the line and
// column.
Result<std::unique_ptr<InputData>> OpenCsvInput(const std::string& path,
                                                const trainer::ModelFile& model,
                                                const std::vector<std::string>& keep);

}  // namespace hpcml::inference
