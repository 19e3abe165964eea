#include "hpcml/featurecache/ingest.hpp"

#include <sys/stat.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "hpcml/common/json.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/featurecache/access.hpp"
#include "hpcml/featurecache/csv.hpp"
#include "hpcml/featurecache/entity_keys.hpp"
#include "hpcml/featurecache/timeutil.hpp"
#include "hpcml/featurecache/writer.hpp"

namespace hpcml::featurecache {
namespace {

// Where each role's column is in the CSV.
struct IngestColumns {
  std::vector<std::string> header;  // trimmed names
  size_t entity = 0, timestamp = 0, label = 0;
  bool has_label = false;
  std::vector<size_t> features;
};

// Refuses an empty or repeated column name in the header, except an unnamed
// first column: the row names R's write.csv writes, or pandas' index.
Status CheckHeaderNames(const CsvReader& csv, const CsvHeader& header) {
  for (size_t i = 0; i < header.size(); ++i) {
    const std::string& name = header.names()[i];
    if (name.empty() && i == 0) continue;
    if (name.empty()) return csv.ErrorAt(i, "empty column name in the header");
    if (*header.Find(name, "") != i) {
      return csv.ErrorAt(i, fmt::format("column \"{}\" appears twice in the header", name));
    }
  }
  return Status::Ok();
}

// Reads the header and finds the entity, timestamp, label and feature
// columns; the features are o.feature_columns, or every other named column
// (an unnamed first column holds row names, not data).
Result<IngestColumns> FindIngestColumns(CsvReader& csv, const IngestOptions& o) {
  HPCML_ASSIGN_OR_RETURN(CsvHeader header, CsvHeader::Read(csv));
  HPCML_RETURN_IF_ERROR(CheckHeaderNames(csv, header));
  IngestColumns c;
  c.header = header.names();
  HPCML_ASSIGN_OR_RETURN(c.entity, header.Find(o.entity_column, "entity"));
  HPCML_ASSIGN_OR_RETURN(c.timestamp, header.Find(o.timestamp_column, "timestamp"));
  c.has_label = !o.label_column.empty();
  if (c.has_label) {
    HPCML_ASSIGN_OR_RETURN(c.label, header.Find(o.label_column, "label"));
  }
  auto special = [&](size_t i) {
    return i == c.entity || i == c.timestamp || (c.has_label && i == c.label);
  };
  if (o.feature_columns.empty()) {
    for (size_t i = 0; i < c.header.size(); ++i) {
      if (!special(i) && !c.header[i].empty()) c.features.push_back(i);
    }
  }
  for (const auto& name : o.feature_columns) {
    HPCML_ASSIGN_OR_RETURN(size_t i, header.Find(name, "feature"));
    if (special(i))
      return InvalidArgument(
          "column \"{}\" cannot be both a feature and the entity, timestamp or label", name);
    c.features.push_back(i);
  }
  if (c.features.empty()) return InvalidArgument("{}: no feature columns", o.csv_path);
  return c;
}

// The new version before its rows are read: every feature typed "int" until
// a cell says otherwise.
NewVersion IngestSpec(const IngestOptions& o, const IngestColumns& c) {
  NewVersion spec;
  for (size_t i : c.features) spec.feature_names.push_back(c.header[i]);
  spec.feature_types.assign(c.features.size(), "int");
  spec.label_name = c.has_label ? o.label_column : "";
  spec.entity_name = o.entity_column;
  spec.timestamp_name = o.timestamp_column;
  spec.operation = "ingest";
  spec.classification = o.classification;
  spec.chunk_rows = o.chunk_rows;
  spec.statistics = o.statistics;
  // Every row takes at least one byte per field plus its line end.
  struct stat st;
  if (::stat(o.csv_path.c_str(), &st) == 0)
    spec.expected_rows = static_cast<uint64_t>(st.st_size) / (c.header.size() + 1) + 1;
  spec.codec = o.codec;
  spec.compression = o.compression;
  return spec;
}

// The entity column's cells as int64: the integers, or the codes of string
// keys (entity_keys.hpp), as IngestOptions::entity_type says.
class EntityCells {
 public:
  static Result<EntityCells> Make(const std::string& type) {
    if (type != "auto" && type != "int" && type != "string")
      return InvalidArgument("--entity-type {}: not auto, int or string", type);
    EntityCells c;
    c.type_ = type;
    c.decided_by_first_row_ = type == "auto";
    return c;
  }

  Result<int64_t> Parse(std::string_view cell) {
    if (type_ == "auto") type_ = ParseIntCell(cell).ok() ? "int" : "string";
    if (type_ == "string") return keys_.Encode(cell);
    auto v = ParseIntCell(cell);
    if (!v.ok() && decided_by_first_row_) {
      return InvalidArgument(
          "{}; the first row's entity was an integer, so integers were expected (use "
          "--entity-type string for string keys)",
          v.status().message());
    }
    return v;
  }
  // The version's entity type and keys (after the last row).
  void Finish(NewVersion* spec) {
    spec->entity_type = type_ == "string" ? "string" : "int";
    spec->entity_keys = keys_.keys();
  }

 private:
  std::string type_;
  bool decided_by_first_row_ = false;
  EntityDictionary keys_;
};

// Rows parsed from the CSV, a block at a time, and what the cells said of
// each feature column's type.
class RowBlock {
 public:
  static constexpr size_t kRows = 8192;

  RowBlock(const IngestColumns& c, EntityCells* entities, const NaValues* na)
      : c_(c),
        entities_(entities),
        na_(na),
        nf_(c.features.size()),
        x_(kRows * nf_),
        y_(c.has_label ? kRows : 0),
        e_(kRows),
        t_(kRows),
        integral_(nf_, true),
        big_(nf_, false),
        missing_(nf_, 0) {}

  // Parses the current record of `csv` into the next row; errors name the
  // cell and its column.
  Status Parse(const CsvReader& csv);
  bool full() const { return n_ == kRows; }
  // Appends the rows, if any, to `writer` and empties the block.
  Status Flush(FeatureSetWriter& writer) {
    if (n_ == 0) return Status::Ok();
    Status st =
        writer.Append(x_.data(), c_.has_label ? y_.data() : nullptr, e_.data(), t_.data(), n_);
    n_ = 0;
    return st;
  }
  bool integral(size_t j) const { return integral_[j]; }
  // Missing cells of feature j so far (empty, an NA word or nan).
  uint64_t missing(size_t j) const { return missing_[j]; }
  // An integral column with a value float32 cannot hold exactly.
  bool big(size_t j) const { return big_[j]; }

 private:
  // `csv`'s error at `col` for `status`, naming the column and its `role`.
  Status CellError(const CsvReader& csv, size_t col, const Status& status, const char* role) const {
    return csv.ErrorAt(col,
                       fmt::format("{} ({}column \"{}\")", status.message(), role, c_.header[col]));
  }

  const IngestColumns& c_;
  EntityCells* entities_;
  const NaValues* na_;
  size_t nf_;
  size_t n_ = 0;
  std::vector<float> x_, y_;
  std::vector<int64_t> e_, t_;
  std::vector<bool> integral_, big_;
  std::vector<uint64_t> missing_;
};

Status RowBlock::Parse(const CsvReader& csv) {
  if (csv.size() != c_.header.size()) {
    return csv.ErrorAtLine(
        fmt::format("expected {} fields as in the header, found {}", c_.header.size(), csv.size()));
  }
  float* row = x_.data() + n_ * nf_;
  for (size_t j = 0; j < nf_; ++j) {
    bool is_int = false, absent = false;
    auto v = ParseFloatCell(csv.field(c_.features[j]), &is_int, na_, &absent);
    if (!v.ok()) return CellError(csv, c_.features[j], v.status(), "");
    row[j] = *v;
    missing_[j] += absent ? 1 : 0;
    if (!is_int) {
      integral_[j] = false;
    } else if (std::fabs(*v) >= 16777216.0f) {
      big_[j] = true;
    }
  }
  if (c_.has_label) {
    std::string_view cell = TrimBlanks(csv.field(c_.label));
    if (cell.empty() || na_->Contains(cell))
      return CellError(csv, c_.label,
                       InvalidArgument("missing label \"{}\" (every row needs its label)", cell),
                       "label ");
    auto v = ParseFloatCell(cell);
    if (!v.ok()) return CellError(csv, c_.label, v.status(), "label ");
    y_[n_] = *v;
  }
  auto id = entities_->Parse(csv.field(c_.entity));
  if (!id.ok()) return CellError(csv, c_.entity, id.status(), "entity ");
  e_[n_] = *id;
  auto ts = ParseTimestamp(csv.field(c_.timestamp));
  if (!ts.ok()) return CellError(csv, c_.timestamp, ts.status(), "timestamp ");
  t_[n_] = *ts;
  ++n_;
  return Status::Ok();
}

// The recorded transform of an ingest.
std::string IngestTransform(const IngestOptions& o, const std::string& csv_canonical,
                            const std::vector<std::string>& feature_names, const RowBlock& rows) {
  nlohmann::json missing = nlohmann::json::object();
  for (size_t j = 0; j < feature_names.size(); ++j)
    if (rows.missing(j) > 0) missing[feature_names[j]] = rows.missing(j);
  nlohmann::json tr = {{"op", "ingest"},
                       {"csv", "file://" + csv_canonical},
                       {"entity", o.entity_column},
                       {"entity_type", o.entity_type},
                       {"timestamp", o.timestamp_column},
                       {"label", o.label_column},
                       {"features", feature_names},
                       {"delimiter", std::string(1, o.delimiter)},
                       {"na_values", o.na_values.words()},
                       {"missing_cells", missing}};
  return JsonText(tr);
}

// Sets each feature's type from its cells, warning of integers beyond 2^24.
void SetFeatureTypes(const IngestOptions& o, const RowBlock& rows, NewVersion* s,
                     std::vector<std::string>* warnings) {
  for (size_t j = 0; j < s->feature_types.size(); ++j) {
    s->feature_types[j] = rows.integral(j) ? "int" : "float";
    if (rows.integral(j) && rows.big(j) && warnings != nullptr) {
      warnings->push_back(
          fmt::format("{}: column \"{}\": integers beyond 2^24 are not exact in float32",
                      o.csv_path, s->feature_names[j]));
    }
  }
}

// Checks the options and that the access policy lets us read the CSV;
// returns the CSV's canonical path.
Result<std::string> CheckIngest(const IngestOptions& o) {
  if (o.entity_column.empty() || o.timestamp_column.empty()) {
    return InvalidArgument("ingest needs the entity and timestamp columns");
  }
  if (o.classification.empty()) return InvalidArgument("ingest needs a classification");
  HPCML_RETURN_IF_ERROR(ClassificationLevel(o.classification).status());
  AccessContext ctx = AccessContext::FromEnvironment();
  HPCML_ASSIGN_OR_RETURN(std::string csv_canonical, CanonicalPath(o.csv_path, /*must_exist=*/true));
  HPCML_RETURN_IF_ERROR(CheckPath(ctx, csv_canonical, "read CSV"));
  return csv_canonical;
}

}  // namespace

Result<VersionInfo> Ingest(const std::string& path, const IngestOptions& o,
                           std::vector<std::string>* warnings) {
  HPCML_ASSIGN_OR_RETURN(std::string csv_canonical, CheckIngest(o));
  HPCML_ASSIGN_OR_RETURN(CsvReader csv, CsvReader::Open(o.csv_path, o.delimiter));
  HPCML_ASSIGN_OR_RETURN(IngestColumns cols, FindIngestColumns(csv, o));
  NewVersion spec = IngestSpec(o, cols);
  HPCML_ASSIGN_OR_RETURN(FeatureSetWriter writer,
                         FeatureSetWriter::Begin(path, WriterOptions{o.zone, o.lock_timeout_s}));
  HPCML_RETURN_IF_ERROR(writer.StartVersion(spec).status());

  HPCML_ASSIGN_OR_RETURN(EntityCells entities, EntityCells::Make(o.entity_type));
  RowBlock rows(cols, &entities, &o.na_values);
  for (;;) {
    HPCML_ASSIGN_OR_RETURN(bool more, csv.Next());
    if (!more) break;
    HPCML_RETURN_IF_ERROR(rows.Parse(csv));
    if (rows.full()) HPCML_RETURN_IF_ERROR(rows.Flush(writer));
  }
  HPCML_RETURN_IF_ERROR(rows.Flush(writer));
  if (writer.rows() == 0) return InvalidArgument("{}: no data rows after the header", o.csv_path);

  NewVersion* s = writer.mutable_spec();
  SetFeatureTypes(o, rows, s, warnings);
  entities.Finish(s);
  HPCML_ASSIGN_OR_RETURN(std::string sha, csv.Sha256Hex());
  s->sources = {SourceRef{"file://" + csv_canonical, sha}};
  s->transform = IngestTransform(o, csv_canonical, spec.feature_names, rows);
  if (o.before_publish) {
    HPCML_ASSIGN_OR_RETURN(VersionStats stats, writer.Statistics());
    HPCML_RETURN_IF_ERROR(o.before_publish(stats));  // the writer aborts when it goes
  }
  return writer.Commit();
}

}  // namespace hpcml::featurecache
