#include "hpcml/featurecache/stats.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "hpcml/featurecache/format.hpp"

namespace hpcml::featurecache {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// splitmix64: the reservoir's generator (deterministic from the seed).
uint64_t Next(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <class T>
Status WriteVector(hid_t group, const char* name, hid_t file_type, hid_t mem_type,
                   const std::vector<T>& v, std::vector<hsize_t> dims) {
  HPCML_ASSIGN_OR_RETURN(
      hid_t s,
      h5::Check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), name));
  h5::Dataspace space(s);
  HPCML_ASSIGN_OR_RETURN(hid_t d, h5::Check(H5Dcreate2(group, name, file_type, space.get(),
                                                       H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                            fmt::format("stats/{}", name)));
  h5::Dataset ds(d);
  return h5::CheckErr(H5Dwrite(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()),
                      fmt::format("stats/{}", name));
}

template <class T>
Result<std::vector<T>> ReadVector(hid_t group, const char* name, hid_t mem_type, size_t n) {
  HPCML_ASSIGN_OR_RETURN(
      hid_t d, h5::Check(H5Dopen2(group, name, H5P_DEFAULT), fmt::format("stats/{}", name)));
  h5::Dataset ds(d);
  HPCML_ASSIGN_OR_RETURN(std::vector<hsize_t> dims, h5::DatasetDims(ds.get(), name));
  size_t total = 1;
  for (hsize_t x : dims) total *= x;
  if (n != 0 && total != n) return Corrupt("stats/{} has {} values, {} expected", name, total, n);
  std::vector<T> v(total);
  HPCML_RETURN_IF_ERROR(
      h5::CheckErr(H5Dread(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), name));
  return v;
}

// The stats group's frequencies, split by its "codes" attribute.
Status ReadFrequencies(hid_t group, std::string_view version, VersionStats* s) {
  HPCML_ASSIGN_OR_RETURN(auto all,
                         ReadVector<uint64_t>(group, "frequencies", H5T_NATIVE_UINT64, 0));
  HPCML_ASSIGN_OR_RETURN(
      hid_t f, h5::Check(H5Dopen2(group, "frequencies", H5P_DEFAULT), "stats/frequencies"));
  h5::Dataset ds(f);
  HPCML_ASSIGN_OR_RETURN(std::vector<int64_t> codes, h5::ReadIntListAttr(ds.get(), "codes"));
  if (codes.size() != s->columns.size())
    return Corrupt("{}/stats/frequencies: codes for {} columns, not {}", version, codes.size(),
                   s->columns.size());
  size_t at = 0;
  for (size_t c = 0; c < codes.size(); ++c) {
    if (codes[c] < 0 || static_cast<uint64_t>(codes[c]) > all.size() - at)
      return Corrupt("{}/stats/frequencies: its codes do not add up", version);
    s->columns[c].frequencies.assign(all.begin() + static_cast<std::ptrdiff_t>(at),
                                     all.begin() + static_cast<std::ptrdiff_t>(at + codes[c]));
    at += static_cast<size_t>(codes[c]);
  }
  if (at != all.size()) return Corrupt("{}/stats/frequencies: its codes do not add up", version);
  return Status::Ok();
}

}  // namespace

double VersionStats::Quantile(size_t c, double q) const {
  std::vector<float> v;
  const size_t cols = columns.size();
  for (size_t r = 0; r < sample_rows(); ++r) {
    const float x = sample[r * cols + c];
    if (!std::isnan(x)) v.push_back(x);
  }
  if (v.empty()) return kNaN;
  const auto k = static_cast<size_t>(std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

StatsAccumulator::StatsAccumulator(std::vector<std::string> columns, bool has_label, uint64_t seed)
    : names_(std::move(columns)),
      features_(names_.size() - (has_label ? 1 : 0)),
      has_label_(has_label),
      seed_(seed),
      rng_(seed),
      count_(names_.size(), 0),
      shift_(names_.size(), kNaN),
      s1_(names_.size(), 0.0),
      s2_(names_.size(), 0.0),
      min_(names_.size(), std::numeric_limits<double>::infinity()),
      max_(names_.size(), -std::numeric_limits<double>::infinity()) {}

void StatsAccumulator::CountCodes(std::vector<bool> coded) {
  coded_ = std::move(coded);
  coded_.resize(names_.size(), false);
  frequencies_.assign(names_.size(), {});
}

// Per column: the count, and sums of (v - shift) and its square, shifted by
// the column's first value so a large mean costs no precision; branch-free
// in the column loop so it vectorises.
void StatsAccumulator::Add(const float* x, const float* y, uint64_t rows) {
  const size_t cols = names_.size();
  for (uint64_t r = 0; r < rows; ++r) {
    const float* row = x + r * features_;
    for (size_t c = 0; c < cols; ++c) {
      const double v = c < features_ ? row[c] : y[r];
      if (std::isnan(shift_[c]) && !std::isnan(v)) shift_[c] = v;
      const bool ok = !std::isnan(v);
      const double d = ok ? v - shift_[c] : 0.0;
      count_[c] += ok;
      s1_[c] += d;
      s2_[c] += d * d;
      min_[c] = ok ? std::min(min_[c], v) : min_[c];
      max_[c] = ok ? std::max(max_[c], v) : max_[c];
    }
    Sample(row, y != nullptr ? y + r : nullptr, rows_ + r);
  }
  for (size_t c = 0; c < coded_.size(); ++c) {
    if (!coded_[c]) continue;
    std::vector<uint64_t>& f = frequencies_[c];
    for (uint64_t r = 0; r < rows; ++r) {
      const float v = c < features_ ? x[r * features_ + c] : y[r];
      if (std::isnan(v) || v < 0 || v >= float(kMaxCategories)) continue;
      const auto code = static_cast<size_t>(v);
      if (code >= f.size()) f.resize(code + 1, 0);
      ++f[code];
    }
  }
  rows_ += rows;
}

// Reservoir sampling (Algorithm R) of whole rows.
void StatsAccumulator::Sample(const float* row, const float* label, uint64_t index) {
  const size_t cols = names_.size();
  size_t slot = 0;
  if (index < kStatsSampleRows) {
    slot = static_cast<size_t>(index);
    sample_.resize((slot + 1) * cols);
  } else {
    const uint64_t j = Next(rng_) % (index + 1);
    if (j >= kStatsSampleRows) return;
    slot = static_cast<size_t>(j);
  }
  std::copy_n(row, features_, sample_.begin() + static_cast<std::ptrdiff_t>(slot * cols));
  if (has_label_) sample_[slot * cols + features_] = *label;
}

VersionStats StatsAccumulator::Finish() const {
  VersionStats s;
  s.rows = rows_;
  s.seed = seed_;
  s.sample = sample_;
  for (size_t c = 0; c < names_.size(); ++c) {
    ColumnStats cs;
    cs.name = names_[c];
    if (c < frequencies_.size()) cs.frequencies = frequencies_[c];
    cs.count = count_[c];
    cs.missing = rows_ - count_[c];
    if (cs.count == 0) {
      cs.min = cs.max = cs.mean = cs.std = kNaN;
    } else {
      const double n = static_cast<double>(cs.count), m1 = s1_[c] / n;
      cs.min = min_[c];
      cs.max = max_[c];
      cs.mean = shift_[c] + m1;
      cs.std = std::sqrt(std::max(0.0, s2_[c] / n - m1 * m1));
    }
    s.columns.push_back(cs);
  }
  return s;
}

Status WriteStats(hid_t version_group, const VersionStats& s) {
  HPCML_ASSIGN_OR_RETURN(
      hid_t g, h5::Check(H5Gcreate2(version_group, "stats", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                         "create stats"));
  h5::Group group(g);
  std::vector<std::string> names;
  std::vector<uint64_t> count, missing;
  std::vector<double> mn, mx, mean, sd;
  std::vector<int64_t> codes;
  std::vector<uint64_t> frequencies;
  for (const ColumnStats& c : s.columns) {
    codes.push_back(static_cast<int64_t>(c.frequencies.size()));
    frequencies.insert(frequencies.end(), c.frequencies.begin(), c.frequencies.end());
    names.push_back(c.name);
    count.push_back(c.count);
    missing.push_back(c.missing);
    mn.push_back(c.min);
    mx.push_back(c.max);
    mean.push_back(c.mean);
    sd.push_back(c.std);
  }
  const hsize_t cols = names.size();
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(group.get(), "columns", names));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(group.get(), "rows", static_cast<int64_t>(s.rows)));
  HPCML_RETURN_IF_ERROR(
      h5::WriteAttr(group.get(), "sample_rows", static_cast<int64_t>(s.sample_rows())));
  HPCML_RETURN_IF_ERROR(h5::WriteAttr(group.get(), "seed", static_cast<int64_t>(s.seed)));
  const hid_t u64 = H5T_STD_U64LE, f64 = H5T_IEEE_F64LE;
  HPCML_RETURN_IF_ERROR(WriteVector(group.get(), "count", u64, H5T_NATIVE_UINT64, count, {cols}));
  HPCML_RETURN_IF_ERROR(
      WriteVector(group.get(), "missing", u64, H5T_NATIVE_UINT64, missing, {cols}));
  HPCML_RETURN_IF_ERROR(WriteVector(group.get(), "min", f64, H5T_NATIVE_DOUBLE, mn, {cols}));
  HPCML_RETURN_IF_ERROR(WriteVector(group.get(), "max", f64, H5T_NATIVE_DOUBLE, mx, {cols}));
  HPCML_RETURN_IF_ERROR(WriteVector(group.get(), "mean", f64, H5T_NATIVE_DOUBLE, mean, {cols}));
  HPCML_RETURN_IF_ERROR(WriteVector(group.get(), "std", f64, H5T_NATIVE_DOUBLE, sd, {cols}));
  if (!frequencies.empty()) {
    HPCML_RETURN_IF_ERROR(WriteVector(group.get(), "frequencies", u64, H5T_NATIVE_UINT64,
                                      frequencies, {frequencies.size()}));
    HPCML_ASSIGN_OR_RETURN(
        hid_t f, h5::Check(H5Dopen2(group.get(), "frequencies", H5P_DEFAULT), "stats/frequencies"));
    h5::Dataset ds(f);
    HPCML_RETURN_IF_ERROR(h5::WriteAttr(ds.get(), "codes", codes));
  }
  return WriteVector(group.get(), "sample", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, s.sample,
                     {s.sample_rows(), cols});
}

Result<VersionStats> ReadStats(hid_t version_group, std::string_view version) {
  if (H5Lexists(version_group, "stats", H5P_DEFAULT) <= 0) {
    return NotFound("version {} has no statistics (written before they were recorded)", version);
  }
  HPCML_ASSIGN_OR_RETURN(hid_t g, h5::Check(H5Gopen2(version_group, "stats", H5P_DEFAULT),
                                            fmt::format("{}/stats", version)));
  h5::Group group(g);
  VersionStats s;
  HPCML_ASSIGN_OR_RETURN(std::vector<std::string> names,
                         h5::ReadStringListAttr(group.get(), "columns"));
  HPCML_ASSIGN_OR_RETURN(int64_t rows, h5::ReadIntAttr(group.get(), "rows"));
  HPCML_ASSIGN_OR_RETURN(int64_t seed, h5::ReadIntAttr(group.get(), "seed"));
  s.rows = static_cast<uint64_t>(rows);
  s.seed = static_cast<uint64_t>(seed);
  const size_t n = names.size();
  HPCML_ASSIGN_OR_RETURN(auto count,
                         ReadVector<uint64_t>(group.get(), "count", H5T_NATIVE_UINT64, n));
  HPCML_ASSIGN_OR_RETURN(auto missing,
                         ReadVector<uint64_t>(group.get(), "missing", H5T_NATIVE_UINT64, n));
  HPCML_ASSIGN_OR_RETURN(auto mn, ReadVector<double>(group.get(), "min", H5T_NATIVE_DOUBLE, n));
  HPCML_ASSIGN_OR_RETURN(auto mx, ReadVector<double>(group.get(), "max", H5T_NATIVE_DOUBLE, n));
  HPCML_ASSIGN_OR_RETURN(auto mean, ReadVector<double>(group.get(), "mean", H5T_NATIVE_DOUBLE, n));
  HPCML_ASSIGN_OR_RETURN(auto sd, ReadVector<double>(group.get(), "std", H5T_NATIVE_DOUBLE, n));
  HPCML_ASSIGN_OR_RETURN(s.sample, ReadVector<float>(group.get(), "sample", H5T_NATIVE_FLOAT, 0));
  if (n == 0 || s.sample.size() % n != 0) {
    return Corrupt("{}/stats: a sample of {} values for {} columns", version, s.sample.size(), n);
  }
  for (size_t c = 0; c < n; ++c) {
    s.columns.push_back(
        {names[c], count[c], missing[c], mn[c], mx[c], mean[c], sd[c], false, {}, {}});
  }
  if (H5Lexists(group.get(), "frequencies", H5P_DEFAULT) > 0) {
    HPCML_RETURN_IF_ERROR(ReadFrequencies(group.get(), version, &s));
  }
  return s;
}

std::vector<size_t> ColumnStats::Top(size_t n) const {
  std::vector<size_t> order(frequencies.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  n = std::min(n, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                    [&](size_t a, size_t b) {
                      return frequencies[a] != frequencies[b] ? frequencies[a] > frequencies[b]
                                                              : a < b;
                    });
  order.resize(n);
  return order;
}

void NameCodes(const std::vector<std::vector<std::string>>& categories,
               const std::vector<std::string>& label_classes, VersionStats* stats) {
  const size_t nf = categories.size();
  for (size_t c = 0; c < stats->columns.size(); ++c) {
    ColumnStats& col = stats->columns[c];
    const std::vector<std::string>* names = nullptr;
    if (c < nf && !categories[c].empty()) names = &categories[c];
    if (c == nf && !label_classes.empty()) names = &label_classes;
    if (names == nullptr) continue;
    col.coded = true;
    col.categories = *names;
    col.frequencies.resize(names->size(), 0);  // codes never seen count 0
  }
}

Status MissingCellsError(std::string_view subject, std::string_view needs,
                         const std::vector<MissingCells>& columns) {
  uint64_t total = 0;
  std::string each;
  for (const MissingCells& c : columns) {
    total += c.cells;
    each += fmt::format("{}{} {}", each.empty() ? "" : ", ", c.column, c.cells);
  }
  return InvalidArgument(
      "{}: {} needs every cell; missing (NaN) cells: {} ({}). Make a version without them: "
      "`hpcml-fcache derive FILE --drop-missing` keeps the complete rows; for a join, "
      "`hpcml-fcache asof ... --missing drop`",
      subject, needs, total, each);
}

}  // namespace hpcml::featurecache
