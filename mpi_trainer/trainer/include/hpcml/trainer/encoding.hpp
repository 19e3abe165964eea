// The model's input encoding: how a table's row, one cell per feature as the
// feature store holds it, becomes the MLP's first-layer input. Built once
// from the training version's column kinds and stored statistics, saved in
// the model file, and applied the same way by the trainer, hpcml-infer and
// the ONNX graph.
//
// An encoded row, width() floats, in this order:
//   numbers     one per feature that is not a category: (x - center) / scale
//               with the training rows' mean and standard deviation; 0 (the
//               mean) where the cell is missing;
//   indicators  1 where the cell is missing, else 0: one per number feature
//               whose training rows had missing cells;
//   embeddings  embed_dim floats per category feature: the row of its
//               embedding table for the cell's code (Model::Embed fills it).
// Codes of a category feature: 0..vocabulary.size()-1 for the values kept
// (at least min_count training rows, in the training version's dictionary
// order), and the unknown code vocabulary.size() shared by rare values,
// values never seen in training and missing cells.
//
// Until Model::Embed runs, the first float of a category's slot holds its
// code (exact in float32: a vocabulary is capped at 2^24 values).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/trainer/partition.hpp"

namespace hpcml::trainer {

struct ColumnEncoding {
  std::string name;
  std::string kind;                     // "float", "int", "bool" or "category"
  double center = 0.0, scale = 1.0;     // numbers: (x - center) / scale
  bool indicator = false;               // numbers: a missing-indicator input
  std::vector<std::string> vocabulary;  // categories: the kept values, by code
  std::int64_t embed_dim = 0;           // categories: the embedding's width

  bool category() const { return kind == "category"; }
  std::int64_t unknown() const { return static_cast<std::int64_t>(vocabulary.size()); }
  // SHA-256 of the vocabulary (each value then "\n"), as the lineage records it.
  std::string vocabulary_sha256() const;
};

struct InputEncoding {
  std::vector<ColumnEncoding> columns;  // one per feature, in feature order
  std::uint64_t min_count = 1;          // rarer training values share the unknown code

  std::int64_t numbers() const;     // number features
  std::int64_t indicators() const;  // missing-indicator inputs
  std::int64_t width() const;       // floats of an encoded row
  // Per category feature, in feature order: its table's shape, and the
  // offset of its slot in an encoded row.
  std::vector<EmbeddingShape> embeddings() const;
  std::vector<std::int64_t> embedding_offsets() const;
  // Checks names, kinds, finite centers, positive scales, unique vocabulary
  // values, widths; `what` names the encoding in messages.
  Status Validate(std::string_view what) const;
};

// What a column looks like in the training version: its kind and stored
// statistics (featurecache stats.hpp: present cells' mean and std, missing
// cells, a category's dictionary and rows per code).
struct TrainingColumn {
  std::string name, kind;
  double mean = 0.0, std = 0.0;
  std::uint64_t count = 0, missing = 0;
  std::vector<std::string> categories;
  std::vector<std::uint64_t> frequencies;
};

struct EncodingOptions {
  std::uint64_t min_count = 5;
  // Embedding widths: per column name, else `embed_dim` for all when > 0,
  // else DefaultEmbedDim.
  std::map<std::string, std::int64_t> embed_dims;
  std::int64_t embed_dim = 0;
};

// The size rule: min(32, round(1.6 * rows^0.56)), rows = kept values + 1
// (the unknown row); at least 2.
std::int64_t DefaultEmbedDim(std::int64_t rows);

Result<InputEncoding> BuildEncoding(const std::vector<TrainingColumn>& columns,
                                    const EncodingOptions& options);

// A source dictionary (a version's categories, in code order) to the
// column's codes: entry i is the code of value i (the unknown code when the
// encoding did not keep it).
std::vector<std::int32_t> CodeMap(const ColumnEncoding& column,
                                  const std::vector<std::string>& dictionary);

// The code of one value (the unknown code when it was not kept).
std::int64_t CodeOf(const ColumnEncoding& column, std::string_view value);

// Encodes `rows` rows of `raw` (rows x columns.size(), row-major) into `out`
// (rows x width()). A category cell holds a code of this encoding (0 to
// unknown()) or NaN (missing: the unknown code); a number cell a finite
// value or NaN. An infinite number, or a category cell that is not a code,
// is InvalidArgument naming the row (row_ids[r] when given, else r) and the
// column (1-based).
Status Encode(const InputEncoding& enc, const float* raw, std::int64_t rows, float* out,
              const std::uint64_t* row_ids = nullptr);

// JSON text and back (the model file's lineage holds it as input.encoding;
// each vocabulary's SHA-256 is written beside it and checked on reading).
std::string EncodingJson(const InputEncoding& enc);
Result<InputEncoding> ParseEncodingJson(std::string_view text);

}  // namespace hpcml::trainer
