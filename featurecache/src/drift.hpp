// `hpcml-fcache drift`: how far each column's distribution moved between two
// versions, for gating retraining in a pipeline.
//
// Per column present in both versions (features by name, and the label):
//  - PSI, the population stability index, over 10 bins cut at the deciles of
//    the reference version A: sum over bins of (b - a) * ln(b / a), with the
//    shares a and b floored at 1e-4 so an empty bin stays finite;
//  - KS, the two-sample Kolmogorov-Smirnov statistic: max |F_A(x) - F_B(x)|.
// A categorical column (category feature, class label) is compared by its
// categories' names, from the exact counts every version records: PSI over
// the categories of either version (shares floored as above), and the
// share of B's rows whose category A never had ("unseen"); KS does not
// apply. A column whose kind changed (number <-> category) is drift.
// Missing values are left out of both. By default numbers come from the
// versions' stored samples (4096 rows each: KS is then within about 0.03 of
// the full-data value, PSI noisier on small bins); `exact` reads the full
// columns instead. Each result says which it used.
#pragma once

#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/featurecache/feature_set.hpp"

namespace hpcml::featurecache {

struct DriftOptions {
  double psi_threshold = 0.2;  // a common rule: < 0.1 stable, 0.1-0.2 moderate, > 0.2 shifted
  double ks_threshold = 0.1;
  bool exact = false;
};

struct ColumnDrift {
  std::string name;
  double psi = 0, ks = 0;             // ks: NaN for a categorical column
  uint64_t count_a = 0, count_b = 0;  // values compared
  bool categorical = false;
  double unseen = 0;     // categorical: share of B's values not among A's categories
  std::string note;      // "kind changed: category -> float"
  bool drifted = false;  // psi or ks above its threshold, or the kind changed
};

// PSI over categories: counts by category name in A and B.
double CategoryPsi(const std::vector<std::string>& names_a, const std::vector<uint64_t>& a,
                   const std::vector<std::string>& names_b, const std::vector<uint64_t>& b,
                   double* unseen);

struct DriftReport {
  std::string a, b;
  std::string source;  // "sample" or "data"
  std::vector<ColumnDrift> columns;
  bool any_drift() const;
};

// The two-sample statistics of already-sorted, NaN-free values.
double PopulationStabilityIndex(const std::vector<float>& a, const std::vector<float>& b);
double KolmogorovSmirnov(const std::vector<float>& a, const std::vector<float>& b);

Result<DriftReport> Drift(const FeatureSet& fs, std::string_view a, std::string_view b,
                          const DriftOptions& options);

std::string FormatDrift(const std::string& path, const DriftReport& r, const DriftOptions& o);
std::string FormatDriftJson(const std::string& path, const DriftReport& r, const DriftOptions& o);

}  // namespace hpcml::featurecache
