#include "hpcml/trees/train.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <unordered_map>

#include "hpcml/common/sha256.hpp"
#include "hpcml/featurecache/feature_set.hpp"
#include "hpcml/featurecache/loader.hpp"
#include "hpcml/trainer/random.hpp"
#include "hpcml/trees/xgb.hpp"

namespace hpcml::trees {
namespace {

namespace fc = hpcml::featurecache;
using Clock = std::chrono::steady_clock;

// Rows per batch handed to XGBoost (a version of fewer rows is one batch).
constexpr std::uint64_t kBatchRows = std::uint64_t{1} << 20;

// One version streamed into XGBoost: the loader (file order), and per
// feature the map from the version's category codes to the model's (-1:
// not in the model's vocabulary, given to XGBoost as missing).
struct Stream {
  explicit Stream(fc::Loader l) : loader(std::move(l)) {}
  std::string what;  // "set.h5 v3", for messages
  fc::Loader loader;
  fc::VersionStats stats;
  std::vector<std::vector<std::int32_t>> maps;
  std::int64_t classes = 0;
  std::vector<float> class_weights;
  // The iterator's state between XGBoost's calls.
  DMatrix proxy;
  fc::Batch batch;
  std::vector<float> weights;
  std::uint64_t served = 0;  // batches taken from the loader this pass
  bool pass_ended = false;   // an error ended this pass
  bool handed = false;       // rows went to XGBoost this pass
  Status pass_status;        // the pass's restart
  std::vector<float> placeholder;
  std::vector<const char*> names, types;
  std::vector<std::string> type_text;
  Status status;
};

Result<Stream> OpenStream(const GbdtData& d, std::int64_t classes, const GbdtRanks& ranks) {
  fc::LoaderOptions opt;
  opt.rank = ranks.rank;
  opt.world = ranks.world;
  opt.batch_rows = kBatchRows;
  opt.shuffle = false;
  opt.drop_last = false;
  opt.prefetch_depth = 2;
  HPCML_ASSIGN_OR_RETURN(fc::Loader loader, fc::Loader::Open(d.path, d.version, opt));
  Stream s(std::move(loader));
  const fc::VersionInfo& v = s.loader.info();
  s.what = fmt::format("{} {}", d.path, v.name);
  if (!s.loader.has_labels()) return InvalidArgument("{}: the version has no labels", s.what);
  if (v.rows < ranks.world) {
    return InvalidArgument("{}: {} rows for {} ranks; train on fewer ranks", s.what, v.rows,
                           ranks.world);
  }
  // The statistics of the version the loader opened (not a fresh lookup):
  // the same digest, or none.
  HPCML_ASSIGN_OR_RETURN(fc::FeatureSet fs, fc::FeatureSet::Open(d.path));
  HPCML_ASSIGN_OR_RETURN(fc::VersionInfo again, fs.Info(v.name));
  if (again.data_sha256 != v.data_sha256) {
    return FailedPrecondition("{}: the version changed while it was opened", s.what);
  }
  auto stats = fs.Stats(v.name);
  if (!stats.ok()) {
    return InvalidArgument(
        "{}: the version has no stored statistics, which training needs "
        "(rewrite it with hpcml-fcache derive)",
        s.what);
  }
  s.stats = std::move(*stats);
  if (s.stats.columns.size() > v.features() && s.stats.columns.back().missing > 0) {
    return fc::MissingCellsError(s.what, "training",
                                 {{v.label_name, s.stats.columns.back().missing}});
  }
  s.classes = classes;
  const auto label_classes = static_cast<std::int64_t>(v.label_classes.size());
  if (label_classes > 0 && label_classes != classes) {
    return InvalidArgument("{}: the label \"{}\" has {} classes, so train with --outputs {}",
                           s.what, v.label_name, label_classes, label_classes);
  }
  return s;
}

// The encoding a tree model records: numbers as they are, a category's
// value as its index in the training dictionary (encoding.hpp's layout with
// unit scale and no indicators; trees have no embeddings, embed_dim 1).
trainer::InputEncoding TreeEncoding(const Stream& s) {
  const fc::VersionInfo& v = s.loader.info();
  trainer::InputEncoding enc;
  enc.min_count = 1;
  for (size_t j = 0; j < v.features(); ++j) {
    trainer::ColumnEncoding c;
    c.name = v.feature_names[j];
    c.kind = std::string(v.kind(j));
    if (c.category()) {
      c.vocabulary = s.stats.columns[j].categories;
      c.embed_dim = 1;
    }
    enc.columns.push_back(std::move(c));
  }
  return enc;
}

// `s`'s category codes mapped by value into `enc`'s vocabularies; a column
// whose kind differs is refused, naming it.
Status Bind(const trainer::InputEncoding& enc, Stream* s) {
  const fc::VersionInfo& v = s->loader.info();
  if (v.feature_names.size() != enc.columns.size()) {
    return InvalidArgument("{} has {} features, the training version {}", s->what,
                           v.feature_names.size(), enc.columns.size());
  }
  for (size_t j = 0; j < v.features(); ++j) {
    const trainer::ColumnEncoding& c = enc.columns[j];
    if (v.feature_names[j] != c.name) {
      return InvalidArgument("{}: feature {} is \"{}\", in the training version \"{}\"", s->what,
                             j + 1, v.feature_names[j], c.name);
    }
    const bool coded = v.kind(j) == "category";
    if (coded != c.category()) {
      return InvalidArgument("{}: feature \"{}\" is {} here but {} in the training version",
                             s->what, c.name, coded ? "a category" : "a number",
                             c.category() ? "a category" : "a number");
    }
    std::vector<std::int32_t> map;
    if (coded) {
      map = trainer::CodeMap(c, s->stats.columns[j].categories);
      for (auto& code : map)
        if (code == c.unknown()) code = -1;
    }
    s->maps.push_back(std::move(map));
    s->type_text.push_back(coded ? "c" : "q");
  }
  for (const std::string& n : v.feature_names) s->names.push_back(n.c_str());
  for (const std::string& t : s->type_text) s->types.push_back(t.c_str());
  return Status::Ok();
}

// XGBoost's array interface for a dense float32 matrix.
std::string ArrayInterface(const void* data, std::size_t rows, std::size_t cols) {
  return fmt::format(R"({{"data": [{}, true], "shape": [{}, {}], "typestr": "<f4", "version": 3}})",
                     reinterpret_cast<std::uintptr_t>(data), rows, cols);
}

// The batch's cells as XGBoost takes them: category codes mapped into the
// model's dictionary (unknown: missing); an infinite number or a label that
// is not a class (or not finite) is an error naming its row and column.
Status Encode(Stream* s) {
  const std::size_t rows = s->batch.rows(), nf = s->batch.features();
  std::span<float> x = s->batch.mutable_x();
  for (std::size_t j = 0; j < nf; ++j) {
    const auto& map = s->maps[j];
    if (map.empty()) {
      // XGBoost would take an infinity as a value past every bin, silently.
      for (std::size_t i = j; i < x.size(); i += nf) {
        if (std::isinf(x[i])) {
          return InvalidArgument("{}: row {}, column {} (\"{}\") is {}: a number or a missing cell",
                                 s->what, s->batch.row_ids()[i / nf], j + 1, s->names[j], x[i]);
        }
      }
      continue;
    }
    for (std::size_t i = j; i < x.size(); i += nf) {
      if (std::isnan(x[i])) continue;
      const auto code = static_cast<std::size_t>(x[i]);
      x[i] = code < map.size() && map[code] >= 0 ? static_cast<float>(map[code])
                                                 : std::numeric_limits<float>::quiet_NaN();
    }
  }
  auto y = s->batch.y();
  for (std::size_t i = 0; i < rows; ++i) {
    const float v = y[i];
    const bool ok = s->classes > 0
                        ? v >= 0.0f && v == std::floor(v) && v < static_cast<float>(s->classes)
                        : std::isfinite(v);
    if (!ok) {
      return InvalidArgument("{}: row {} has label {}{}", s->what, s->batch.row_ids()[i], v,
                             s->classes > 0 ? fmt::format(", not a class in [0, {})", s->classes)
                                            : std::string(", not a finite number"));
    }
  }
  return Status::Ok();
}

// Rows into the proxy, with their labels, class weights, names and kinds.
Status Hand(Stream* s, const float* x, const float* y, std::size_t rows) {
  const std::size_t nf = s->names.size();
  const DMatrixHandle p = s->proxy.get();
  HPCML_RETURN_IF_ERROR(XgbCheck(XGProxyDMatrixSetDataDense(p, ArrayInterface(x, rows, nf).c_str()),
                                 "setting a batch"));
  HPCML_RETURN_IF_ERROR(XgbCheck(XGDMatrixSetDenseInfo(p, "label", y, rows, 1), "labels"));
  if (!s->class_weights.empty()) {
    s->weights.resize(rows);
    for (std::size_t i = 0; i < rows; ++i)
      s->weights[i] = s->class_weights[static_cast<std::size_t>(y[i])];
    HPCML_RETURN_IF_ERROR(
        XgbCheck(XGDMatrixSetDenseInfo(p, "weight", s->weights.data(), rows, 1), "weights"));
  }
  HPCML_RETURN_IF_ERROR(XgbCheck(XGDMatrixSetStrFeatureInfo(p, "feature_name", s->names.data(), nf),
                                 "feature names"));
  return XgbCheck(XGDMatrixSetStrFeatureInfo(p, "feature_type", s->types.data(), nf),
                  "feature types");
}

// The next batch into the proxy: 1, or 0 at the end of a pass. XGBoost's
// callbacks cannot carry an error: the first is kept in s->status and ends
// the pass. Across ranks every rank must still take part in the sketch's
// collective with data, so a pass that fails before any rows hands one row
// of missing cells (label 0); the error is agreed on after the matrix. The
// data are the same each pass, so each pass ends at the same place.
int Next(DataIterHandle handle) {
  auto* s = static_cast<Stream*>(handle);
  if (s->pass_ended || s->served >= s->loader.batches_per_epoch()) return 0;
  Status st = s->pass_status;
  if (st.ok()) {
    Result<fc::Batch> batch = s->loader.Next();
    ++s->served;
    if (batch.ok()) s->batch = std::move(*batch);
    st = batch.ok() ? Encode(s) : batch.status().WithContext(s->what);
    // A rank's last batch may be empty (its shard a row shorter): not handed on.
    if (st.ok() && s->batch.rows() == 0) return Next(handle);
    if (st.ok()) st = Hand(s, s->batch.x().data(), s->batch.y().data(), s->batch.rows());
    if (st.ok()) {
      s->handed = true;
      return 1;
    }
  }
  if (s->status.ok()) s->status = st;
  s->pass_ended = true;
  if (s->handed) return 0;
  s->placeholder.assign(s->names.size() + 1, std::numeric_limits<float>::quiet_NaN());
  s->placeholder.back() = 0.0f;  // the label
  if (!Hand(s, s->placeholder.data(), &s->placeholder.back(), 1).ok()) return 0;
  s->handed = true;
  return 1;
}

void Reset(DataIterHandle handle) {
  auto* s = static_cast<Stream*>(handle);
  s->served = 0;
  s->pass_ended = false;
  s->handed = false;
  s->pass_status = s->loader.Restore(fc::Position::EpochStart(0));
}

// XGBoost's quantile matrix of the stream (`ref`: the training matrix whose
// bins a validation matrix shares).
Result<DMatrix> Quantiles(Stream* s, DMatrixHandle ref, const GbdtParams& p) {
  DMatrixHandle proxy = nullptr;
  HPCML_RETURN_IF_ERROR(XgbCheck(XGProxyDMatrixCreate(&proxy), "XGProxyDMatrixCreate"));
  s->proxy.reset(proxy);
  const std::string config =
      fmt::format(R"({{"missing": NaN, "nthread": {}, "max_bin": {}}})", p.threads, p.max_bin);
  DMatrixHandle out = nullptr;
  const int rc =
      XGQuantileDMatrixCreateFromCallback(s, proxy, ref, Reset, Next, config.c_str(), &out);
  DMatrix m(out);
  HPCML_RETURN_IF_ERROR(s->status);
  HPCML_RETURN_IF_ERROR(XgbCheck(rc, fmt::format("{}: building its matrix", s->what)));
  s->proxy.reset();
  return m;
}

std::string Objective(std::int64_t classes) {
  return classes == 0 ? "reg:squarederror" : classes == 2 ? "binary:logistic" : "multi:softprob";
}

Status SetParams(BoosterHandle b, std::int64_t classes, const GbdtParams& p) {
  const std::vector<std::pair<std::string, std::string>> kv = {
      {"tree_method", "hist"},
      {"objective", Objective(classes)},
      {"eta", fmt::format("{}", p.eta)},
      {"max_depth", fmt::format("{}", p.max_depth)},
      {"min_child_weight", fmt::format("{}", p.min_child_weight)},
      {"lambda", fmt::format("{}", p.lambda)},
      {"colsample_bytree", fmt::format("{}", p.colsample_bytree)},
      {"max_bin", fmt::format("{}", p.max_bin)},
      {"nthread", fmt::format("{}", p.threads)},
      {"seed", fmt::format("{}", p.seed)},
  };
  for (const auto& [k, v] : kv) {
    HPCML_RETURN_IF_ERROR(XgbCheck(XGBoosterSetParam(b, k.c_str(), v.c_str()), k));
  }
  if (classes > 2) {
    HPCML_RETURN_IF_ERROR(
        XgbCheck(XGBoosterSetParam(b, "num_class", std::to_string(classes).c_str()), "num_class"));
  }
  // The first metric is the loss early stopping watches.
  std::vector<std::string> metrics = {classes == 0   ? "rmse"
                                      : classes == 2 ? "logloss"
                                                     : "mlogloss"};
  if (classes == 2) metrics.push_back("auc");
  for (const std::string& m : metrics) {
    HPCML_RETURN_IF_ERROR(XgbCheck(XGBoosterSetParam(b, "eval_metric", m.c_str()), "eval_metric"));
  }
  return Status::Ok();
}

// "[3]\ttrain-logloss:0.41\tval-logloss:0.44\tval-auc:0.91" -> the figures.
Status ParseEval(std::string_view text, RoundMetrics* r) {
  std::size_t at = 0;
  while ((at = text.find('\t', at)) != std::string_view::npos) {
    ++at;
    const std::size_t colon = text.find(':', at), end = text.find('\t', at);
    if (colon == std::string_view::npos) return Internal("XGBoost evaluation \"{}\"", text);
    const std::string key(text.substr(at, colon - at));
    const double v =
        std::strtod(std::string(text.substr(colon + 1, end - colon - 1)).c_str(), nullptr);
    if (key.rfind("train-", 0) == 0 && key != "train-auc") r->train_loss = v;
    if (key == "val-auc")
      r->val_auc = v;
    else if (key.rfind("val-", 0) == 0)
      r->val_loss = v;
  }
  return Status::Ok();
}

// Row sampling done by hpcml (GbdtParams::subsample): the gradients of
// XGBoost's own objectives, computed from the booster's predictions on the
// training matrix (its prediction cache), with rows left out of the round
// given gradient and hessian 0. Which rows take part depends only on the
// seed, the round and the row's place in the version (this rank's rows
// start at `first_row`), so a resumed run, and a run on other ranks, draws
// the same rows.
class RowSampler {
 public:
  static Result<RowSampler> Make(DMatrixHandle dtrain, std::int64_t classes, const GbdtParams& p,
                                 std::uint64_t first_row) {
    if (!(p.subsample > 0.0 && p.subsample <= 1.0)) {
      return InvalidArgument("--subsample must be in (0, 1], got {}", p.subsample);
    }
    RowSampler s;
    s.classes_ = classes;
    s.rate_ = p.subsample;
    s.seed_ = p.seed;
    s.first_row_ = first_row;
    bst_ulong n = 0;
    const float* v = nullptr;
    HPCML_RETURN_IF_ERROR(XgbCheck(XGDMatrixGetFloatInfo(dtrain, "label", &n, &v), "labels"));
    s.labels_.assign(v, v + n);
    HPCML_RETURN_IF_ERROR(XgbCheck(XGDMatrixGetFloatInfo(dtrain, "weight", &n, &v), "weights"));
    s.weights_.assign(v, v + n);
    return s;
  }

  // Boosts round `round` (0-based) on the sampled rows.
  Status Round(BoosterHandle b, DMatrixHandle dtrain, std::int64_t round) {
    const char* config =
        R"({"type": 0, "training": true, "iteration_begin": 0, "iteration_end": 0, "strict_shape": false})";
    const bst_ulong* shape = nullptr;
    bst_ulong dim = 0;
    const float* pred = nullptr;
    HPCML_RETURN_IF_ERROR(
        XgbCheck(XGBoosterPredictFromDMatrix(b, dtrain, config, &shape, &dim, &pred),
                 "predicting for the round's gradients"));
    const std::size_t rows = labels_.size();
    const std::size_t k = classes_ > 2 ? static_cast<std::size_t>(classes_) : 1;
    grad_.assign(rows * k, 0.0f);
    hess_.assign(rows * k, 0.0f);
    const std::uint64_t seed = trainer::DeriveSeed(seed_, static_cast<std::uint64_t>(round));
    for (std::size_t i = 0; i < rows; ++i) {
      if (trainer::UniformAt(seed, first_row_ + i) >= rate_) continue;
      const float w = weights_.empty() ? 1.0f : weights_[i];
      const float y = labels_[i];
      if (classes_ == 0) {  // reg:squarederror
        grad_[i] = (pred[i] - y) * w;
        hess_[i] = w;
      } else if (classes_ == 2) {  // binary:logistic
        const float p = pred[i];
        grad_[i] = (p - y) * w;
        hess_[i] = std::max(p * (1.0f - p), 1e-16f) * w;
      } else {  // multi:softprob
        const auto label = static_cast<std::size_t>(y);
        for (std::size_t c = 0; c < k; ++c) {
          const float p = pred[i * k + c];
          grad_[i * k + c] = (c == label ? p - 1.0f : p) * w;
          hess_[i * k + c] = std::max(2.0f * p * (1.0f - p), 1e-16f) * w;
        }
      }
    }
    return XgbCheck(XGBoosterBoostOneIter(b, dtrain, grad_.data(), hess_.data(), grad_.size()),
                    "a sampled round");
  }

 private:
  std::int64_t classes_ = 0;
  double rate_ = 1.0;
  std::uint64_t seed_ = 0;
  std::uint64_t first_row_ = 0;
  std::vector<float> labels_, weights_, grad_, hess_;
};

void DescribeData(const Stream& s, trainer::TrainingData* d) {
  const fc::VersionInfo& v = s.loader.info();
  // The canonical path, as the MLP's lineage records it.
  const std::string path = s.what.substr(0, s.what.rfind(' '));
  std::error_code ec;
  const auto canonical = std::filesystem::canonical(path, ec);
  d->path = ec ? path : canonical.string();
  d->version = v.name;
  d->data_sha256 = v.data_sha256;
  d->zone = v.zone;
  d->classification = v.classification;
  d->rows = v.rows;
}

}  // namespace

Result<GbdtRun> TrainGbdt(const GbdtData& train, const std::optional<GbdtData>& val,
                          std::int64_t classes, const GbdtParams& params,
                          trainer::ModelLineage lineage, const GbdtHooks& hooks) {
  if (params.rounds < 1) return InvalidArgument("--rounds must be >= 1");
  if (params.early_stopping_rounds > 0 && !val) {
    return InvalidArgument("early stopping needs a validation version (--val-version)");
  }
  if (!params.class_weights.empty() &&
      static_cast<std::int64_t>(params.class_weights.size()) != classes) {
    return InvalidArgument("{} class weights for {} classes", params.class_weights.size(), classes);
  }
  const GbdtRanks& ranks = hooks.ranks;
  auto agree = [&](const Status& local) { return ranks.agree ? ranks.agree(local) : local; };
  const auto t0 = Clock::now();
  // Every rank opens its shards; an error on one is agreed on by all.
  std::optional<Stream> tr, va;
  trainer::InputEncoding enc;
  auto open = [&]() -> Status {
    HPCML_ASSIGN_OR_RETURN(tr, OpenStream(train, classes, ranks));
    enc = TreeEncoding(*tr);
    HPCML_RETURN_IF_ERROR(Bind(enc, &*tr));
    tr->class_weights = params.class_weights;
    if (params.balanced_weights) {
      const fc::ColumnStats& label = tr->stats.columns.back();
      if (!label.coded || static_cast<std::int64_t>(label.frequencies.size()) != classes) {
        return InvalidArgument(
            "--class-weight balanced needs a string label's class counts; give "
            "w0,w1,... instead");
      }
      std::uint64_t rows = 0;
      for (std::uint64_t n : label.frequencies) rows += n;
      for (std::uint64_t n : label.frequencies) {
        tr->class_weights.push_back(
            n == 0 ? 0.0f
                   : static_cast<float>(static_cast<double>(rows) /
                                        (static_cast<double>(classes) * static_cast<double>(n))));
      }
    }
    if (!val) return Status::Ok();
    HPCML_ASSIGN_OR_RETURN(va, OpenStream(*val, classes, ranks));
    if (va->loader.info().label_classes != tr->loader.info().label_classes) {
      return InvalidArgument("{} has other label classes than the training version", va->what);
    }
    return Bind(enc, &*va);
  };
  HPCML_RETURN_IF_ERROR(agree(open()));
  if (ranks.connect) HPCML_RETURN_IF_ERROR(ranks.connect());
  // XGBoost's matrices (their quantile sketch is merged across ranks). A
  // bad cell stops a rank's stream, not the collective: agreed on after.
  Result<DMatrix> built = Quantiles(&*tr, nullptr, params);
  HPCML_RETURN_IF_ERROR(agree(built.status()));
  DMatrix dtrain = std::move(*built);
  DMatrix dval;
  if (va) {
    built = Quantiles(&*va, dtrain.get(), params);
    HPCML_RETURN_IF_ERROR(agree(built.status()));
    dval = std::move(*built);
  }
  GbdtRun run;
  run.train_rows = tr->loader.info().rows;
  run.load_seconds = std::chrono::duration<double>(Clock::now() - t0).count();

  // A run resumes only from its own checkpoints: same settings, data and
  // ranks (the model depends on how the rows are split).
  const std::string run_key = Sha256::Hex(
      fmt::format("{}\n{}\n{}{}", hooks.settings, tr->loader.info().data_sha256,
                  va ? va->loader.info().data_sha256 : std::string("no validation"),
                  ranks.world > 1 ? fmt::format("\n{} ranks", ranks.world) : std::string()));

  std::vector<DMatrixHandle> cache = {dtrain.get()};
  if (dval) cache.push_back(dval.get());
  Booster booster;
  std::optional<RowSampler> sampler;
  auto setup = [&]() -> Status {
    BoosterHandle bh = nullptr;
    HPCML_RETURN_IF_ERROR(
        XgbCheck(XGBoosterCreate(cache.data(), cache.size(), &bh), "XGBoosterCreate"));
    booster.reset(bh);
    if (hooks.resume) {
      if (hooks.resume->run_key != run_key) {
        return FailedPrecondition(
            "the checkpoint at round {} is of another run (other settings, data or ranks); "
            "train into another --checkpoint-dir",
            hooks.resume->round);
      }
      HPCML_RETURN_IF_ERROR(
          XgbCheck(XGBoosterLoadModelFromBuffer(booster.get(), hooks.resume->booster.data(),
                                                hooks.resume->booster.size()),
                   "loading the checkpoint's trees"));
      run.rounds = hooks.resume->rounds;
      run.resumed_round = hooks.resume->round;
    }
    HPCML_RETURN_IF_ERROR(SetParams(booster.get(), classes, params));
    if (params.subsample < 1.0) {
      HPCML_ASSIGN_OR_RETURN(sampler, RowSampler::Make(dtrain.get(), classes, params,
                                                       tr->loader.plan().shard_begin()));
    }
    return Status::Ok();
  };
  HPCML_RETURN_IF_ERROR(agree(setup()));
  const char* names[] = {"train", "val"};
  double best = std::numeric_limits<double>::infinity();
  // Early stopping's state after round m; true when the run ends there.
  auto track = [&](const RoundMetrics& m) {
    if (!m.val_loss || *m.val_loss < best) {
      best = m.val_loss.value_or(best);
      run.best_round = m.round;
      return false;
    }
    return params.early_stopping_rounds > 0 &&
           m.round - run.best_round >= params.early_stopping_rounds;
  };
  bool stopped_early = false;
  for (const RoundMetrics& m : run.rounds) stopped_early = track(m);
  auto save = [&](std::int64_t round) -> Status {
    if (!hooks.save) return Status::Ok();
    GbdtCheckpoint c;
    c.round = round;
    HPCML_ASSIGN_OR_RETURN(c.booster, SaveBooster(booster.get()));
    c.run_key = run_key;
    c.rounds = run.rounds;
    return hooks.save(c);
  };
  for (std::int64_t i = run.resumed_round; i < params.rounds && !stopped_early; ++i) {
    const auto r0 = Clock::now();
    if (sampler) {
      HPCML_RETURN_IF_ERROR(sampler->Round(booster.get(), dtrain.get(), i));
    } else {
      HPCML_RETURN_IF_ERROR(XgbCheck(
          XGBoosterUpdateOneIter(booster.get(), static_cast<int>(i), dtrain.get()), "a round"));
    }
    RoundMetrics m;
    m.round = i + 1;
    const std::int64_t every = std::max<std::int64_t>(params.train_loss_every, 1);
    const bool train_loss = m.round == 1 || m.round % every == 0 || m.round == params.rounds;
    // The matrices evaluated: the training one only at those rounds.
    std::vector<DMatrixHandle> eval(cache.begin() + (train_loss ? 0 : 1), cache.end());
    const char** eval_names = train_loss ? names : names + 1;
    if (!eval.empty()) {
      const char* text = nullptr;
      HPCML_RETURN_IF_ERROR(
          XgbCheck(XGBoosterEvalOneIter(booster.get(), static_cast<int>(i), eval.data(), eval_names,
                                        eval.size(), &text),
                   "evaluating a round"));
      HPCML_RETURN_IF_ERROR(ParseEval(text, &m));
      if ((m.train_loss && !std::isfinite(*m.train_loss)) ||
          (m.val_loss && !std::isfinite(*m.val_loss))) {
        return FailedPrecondition("round {}: non-finite loss ({}); no model written", m.round,
                                  text);
      }
    }
    m.seconds = std::chrono::duration<double>(Clock::now() - r0).count();
    run.rounds.push_back(m);
    if (hooks.on_round) hooks.on_round(m);
    stopped_early = track(m);
    if (stopped_early || !hooks.after_round) continue;
    const GbdtHooks::Action act = hooks.after_round(m.round);
    if (act != GbdtHooks::Action::kContinue) HPCML_RETURN_IF_ERROR(save(m.round));
    if (act == GbdtHooks::Action::kSaveAndStop) {
      run.interrupted = true;
      return run;
    }
  }
  // Without early stopping every round's trees are kept (as XGBoost's train
  // keeps them), and the validation record is the last round's.
  if (!val || params.early_stopping_rounds == 0) {
    run.best_round = static_cast<std::int64_t>(run.rounds.size());
  }
  // The trees up to the best round: what python-xgboost predicts with
  // best_iteration after early stopping.
  Booster kept;
  if (run.best_round < static_cast<std::int64_t>(run.rounds.size())) {
    BoosterHandle sliced = nullptr;
    HPCML_RETURN_IF_ERROR(
        XgbCheck(XGBoosterSlice(booster.get(), 0, static_cast<int>(run.best_round), 1, &sliced),
                 "keeping the best round's trees"));
    kept.reset(sliced);
  }
  // Names and kinds on the booster itself, as python-xgboost's train sets
  // them: a user loading /booster sees the features, and hpcml-infer checks them.
  const BoosterHandle out = kept ? kept.get() : booster.get();
  HPCML_RETURN_IF_ERROR(
      XgbCheck(XGBoosterSetStrFeatureInfo(out, "feature_name", tr->names.data(), tr->names.size()),
               "feature names"));
  HPCML_RETURN_IF_ERROR(
      XgbCheck(XGBoosterSetStrFeatureInfo(out, "feature_type", tr->types.data(), tr->types.size()),
               "feature types"));
  HPCML_ASSIGN_OR_RETURN(run.model.booster, SaveBooster(out));
  run.model.objective = Objective(classes);
  run.model.outputs = classes == 0 ? 1 : classes;
  run.model.rounds = run.best_round;

  const fc::VersionInfo& v = tr->loader.info();
  DescribeData(*tr, &lineage.data);
  if (classes > 0 && !tr->stats.columns.empty() && tr->stats.columns.back().coded) {
    lineage.data.class_rows = tr->stats.columns.back().frequencies;
  }
  lineage.input.feature_names = v.feature_names;
  lineage.input.label_name = v.label_name;
  lineage.input.label_classes = v.label_classes;
  lineage.input.encoding = enc;
  lineage.input.stats = trainer::SkewStats(tr->stats, v.features());
  // A version a derive standardised: scoring raw rows standardises them
  // first (hpcml-infer, the ONNX graph).
  HPCML_RETURN_IF_ERROR(trainer::RecordStandardization(v, train.path, &lineage.input));
  lineage.steps = run.best_round;
  lineage.first_loss = run.rounds.front().train_loss.value_or(0.0);
  // The training loss of the last round that has one, up to the best.
  for (std::int64_t r = run.best_round; r >= 1; --r) {
    if (const auto& l = run.rounds[static_cast<size_t>(r - 1)].train_loss) {
      lineage.final_loss = *l;
      break;
    }
  }
  if (va) {
    trainer::ValidationRecord rec;
    DescribeData(*va, &rec.data);
    rec.rows = static_cast<std::int64_t>(va->loader.rows());
    rec.step = run.best_round;
    rec.selected = params.early_stopping_rounds > 0 ? "best" : "final";
    const RoundMetrics& b = run.rounds[static_cast<size_t>(run.best_round - 1)];
    rec.monitor = classes == 0 ? "rmse" : "log_loss";
    rec.metrics =
        b.val_auc ? fmt::format(R"({{"{}": {}, "auc": {}}})", rec.monitor, *b.val_loss, *b.val_auc)
                  : fmt::format(R"({{"{}": {}}})", rec.monitor, b.val_loss.value_or(0));
    lineage.validation = rec;
  }
  run.model.lineage = std::move(lineage);
  return run;
}

}  // namespace hpcml::trees
