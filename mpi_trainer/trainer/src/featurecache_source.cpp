#include "featurecache_source.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hpcml/featurecache/feature_set.hpp"
#include "hpcml/featurecache/loader.hpp"

namespace hpcml::trainer {
namespace {

namespace fc = hpcml::featurecache;

// The batch's labels into `targets`; with classes, each must be one of them,
// else finite.
Status CopyLabels(const FeatureCacheConfig& c, const fc::Loader& loader, const fc::Batch& b,
                  float* targets) {
  auto y = b.y();
  for (size_t i = 0; i < y.size(); ++i) {
    const float v = y[i];
    if (c.num_classes > 0 &&
        (!(v >= 0.0f) || v != std::floor(v) || v >= static_cast<float>(c.num_classes))) {
      return Corrupt("{} {}: row {} has label {}, not a class in [0, {}) (--outputs)", c.path,
                     loader.info().name, b.row_ids()[i], v, c.num_classes);
    }
    if (!std::isfinite(v)) {
      return InvalidArgument(
          "{} {}: row {} has label {} (column \"{}\"): training needs a finite "
          "label in every row",
          c.path, loader.info().name, b.row_ids()[i], v, loader.info().label_name);
    }
    targets[i] = v;
  }
  return Status::Ok();
}

// The batch's features into `features`, each finite: a NaN or infinity would
// make the model's weights non-finite. The version was checked for missing
// cells when it was opened; this catches what its statistics do not count
// (infinities, a version without statistics).
Status CopyFeatures(const FeatureCacheConfig& c, const fc::Loader& loader, const fc::Batch& b,
                    float* features) {
  auto x = b.x();
  const std::size_t nf = loader.features();
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      const fc::VersionInfo& v = loader.info();
      return InvalidArgument(
          "{} {}: row {}, column {} (\"{}\") is {}: training needs a finite "
          "value in every cell",
          c.path, v.name, b.row_ids()[i / nf], i % nf + 1, v.feature_names[i % nf], x[i]);
    }
  }
  std::memcpy(features, x.data(), x.size_bytes());
  return Status::Ok();
}

class FeatureCacheSource final : public BatchSource {
 public:
  FeatureCacheSource(FeatureCacheConfig config, fc::Loader loader, std::int64_t rows)
      : c_(std::move(config)), loader_(std::move(loader)), rows_(rows) {}

  std::int64_t feature_dim() const override {
    return static_cast<std::int64_t>(loader_.features());
  }
  std::int64_t target_dim() const override { return 1; }
  std::int64_t num_classes() const override { return c_.num_classes; }

  Status Next(std::int64_t rows, float* features, float* targets) override {
    if (rows != rows_) {
      return InvalidArgument("{}: asked for {} rows, the loader serves batches of {}", c_.path,
                             rows, rows_);
    }
    HPCML_ASSIGN_OR_RETURN(fc::Batch b, loader_.Next());
    if (static_cast<std::int64_t>(b.rows()) != rows_) {
      return Internal("{}: short batch of {} rows (expected {})", c_.path, b.rows(), rows_);
    }
    if (features != nullptr) HPCML_RETURN_IF_ERROR(CopyFeatures(c_, loader_, b, features));
    if (targets != nullptr) HPCML_RETURN_IF_ERROR(CopyLabels(c_, loader_, b, targets));
    return Status::Ok();
  }

  std::string SavePosition() const override { return loader_.Save().ToString(); }

  Status RestorePosition(std::string_view position) override {
    HPCML_ASSIGN_OR_RETURN(fc::Position p, fc::Position::Parse(position));
    return loader_.Restore(p);
  }

 private:
  FeatureCacheConfig c_;
  fc::Loader loader_;
  std::int64_t rows_;
};

// One pass over a validation version per evaluation (see OpenFeatureCacheEval).
class FeatureCacheEvalSource final : public EvalSource {
 public:
  FeatureCacheEvalSource(FeatureCacheConfig config, fc::Loader loader, std::int64_t rows)
      : c_(std::move(config)), loader_(std::move(loader)), rows_(rows) {}

  std::int64_t feature_dim() const override {
    return static_cast<std::int64_t>(loader_.features());
  }
  std::int64_t target_dim() const override { return 1; }
  std::int64_t num_classes() const override { return c_.num_classes; }
  std::int64_t rows() const override { return static_cast<std::int64_t>(loader_.rows()); }
  std::int64_t batches() const override {
    return static_cast<std::int64_t>(loader_.batches_per_epoch());
  }

  Result<std::int64_t> Next(std::int64_t max_rows, float* features, float* targets) override {
    HPCML_ASSIGN_OR_RETURN(fc::Batch b, loader_.Next());
    const auto n = static_cast<std::int64_t>(b.rows());
    if (n > max_rows || n > rows_) {
      return Internal("{}: batch of {} rows, room for {}", c_.path, n, std::min(max_rows, rows_));
    }
    if (features != nullptr) HPCML_RETURN_IF_ERROR(CopyFeatures(c_, loader_, b, features));
    if (targets != nullptr) HPCML_RETURN_IF_ERROR(CopyLabels(c_, loader_, b, targets));
    return n;
  }

 private:
  FeatureCacheConfig c_;
  fc::Loader loader_;
  std::int64_t rows_;
};

// The statistics stored with the opened version. The file is opened again
// by path, so they are taken only when that version still has the digest the
// loader opened (versions are immutable; a mismatch would mean another file
// at the path): else none, as for a version written before statistics.
std::optional<fc::VersionStats> StoredStats(const std::string& path, const fc::VersionInfo& v) {
  auto fs = fc::FeatureSet::Open(path);
  if (!fs.ok()) return std::nullopt;
  auto info = fs->Info(v.name);
  auto st = fs->Stats(v.name);
  if (!info.ok() || info->data_sha256 != v.data_sha256 || !st.ok()) return std::nullopt;
  if (st->columns.size() < v.features()) return std::nullopt;
  return std::move(st).value();
}

// The training version's statistics per feature, for skew checks when scoring.
InputSchema::Stats SkewStats(const fc::VersionStats& st, std::size_t features) {
  InputSchema::Stats out;
  for (size_t c = 0; c < features; ++c) {
    const fc::ColumnStats& x = st.columns[c];
    const double total = static_cast<double>(x.count + x.missing);
    out.mean.push_back(x.mean);
    out.std.push_back(x.std);
    out.min.push_back(x.min);
    out.max.push_back(x.max);
    out.missing.push_back(total > 0 ? static_cast<double>(x.missing) / total : 0.0);
  }
  return out;
}

// Until the trainer handles missing values, a version with NaN cells (its
// features or its label, as its statistics count them) is refused when it
// is opened, with what to do.
Status RefuseMissing(const std::string& option, const FeatureCacheConfig& c,
                     const fc::VersionInfo& v, const std::optional<fc::VersionStats>& st) {
  if (!st) return Status::Ok();
  std::vector<fc::MissingCells> gaps;
  for (const fc::ColumnStats& col : st->columns) {
    if (col.missing > 0) gaps.push_back({col.name, col.missing});
  }
  if (gaps.empty()) return Status::Ok();
  return fc::MissingCellsError(fmt::format("{} {} {}", option, c.path, v.name), "training", gaps);
}

// Until the trainer encodes them, category features (codes, not amounts)
// are refused; a class label must have as many classes as the model.
Status RefuseKinds(const std::string& option, const FeatureCacheConfig& c,
                   const fc::VersionInfo& v) {
  std::vector<std::string> coded;
  for (size_t j = 0; j < v.features(); ++j)
    if (v.kind(j) == "category") coded.push_back(v.feature_names[j]);
  if (!coded.empty()) {
    return InvalidArgument(
        "{} {} {}: categorical feature(s) {}: their stored values are category codes, not "
        "amounts, and the MLP trains on numbers; leave them out (hpcml-fcache derive {} "
        "--select ...) or train trees",
        option, c.path, v.name, fmt::join(coded, ", "), c.path);
  }
  const auto classes = static_cast<std::int64_t>(v.label_classes.size());
  if (classes > 0 && c.num_classes != classes) {
    return InvalidArgument(
        "{} {} {}: the label \"{}\" has {} classes ({}), so train with "
        "--classes {}",
        option, c.path, v.name, v.label_name, classes, fmt::join(v.label_classes, ", "), classes);
  }
  return Status::Ok();
}

// The version as the model file's lineage records it (from the loader's
// info: the version that was opened and checked, not a fresh lookup).
Status DescribeInput(const FeatureCacheConfig& config, const fc::Loader& loader,
                     const std::optional<fc::VersionStats>& stats, ModelLineage* lineage) {
  const fc::VersionInfo& v = loader.info();
  std::error_code ec;
  const std::filesystem::path canonical = std::filesystem::canonical(config.path, ec);
  lineage->data = {ec ? config.path : canonical.string(),
                   v.name,
                   v.data_sha256,
                   v.zone,
                   v.classification,
                   v.rows};
  InputSchema& in = lineage->input;
  in.feature_names = v.feature_names;
  in.label_name = v.label_name;
  if (stats) in.stats = SkewStats(*stats, v.features());
  HPCML_ASSIGN_OR_RETURN(std::vector<fc::ColumnScaling> scaling, fc::RecordedStandardization(v));
  if (scaling.empty()) return Status::Ok();
  in.standardized.assign(v.features(), false);
  in.mean.assign(v.features(), 0.0);
  in.scale.assign(v.features(), 1.0);
  in.standardized_by = v.name;
  for (const fc::ColumnScaling& c : scaling) {
    auto it = std::find(v.feature_names.begin(), v.feature_names.end(), c.column);
    if (it == v.feature_names.end()) {
      return Corrupt("{} {}: its transform standardised \"{}\", which is not one of its features",
                     config.path, v.name, c.column);
    }
    const auto j = static_cast<size_t>(it - v.feature_names.begin());
    in.standardized[j] = true;
    in.mean[j] = c.mean;
    in.scale[j] = c.scale;
  }
  return Status::Ok();
}

std::string Names(const std::vector<std::string>& names) {
  return fmt::format("[{}]", fmt::join(names, ", "));
}

// Whether the validation version's input is the training version's: same
// feature names in the same order, the same label, the same recorded
// standardisation (else the model would see other units).
Status CheckSameInput(const ModelLineage& train, const ModelLineage& val) {
  const std::string tv =
      fmt::format("the training version (--data {} {})", train.data.path, train.data.version);
  const std::string vv =
      fmt::format("the validation version (--val-data {} {})", val.data.path, val.data.version);
  const InputSchema &t = train.input, &v = val.input;
  if (t.feature_names != v.feature_names) {
    return InvalidArgument("{} has the features {}, {} has {}: they must match in name and order",
                           vv, Names(v.feature_names), tv, Names(t.feature_names));
  }
  if (t.label_name != v.label_name) {
    return InvalidArgument("{} has the label \"{}\", {} has \"{}\"", vv, v.label_name, tv,
                           t.label_name);
  }
  if (t.standardized != v.standardized || t.mean != v.mean || t.scale != v.scale) {
    return InvalidArgument(
        "{} is standardised differently from {} (its transform's recorded mean and scale "
        "differ): the model would see its features in other units",
        vv, tv);
  }
  return Status::Ok();
}

}  // namespace

bool FeatureCacheAvailable() {
  return true;
}

Result<std::unique_ptr<BatchSource>> OpenFeatureCache(const FeatureCacheConfig& config,
                                                      std::int64_t global_batch, int replica,
                                                      int replicas, ModelLineage* lineage) {
  if (replicas < 1 || replica < 0 || replica >= replicas || global_batch % replicas != 0) {
    return InvalidArgument("--batch {} cannot be split over {} replicas", global_batch, replicas);
  }
  const std::int64_t rows = global_batch / replicas;
  fc::LoaderOptions opt;
  opt.rank = static_cast<std::uint32_t>(replica);
  opt.world = static_cast<std::uint32_t>(replicas);
  opt.batch_rows = static_cast<std::uint64_t>(rows);
  opt.seed = config.seed;
  opt.shuffle = config.shuffle;
  opt.drop_last = true;
  HPCML_ASSIGN_OR_RETURN(fc::Loader loader, fc::Loader::Open(config.path, config.version, opt));
  if (!loader.has_labels()) {
    return InvalidArgument("{} {}: the version has no labels; training needs them", config.path,
                           loader.info().name);
  }
  if (loader.batches_per_epoch() == 0) {
    return InvalidArgument(
        "{} {}: {} rows are too few for batches of {} rows on each of {} "
        "replicas",
        config.path, loader.info().name, loader.rows(), rows, replicas);
  }
  const std::optional<fc::VersionStats> stats = StoredStats(config.path, loader.info());
  HPCML_RETURN_IF_ERROR(RefuseKinds("--data", config, loader.info()));
  HPCML_RETURN_IF_ERROR(RefuseMissing("--data", config, loader.info(), stats));
  if (lineage != nullptr) HPCML_RETURN_IF_ERROR(DescribeInput(config, loader, stats, lineage));
  return std::unique_ptr<BatchSource>(
      std::make_unique<FeatureCacheSource>(config, std::move(loader), rows));
}

}  // namespace hpcml::trainer

namespace hpcml::trainer {

Result<std::unique_ptr<EvalSource>> OpenFeatureCacheEval(const FeatureCacheConfig& config,
                                                         std::int64_t rows, int replica,
                                                         int replicas, const ModelLineage& training,
                                                         TrainingData* described) {
  if (rows < 1 || replicas < 1 || replica < 0 || replica >= replicas) {
    return InvalidArgument("--val-data {}: {} rows per batch on replica {} of {}", config.path,
                           rows, replica, replicas);
  }
  fc::LoaderOptions opt;
  opt.rank = static_cast<std::uint32_t>(replica);
  opt.world = static_cast<std::uint32_t>(replicas);
  opt.batch_rows = static_cast<std::uint64_t>(rows);
  opt.shuffle = false;
  opt.drop_last = false;  // every row counts, the last batches may be short
  opt.prefetch_depth = 2;
  auto loader = fc::Loader::Open(config.path, config.version, opt);
  if (!loader.ok()) return loader.status().WithContext("--val-data");
  if (!loader->has_labels()) {
    return InvalidArgument("--val-data {} {}: the version has no labels; validation needs them",
                           config.path, loader->info().name);
  }
  const std::optional<fc::VersionStats> stats = StoredStats(config.path, loader->info());
  HPCML_RETURN_IF_ERROR(RefuseKinds("--val-data", config, loader->info()));
  HPCML_RETURN_IF_ERROR(RefuseMissing("--val-data", config, loader->info(), stats));
  ModelLineage val;
  HPCML_RETURN_IF_ERROR(DescribeInput(config, *loader, stats, &val));
  HPCML_RETURN_IF_ERROR(CheckSameInput(training, val));
  if (described != nullptr) *described = val.data;
  return std::unique_ptr<EvalSource>(
      std::make_unique<FeatureCacheEvalSource>(config, std::move(*loader), rows));
}

}  // namespace hpcml::trainer
