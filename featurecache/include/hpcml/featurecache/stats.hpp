// Per-column statistics of a version, computed while it is written (one pass
// over the rows the writer already holds; no second read), stored in the
// version's "stats" group (docs/featurecache.md), readable with h5py:
//
//   /versions/v<N>/stats/       attrs: columns (the features, then the label),
//                                      rows, sample_rows, seed
//       count, missing          uint64 [columns]   non-missing and NaN values
//       min, max, mean, std     float64 [columns]  over the non-missing values
//                                                  (std: population); NaN when
//                                                  a column has no values
//       frequencies             uint64 [sum of codes]: for each coded column
//                               (category feature, class label), the rows
//                               of each code, in code order; attr
//                               codes: per column, how many (0: not coded)
//       sample                  float32 [sample_rows, columns]: a uniform
//                               sample of whole rows (reservoir sampling,
//                               seeded, so the same rows give the same sample)
//
// The sample is the distribution summary: quantiles (Quantile) and, for
// drift, a two-sample comparison; with k = 4096 rows a quantile's rank is
// within about 1/sqrt(k) = 1.6% of the truth.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpcml/common/h5.hpp"
#include "hpcml/common/status.hpp"

namespace hpcml::featurecache {

inline constexpr uint64_t kStatsSampleRows = 4096;

struct ColumnStats {
  std::string name;
  uint64_t count = 0, missing = 0;
  double min = 0, max = 0, mean = 0, std = 0;
  // A coded column (category feature, class label): the rows of each code,
  // index = code, and the names of the codes (its dictionary, or the
  // classes). Empty for other columns. min, max, mean and std are then of
  // the codes, which mean nothing.
  bool coded = false;
  std::vector<uint64_t> frequencies;
  std::vector<std::string> categories;
  // The `n` most frequent codes, most frequent first (ties: lower code).
  std::vector<size_t> Top(size_t n) const;
};

struct VersionStats {
  uint64_t rows = 0;
  std::vector<ColumnStats> columns;  // the features, then the label when there is one
  uint64_t seed = 0;
  // sample_rows x columns, row-major.
  std::vector<float> sample;
  uint64_t sample_rows() const { return columns.empty() ? 0 : sample.size() / columns.size(); }

  // The q-quantile (0..1) of column c in the sample, missing values left
  // out; NaN when the sample has none of that column.
  double Quantile(size_t c, double q) const;
};

class StatsAccumulator {
 public:
  // `columns`: feature names, then the label's name when there is one.
  StatsAccumulator(std::vector<std::string> columns, bool has_label, uint64_t seed = 0);

  // Counts the codes of the columns marked (same length as the columns):
  // category features and a class label. Before the first Add.
  void CountCodes(std::vector<bool> coded);

  // x: rows x features (row-major); y: rows labels, or null without a label.
  void Add(const float* x, const float* y, uint64_t rows);
  VersionStats Finish() const;

 private:
  void Sample(const float* x, const float* y, uint64_t row);

  std::vector<std::string> names_;
  size_t features_;
  bool has_label_;
  uint64_t seed_, rows_ = 0, rng_;
  std::vector<uint64_t> count_;
  std::vector<double> shift_, s1_, s2_, min_, max_;
  std::vector<bool> coded_;
  std::vector<std::vector<uint64_t>> frequencies_;  // by column
  std::vector<float> sample_;
};

// Marks the coded columns of `stats` and names their codes: `categories`
// per feature (VersionReader::Categories; empty for other features), and
// the label's classes.
void NameCodes(const std::vector<std::vector<std::string>>& categories,
               const std::vector<std::string>& label_classes, VersionStats* stats);

// Missing (NaN) cells of one column.
struct MissingCells {
  std::string column;
  uint64_t cells = 0;
};

// The refusal of a consumer that needs every cell (`needs`: "training",
// "standardising"), until missing values are supported there: InvalidArgument
// "<subject>: <needs> needs every cell; missing (NaN) cells: N (col n, ...)",
// with what to do (derive --drop-missing, asof --missing drop).
Status MissingCellsError(std::string_view subject, std::string_view needs,
                         const std::vector<MissingCells>& columns);

// The "stats" group of a version group, and back. ReadStats: NotFound when
// the version has none (written before statistics existed).
Status WriteStats(hid_t version_group, const VersionStats& stats);
Result<VersionStats> ReadStats(hid_t version_group, std::string_view version);

}  // namespace hpcml::featurecache
