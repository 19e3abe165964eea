#include "inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "hpcml/common/strings.hpp"
#include "hpcml/featurecache/access.hpp"
#include "hpcml/featurecache/csv.hpp"
#include "hpcml/featurecache/entity_keys.hpp"
#include "hpcml/featurecache/timeutil.hpp"
#include "hpcml/trainer/encoding.hpp"

namespace hpcml::inference {
namespace {

namespace fc = hpcml::featurecache;

const trainer::InputEncoding* EncodingOf(const trainer::ModelFile& m) {
  return m.lineage && m.lineage->input.encoding ? &*m.lineage->input.encoding : nullptr;
}

// A vocabulary's codes by value, looked up by string_view.
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using CodeTable = std::unordered_map<std::string, std::int32_t, TextHash, std::equal_to<>>;

// An encoded model's view of a version's column: a category column's codes
// through `codes` (the version's code i is the model's codes[i]).
struct ColumnMap {
  bool category = false;
  std::vector<std::int32_t> codes;
};

class VersionInput final : public InputData {
 public:
  VersionInput(fc::FeatureSet fs, fc::VersionReader reader, std::vector<fc::ColumnScaling> scaling,
               bool encoded, std::vector<ColumnMap> maps)
      : fs_(std::move(fs)),
        reader_(std::move(reader)),
        scaling_(std::move(scaling)),
        encoded_(encoded),
        maps_(std::move(maps)) {
    what_ = fmt::format("{} {}", fs_.path(), reader_.info().name);
    uri_ = fmt::format("file://{}#{}", fs_.canonical_path(), reader_.info().name);
  }

  const std::string& what() const override { return what_; }
  std::uint64_t rows() const override { return reader_.rows(); }
  const std::vector<std::string>& features() const override { return reader_.info().feature_names; }
  std::vector<std::string> kinds() const override {
    std::vector<std::string> k;
    for (size_t j = 0; j < reader_.features(); ++j) k.emplace_back(reader_.info().kind(j));
    return k;
  }
  const std::vector<fc::ColumnScaling>& scaling() const override { return scaling_; }
  // Without an encoding, a missing (NaN) or infinite cell is an error naming
  // its row and column, as in a CSV: a model given NaN can still print a
  // finite, wrong score. With one, NaN is a missing cell the encoding
  // imputes, and category codes become the model's.
  Status Read(std::uint64_t first, std::uint64_t n, float* x) const override {
    HPCML_RETURN_IF_ERROR(reader_.Read(first, n, x, nullptr, nullptr, nullptr));
    if (encoded_) return ToModelCodes(first, n, x);
    const size_t f = reader_.features();
    for (std::uint64_t i = 0; i < n * f; ++i) {
      if (std::isfinite(x[i])) continue;
      return InvalidArgument(
          "{}: row {}, feature \"{}\": {} value; the model needs every cell (fill them with "
          "hpcml-fcache derive --impute, or keep complete rows with --drop-missing)",
          what_, first + i / f, reader_.info().feature_names[i % f],
          std::isnan(x[i]) ? "a missing (NaN)" : "an infinite");
    }
    return Status::Ok();
  }
  std::vector<std::string> id_names() const override {
    return {reader_.info().entity_name, reader_.info().timestamp_name};
  }
  Status Ids(std::uint64_t first, std::uint64_t n, std::vector<std::string>* cells) const override {
    std::vector<std::int64_t> e(n), t(n);
    HPCML_RETURN_IF_ERROR(reader_.Read(first, n, nullptr, nullptr, e.data(), t.data()));
    if (reader_.info().string_keys() && keys_.empty()) {
      HPCML_ASSIGN_OR_RETURN(keys_, reader_.EntityKeys());
    }
    cells->clear();
    for (std::uint64_t i = 0; i < n; ++i) {
      cells->push_back(fc::CsvQuote(fc::EntityText(e[i], keys_)));
      cells->push_back(fc::FormatTimestamp(t[i]));
    }
    return Status::Ok();
  }
  const fc::VersionReader* version() const override { return &reader_; }
  std::optional<fc::VersionStats> stats() const override {
    auto s = fs_.Stats(reader_.info().name);
    if (!s.ok()) return std::nullopt;
    return std::move(s).value();
  }
  const std::string& uri() const override { return uri_; }
  const std::string& digest() const override { return reader_.info().data_sha256; }

 private:
  Status ToModelCodes(std::uint64_t first, std::uint64_t n, float* x) const {
    const size_t f = reader_.features();
    for (std::uint64_t i = 0; i < n * f; ++i) {
      const size_t j = i % f;
      const float v = x[i];
      if (std::isnan(v)) continue;
      if (j < maps_.size() && maps_[j].category) {
        const std::vector<std::int32_t>& codes = maps_[j].codes;
        if (!(v >= 0.0f) || v >= static_cast<float>(codes.size()) || v != std::floor(v)) {
          return Corrupt("{}: row {}, feature \"{}\": {} is not a code of its {} categories", what_,
                         first + i / f, reader_.info().feature_names[j], v, codes.size());
        }
        x[i] = static_cast<float>(codes[static_cast<size_t>(v)]);
      } else if (std::isinf(v)) {
        return InvalidArgument("{}: row {}, feature \"{}\": an infinite value", what_,
                               first + i / f, reader_.info().feature_names[j]);
      }
    }
    return Status::Ok();
  }

  fc::FeatureSet fs_;
  fc::VersionReader reader_;
  std::vector<fc::ColumnScaling> scaling_;
  bool encoded_;
  std::vector<ColumnMap> maps_;  // encoded: per feature of the version
  std::string what_, uri_;
  mutable std::vector<std::string> keys_;  // string entity keys, read on first use
};

class CsvInput final : public InputData {
 public:
  CsvInput(std::string path, std::vector<std::string> keep)
      : path_(std::move(path)), keep_(std::move(keep)) {}

  const std::string& what() const override { return path_; }
  std::uint64_t rows() const override { return rows_; }
  const std::vector<std::string>& features() const override { return names_; }
  std::vector<std::string> kinds() const override { return {}; }
  const std::vector<fc::ColumnScaling>& scaling() const override { return none_; }
  Status Read(std::uint64_t first, std::uint64_t n, float* x) const override {
    std::copy_n(x_.begin() + static_cast<std::ptrdiff_t>(first * names_.size()), n * names_.size(),
                x);
    return Status::Ok();
  }
  std::vector<std::string> id_names() const override { return keep_; }
  std::optional<fc::VersionStats> stats() const override { return stats_; }
  const std::string& uri() const override { return uri_; }
  const std::string& digest() const override { return sha256_; }
  Status Ids(std::uint64_t first, std::uint64_t n, std::vector<std::string>* cells) const override {
    const size_t k = keep_.size();
    cells->assign(ids_.begin() + static_cast<std::ptrdiff_t>(first * k),
                  ids_.begin() + static_cast<std::ptrdiff_t>((first + n) * k));
    return Status::Ok();
  }

  Status Load(fc::CsvReader& csv, const trainer::ModelFile& model);

 private:
  Status FindColumns(const fc::CsvReader& csv, const trainer::ModelFile& model);
  // Feature cell `c` of the current record, as the model reads it.
  Result<float> Cell(const fc::CsvReader& csv, size_t c, size_t feature) const;

  std::string path_, uri_, sha256_;
  std::vector<std::string> keep_;
  std::vector<std::string> names_;
  std::vector<size_t> feature_col_, keep_col_;
  // An encoded model's columns, by feature: its encoding, and a category's
  // vocabulary as a hash map to its codes.
  std::optional<trainer::InputEncoding> encoding_;
  std::vector<CodeTable> vocabulary_;
  fc::NaValues na_ = fc::NaValues::Default();
  std::vector<float> x_;
  std::vector<std::string> ids_;
  std::uint64_t rows_ = 0;
  std::vector<fc::ColumnScaling> none_;
  std::optional<fc::VersionStats> stats_;
};

Status CsvInput::FindColumns(const fc::CsvReader& csv, const trainer::ModelFile& model) {
  std::map<std::string, size_t, std::less<>> index;
  for (size_t i = 0; i < csv.size(); ++i) index.emplace(std::string(csv.field(i)), i);
  auto column = [&](const std::string& name, const char* role) -> Result<size_t> {
    auto it = index.find(name);
    if (it == index.end()) {
      return csv.ErrorAtLine(fmt::format("the header has no column \"{}\" ({})", name, role));
    }
    return it->second;
  };
  for (const std::string& k : keep_) {
    HPCML_ASSIGN_OR_RETURN(size_t c, column(k, "--keep"));
    keep_col_.push_back(c);
  }
  const bool named = model.lineage && !model.lineage->input.feature_names.empty();
  if (named) names_ = model.lineage->input.feature_names;
  for (size_t i = 0; !named && i < csv.size(); ++i) {
    if (std::find(keep_col_.begin(), keep_col_.end(), i) == keep_col_.end()) {
      names_.emplace_back(csv.field(i));
    }
  }
  for (const std::string& n : names_) {
    HPCML_ASSIGN_OR_RETURN(size_t c, column(n, "a feature of the model"));
    feature_col_.push_back(c);
  }
  if (EncodingOf(model) == nullptr) return Status::Ok();
  encoding_ = *EncodingOf(model);
  for (const trainer::ColumnEncoding& col : encoding_->columns) {
    auto& map = vocabulary_.emplace_back();
    if (!col.category()) continue;
    map.reserve(col.vocabulary.size());
    for (size_t i = 0; i < col.vocabulary.size(); ++i)
      map.emplace(col.vocabulary[i], static_cast<std::int32_t>(i));
  }
  return Status::Ok();
}

Result<float> CsvInput::Cell(const fc::CsvReader& csv, size_t c, size_t feature) const {
  const std::string_view cell = csv.field(c);
  if (!encoding_) {
    float v = 0;
    auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
    if (ec != std::errc() || end != cell.data() + cell.size() || !std::isfinite(v)) {
      return csv.ErrorAt(c, fmt::format("\"{}\" is not a finite number", cell));
    }
    return v;
  }
  const trainer::ColumnEncoding& col = encoding_->columns[feature];
  const std::string_view s = TrimBlanks(cell);
  // A kept value first: "NA" may be a real category (ingest's per-column
  // missing words); anything else not kept is the unknown code, as missing.
  if (col.category()) {
    const auto& map = vocabulary_[feature];
    auto it = map.find(s);
    if (it != map.end()) return static_cast<float>(it->second);
    if (s.empty() || na_.Contains(s)) return std::numeric_limits<float>::quiet_NaN();
    return static_cast<float>(col.unknown());
  }
  if (s.empty() || na_.Contains(s)) return std::numeric_limits<float>::quiet_NaN();
  if (col.kind == "bool") {
    auto b = fc::ParseBoolCell(s);
    if (!b.ok()) return csv.ErrorAt(c, b.status().message());
    return *b ? 1.0f : 0.0f;
  }
  auto v = fc::ParseFloatCell(s, nullptr, &na_);
  if (!v.ok()) return csv.ErrorAt(c, v.status().message());
  return *v;
}

Status CsvInput::Load(fc::CsvReader& csv, const trainer::ModelFile& model) {
  HPCML_ASSIGN_OR_RETURN(bool header, csv.Next());
  if (!header) return InvalidArgument("{}: empty file (a header row is needed)", path_);
  const size_t width = csv.size();
  HPCML_RETURN_IF_ERROR(FindColumns(csv, model));
  for (;;) {
    HPCML_ASSIGN_OR_RETURN(bool more, csv.Next());
    if (!more) break;
    if (csv.size() != width) {
      return csv.ErrorAtLine(fmt::format("{} fields, the header has {}", csv.size(), width));
    }
    for (size_t j = 0; j < feature_col_.size(); ++j) {
      HPCML_ASSIGN_OR_RETURN(float v, Cell(csv, feature_col_[j], j));
      x_.push_back(v);
    }
    for (size_t c : keep_col_) ids_.push_back(fc::CsvQuote(std::string(csv.field(c))));
    ++rows_;
  }
  if (rows_ == 0) return InvalidArgument("{}: no rows to score", path_);
  uri_ = "file://" + csv.path();
  HPCML_ASSIGN_OR_RETURN(sha256_, csv.Sha256Hex());
  fc::StatsAccumulator acc(names_, /*has_label=*/false);
  acc.Add(x_.data(), nullptr, rows_);
  stats_ = acc.Finish();
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<InputData>> OpenVersionInput(const std::string& path,
                                                    const std::string& version,
                                                    const trainer::ModelFile& model) {
  HPCML_ASSIGN_OR_RETURN(fc::FeatureSet fs, fc::FeatureSet::Open(path));
  HPCML_ASSIGN_OR_RETURN(fc::VersionReader reader, fs.OpenVersion(version));
  HPCML_ASSIGN_OR_RETURN(std::vector<fc::ColumnScaling> scaling,
                         fc::RecordedStandardization(reader.info()));
  const trainer::InputEncoding* enc = EncodingOf(model);
  std::vector<ColumnMap> maps;
  if (enc != nullptr) {
    const fc::VersionInfo& info = reader.info();
    std::vector<std::vector<std::string>> dictionaries;
    if (info.typed && std::any_of(enc->columns.begin(), enc->columns.end(),
                                  [](const auto& c) { return c.category(); })) {
      HPCML_ASSIGN_OR_RETURN(dictionaries, reader.Categories());
    }
    maps.resize(info.features());
    for (size_t j = 0; j < info.features() && j < enc->columns.size(); ++j) {
      const trainer::ColumnEncoding& col = enc->columns[j];
      // Anything else is MatchSchema's error, before any row is read.
      if (!col.category() || info.kind(j) != "category" || col.name != info.feature_names[j])
        continue;
      maps[j].category = true;
      maps[j].codes = trainer::CodeMap(
          col, j < dictionaries.size() ? dictionaries[j] : std::vector<std::string>{});
    }
  }
  return std::unique_ptr<InputData>(std::make_unique<VersionInput>(
      std::move(fs), std::move(reader), std::move(scaling), enc != nullptr, std::move(maps)));
}

Result<std::unique_ptr<InputData>> OpenCsvInput(const std::string& path,
                                                const trainer::ModelFile& model,
                                                const std::vector<std::string>& keep) {
  const fc::AccessContext ctx = fc::AccessContext::FromEnvironment();
  HPCML_ASSIGN_OR_RETURN(std::string canonical, fc::CanonicalPath(path, /*must_exist=*/true));
  HPCML_RETURN_IF_ERROR(fc::CheckPath(ctx, canonical, "read CSV"));
  HPCML_ASSIGN_OR_RETURN(fc::CsvReader csv, fc::CsvReader::Open(canonical));
  auto in = std::make_unique<CsvInput>(path, keep);
  HPCML_RETURN_IF_ERROR(in->Load(csv, model));
  return std::unique_ptr<InputData>(std::move(in));
}

}  // namespace hpcml::inference
