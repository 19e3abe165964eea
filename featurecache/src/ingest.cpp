#include "hpcml/featurecache/ingest.hpp"

#include <sys/stat.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "hpcml/featurecache/access.hpp"
#include "hpcml/featurecache/csv.hpp"
#include "hpcml/featurecache/timeutil.hpp"
#include "hpcml/featurecache/writer.hpp"

namespace hpcml::featurecache {
namespace {

std::string Trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

Result<VersionInfo> Ingest(const std::string& path, const IngestOptions& o,
                           std::vector<std::string>* warnings) {
  if (o.entity_column.empty() || o.timestamp_column.empty()) {
    return InvalidArgument("ingest needs the entity and timestamp columns");
  }
  if (o.classification.empty()) return InvalidArgument("ingest needs a classification");
  HPCML_RETURN_IF_ERROR(ClassificationLevel(o.classification).status());
  AccessContext ctx = AccessContext::FromEnvironment();
  HPCML_ASSIGN_OR_RETURN(std::string csv_canonical, CanonicalPath(o.csv_path, /*must_exist=*/true));
  HPCML_RETURN_IF_ERROR(CheckPath(ctx, csv_canonical, "read CSV"));
  HPCML_ASSIGN_OR_RETURN(CsvReader csv, CsvReader::Open(o.csv_path, o.delimiter));

  HPCML_ASSIGN_OR_RETURN(bool has_header, csv.Next());
  if (!has_header) return InvalidArgument("{}: empty file: expected a header row", o.csv_path);
  std::vector<std::string> header;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < csv.size(); ++i) {
    header.push_back(Trimmed(csv.field(i)));
    if (header.back().empty()) return csv.ErrorAt(i, "empty column name in the header");
    if (!index.emplace(header.back(), i).second) {
      return csv.ErrorAt(i,
                         fmt::format("column \"{}\" appears twice in the header", header.back()));
    }
  }
  std::string all;
  for (const auto& h : header) all += (all.empty() ? "" : ", ") + h;
  auto find = [&](const std::string& name, const char* role) -> Result<size_t> {
    auto it = index.find(name);
    if (it == index.end()) {
      return InvalidArgument("{}: line 1: no {} column named \"{}\" (columns: {})", o.csv_path,
                             role, name, all);
    }
    return it->second;
  };
  HPCML_ASSIGN_OR_RETURN(size_t entity_col, find(o.entity_column, "entity"));
  HPCML_ASSIGN_OR_RETURN(size_t ts_col, find(o.timestamp_column, "timestamp"));
  const bool has_label = !o.label_column.empty();
  size_t label_col = 0;
  if (has_label) {
    HPCML_ASSIGN_OR_RETURN(label_col, find(o.label_column, "label"));
  }
  auto special = [&](size_t i) {
    return i == entity_col || i == ts_col || (has_label && i == label_col);
  };
  std::vector<size_t> feature_cols;
  if (o.feature_columns.empty()) {
    for (size_t i = 0; i < header.size(); ++i) {
      if (!special(i)) feature_cols.push_back(i);
    }
  } else {
    for (const auto& name : o.feature_columns) {
      HPCML_ASSIGN_OR_RETURN(size_t i, find(name, "feature"));
      if (special(i))
        return InvalidArgument(
            "column \"{}\" cannot be both a feature and the entity, timestamp or label", name);
      feature_cols.push_back(i);
    }
  }
  if (feature_cols.empty()) return InvalidArgument("{}: no feature columns", o.csv_path);
  const size_t nf = feature_cols.size();

  NewVersion spec;
  for (size_t c : feature_cols) spec.feature_names.push_back(header[c]);
  spec.feature_types.assign(nf, "int");
  spec.label_name = has_label ? o.label_column : "";
  spec.entity_name = o.entity_column;
  spec.timestamp_name = o.timestamp_column;
  spec.operation = "ingest";
  spec.classification = o.classification;
  spec.chunk_rows = o.chunk_rows;
  {
    // Every row takes at least one byte per field plus its line end.
    struct stat st;
    if (::stat(o.csv_path.c_str(), &st) == 0)
      spec.expected_rows = static_cast<uint64_t>(st.st_size) / (header.size() + 1) + 1;
  }
  spec.compression = o.compression;

  HPCML_ASSIGN_OR_RETURN(FeatureSetWriter writer,
                         FeatureSetWriter::Begin(path, WriterOptions{o.zone, o.lock_timeout_s}));
  HPCML_RETURN_IF_ERROR(writer.StartVersion(spec).status());

  const size_t block = 8192;
  std::vector<float> x(block * nf), y(has_label ? block : 0);
  std::vector<int64_t> e(block), t(block);
  std::vector<bool> integral(nf, true), big(nf, false);
  size_t n = 0;
  auto flush = [&]() -> Status {
    Status st = writer.Append(x.data(), has_label ? y.data() : nullptr, e.data(), t.data(), n);
    n = 0;
    return st;
  };
  for (;;) {
    HPCML_ASSIGN_OR_RETURN(bool more, csv.Next());
    if (!more) break;
    if (csv.size() != header.size()) {
      return csv.ErrorAtLine(
          fmt::format("expected {} fields as in the header, found {}", header.size(), csv.size()));
    }
    float* row = x.data() + n * nf;
    for (size_t j = 0; j < nf; ++j) {
      bool is_int = false;
      auto v = ParseFloatCell(csv.field(feature_cols[j]), &is_int);
      if (!v.ok()) {
        return csv.ErrorAt(feature_cols[j], fmt::format("{} (column \"{}\")", v.status().message(),
                                                        header[feature_cols[j]]));
      }
      row[j] = *v;
      if (!is_int) {
        integral[j] = false;
      } else if (std::fabs(*v) >= 16777216.0f) {
        big[j] = true;
      }
    }
    if (has_label) {
      auto v = ParseFloatCell(csv.field(label_col));
      if (!v.ok()) {
        return csv.ErrorAt(label_col, fmt::format("{} (label column \"{}\")", v.status().message(),
                                                  header[label_col]));
      }
      y[n] = *v;
    }
    auto id = ParseIntCell(csv.field(entity_col));
    if (!id.ok()) {
      return csv.ErrorAt(entity_col, fmt::format("{} (entity column \"{}\")", id.status().message(),
                                                 header[entity_col]));
    }
    e[n] = *id;
    auto ts = ParseTimestamp(csv.field(ts_col));
    if (!ts.ok()) {
      return csv.ErrorAt(ts_col, fmt::format("{} (timestamp column \"{}\")", ts.status().message(),
                                             header[ts_col]));
    }
    t[n] = *ts;
    if (++n == block) HPCML_RETURN_IF_ERROR(flush());
  }
  if (n > 0) HPCML_RETURN_IF_ERROR(flush());
  if (writer.rows() == 0) return InvalidArgument("{}: no data rows after the header", o.csv_path);

  NewVersion* s = writer.mutable_spec();
  for (size_t j = 0; j < nf; ++j) {
    s->feature_types[j] = integral[j] ? "int" : "float";
    if (integral[j] && big[j] && warnings != nullptr) {
      warnings->push_back(
          fmt::format("{}: column \"{}\": integers beyond 2^24 are not exact in float32",
                      o.csv_path, spec.feature_names[j]));
    }
  }
  HPCML_ASSIGN_OR_RETURN(std::string sha, csv.Sha256Hex());
  s->sources = {SourceRef{"file://" + csv_canonical, sha}};
  nlohmann::json tr = {{"op", "ingest"},
                       {"csv", "file://" + csv_canonical},
                       {"entity", o.entity_column},
                       {"timestamp", o.timestamp_column},
                       {"label", o.label_column},
                       {"features", spec.feature_names},
                       {"delimiter", std::string(1, o.delimiter)}};
  s->transform = tr.dump();
  return writer.Commit();
}

}  // namespace hpcml::featurecache
