#include "drift.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "hpcml/common/json.hpp"

namespace hpcml::featurecache {
namespace {

constexpr double kFloor = 1e-4;  // the least share of a bin (PSI)

std::vector<std::string> Columns(const VersionInfo& v) {
  std::vector<std::string> c = v.feature_names;
  if (v.has_labels()) c.push_back(v.label_name);
  return c;
}

std::vector<float> SortedValues(std::vector<float> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](float x) { return std::isnan(x); }), v.end());
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<float> FromSample(const VersionStats& s, size_t c) {
  std::vector<float> v;
  const size_t cols = s.columns.size();
  for (size_t r = 0; r < s.sample_rows(); ++r) v.push_back(s.sample[r * cols + c]);
  return SortedValues(std::move(v));
}

// Column c (features, then the label) of the whole version, in blocks.
Result<std::vector<float>> FromData(const VersionReader& r, size_t c) {
  const uint64_t rows = r.rows(), f = r.features(), block = 65536;
  std::vector<float> out, x(c < f ? block * f : 0), y(c < f ? 0 : block);
  out.reserve(rows);
  for (uint64_t first = 0; first < rows; first += block) {
    const uint64_t n = std::min(block, rows - first);
    HPCML_RETURN_IF_ERROR(
        r.Read(first, n, c < f ? x.data() : nullptr, c < f ? nullptr : y.data(), nullptr, nullptr));
    for (uint64_t i = 0; i < n; ++i) out.push_back(c < f ? x[i * f + c] : y[i]);
  }
  return SortedValues(std::move(out));
}

// The values of every column of `version`, by name.
Result<std::vector<std::vector<float>>> Values(const FeatureSet& fs, const VersionInfo& v,
                                               bool exact) {
  std::vector<std::vector<float>> out;
  const size_t n = Columns(v).size();
  if (exact) {
    HPCML_ASSIGN_OR_RETURN(VersionReader r, fs.OpenVersion(v.name));
    for (size_t c = 0; c < n; ++c) {
      HPCML_ASSIGN_OR_RETURN(std::vector<float> col, FromData(r, c));
      out.push_back(std::move(col));
    }
    return out;
  }
  auto s = fs.Stats(v.name);
  if (!s.ok()) return s.status().WithContext("use --exact to compare the full data");
  for (size_t c = 0; c < n; ++c) out.push_back(FromSample(*s, c));
  return out;
}

}  // namespace

bool DriftReport::any_drift() const {
  return std::any_of(columns.begin(), columns.end(),
                     [](const ColumnDrift& c) { return c.drifted; });
}

double PopulationStabilityIndex(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.empty() || b.empty()) return NAN;
  std::vector<float> cuts;
  for (size_t i = 1; i < 10; ++i) cuts.push_back(a[i * a.size() / 10]);
  double psi = 0;
  size_t pa = 0, pb = 0;  // values of a and b at or below the previous cut
  for (size_t i = 0; i <= cuts.size(); ++i) {
    const size_t ea =
        i < cuts.size() ? std::upper_bound(a.begin(), a.end(), cuts[i]) - a.begin() : a.size();
    const size_t eb =
        i < cuts.size() ? std::upper_bound(b.begin(), b.end(), cuts[i]) - b.begin() : b.size();
    const double sa =
        std::max(kFloor, static_cast<double>(ea - pa) / static_cast<double>(a.size()));
    const double sb =
        std::max(kFloor, static_cast<double>(eb - pb) / static_cast<double>(b.size()));
    psi += (sb - sa) * std::log(sb / sa);
    pa = ea;
    pb = eb;
  }
  return psi;
}

double CategoryPsi(const std::vector<std::string>& names_a, const std::vector<uint64_t>& a,
                   const std::vector<std::string>& names_b, const std::vector<uint64_t>& b,
                   double* unseen) {
  std::map<std::string_view, std::pair<uint64_t, uint64_t>> counts;
  uint64_t total_a = 0, total_b = 0;
  for (size_t i = 0; i < a.size(); ++i) counts[names_a[i]].first += a[i], total_a += a[i];
  for (size_t i = 0; i < b.size(); ++i) counts[names_b[i]].second += b[i], total_b += b[i];
  *unseen = NAN;
  if (total_a == 0 || total_b == 0) return NAN;
  double psi = 0;
  uint64_t new_rows = 0;
  for (const auto& [name, ab] : counts) {
    if (ab.first == 0) new_rows += ab.second;
    const double sa =
        std::max(kFloor, static_cast<double>(ab.first) / static_cast<double>(total_a));
    const double sb =
        std::max(kFloor, static_cast<double>(ab.second) / static_cast<double>(total_b));
    psi += (sb - sa) * std::log(sb / sa);
  }
  *unseen = static_cast<double>(new_rows) / static_cast<double>(total_b);
  return psi;
}

double KolmogorovSmirnov(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.empty() || b.empty()) return NAN;
  size_t i = 0, j = 0;
  double d = 0;
  while (i < a.size() && j < b.size()) {
    const float x = std::min(a[i], b[j]);
    while (i < a.size() && a[i] == x) ++i;
    while (j < b.size() && b[j] == x) ++j;
    d = std::max(d, std::abs(static_cast<double>(i) / static_cast<double>(a.size()) -
                             static_cast<double>(j) / static_cast<double>(b.size())));
  }
  return d;
}

Result<DriftReport> Drift(const FeatureSet& fs, std::string_view a, std::string_view b,
                          const DriftOptions& o) {
  HPCML_ASSIGN_OR_RETURN(VersionInfo va, fs.Info(a));
  HPCML_ASSIGN_OR_RETURN(VersionInfo vb, fs.Info(b));
  HPCML_ASSIGN_OR_RETURN(auto xa, Values(fs, va, o.exact));
  HPCML_ASSIGN_OR_RETURN(auto xb, Values(fs, vb, o.exact));
  // The exact counts of categorical columns, from the recorded statistics.
  HPCML_ASSIGN_OR_RETURN(VersionStats sa, fs.Stats(va.name));
  HPCML_ASSIGN_OR_RETURN(VersionStats sb, fs.Stats(vb.name));
  DriftReport r{va.name, vb.name, o.exact ? "data" : "sample", {}};
  const std::vector<std::string> ca = Columns(va), cb = Columns(vb);
  for (size_t i = 0; i < ca.size(); ++i) {
    auto it = std::find(cb.begin(), cb.end(), ca[i]);
    if (it == cb.end()) continue;
    const size_t j = static_cast<size_t>(it - cb.begin());
    const ColumnStats &ka = sa.columns[i], &kb = sb.columns[j];
    ColumnDrift d;
    d.name = ca[i];
    if (ka.coded != kb.coded) {
      d.note = fmt::format("kind changed: {} -> {}", ka.coded ? "category" : "number",
                           kb.coded ? "category" : "number");
      d.psi = d.ks = NAN;
      d.drifted = true;
    } else if (ka.coded) {
      d.categorical = true;
      d.psi = CategoryPsi(ka.categories, ka.frequencies, kb.categories, kb.frequencies, &d.unseen);
      d.ks = NAN;
      d.count_a = ka.count;
      d.count_b = kb.count;
      d.drifted = d.psi > o.psi_threshold;
    } else {
      const auto& x = xa[i];
      const auto& y = xb[j];
      d.psi = PopulationStabilityIndex(x, y);
      d.ks = KolmogorovSmirnov(x, y);
      d.count_a = x.size();
      d.count_b = y.size();
      d.drifted = d.psi > o.psi_threshold || d.ks > o.ks_threshold;
    }
    r.columns.push_back(d);
  }
  if (r.columns.empty()) {
    return InvalidArgument("{}: {} and {} have no column in common", fs.path(), va.name, vb.name);
  }
  return r;
}

std::string FormatDrift(const std::string& path, const DriftReport& r, const DriftOptions& o) {
  std::string s = fmt::format(
      "{}: {} -> {}, from the {} (PSI over deciles of {}; categorical columns: over categories, "
      "exact counts; drift: PSI > {} or KS > {})\n",
      path, r.a, r.b, r.source == "data" ? "full data" : "stored samples", r.a, o.psi_threshold,
      o.ks_threshold);
  s += fmt::format("{:<24} {:>10} {:>10} {:>10} {:>10} {:>8}  {}\n", "column", "PSI", "KS",
                   "n " + r.a, "n " + r.b, "unseen", "");
  for (const ColumnDrift& c : r.columns) {
    const std::string ks = std::isnan(c.ks) ? "-" : fmt::format("{:.4f}", c.ks);
    const std::string unseen = c.categorical ? fmt::format("{:.2f}%", 100 * c.unseen) : "-";
    s += fmt::format("{:<24} {:>10.4f} {:>10} {:>10} {:>10} {:>8}  {}{}\n", c.name, c.psi, ks,
                     c.count_a, c.count_b, unseen, c.drifted ? "DRIFT" : "",
                     c.note.empty() ? "" : " (" + c.note + ")");
  }
  return s;
}

std::string FormatDriftJson(const std::string& path, const DriftReport& r, const DriftOptions& o) {
  nlohmann::ordered_json j = {{"file", path},
                              {"a", r.a},
                              {"b", r.b},
                              {"source", r.source},
                              {"psi_threshold", o.psi_threshold},
                              {"ks_threshold", o.ks_threshold},
                              {"drift", r.any_drift()}};
  nlohmann::ordered_json cols = nlohmann::ordered_json::array();
  for (const ColumnDrift& c : r.columns) {
    auto num = [](double v) {
      return std::isnan(v) ? nlohmann::ordered_json() : nlohmann::ordered_json(v);
    };
    cols.push_back({{"name", c.name},
                    {"kind", c.categorical ? "category" : "number"},
                    {"psi", num(c.psi)},
                    {"ks", num(c.ks)},
                    {"unseen", c.categorical ? num(c.unseen) : nlohmann::ordered_json()},
                    {"n_a", c.count_a},
                    {"n_b", c.count_b},
                    {"drift", c.drifted},
                    {"note", c.note}});
  }
  j["columns"] = cols;
  return JsonText(j, 2) + "\n";
}

}  // namespace hpcml::featurecache
