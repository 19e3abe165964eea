#include "hpcml/featurecache/ingest.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/parallel.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/common/toml.hpp"
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
  std::shared_ptr<CsvHeader> header_index;
  size_t entity = 0, timestamp = 0, label = 0, available = 0;
  bool has_label = false, has_available = false;
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
  c.header_index = std::make_shared<CsvHeader>(header);
  HPCML_ASSIGN_OR_RETURN(c.entity, header.Find(o.entity_column, "entity"));
  HPCML_ASSIGN_OR_RETURN(c.timestamp, header.Find(o.timestamp_column, "timestamp"));
  c.has_label = !o.label_column.empty();
  if (c.has_label) {
    HPCML_ASSIGN_OR_RETURN(c.label, header.Find(o.label_column, "label"));
  }
  c.has_available = !o.available_column.empty();
  if (c.has_available) {
    HPCML_ASSIGN_OR_RETURN(c.available, header.Find(o.available_column, "availability"));
    if (c.available == c.entity || c.available == c.timestamp ||
        (c.has_label && c.available == c.label))
      return InvalidArgument(
          "column \"{}\" cannot be both the availability time and the entity, "
          "timestamp or label",
          o.available_column);
  }
  auto special = [&](size_t i) {
    return i == c.entity || i == c.timestamp || (c.has_label && i == c.label) ||
           (c.has_available && i == c.available);
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
          "column \"{}\" cannot be both a feature and the entity, timestamp, label or "
          "availability time",
          name);
    c.features.push_back(i);
  }
  if (c.features.empty()) return InvalidArgument("{}: no feature columns", o.csv_path);
  return c;
}

// Each feature column's kind and missing words, and the label's kind.
struct ColumnPlan {
  std::vector<std::string> kinds;      // per feature (kKinds)
  std::vector<const NaValues*> na;     // per feature
  const NaValues* label_na = nullptr;  // the label's
  bool label_classes = false;          // a string label: classes
  std::vector<std::string> classes;    // sorted, when label_classes
  std::vector<std::string> inferred;   // the columns whose kind was inferred
};

// The shapes a column's cells took in the first pass, and the kind they
// make: any text, or true/false words among numbers: category; only
// true/false words: bool; only integers: int; otherwise float (a column with
// no value at all too).
class KindVotes {
 public:
  void Add(CellShape s) { seen_ |= static_cast<uint8_t>(1u << static_cast<unsigned>(s)); }
  void Merge(const KindVotes& o) { seen_ |= o.seen_; }
  bool decided() const { return has(CellShape::kText); }  // nothing changes a category
  std::string Kind() const {
    const bool number = has(CellShape::kInt) || has(CellShape::kFloat);
    if (has(CellShape::kText) || (has(CellShape::kBool) && number)) return "category";
    if (has(CellShape::kBool)) return "bool";
    if (has(CellShape::kInt) && !has(CellShape::kFloat)) return "int";
    return "float";
  }

 private:
  bool has(CellShape s) const { return (seen_ >> static_cast<unsigned>(s)) & 1u; }
  uint8_t seen_ = 0;
};

// "<csv>: line N: expected F fields as in the header, found G".
Status CheckFieldCount(const CsvReader& csv, size_t header) {
  if (csv.size() == header) return Status::Ok();
  return csv.ErrorAtLine(
      fmt::format("expected {} fields as in the header, found {}", header, csv.size()));
}

// What the first pass saw: each open column's votes, the label's, and its
// distinct texts (up to one more than classes may have).
class KindTally {
 public:
  KindTally(const IngestOptions& o, const IngestColumns& c, const ColumnPlan& plan)
      : o_(&o), c_(&c), plan_(&plan), votes_(c.features.size()) {
    for (size_t j = 0; j < votes_.size(); ++j)
      if (plan.kinds[j].empty()) open_.push_back(j);
    label_open_ = c.has_label && !o.column_kinds.contains(o.label_column);
    collect_ = c.has_label && (label_open_ || plan.label_classes);
  }

  // The current record of `csv`.
  Status Add(const CsvReader& csv) {
    HPCML_RETURN_IF_ERROR(CheckFieldCount(csv, c_->header.size()));
    for (size_t k = 0; k < open_.size();) {
      const size_t j = open_[k];
      votes_[j].Add(ClassifyCell(csv.field(c_->features[j]), *plan_->na[j]));
      if (votes_[j].decided()) {
        open_[k] = open_.back();  // a category already: no need to look further
        open_.pop_back();
      } else {
        ++k;
      }
    }
    if (collect_) {
      std::string_view cell = TrimBlanks(csv.field(c_->label));
      if (label_open_) label_votes_.Add(ClassifyCell(cell, *plan_->label_na));
      if (!cell.empty() && !plan_->label_na->Contains(cell)) AddClass(cell);
    }
    return Status::Ok();
  }
  // Adds what another tally (of another piece of the file) saw.
  void Merge(const KindTally& t) {
    for (size_t j = 0; j < votes_.size(); ++j) votes_[j].Merge(t.votes_[j]);
    label_votes_.Merge(t.label_votes_);
    for (const std::string& cls : t.classes_) AddClass(cls);
  }
  // The inferred kinds and classes into `plan`.
  Status Finish(ColumnPlan* plan) const {
    for (size_t j = 0; j < votes_.size(); ++j) {
      if (!plan->kinds[j].empty()) continue;
      plan->kinds[j] = votes_[j].Kind();
      plan->inferred.push_back(c_->header[c_->features[j]]);
    }
    if (label_open_) plan->label_classes = label_votes_.Kind() == "category";
    if (plan->label_classes) {
      if (classes_.size() > kMaxLabelClasses) {
        return InvalidArgument(
            "{}: label column \"{}\" has more than {} distinct values (not classes)", o_->csv_path,
            o_->label_column, kMaxLabelClasses);
      }
      plan->classes.assign(classes_.begin(), classes_.end());
    }
    return Status::Ok();
  }

 private:
  void AddClass(std::string_view cell) {
    if (classes_.size() <= kMaxLabelClasses && !classes_.contains(cell)) classes_.emplace(cell);
  }
  const IngestOptions* o_;
  const IngestColumns* c_;
  const ColumnPlan* plan_;
  std::vector<KindVotes> votes_;
  std::vector<size_t> open_;  // features still to infer
  KindVotes label_votes_;
  std::set<std::string, std::less<>> classes_;
  bool label_open_ = false, collect_ = false;
};

// The first pass: the kind of every feature column whose kind was not
// given, and the sorted class names of a string label. A scan: no UTF-8
// check and no digest (the second pass does both); on `threads`, pieces of
// the file at once. Returns the file's identity at its end, so the second
// pass can tell whether it changed.
Result<std::string> InferKinds(const IngestOptions& o, const IngestColumns& c, ColumnPlan* plan,
                               unsigned threads) {
  HPCML_ASSIGN_OR_RETURN(CsvReader csv,
                         CsvReader::Open(o.csv_path, o.delimiter, CsvReader::Mode::kScan));
  HPCML_RETURN_IF_ERROR(CsvHeader::Read(csv).status());
  KindTally all(o, c, *plan);
  if (threads <= 1) {
    for (;;) {
      HPCML_ASSIGN_OR_RETURN(bool more, csv.Next());
      if (!more) break;
      HPCML_RETURN_IF_ERROR(all.Add(csv));
    }
  } else {
    std::vector<KindTally> piece(threads, all);
    Status read = csv.ReadRestInParallel(
        threads,
        [&](unsigned p, CsvReader& r) {
          piece[p] = KindTally(o, c, *plan);
          for (;;) {
            HPCML_ASSIGN_OR_RETURN(bool more, r.Next());
            if (!more) return Status::Ok();
            HPCML_RETURN_IF_ERROR(piece[p].Add(r));
          }
        },
        [&](unsigned n) {
          for (unsigned p = 0; p < n; ++p) all.Merge(piece[p]);
          return Status::Ok();
        });
    HPCML_RETURN_IF_ERROR(read);
  }
  HPCML_RETURN_IF_ERROR(all.Finish(plan));
  return csv.Identity();
}

// The kinds and missing words of the columns: given, or left empty to infer.
Result<ColumnPlan> PlanColumns(const IngestOptions& o, const IngestColumns& c,
                               const CsvHeader& header) {
  for (const auto& [name, kind] : o.column_kinds) {
    HPCML_ASSIGN_OR_RETURN(size_t i, header.Find(name, "typed"));
    if (i == c.entity || i == c.timestamp) {
      return InvalidArgument(
          "--types: \"{}\" is the {} column, which has no kind (entities: "
          "--entity-type)",
          name, i == c.entity ? "entity" : "timestamp");
    }
    HPCML_RETURN_IF_ERROR(ValidateKind(kind).WithContext(fmt::format("column \"{}\"", name)));
  }
  for (const auto& [name, na] : o.column_na_values)
    HPCML_RETURN_IF_ERROR(header.Find(name, "--column-na-values").status());
  ColumnPlan plan;
  auto na_of = [&](const std::string& name) {
    auto it = o.column_na_values.find(name);
    return it == o.column_na_values.end() ? &o.na_values : &it->second;
  };
  for (size_t i : c.features) {
    auto it = o.column_kinds.find(c.header[i]);
    plan.kinds.push_back(it == o.column_kinds.end() ? "" : it->second);
    plan.na.push_back(na_of(c.header[i]));
  }
  if (c.has_label) {
    plan.label_na = na_of(o.label_column);
    auto it = o.column_kinds.find(o.label_column);
    plan.label_classes = it != o.column_kinds.end() && it->second == "category";
  }
  return plan;
}

// The new version before its rows are read.
NewVersion IngestSpec(const IngestOptions& o, const IngestColumns& c, const ColumnPlan& plan) {
  NewVersion spec;
  for (size_t i : c.features) spec.feature_names.push_back(c.header[i]);
  spec.feature_types = plan.kinds;
  spec.label_name = c.has_label ? o.label_column : "";
  spec.label_classes = plan.classes;
  spec.entity_name = o.entity_column;
  spec.timestamp_name = o.timestamp_column;
  spec.available_name = o.available_column;
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
  // An empty copy with the type decided (for a piece of the file).
  EntityCells Fork() const {
    EntityCells c;
    c.type_ = type_;
    c.decided_by_first_row_ = decided_by_first_row_;
    return c;
  }
  // The codes of a fork's keys among these (added when new); empty for int
  // entities.
  Result<std::vector<int64_t>> Absorb(const EntityCells& fork) {
    std::vector<int64_t> code;
    for (const std::string& k : fork.keys_.keys()) {
      HPCML_ASSIGN_OR_RETURN(int64_t c, keys_.Encode(k));
      code.push_back(c);
    }
    return code;
  }
  // The version's entity type and keys (after the last row).
  void Finish(NewVersion* spec) {
    spec->entity_type = type_ == "string" ? "string" : "int";
    spec->entity_keys = keys_.keys();
  }

 private:
  std::string type_;
  bool decided_by_first_row_ = false;
  StringDictionary keys_;
};

// Rows parsed from the CSV, a block at a time: each feature cell as its
// column's kind says (format.hpp), and the count of missing cells.
class ParsedRows {
 public:
  static constexpr size_t kRows = 8192;

  // `grow`: the block grows instead of filling up (a piece of the file,
  // appended once merged).
  ParsedRows(const IngestColumns& c, const ColumnPlan& plan, EntityCells* entities,
             bool grow = false)
      : grow_(grow),
        c_(c),
        plan_(plan),
        entities_(entities),
        nf_(c.features.size()),
        int_slot_(nf_, -1),
        dictionaries_(nf_),
        missing_(nf_, 0) {
    for (size_t j = 0; j < nf_; ++j) {
      if (plan.kinds[j] == "int") int_slot_[j] = static_cast<int>(ni_++);
      kind_.push_back(KindOf(plan.kinds[j]));
    }
    for (size_t k = 0; k < plan.classes.size(); ++k) class_code_.emplace(plan.classes[k], k);
    x_.resize(kRows * nf_);
    y_.resize(c.has_label ? kRows : 0);
    e_.resize(kRows);
    t_.resize(kRows);
    a_.resize(c.has_available ? kRows : 0);
    i_.resize(kRows * ni_);
  }

  // Parses the current record of `csv` into the next row; errors name the
  // cell, its column and its kind.
  Status Parse(const CsvReader& csv);
  bool full() const { return n_ == capacity_; }
  // Empties the block, its counts and dictionaries (a piece's, reused).
  void Clear() {
    n_ = 0;
    std::fill(missing_.begin(), missing_.end(), 0);
    for (auto& d : dictionaries_) d = StringDictionary();
  }
  // Takes over the counts and dictionaries of `piece`, the rows parsed from
  // the next piece of the file, recoding its categories and entity keys
  // (whose codes among `entities` are `entity_code`) to match; then its
  // rows may be flushed.
  Status Absorb(ParsedRows& piece, const std::vector<int64_t>& entity_code);
  // Appends the rows, if any, to `writer` and empties the block.
  Status Flush(FeatureSetWriter& writer) {
    if (n_ == 0) return Status::Ok();
    Status st =
        writer.Append(x_.data(), c_.has_label ? y_.data() : nullptr, e_.data(), t_.data(), n_,
                      ni_ > 0 ? i_.data() : nullptr, c_.has_available ? a_.data() : nullptr);
    n_ = 0;
    return st;
  }
  // Missing cells of feature j so far (empty, an NA word or nan).
  uint64_t missing(size_t j) const { return missing_[j]; }
  // Per feature, its categories (empty unless a category feature).
  std::vector<std::vector<std::string>> Categories() const {
    std::vector<std::vector<std::string>> out;
    for (const auto& d : dictionaries_) out.push_back(d.keys());
    return out;
  }

 private:
  enum class K { kFloat, kInt, kBool, kCategory };
  static K KindOf(const std::string& k) {
    return k == "int"        ? K::kInt
           : k == "bool"     ? K::kBool
           : k == "category" ? K::kCategory
                             : K::kFloat;
  }
  // One feature cell into `*x` (and its int slot); `*absent` when missing.
  Status ParseFeature(size_t j, std::string_view text, float* x, bool* absent);
  Status ParseLabel(const CsvReader& csv);
  // `csv`'s error at `col` for `status`, naming the column, its `role`
  // and, for features, its kind and how it was set.
  Status CellError(const CsvReader& csv, size_t col, const Status& status, const char* role) const {
    return csv.ErrorAt(col,
                       fmt::format("{} ({}column \"{}\")", status.message(), role, c_.header[col]));
  }
  Status FeatureError(const CsvReader& csv, size_t j, const Status& status) const {
    const std::string& name = c_.header[c_.features[j]];
    const bool inferred =
        std::find(plan_.inferred.begin(), plan_.inferred.end(), name) != plan_.inferred.end();
    return csv.ErrorAt(c_.features[j],
                       fmt::format("{} (column \"{}\" is {}{})", status.message(), name,
                                   plan_.kinds[j], inferred ? "" : ", as --types says"));
  }

  void Grow();

  bool grow_ = false;
  size_t capacity_ = kRows;
  const IngestColumns& c_;
  const ColumnPlan& plan_;
  EntityCells* entities_;
  size_t nf_, ni_ = 0;
  size_t n_ = 0;
  std::vector<K> kind_;
  std::vector<int> int_slot_;  // per feature: its column of int values, or -1
  std::vector<StringDictionary> dictionaries_;
  std::map<std::string, size_t, std::less<>> class_code_;
  std::vector<float> x_, y_;
  std::vector<int64_t> e_, t_, i_, a_;
  std::vector<uint64_t> missing_;
};

Status ParsedRows::ParseFeature(size_t j, std::string_view text, float* x, bool* absent) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  int64_t* slot = int_slot_[j] >= 0 ? i_.data() + n_ * ni_ + int_slot_[j] : nullptr;
  if (kind_[j] == K::kFloat) {
    HPCML_ASSIGN_OR_RETURN(*x, ParseFloatCell(text, nullptr, plan_.na[j], absent));
    return Status::Ok();
  }
  std::string_view s = TrimBlanks(text);
  *absent = s.empty() || plan_.na[j]->Contains(s);
  if (*absent) {
    *x = kNaN;
    if (slot != nullptr) *slot = kIntMissing;
    return Status::Ok();
  }
  switch (kind_[j]) {
    case K::kInt: {
      HPCML_ASSIGN_OR_RETURN(int64_t v, ParseIntCell(s));
      if (v == kIntMissing) return InvalidArgument("{} is reserved for missing values", v);
      *slot = v;
      *x = static_cast<float>(v);
      return Status::Ok();
    }
    case K::kBool: {
      HPCML_ASSIGN_OR_RETURN(bool v, ParseBoolCell(s));
      *x = v ? 1.0f : 0.0f;
      return Status::Ok();
    }
    case K::kCategory:
    default: {
      HPCML_ASSIGN_OR_RETURN(int64_t code, dictionaries_[j].Encode(s));
      if (static_cast<uint64_t>(code) >= kMaxCategories)
        return InvalidArgument("more than {} categories", kMaxCategories);
      *x = static_cast<float>(code);
      return Status::Ok();
    }
  }
}

Status ParsedRows::ParseLabel(const CsvReader& csv) {
  std::string_view cell = TrimBlanks(csv.field(c_.label));
  if (cell.empty() || plan_.label_na->Contains(cell))
    return CellError(csv, c_.label,
                     InvalidArgument("missing label \"{}\" (every row needs its label)", cell),
                     "label ");
  if (plan_.label_classes) {
    auto it = class_code_.find(cell);
    if (it == class_code_.end())  // the file changed after the first pass
      return CellError(csv, c_.label, InvalidArgument("\"{}\" is not a class", cell), "label ");
    y_[n_] = static_cast<float>(it->second);
    return Status::Ok();
  }
  auto v = ParseNumericLabel(cell);
  if (!v.ok()) return CellError(csv, c_.label, v.status(), "label ");
  y_[n_] = *v;
  return Status::Ok();
}

void ParsedRows::Grow() {
  capacity_ *= 2;
  x_.resize(capacity_ * nf_);
  if (!y_.empty()) y_.resize(capacity_);
  e_.resize(capacity_);
  t_.resize(capacity_);
  if (!a_.empty()) a_.resize(capacity_);
  i_.resize(capacity_ * ni_);
}

Status ParsedRows::Absorb(ParsedRows& piece, const std::vector<int64_t>& entity_code) {
  for (size_t j = 0; j < nf_; ++j) {
    missing_[j] += piece.missing_[j];
    if (kind_[j] != K::kCategory) continue;
    std::vector<float> code;
    for (const std::string& k : piece.dictionaries_[j].keys()) {
      HPCML_ASSIGN_OR_RETURN(int64_t c, dictionaries_[j].Encode(k));
      if (static_cast<uint64_t>(c) >= kMaxCategories)
        return InvalidArgument("column \"{}\": more than {} categories", c_.header[c_.features[j]],
                               kMaxCategories);
      code.push_back(static_cast<float>(c));
    }
    for (size_t i = 0; i < piece.n_; ++i) {
      float& x = piece.x_[i * nf_ + j];
      if (!std::isnan(x)) x = code[static_cast<size_t>(x)];
    }
  }
  if (!entity_code.empty())
    for (size_t i = 0; i < piece.n_; ++i) piece.e_[i] = entity_code[piece.e_[i]];
  return Status::Ok();
}

Status ParsedRows::Parse(const CsvReader& csv) {
  HPCML_RETURN_IF_ERROR(CheckFieldCount(csv, c_.header.size()));
  if (grow_ && n_ == capacity_) Grow();
  float* row = x_.data() + n_ * nf_;
  for (size_t j = 0; j < nf_; ++j) {
    bool absent = false;
    Status st = ParseFeature(j, csv.field(c_.features[j]), &row[j], &absent);
    if (!st.ok()) return FeatureError(csv, j, st);
    missing_[j] += absent ? 1 : 0;
  }
  if (c_.has_label) HPCML_RETURN_IF_ERROR(ParseLabel(csv));
  auto id = entities_->Parse(csv.field(c_.entity));
  if (!id.ok()) return CellError(csv, c_.entity, id.status(), "entity ");
  e_[n_] = *id;
  auto ts = ParseTimestamp(csv.field(c_.timestamp));
  if (!ts.ok()) return CellError(csv, c_.timestamp, ts.status(), "timestamp ");
  t_[n_] = *ts;
  if (c_.has_available) {
    auto at = ParseTimestamp(csv.field(c_.available));
    if (!at.ok()) return CellError(csv, c_.available, at.status(), "availability ");
    a_[n_] = *at;
  }
  ++n_;
  return Status::Ok();
}

// The recorded transform of an ingest.
std::string IngestTransform(const IngestOptions& o, const std::string& csv_canonical,
                            const std::vector<std::string>& feature_names, const ColumnPlan& plan,
                            const ParsedRows& rows) {
  nlohmann::json missing = nlohmann::json::object();
  for (size_t j = 0; j < feature_names.size(); ++j)
    if (rows.missing(j) > 0) missing[feature_names[j]] = rows.missing(j);
  nlohmann::json column_na = nlohmann::json::object();
  for (const auto& [name, na] : o.column_na_values) column_na[name] = na.words();
  nlohmann::json tr = {{"op", "ingest"},
                       {"csv", o.source_uri.empty() ? "file://" + csv_canonical : o.source_uri},
                       {"entity", o.entity_column},
                       {"entity_type", o.entity_type},
                       {"timestamp", o.timestamp_column},
                       {"available", o.available_column},
                       {"label", o.label_column},
                       {"features", feature_names},
                       {"delimiter", std::string(1, o.delimiter)},
                       {"na_values", o.na_values.words()},
                       {"column_na_values", column_na},
                       {"types_given", o.column_kinds},
                       {"types_inferred", plan.inferred},
                       {"missing_cells", missing}};
  return JsonText(tr);
}

// Notes on columns with no value at all (inferred as float).
void WarnEmptyColumns(const IngestOptions& o, const NewVersion& s, uint64_t rows,
                      const ParsedRows& parsed, std::vector<std::string>* warnings) {
  if (warnings == nullptr) return;
  for (size_t j = 0; j < s.feature_names.size(); ++j) {
    if (parsed.missing(j) == rows) {
      warnings->push_back(
          fmt::format("{}: column \"{}\" has no value in any row", o.csv_path, s.feature_names[j]));
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

Result<std::map<std::string, std::string>> ParseColumnKinds(std::string_view list) {
  std::map<std::string, std::string> out;
  for (std::string_view entry : SplitFields(list, ',')) {
    entry = TrimBlanks(entry);
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos)
      return InvalidArgument("\"{}\": write column=kind (float, int, bool or category)", entry);
    std::string name(TrimBlanks(entry.substr(0, eq))), kind(TrimBlanks(entry.substr(eq + 1)));
    HPCML_RETURN_IF_ERROR(ValidateKind(kind).WithContext(fmt::format("\"{}\"", entry)));
    if (name.empty() || !out.emplace(name, kind).second)
      return InvalidArgument("\"{}\": an empty or repeated column name", entry);
  }
  return out;
}

Result<std::map<std::string, std::string>> LoadColumnKinds(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  HPCML_ASSIGN_OR_RETURN(toml::table root, ParseToml(text, path));
  const toml::table* t = &root;
  if (const toml::table* columns = root["columns"].as_table(); columns != nullptr) t = columns;
  std::map<std::string, std::string> out;
  for (const auto& [key, node] : *t) {
    const auto* kind = node.as_string();
    Status st = kind == nullptr ? InvalidArgument("not a string") : ValidateKind(kind->get());
    if (!st.ok()) {
      return InvalidArgument("{}:{}: column \"{}\": {}", path, key.source().begin.line, key.str(),
                             st.message());
    }
    out.emplace(std::string(key.str()), kind->get());
  }
  return out;
}

Result<std::pair<std::string, NaValues>> ParseColumnNaValues(std::string_view entry) {
  const size_t eq = entry.find('=');
  std::string name(TrimBlanks(entry.substr(0, eq)));
  if (eq == std::string_view::npos || name.empty())
    return InvalidArgument("\"{}\": write column=WORD,WORD (or column= for empty cells only)",
                           entry);
  HPCML_ASSIGN_OR_RETURN(NaValues na, NaValues::Parse(entry.substr(eq + 1)));
  return std::make_pair(std::move(name), std::move(na));
}

namespace {

// The second pass on `threads`: the first record on this thread (it
// decides an "auto" entity type), then pieces of the file at once, each
// with its own dictionaries, merged in file order and appended. A merge
// that fails (too many categories once the pieces' are put together) sets
// *redo: the caller reads the file again on one thread, whose error names
// the line.
Status ParseInParallel(CsvReader& csv, const IngestColumns& cols, const ColumnPlan& plan,
                       unsigned threads, EntityCells& entities, ParsedRows& rows,
                       FeatureSetWriter& writer, bool* redo) {
  HPCML_ASSIGN_OR_RETURN(bool more, csv.Next());
  if (!more) return Status::Ok();
  HPCML_RETURN_IF_ERROR(rows.Parse(csv));
  HPCML_RETURN_IF_ERROR(rows.Flush(writer));
  struct Piece {
    EntityCells entities;
    std::unique_ptr<ParsedRows> rows;
  };
  std::vector<Piece> pieces(threads);
  for (Piece& p : pieces) {
    p.entities = entities.Fork();
    p.rows = std::make_unique<ParsedRows>(cols, plan, &p.entities, /*grow=*/true);
  }
  return csv.ReadRestInParallel(
      threads,
      [&](unsigned p, CsvReader& r) {
        Piece& pc = pieces[p];
        pc.entities = entities.Fork();
        pc.rows->Clear();
        for (;;) {
          HPCML_ASSIGN_OR_RETURN(bool next, r.Next());
          if (!next) return Status::Ok();
          HPCML_RETURN_IF_ERROR(pc.rows->Parse(r));
        }
      },
      [&](unsigned n) {
        for (unsigned p = 0; p < n; ++p) {
          Piece& pc = pieces[p];
          auto code = entities.Absorb(pc.entities);
          Status st = code.ok() ? rows.Absorb(*pc.rows, *code) : code.status();
          if (!st.ok()) {
            *redo = true;
            return st;
          }
          HPCML_RETURN_IF_ERROR(pc.rows->Flush(writer));
        }
        return Status::Ok();
      });
}

Result<VersionInfo> IngestOn(const std::string& path, const IngestOptions& o, unsigned threads,
                             std::vector<std::string>* warnings, bool* redo) {
  HPCML_ASSIGN_OR_RETURN(std::string csv_canonical, CheckIngest(o));
  HPCML_ASSIGN_OR_RETURN(CsvReader csv, CsvReader::Open(o.csv_path, o.delimiter));
  HPCML_ASSIGN_OR_RETURN(IngestColumns cols, FindIngestColumns(csv, o));
  HPCML_ASSIGN_OR_RETURN(ColumnPlan plan, PlanColumns(o, cols, *cols.header_index));
  const bool infer =
      std::find(plan.kinds.begin(), plan.kinds.end(), "") != plan.kinds.end() ||
      (cols.has_label && (!o.column_kinds.contains(o.label_column) || plan.label_classes));
  std::string first_pass;
  if (infer) {
    HPCML_ASSIGN_OR_RETURN(first_pass, InferKinds(o, cols, &plan, threads));
  }
  NewVersion spec = IngestSpec(o, cols, plan);
  HPCML_ASSIGN_OR_RETURN(
      FeatureSetWriter writer,
      FeatureSetWriter::Begin(path, WriterOptions{o.zone, o.lock_timeout_s, threads}));
  HPCML_RETURN_IF_ERROR(writer.StartVersion(spec).status());

  HPCML_ASSIGN_OR_RETURN(EntityCells entities, EntityCells::Make(o.entity_type));
  ParsedRows rows(cols, plan, &entities);
  if (threads > 1) {
    HPCML_RETURN_IF_ERROR(ParseInParallel(csv, cols, plan, threads, entities, rows, writer, redo));
  } else {
    for (;;) {
      HPCML_ASSIGN_OR_RETURN(bool more, csv.Next());
      if (!more) break;
      HPCML_RETURN_IF_ERROR(rows.Parse(csv));
      if (rows.full()) HPCML_RETURN_IF_ERROR(rows.Flush(writer));
    }
  }
  HPCML_RETURN_IF_ERROR(rows.Flush(writer));
  if (writer.rows() == 0) return InvalidArgument("{}: no data rows after the header", o.csv_path);
  HPCML_ASSIGN_OR_RETURN(std::string sha, csv.Sha256Hex());
  HPCML_ASSIGN_OR_RETURN(std::string identity, csv.Identity());
  if (infer && identity != first_pass)
    return FailedPrecondition("{}: the file changed while it was read; nothing added", o.csv_path);

  NewVersion* s = writer.mutable_spec();
  WarnEmptyColumns(o, *s, writer.rows(), rows, warnings);
  entities.Finish(s);
  s->categories = rows.Categories();
  s->sources = {SourceRef{o.source_uri.empty() ? "file://" + csv_canonical : o.source_uri, sha}};
  s->transform = IngestTransform(o, csv_canonical, spec.feature_names, plan, rows);
  if (o.before_publish) {
    HPCML_ASSIGN_OR_RETURN(VersionStats stats, writer.Statistics());
    HPCML_RETURN_IF_ERROR(o.before_publish(stats));  // the writer aborts when it goes
  }
  return writer.Commit();
}

}  // namespace

Result<VersionInfo> Ingest(const std::string& path, const IngestOptions& o,
                           std::vector<std::string>* warnings) {
  const unsigned threads = o.threads == 0 ? AvailableCpus() : o.threads;
  bool redo = false;
  auto r = IngestOn(path, o, threads, warnings, &redo);
  if (!r.ok() && redo) return IngestOn(path, o, 1, warnings, &redo);
  return r;
}

}  // namespace hpcml::featurecache
