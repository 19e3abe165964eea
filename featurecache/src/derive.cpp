#include "derive.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hpcml/common/json.hpp"

#include "hpcml/featurecache/feature_set.hpp"
#include "hpcml/featurecache/timeutil.hpp"
#include "hpcml/featurecache/writer.hpp"

namespace hpcml::featurecache {

Result<std::string> ChildClassification(const std::string& parent, const std::string& requested) {
  if (requested.empty()) return parent;
  HPCML_ASSIGN_OR_RETURN(int want, ClassificationLevel(requested));
  HPCML_ASSIGN_OR_RETURN(int have, ClassificationLevel(parent));
  if (want < have) {
    return InvalidArgument(
        "classification '{}' is below the parent's '{}': derived data keeps its parent's "
        "protection",
        requested, parent);
  }
  return requested;
}

namespace {

// The parent's columns a derive keeps, in output order, and which of them it
// standardises.
struct Selection {
  std::vector<size_t> cols;       // parent feature index of each output column
  std::vector<bool> standardize;  // per output column
  bool any_standardize() const {
    return std::find(standardize.begin(), standardize.end(), true) != standardize.end();
  }
};

// o.select (or every column) and o.standardize / o.standardize_columns
// resolved against the parent's feature names.
Result<Selection> SelectColumns(const std::string& path, const VersionInfo& pi,
                                const DeriveOptions& o) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < pi.features(); ++i) index[pi.feature_names[i]] = i;
  auto lookup = [&](const std::string& name) -> Result<size_t> {
    auto it = index.find(name);
    if (it == index.end()) {
      std::string have;
      for (const auto& n : pi.feature_names) have += (have.empty() ? "" : ", ") + n;
      return InvalidArgument("{}: version {} has no feature \"{}\" (features: {})", path, pi.name,
                             name, have);
    }
    return it->second;
  };
  Selection sel;
  if (o.select.empty()) {
    for (size_t i = 0; i < pi.features(); ++i) sel.cols.push_back(i);
  }
  for (const auto& name : o.select) {
    HPCML_ASSIGN_OR_RETURN(size_t i, lookup(name));
    sel.cols.push_back(i);
  }
  auto numeric = [&](size_t i) { return pi.kind(i) == "float" || pi.kind(i) == "int"; };
  for (size_t i : sel.cols)
    sel.standardize.push_back(o.standardize && o.standardize_columns.empty() && numeric(i));
  for (const auto& name : o.standardize_columns) {
    HPCML_ASSIGN_OR_RETURN(size_t i, lookup(name));
    if (!numeric(i))
      return InvalidArgument("cannot standardise \"{}\": it is a {} column, not a number", name,
                             pi.kind(i));
    auto pos = std::find(sel.cols.begin(), sel.cols.end(), i);
    if (pos == sel.cols.end())
      return InvalidArgument("cannot standardise \"{}\": it is not among the selected columns",
                             name);
    sel.standardize[static_cast<size_t>(pos - sel.cols.begin())] = true;
  }
  return sel;
}

// Whether a row with timestamp `ts` passes o.since / o.until.
bool KeepTime(const DeriveOptions& o, int64_t ts) {
  return (!o.since || ts >= *o.since) && (!o.until || ts < *o.until);
}

// Whether row `x` (the parent's features) with label `y` (null: none) has
// every kept feature and the label present.
bool Complete(const Selection& sel, const float* x, const float* y) {
  if (y != nullptr && std::isnan(*y)) return false;
  for (size_t c : sel.cols) {
    if (std::isnan(x[c])) return false;
  }
  return true;
}

// Rows per block read from the parent (about 8 MiB of features).
uint64_t BlockRows(const VersionInfo& pi) {
  return std::max<uint64_t>(1024, (8u << 20) / (4 * pi.features()));
}

// Pass 1's result: the kept rows and, per output column, the mean and the
// divisor applied (the standard deviation, or 1), and, with --impute, the
// value that fills a missing cell (as stored: standardised, a code, 0/1;
// NaN: the column had no missing cell).
struct KeptRows {
  uint64_t kept = 0;
  std::vector<double> mean, scale, fill;
};

// The value --impute fills column j's missing cells with: the mean of a
// number (rounded for an int column), the most frequent value of a bool or
// category column (the lowest code on a tie).
double FillValue(std::string_view kind, double mean, const std::vector<uint64_t>& frequencies) {
  if (kind == "float") return mean;
  if (kind == "int") return std::round(mean);
  auto most = std::max_element(frequencies.begin(), frequencies.end());
  return most == frequencies.end() ? 0.0 : static_cast<double>(most - frequencies.begin());
}

// Pass 1: counts the kept rows and computes the mean and standard deviation
// (population) of the standardised and imputed columns over their present
// values, in double, merged row by row (Welford / Chan et al.), and the
// frequencies of the imputed coded ones.
Result<KeptRows> ComputeStats(const std::string& path, VersionReader& parent, const Selection& sel,
                              const DeriveOptions& o) {
  const VersionInfo& pi = parent.info();
  const size_t nf = sel.cols.size();
  const uint64_t pf = pi.features(), step = BlockRows(pi);
  const bool any_std = sel.any_standardize() || o.impute;
  const bool read_x = any_std || o.drop_missing, read_y = o.drop_missing && pi.has_labels();
  std::vector<std::vector<uint64_t>> freq(nf);
  std::vector<float> x(read_x ? step * pf : 0), y(read_y ? step : 0);
  std::vector<int64_t> t(step);
  KeptRows s;
  s.mean.assign(nf, 0.0);
  s.scale.assign(nf, 1.0);
  std::vector<double> m2(nf, 0.0);
  std::vector<uint64_t> missing(nf, 0), count(nf, 0);
  for (uint64_t first = 0; first < pi.rows; first += step) {
    uint64_t n = std::min(step, pi.rows - first);
    HPCML_RETURN_IF_ERROR(parent.Read(first, n, read_x ? x.data() : nullptr,
                                      read_y ? y.data() : nullptr, nullptr, t.data()));
    for (uint64_t r = 0; r < n; ++r) {
      if (!KeepTime(o, t[r])) continue;
      if (o.drop_missing && !Complete(sel, &x[r * pf], read_y ? &y[r] : nullptr)) continue;
      ++s.kept;
      for (size_t j = 0; any_std && j < nf; ++j) {
        if (!sel.standardize[j] && !o.impute) continue;
        double v = x[r * pf + sel.cols[j]];
        if (std::isnan(v)) {
          ++missing[j];
          continue;
        }
        const std::string_view kind = pi.kind(sel.cols[j]);
        if (kind == "bool" || kind == "category") {
          const auto code = static_cast<size_t>(v);
          if (code >= freq[j].size()) freq[j].resize(code + 1, 0);
          ++freq[j][code];
          continue;
        }
        double d = v - s.mean[j];
        s.mean[j] += d / static_cast<double>(++count[j]);
        m2[j] += d * (v - s.mean[j]);
      }
    }
  }
  if (s.kept == 0) {
    return InvalidArgument(
        "{}: {} none of the {} rows of {}", path,
        o.drop_missing ? "the time filter and --drop-missing keep" : "the time filter keeps",
        pi.rows, pi.name);
  }
  s.fill.assign(nf, std::numeric_limits<double>::quiet_NaN());
  for (size_t j = 0; j < nf; ++j) {
    if (sel.standardize[j] && count[j] > 0) {
      double sd = std::sqrt(m2[j] / static_cast<double>(count[j]));
      s.scale[j] = sd > 0 ? sd : 1.0;  // a constant column becomes all zeros
    }
    if (!o.impute || missing[j] == 0) continue;
    const std::string_view kind = pi.kind(sel.cols[j]);
    if (count[j] == 0 && freq[j].empty()) {
      return InvalidArgument("{}: --impute: column \"{}\" has no value in the kept rows", path,
                             pi.feature_names[sel.cols[j]]);
    }
    s.fill[j] = FillValue(sel.standardize[j] ? "float" : kind, s.mean[j], freq[j]);
    if (sel.standardize[j]) s.fill[j] = 0.0;  // the mean, standardised
  }
  return s;
}

// The recorded transform: parent, selection, filters and the scaling of each
// standardised output column relative to the unstandardised data: this
// derive's own, the parent's (`inherited`, from its record) or both composed,
// (((raw - m1) / s1) - m2) / s2 = (raw - (m1 + m2 s1)) / (s1 s2).
std::string DeriveTransform(const VersionInfo& pi, const DeriveOptions& o, const Selection& sel,
                            const KeptRows& s, const std::vector<std::string>& names,
                            const std::vector<ColumnScaling>& inherited) {
  nlohmann::json tr = {{"op", "derive"}, {"from", pi.name}};
  if (!o.select.empty()) tr["select"] = o.select;
  if (o.since || o.until) {
    nlohmann::json f = nlohmann::json::object();
    if (o.since) f["since"] = FormatTimestamp(*o.since);
    if (o.until) f["until"] = FormatTimestamp(*o.until);
    tr["filter_time"] = f;
  }
  if (o.drop_missing) tr["drop_missing"] = true;
  if (o.impute || !o.transform_from.empty()) {
    nlohmann::json imputed = nlohmann::json::object();
    for (size_t j = 0; j < sel.cols.size(); ++j)
      if (!std::isnan(s.fill[j])) imputed[names[j]] = s.fill[j];
    if (!imputed.empty()) tr["impute"] = imputed;  // column -> the value in its missing cells
  }
  nlohmann::json cols_j = nlohmann::json::array(), mean_j = nlohmann::json::array(),
                 std_j = nlohmann::json::array();
  for (size_t j = 0; j < sel.cols.size(); ++j) {
    auto parent = std::find_if(inherited.begin(), inherited.end(),
                               [&](const ColumnScaling& c) { return c.column == names[j]; });
    if (!sel.standardize[j] && parent == inherited.end()) continue;
    double mean = sel.standardize[j] ? s.mean[j] : 0.0, sd = sel.standardize[j] ? s.scale[j] : 1.0;
    if (parent != inherited.end()) {
      mean = parent->mean + mean * parent->scale;
      sd *= parent->scale;
    }
    cols_j.push_back(names[j]);
    mean_j.push_back(mean);
    std_j.push_back(sd);
  }
  if (!cols_j.empty()) tr["standardize"] = {{"columns", cols_j}, {"mean", mean_j}, {"std", std_j}};
  return JsonText(tr);
}

}  // namespace

Result<std::vector<ColumnScaling>> RecordedStandardization(const VersionInfo& info) {
  const nlohmann::json tr = nlohmann::json::parse(info.transform, nullptr, false);
  std::vector<ColumnScaling> out;
  if (!tr.is_object() || !tr.contains("standardize")) return out;
  try {
    const nlohmann::json& st = tr.at("standardize");
    const auto cols = st.at("columns").get<std::vector<std::string>>();
    const auto mean = st.at("mean").get<std::vector<double>>();
    const auto sd = st.at("std").get<std::vector<double>>();
    if (mean.size() != cols.size() || sd.size() != cols.size()) {
      return Corrupt("version {}: transform.standardize has {} columns, {} means, {} stds",
                     info.name, cols.size(), mean.size(), sd.size());
    }
    for (size_t i = 0; i < cols.size(); ++i) out.push_back({cols[i], mean[i], sd[i]});
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("version {}: transform.standardize: {}", info.name, e.what());
  }
  return out;
}

namespace {

// --transform-from: the reference version's recorded standardisation
// (relative to raw data) and fill values, by column name.
struct Reference {
  VersionInfo info;
  std::vector<ColumnScaling> scaling;
  std::map<std::string, double> fill;  // the stored value of a missing cell
  std::vector<std::vector<std::string>> categories;
};

Result<Reference> LoadReference(const FeatureSet& fs, const std::string& spec) {
  Reference r;
  HPCML_ASSIGN_OR_RETURN(VersionReader ref, fs.OpenVersion(spec));
  r.info = ref.info();
  HPCML_ASSIGN_OR_RETURN(r.scaling, RecordedStandardization(r.info));
  HPCML_ASSIGN_OR_RETURN(r.categories, ref.Categories());
  const nlohmann::json tr = nlohmann::json::parse(r.info.transform, nullptr, false);
  if (tr.is_object() && tr.contains("impute") && tr["impute"].is_object()) {
    for (const auto& [column, value] : tr["impute"].items()) {
      if (!value.is_number())
        return Corrupt("version {}: transform.impute.{}", r.info.name, column);
      r.fill[column] = value.get<double>();
    }
  }
  if (r.scaling.empty() && r.fill.empty()) {
    return InvalidArgument("--transform-from {}: it records no standardisation or fill values",
                           r.info.name);
  }
  return r;
}

// The selection of --transform-from: the reference's features, found by
// name in the parent, of the same kind, standardised where it was.
Result<Selection> SelectLike(const std::string& path, const VersionInfo& pi, const Reference& ref,
                             const std::vector<ColumnScaling>& inherited) {
  Selection sel;
  for (size_t k = 0; k < ref.info.features(); ++k) {
    const std::string& name = ref.info.feature_names[k];
    auto it = std::find(pi.feature_names.begin(), pi.feature_names.end(), name);
    if (it == pi.feature_names.end())
      return InvalidArgument("{}: version {} has no feature \"{}\" of {}", path, pi.name, name,
                             ref.info.name);
    const size_t i = static_cast<size_t>(it - pi.feature_names.begin());
    const bool scaled = std::any_of(ref.scaling.begin(), ref.scaling.end(),
                                    [&](const ColumnScaling& c) { return c.column == name; });
    const std::string_view want = scaled ? std::string_view("float") : ref.info.kind(k);
    const bool numeric = pi.kind(i) == "float" || pi.kind(i) == "int";
    if (scaled ? !numeric : pi.kind(i) != want) {
      return InvalidArgument("{}: feature \"{}\" is {} in version {} but {} in {}", path, name,
                             pi.kind(i), pi.name, ref.info.kind(k), ref.info.name);
    }
    if (scaled && std::any_of(inherited.begin(), inherited.end(),
                              [&](const ColumnScaling& c) { return c.column == name; }))
      return InvalidArgument("{}: feature \"{}\" of version {} is standardised already", path, name,
                             pi.name);
    sel.cols.push_back(i);
    sel.standardize.push_back(scaled);
  }
  return sel;
}

// The reference's scaling and fill values for the selected columns; a
// category's fill by name in the parent's dictionary (added when absent).
void ApplyReference(const Reference& ref, const Selection& sel, KeptRows* s, NewVersion* spec) {
  for (size_t j = 0; j < sel.cols.size(); ++j) {
    const std::string& name = ref.info.feature_names[j];
    for (const ColumnScaling& c : ref.scaling) {
      if (c.column == name) s->mean[j] = c.mean, s->scale[j] = c.scale;
    }
    auto fill = ref.fill.find(name);
    if (fill == ref.fill.end()) continue;
    s->fill[j] = fill->second;
    if (spec->feature_types[j] != "category") continue;
    const std::string& value = ref.categories[j].at(static_cast<size_t>(fill->second));
    std::vector<std::string>& dict = spec->categories[j];
    auto at = std::find(dict.begin(), dict.end(), value);
    if (at == dict.end()) at = dict.insert(dict.end(), value);
    s->fill[j] = static_cast<double>(at - dict.begin());
  }
}

NewVersion DeriveSpec(const VersionInfo& pi, const DeriveOptions& o, const Selection& sel,
                      const KeptRows& s, const std::string& classification,
                      const std::vector<ColumnScaling>& inherited,
                      const std::vector<std::vector<std::string>>& categories) {
  NewVersion spec;
  for (size_t j = 0; j < sel.cols.size(); ++j) {
    InheritFeature(pi, sel.cols[j], categories, &spec);
    if (sel.standardize[j]) spec.feature_types.back() = "float";
  }
  spec.label_name = pi.label_name;
  spec.label_classes = pi.label_classes;
  spec.entity_name = pi.entity_name;
  spec.timestamp_name = pi.timestamp_name;
  spec.operation = "derive";
  spec.parents = {ParentRef{pi.name, pi.data_sha256}};
  spec.classification = classification;
  spec.chunk_rows = o.chunk_rows;
  spec.expected_rows = s.kept;
  InheritCodec(pi, o.codec, o.compression, &spec);
  spec.transform = DeriveTransform(pi, o, sel, s, spec.feature_names, inherited);
  return spec;
}

// Where each output int column's exact values come from: its column in
// the parent's int_values (an int column not standardised).
struct IntColumns {
  std::vector<size_t> from;  // per output int column, the parent's int slot
  std::vector<size_t> out;   // its output feature
};

IntColumns MapIntColumns(const VersionInfo& pi, const Selection& sel, const NewVersion& spec) {
  std::vector<int> slot(pi.features(), -1);
  int next = 0;
  for (size_t i = 0; i < pi.features(); ++i)
    if (pi.typed && pi.feature_types[i] == "int") slot[i] = next++;
  IntColumns m;
  for (size_t j = 0; j < sel.cols.size(); ++j) {
    if (spec.feature_types[j] != "int") continue;
    m.from.push_back(static_cast<size_t>(slot[sel.cols[j]]));
    m.out.push_back(j);
  }
  return m;
}

// Pass 2: filter, select, standardise, impute, append to the started version.
Status WriteDerived(VersionReader& parent, const Selection& sel, const KeptRows& s,
                    const DeriveOptions& o, const IntColumns& ints, FeatureSetWriter& writer) {
  const VersionInfo& pi = parent.info();
  const size_t nf = sel.cols.size(), ni = ints.from.size(), pi_n = pi.int_features();
  const uint64_t pf = pi.features(), step = BlockRows(pi);
  const bool labels = pi.has_labels();
  std::vector<float> x(step * pf), y(labels ? step : 0), out(step * nf), yo(labels ? step : 0);
  std::vector<int64_t> e(step), t(step), eo(step), to(step), pint(ni > 0 ? step * pi_n : 0),
      io(step * ni);
  for (uint64_t first = 0; first < pi.rows; first += step) {
    uint64_t n = std::min(step, pi.rows - first);
    HPCML_RETURN_IF_ERROR(
        parent.Read(first, n, x.data(), labels ? y.data() : nullptr, e.data(), t.data()));
    if (ni > 0) HPCML_RETURN_IF_ERROR(parent.ReadInts(first, n, pint.data()));
    uint64_t m = 0;
    for (uint64_t r = 0; r < n; ++r) {
      if (!KeepTime(o, t[r])) continue;
      if (o.drop_missing && !Complete(sel, &x[r * pf], labels ? &y[r] : nullptr)) continue;
      for (size_t j = 0; j < nf; ++j) {
        float v = x[r * pf + sel.cols[j]];
        if (sel.standardize[j]) v = static_cast<float>((v - s.mean[j]) / s.scale[j]);
        if (std::isnan(v) && !std::isnan(s.fill[j])) v = static_cast<float>(s.fill[j]);
        out[m * nf + j] = v;
      }
      for (size_t k = 0; k < ni; ++k) {
        int64_t v = pint[r * pi_n + ints.from[k]];
        const double fill = s.fill[ints.out[k]];
        if (v == kIntMissing && !std::isnan(fill)) v = static_cast<int64_t>(fill);
        io[m * ni + k] = v;
      }
      if (labels) yo[m] = y[r];
      eo[m] = e[r];
      to[m] = t[r];
      ++m;
    }
    if (m > 0) {
      HPCML_RETURN_IF_ERROR(writer.Append(out.data(), labels ? yo.data() : nullptr, eo.data(),
                                          to.data(), m, ni > 0 ? io.data() : nullptr));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<VersionInfo> Derive(const std::string& path, const DeriveOptions& o) {
  if (o.since && o.until && *o.since >= *o.until) {
    return InvalidArgument("--since {} is not before --until {}", FormatTimestamp(*o.since),
                           FormatTimestamp(*o.until));
  }
  // Lock first: nobody can publish between reading the parent and writing.
  HPCML_ASSIGN_OR_RETURN(FeatureSetWriter writer,
                         FeatureSetWriter::Begin(path, WriterOptions{"", o.lock_timeout_s}));
  HPCML_ASSIGN_OR_RETURN(FeatureSet fs, FeatureSet::Open(path));
  HPCML_ASSIGN_OR_RETURN(VersionReader parent, fs.OpenVersion(o.from));
  const VersionInfo& pi = parent.info();
  HPCML_ASSIGN_OR_RETURN(std::string classification,
                         ChildClassification(pi.classification, o.classification));
  HPCML_ASSIGN_OR_RETURN(std::vector<ColumnScaling> inherited, RecordedStandardization(pi));
  HPCML_ASSIGN_OR_RETURN(auto categories, parent.Categories());
  if (o.transform_from.empty()) {
    HPCML_ASSIGN_OR_RETURN(Selection sel, SelectColumns(path, pi, o));
    HPCML_ASSIGN_OR_RETURN(KeptRows stats, ComputeStats(path, parent, sel, o));
    NewVersion spec = DeriveSpec(pi, o, sel, stats, classification, inherited, categories);
    HPCML_RETURN_IF_ERROR(InheritEntities(parent, &spec));
    HPCML_RETURN_IF_ERROR(writer.StartVersion(spec).status());
    HPCML_RETURN_IF_ERROR(
        WriteDerived(parent, sel, stats, o, MapIntColumns(pi, sel, spec), writer));
    return writer.Commit();
  }
  if (!o.select.empty() || o.standardize || !o.standardize_columns.empty() || o.impute) {
    return InvalidArgument(
        "--transform-from takes its columns, standardisation and fill values from that version: "
        "give no --select, --standardize or --impute with it");
  }
  HPCML_ASSIGN_OR_RETURN(Reference ref, LoadReference(fs, o.transform_from));
  HPCML_ASSIGN_OR_RETURN(Selection sel, SelectLike(path, pi, ref, inherited));
  DeriveOptions counting = o;  // only the kept rows are counted here
  counting.transform_from.clear();
  Selection plain = sel;
  plain.standardize.assign(sel.cols.size(), false);
  HPCML_ASSIGN_OR_RETURN(KeptRows stats, ComputeStats(path, parent, plain, counting));
  NewVersion spec = DeriveSpec(pi, o, sel, stats, classification, inherited, categories);
  ApplyReference(ref, sel, &stats, &spec);
  spec.transform = DeriveTransform(pi, o, sel, stats, spec.feature_names, inherited);
  auto tr = nlohmann::json::parse(spec.transform);
  tr["transform_from"] = {{"version", ref.info.name}, {"sha256", ref.info.data_sha256}};
  spec.transform = JsonText(tr);
  spec.parents.push_back(ParentRef{ref.info.name, ref.info.data_sha256});
  HPCML_RETURN_IF_ERROR(InheritEntities(parent, &spec));
  HPCML_RETURN_IF_ERROR(writer.StartVersion(spec).status());
  HPCML_RETURN_IF_ERROR(WriteDerived(parent, sel, stats, o, MapIntColumns(pi, sel, spec), writer));
  return writer.Commit();
}

}  // namespace hpcml::featurecache
