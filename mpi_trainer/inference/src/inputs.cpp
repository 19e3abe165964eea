#include "inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "hpcml/featurecache/access.hpp"
#include "hpcml/featurecache/csv.hpp"
#include "hpcml/featurecache/entity_keys.hpp"
#include "hpcml/featurecache/timeutil.hpp"

namespace hpcml::inference {
namespace {

namespace fc = hpcml::featurecache;

class VersionInput final : public InputData {
 public:
  VersionInput(fc::FeatureSet fs, fc::VersionReader reader, std::vector<fc::ColumnScaling> scaling)
      : fs_(std::move(fs)), reader_(std::move(reader)), scaling_(std::move(scaling)) {
    what_ = fmt::format("{} {}", fs_.path(), reader_.info().name);
    uri_ = fmt::format("file://{}#{}", fs_.canonical_path(), reader_.info().name);
  }

  const std::string& what() const override { return what_; }
  std::uint64_t rows() const override { return reader_.rows(); }
  const std::vector<std::string>& features() const override { return reader_.info().feature_names; }
  const std::vector<fc::ColumnScaling>& scaling() const override { return scaling_; }
  // A missing (NaN) or infinite cell is an error naming its row and column,
  // as in a CSV: a model given NaN can still print a finite, wrong score.
  Status Read(std::uint64_t first, std::uint64_t n, float* x) const override {
    HPCML_RETURN_IF_ERROR(reader_.Read(first, n, x, nullptr, nullptr, nullptr));
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
  fc::FeatureSet fs_;
  fc::VersionReader reader_;
  std::vector<fc::ColumnScaling> scaling_;
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

  std::string path_, uri_, sha256_;
  std::vector<std::string> keep_;
  std::vector<std::string> names_;
  std::vector<size_t> feature_col_, keep_col_;
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
  return Status::Ok();
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
    for (size_t c : feature_col_) {
      const std::string_view cell = csv.field(c);
      float v = 0;
      auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
      if (ec != std::errc() || end != cell.data() + cell.size() || !std::isfinite(v)) {
        return csv.ErrorAt(c, fmt::format("\"{}\" is not a finite number", cell));
      }
      x_.push_back(v);
    }
    for (size_t c : keep_col_) ids_.emplace_back(csv.field(c));
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
                                                    const std::string& version) {
  HPCML_ASSIGN_OR_RETURN(fc::FeatureSet fs, fc::FeatureSet::Open(path));
  HPCML_ASSIGN_OR_RETURN(fc::VersionReader reader, fs.OpenVersion(version));
  HPCML_ASSIGN_OR_RETURN(std::vector<fc::ColumnScaling> scaling,
                         fc::RecordedStandardization(reader.info()));
  return std::unique_ptr<InputData>(
      std::make_unique<VersionInput>(std::move(fs), std::move(reader), std::move(scaling)));
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
