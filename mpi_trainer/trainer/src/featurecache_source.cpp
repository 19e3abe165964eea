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

// How a version's rows become the model's input: the encoding, and per
// category feature the map from the version's codes to the encoding's.
struct Encoder {
  InputEncoding enc;
  std::vector<std::vector<std::int32_t>> maps;  // per feature; empty for numbers
  std::vector<float> scratch;                   // a batch's raw rows, recoded
};

// The batch's features, encoded into `features` (encoding.hpp). A NaN cell
// is missing (imputed, or the unknown code); an infinity is refused, naming
// the file, version, source row and column.
Status EncodeFeatures(const FeatureCacheConfig& c, const fc::Loader& loader, const fc::Batch& b,
                      Encoder* e, float* features) {
  auto x = b.x();
  const std::size_t nf = loader.features();
  e->scratch.assign(x.begin(), x.end());
  for (std::size_t j = 0; j < nf; ++j) {
    const std::vector<std::int32_t>& map = e->maps[j];
    if (map.empty()) continue;
    for (std::size_t i = j; i < e->scratch.size(); i += nf) {
      float& v = e->scratch[i];
      if (std::isnan(v)) continue;
      const auto code = static_cast<std::size_t>(v);
      // The loader checked codes against the dictionary; this guards the index.
      v = v >= 0.0f && code < map.size() ? static_cast<float>(map[code]) : -1.0f;
    }
  }
  Status st = Encode(e->enc, e->scratch.data(), static_cast<std::int64_t>(b.rows()), features,
                     b.row_ids().data());
  if (!st.ok()) return InvalidArgument("{} {}: {}", c.path, loader.info().name, st.message());
  return Status::Ok();
}

class FeatureCacheSource final : public BatchSource {
 public:
  FeatureCacheSource(FeatureCacheConfig config, fc::Loader loader, std::int64_t rows,
                     Encoder encoder)
      : c_(std::move(config)), loader_(std::move(loader)), rows_(rows), e_(std::move(encoder)) {}

  std::int64_t feature_dim() const override { return e_.enc.width(); }
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
    if (features != nullptr) HPCML_RETURN_IF_ERROR(EncodeFeatures(c_, loader_, b, &e_, features));
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
  Encoder e_;
};

// One pass over a validation version per evaluation (see OpenFeatureCacheEval).
class FeatureCacheEvalSource final : public EvalSource {
 public:
  FeatureCacheEvalSource(FeatureCacheConfig config, fc::Loader loader, std::int64_t rows,
                         Encoder encoder)
      : c_(std::move(config)), loader_(std::move(loader)), rows_(rows), e_(std::move(encoder)) {}

  std::int64_t feature_dim() const override { return e_.enc.width(); }
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
    if (features != nullptr) HPCML_RETURN_IF_ERROR(EncodeFeatures(c_, loader_, b, &e_, features));
    if (targets != nullptr) HPCML_RETURN_IF_ERROR(CopyLabels(c_, loader_, b, targets));
    return n;
  }

 private:
  FeatureCacheConfig c_;
  fc::Loader loader_;
  std::int64_t rows_;
  Encoder e_;
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

// The version's statistics, which the encoding is built from; a version
// written before statistics is refused with what to do.
Result<fc::VersionStats> NeedStats(const std::string& option, const FeatureCacheConfig& c,
                                   const fc::VersionInfo& v,
                                   const std::optional<fc::VersionStats>& st) {
  if (st) return *st;
  return InvalidArgument(
      "{} {} {}: the version has no stored statistics, which training needs for its input "
      "encoding (versions written before statistics); rewrite it with hpcml-fcache derive {} "
      "--from {}",
      option, c.path, v.name, c.path, v.name);
}

// Every training or validation row needs its label: a version with missing
// labels (as its statistics count them) is refused when opened, with what to
// do. Missing feature cells are the encoding's business.
Status RefuseMissingLabels(const std::string& option, const FeatureCacheConfig& c,
                           const fc::VersionInfo& v, const fc::VersionStats& st) {
  if (st.columns.size() <= v.features() || st.columns.back().missing == 0) return Status::Ok();
  return fc::MissingCellsError(fmt::format("{} {} {}", option, c.path, v.name), "training",
                               {{v.label_name, st.columns.back().missing}});
}

// A class label must have as many classes as the model.
Status CheckClasses(const std::string& option, const FeatureCacheConfig& c,
                    const fc::VersionInfo& v) {
  const auto classes = static_cast<std::int64_t>(v.label_classes.size());
  if (classes > 0 && c.num_classes != classes) {
    return InvalidArgument(
        "{} {} {}: the label \"{}\" has {} classes ({}), so train with "
        "--classes {}",
        option, c.path, v.name, v.label_name, classes, fmt::join(v.label_classes, ", "), classes);
  }
  return Status::Ok();
}

// The training version's encoding, from its kinds and statistics.
Result<InputEncoding> TrainingEncoding(const FeatureCacheConfig& c, const fc::VersionInfo& v,
                                       const fc::VersionStats& st) {
  std::vector<TrainingColumn> cols;
  for (size_t j = 0; j < v.features(); ++j) {
    const fc::ColumnStats& x = st.columns[j];
    cols.push_back({v.feature_names[j], std::string(v.kind(j)), x.mean, x.std, x.count, x.missing,
                    x.categories, x.frequencies});
  }
  auto enc = BuildEncoding(cols, c.encoding);
  if (!enc.ok()) return enc.status().WithContext(fmt::format("--data {} {}", c.path, v.name));
  return enc;
}

// `enc` applied to version `v`: its category features must be the
// encoding's, their codes mapped by value through the version's dictionary.
Result<Encoder> Bind(const std::string& option, const FeatureCacheConfig& c,
                     const fc::VersionInfo& v, const fc::VersionStats& st, InputEncoding enc) {
  Encoder e;
  for (size_t j = 0; j < v.features(); ++j) {
    const ColumnEncoding& col = enc.columns[j];
    const bool coded = v.kind(j) == "category";
    if (coded != col.category()) {
      return InvalidArgument(
          "{} {} {}: feature \"{}\" is {} here but was {} in the training version", option, c.path,
          v.name, v.feature_names[j], coded ? "a category" : "a number",
          col.category() ? "a category" : "a number");
    }
    e.maps.push_back(coded ? CodeMap(col, st.columns[j].categories) : std::vector<std::int32_t>{});
  }
  e.enc = std::move(enc);
  return e;
}

// Rows per class of the label, from its statistics (the last column).
std::vector<std::uint64_t> ClassRows(const fc::VersionStats& st, std::int64_t classes) {
  if (classes <= 0 || st.columns.empty()) return {};
  const fc::ColumnStats& label = st.columns.back();
  if (label.coded) return label.frequencies;
  // A 0/1 label: the mean of its values counts the ones exactly.
  if (classes == 2 && label.count > 0 && label.min >= 0.0 && label.max <= 1.0) {
    const auto ones =
        static_cast<std::uint64_t>(std::llround(label.mean * static_cast<double>(label.count)));
    return {label.count - ones, ones};
  }
  return {};
}

// The version as the model file's lineage records it (from the loader's
// info: the version that was opened and checked, not a fresh lookup).
Status DescribeInput(const FeatureCacheConfig& config, const fc::Loader& loader,
                     const std::optional<fc::VersionStats>& stats, ModelLineage* lineage) {
  lineage->input.label_classes = loader.info().label_classes;
  const fc::VersionInfo& v = loader.info();
  std::error_code ec;
  const std::filesystem::path canonical = std::filesystem::canonical(config.path, ec);
  lineage->data = {ec ? config.path : canonical.string(),
                   v.name,
                   v.data_sha256,
                   v.zone,
                   v.classification,
                   v.rows,
                   {}};
  InputSchema& in = lineage->input;
  in.feature_names = v.feature_names;
  in.label_name = v.label_name;
  if (stats) in.stats = SkewStats(*stats, v.features());
  return RecordStandardization(v, config.path, &in);
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
  if (t.label_classes != v.label_classes) {
    return InvalidArgument("{} has the classes {}, {} has {}: they must be the same", vv,
                           Names(v.label_classes), tv, Names(t.label_classes));
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
  const fc::VersionInfo& v = loader.info();
  const std::optional<fc::VersionStats> stored = StoredStats(config.path, v);
  HPCML_ASSIGN_OR_RETURN(fc::VersionStats stats, NeedStats("--data", config, v, stored));
  HPCML_RETURN_IF_ERROR(CheckClasses("--data", config, v));
  HPCML_RETURN_IF_ERROR(RefuseMissingLabels("--data", config, v, stats));
  HPCML_ASSIGN_OR_RETURN(InputEncoding enc, TrainingEncoding(config, v, stats));
  if (lineage != nullptr) {
    HPCML_RETURN_IF_ERROR(DescribeInput(config, loader, stored, lineage));
    lineage->input.encoding = enc;
    lineage->data.class_rows = ClassRows(stats, config.num_classes);
  }
  HPCML_ASSIGN_OR_RETURN(Encoder e, Bind("--data", config, v, stats, std::move(enc)));
  return std::unique_ptr<BatchSource>(
      std::make_unique<FeatureCacheSource>(config, std::move(loader), rows, std::move(e)));
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
  const fc::VersionInfo& v = loader->info();
  const std::optional<fc::VersionStats> stored = StoredStats(config.path, v);
  HPCML_ASSIGN_OR_RETURN(fc::VersionStats stats, NeedStats("--val-data", config, v, stored));
  HPCML_RETURN_IF_ERROR(CheckClasses("--val-data", config, v));
  HPCML_RETURN_IF_ERROR(RefuseMissingLabels("--val-data", config, v, stats));
  ModelLineage val;
  HPCML_RETURN_IF_ERROR(DescribeInput(config, *loader, stored, &val));
  HPCML_RETURN_IF_ERROR(CheckSameInput(training, val));
  if (!training.input.encoding) return Internal("--val-data: the training input has no encoding");
  HPCML_ASSIGN_OR_RETURN(Encoder e, Bind("--val-data", config, v, stats, *training.input.encoding));
  if (described != nullptr) *described = val.data;
  return std::unique_ptr<EvalSource>(
      std::make_unique<FeatureCacheEvalSource>(config, std::move(*loader), rows, std::move(e)));
}

Status RecordStandardization(const featurecache::VersionInfo& v, const std::string& path,
                             InputSchema* in_out) {
  namespace fc = hpcml::featurecache;
  InputSchema& in = *in_out;
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
                     path, v.name, c.column);
    }
    const auto j = static_cast<size_t>(it - v.feature_names.begin());
    in.standardized[j] = true;
    in.mean[j] = c.mean;
    in.scale[j] = c.scale;
  }
  return Status::Ok();
}

InputSchema::Stats SkewStats(const featurecache::VersionStats& st, std::size_t features) {
  InputSchema::Stats out;
  for (size_t c = 0; c < features; ++c) {
    const featurecache::ColumnStats& x = st.columns[c];
    const double total = static_cast<double>(x.count + x.missing);
    out.mean.push_back(x.mean);
    out.std.push_back(x.std);
    out.min.push_back(x.min);
    out.max.push_back(x.max);
    out.missing.push_back(total > 0 ? static_cast<double>(x.missing) / total : 0.0);
  }
  return out;
}

Result<ModelLineage> LineageOfVersion(const std::string& path, const std::string& version) {
  HPCML_ASSIGN_OR_RETURN(fc::FeatureSet fs, fc::FeatureSet::Open(path));
  HPCML_ASSIGN_OR_RETURN(fc::VersionInfo v, fs.Info(version));
  auto stats = fs.Stats(v.name);
  ModelLineage l;
  l.data = {fs.canonical_path(), v.name, v.data_sha256, v.zone, v.classification, v.rows, {}};
  const auto classes = static_cast<std::int64_t>(v.label_classes.size());
  if (stats.ok()) l.data.class_rows = ClassRows(*stats, classes);
  InputSchema& in = l.input;
  in.feature_names = v.feature_names;
  in.label_name = v.label_name;
  in.label_classes = v.label_classes;
  if (stats.ok()) in.stats = SkewStats(*stats, v.features());
  HPCML_RETURN_IF_ERROR(RecordStandardization(v, path, &in));
  return l;
}

}  // namespace hpcml::trainer
