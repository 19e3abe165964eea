#include "hpcml/featurecache/derive.hpp"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

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
  std::vector<size_t> cols;
  if (o.select.empty()) {
    for (size_t i = 0; i < pi.features(); ++i) cols.push_back(i);
  } else {
    for (const auto& name : o.select) {
      HPCML_ASSIGN_OR_RETURN(size_t i, lookup(name));
      cols.push_back(i);
    }
  }
  const size_t nf = cols.size();
  std::vector<bool> standardize(nf, false);
  if (o.standardize || !o.standardize_columns.empty()) {
    if (o.standardize_columns.empty()) {
      standardize.assign(nf, true);
    } else {
      for (const auto& name : o.standardize_columns) {
        HPCML_ASSIGN_OR_RETURN(size_t i, lookup(name));
        auto pos = std::find(cols.begin(), cols.end(), i);
        if (pos == cols.end())
          return InvalidArgument("cannot standardise \"{}\": it is not among the selected columns",
                                 name);
        standardize[static_cast<size_t>(pos - cols.begin())] = true;
      }
    }
  }
  HPCML_ASSIGN_OR_RETURN(std::string classification,
                         ChildClassification(pi.classification, o.classification));

  const uint64_t pf = pi.features();
  const uint64_t step = std::max<uint64_t>(1024, (8u << 20) / (4 * pf));
  std::vector<float> x(step * pf), y(pi.has_labels() ? step : 0), out(step * nf);
  std::vector<int64_t> e(step), t(step);
  auto keep = [&](int64_t ts) {
    return (!o.since || ts >= *o.since) && (!o.until || ts < *o.until);
  };

  // Pass 1: mean and standard deviation (population) of the kept rows, in
  // double, merged block by block (Chan et al.).
  std::vector<double> mean(nf, 0.0), m2(nf, 0.0), scale(nf, 1.0);
  uint64_t kept = 0;
  bool any_std = std::find(standardize.begin(), standardize.end(), true) != standardize.end();
  for (uint64_t first = 0; first < pi.rows; first += step) {
    uint64_t n = std::min(step, pi.rows - first);
    HPCML_RETURN_IF_ERROR(
        parent.Read(first, n, any_std ? x.data() : nullptr, nullptr, nullptr, t.data()));
    for (uint64_t r = 0; r < n; ++r) {
      if (!keep(t[r])) continue;
      ++kept;
      if (!any_std) continue;
      for (size_t j = 0; j < nf; ++j) {
        if (!standardize[j]) continue;
        double v = x[r * pf + cols[j]];
        double d = v - mean[j];
        mean[j] += d / static_cast<double>(kept);
        m2[j] += d * (v - mean[j]);
      }
    }
  }
  if (kept == 0)
    return InvalidArgument("{}: the time filter keeps none of the {} rows of {}", path, pi.rows,
                           pi.name);
  for (size_t j = 0; j < nf; ++j) {
    if (!standardize[j]) continue;
    double sd = std::sqrt(m2[j] / static_cast<double>(kept));
    if (std::isnan(mean[j])) {
      return InvalidArgument("{}: cannot standardise \"{}\": it holds nan values", path,
                             pi.feature_names[cols[j]]);
    }
    scale[j] = sd > 0 ? sd : 1.0;  // a constant column becomes all zeros
  }

  NewVersion spec;
  for (size_t j = 0; j < nf; ++j) {
    spec.feature_names.push_back(pi.feature_names[cols[j]]);
    spec.feature_types.push_back(standardize[j] ? "float" : pi.feature_types[cols[j]]);
  }
  spec.label_name = pi.label_name;
  spec.entity_name = pi.entity_name;
  spec.timestamp_name = pi.timestamp_name;
  spec.operation = "derive";
  spec.parents = {ParentRef{pi.name, pi.data_sha256}};
  spec.classification = classification;
  spec.chunk_rows = o.chunk_rows;
  spec.expected_rows = kept;
  spec.compression = o.compression >= 0 ? o.compression : pi.compression;
  nlohmann::json tr = {{"op", "derive"}, {"from", pi.name}};
  if (!o.select.empty()) tr["select"] = o.select;
  if (o.since || o.until) {
    nlohmann::json f = nlohmann::json::object();
    if (o.since) f["since"] = FormatTimestamp(*o.since);
    if (o.until) f["until"] = FormatTimestamp(*o.until);
    tr["filter_time"] = f;
  }
  if (any_std) {
    nlohmann::json cols_j = nlohmann::json::array(), mean_j = nlohmann::json::array(),
                   std_j = nlohmann::json::array();
    for (size_t j = 0; j < nf; ++j) {
      if (!standardize[j]) continue;
      cols_j.push_back(spec.feature_names[j]);
      mean_j.push_back(mean[j]);
      std_j.push_back(scale[j]);
    }
    tr["standardize"] = {{"columns", cols_j}, {"mean", mean_j}, {"std", std_j}};
  }
  spec.transform = tr.dump();
  HPCML_RETURN_IF_ERROR(writer.StartVersion(spec).status());

  // Pass 2: filter, select, standardise, write.
  std::vector<float> yo(pi.has_labels() ? step : 0);
  std::vector<int64_t> eo(step), to(step);
  for (uint64_t first = 0; first < pi.rows; first += step) {
    uint64_t n = std::min(step, pi.rows - first);
    HPCML_RETURN_IF_ERROR(
        parent.Read(first, n, x.data(), pi.has_labels() ? y.data() : nullptr, e.data(), t.data()));
    uint64_t m = 0;
    for (uint64_t r = 0; r < n; ++r) {
      if (!keep(t[r])) continue;
      for (size_t j = 0; j < nf; ++j) {
        float v = x[r * pf + cols[j]];
        out[m * nf + j] = standardize[j] ? static_cast<float>((v - mean[j]) / scale[j]) : v;
      }
      if (pi.has_labels()) yo[m] = y[r];
      eo[m] = e[r];
      to[m] = t[r];
      ++m;
    }
    if (m > 0) {
      HPCML_RETURN_IF_ERROR(writer.Append(out.data(), pi.has_labels() ? yo.data() : nullptr,
                                          eo.data(), to.data(), m));
    }
  }
  return writer.Commit();
}

}  // namespace hpcml::featurecache
