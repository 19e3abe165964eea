#include "train_options.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "hpcml/common/cli.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/topology/planner.hpp"
#include "hpcml/trainer/partition.hpp"

namespace hpcml::trainer {

std::string_view Name(BindMode b) {
  switch (b) {
    case BindMode::kAuto:
      return "auto";
    case BindMode::kOff:
      return "off";
    case BindMode::kForce:
      return "force";
  }
  return "?";
}

namespace {

// The optimiser's settings work in float: each must be a finite number >= 0
// that a float holds (a NaN or infinite rate would make every weight one).
const CLI::Validator kFiniteNonNegative(
    [](std::string& text) -> std::string {
      double v = 0;
      std::size_t used = 0;
      try {
        v = std::stod(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != text.size() || !std::isfinite(v) || v < 0 ||
          v > static_cast<double>(std::numeric_limits<float>::max())) {
        return "'" + text + "' is not a finite number >= 0 that fits a float";
      }
      return std::string();
    },
    "FINITE>=0");

// The grid and the backend.
void AddPlacementOptions(CLI::App& app, TrainOptions& o) {
  app.add_option("--dp", o.grid.dp, "data-parallel replicas")->capture_default_str();
  app.add_option("--pp", o.grid.pp, "pipeline stages")->capture_default_str();
  app.add_option("--tp", o.grid.tp, "tensor-parallel shards per layer pair")->capture_default_str();
  app.add_option("--threads", o.threads,
                 "math threads per rank (default: OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, "
                 "else the rank's cores); never more than the rank's share of its node's cores")
      ->check(CLI::PositiveNumber);
  AddEnumOption(app, "--gemm", &o.gemm, {GemmLibrary::kOneDnn, GemmLibrary::kOpenBlas},
                "cpu backend GEMM library: onednn or openblas (fallback)");
  AddEnumOption(app, "--backend", &o.backend, {BackendKind::kCpu, BackendKind::kCuda},
                "cpu or cuda");
}

// --model gbdt's parameters, in XGBoost's names where they have one.
void AddTreeOptions(CLI::App& app, TrainOptions& o) {
  app.add_option("--rounds", o.rounds, "gbdt: boosting rounds (trees per class)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-depth", o.max_depth, "gbdt: tree depth")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--eta", o.eta, "gbdt: learning rate (shrinkage)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--min-child-weight", o.min_child_weight, "gbdt: least hessian sum in a leaf")
      ->capture_default_str()
      ->check(kFiniteNonNegative);
  app.add_option("--lambda", o.lambda, "gbdt: L2 regularisation of leaf weights")
      ->capture_default_str()
      ->check(kFiniteNonNegative);
  app.add_option("--subsample", o.subsample,
                 "gbdt: share of the rows each round sees (drawn by hpcml: resumable)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0).description("in (0, 1]"));
  app.add_option("--colsample", o.colsample, "gbdt: share of the features each tree sees")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0).description("in (0, 1]"));
  app.add_option("--max-bin", o.max_bin, "gbdt: histogram bins per feature")
      ->capture_default_str()
      ->check(CLI::Range(2, 65536));
}

// The model, its input and the schedule of the batch.
void AddModelOptions(CLI::App& app, TrainOptions& o) {
  AddEnumOption(app, "--model", &o.model, {ModelKind::kMlp, ModelKind::kGbdt},
                "mlp, or gbdt: gradient-boosted trees (XGBoost, one rank, --data only)");
  app.add_option("--input-dim", o.input_dim, "features per sample (--synthetic only)")
      ->capture_default_str();
  app.add_option("--hidden", o.hidden,
                 "hidden layer widths, comma-separated, e.g. 256,256,256 ('' for none)")
      ->capture_default_str();
  app.add_option("--outputs", o.outputs, "classes (ce) or regression targets (mse)")
      ->capture_default_str();
  AddEnumOption(app, "--activation", &o.activation,
                {Activation::kRelu, Activation::kGelu, Activation::kTanh}, "relu, gelu or tanh");
  AddEnumOption(app, "--loss", &o.loss, {LossKind::kCrossEntropy, LossKind::kMse},
                "ce (softmax cross-entropy) or mse");
  app.add_flag("--synthetic", o.synthetic, "train on the synthetic teacher data set");
  app.add_option("--synthetic-samples", o.synthetic_samples,
                 "size of the synthetic data set (0: fresh samples every step)")
      ->capture_default_str();
  app.add_option("--data-seed", o.data_seed, "seed of the synthetic data / shuffle seed of --data")
      ->capture_default_str();
  app.add_option("--data", o.data, "feature set (.h5) to train on");
  app.add_option("--data-version", o.data_version, "version of --data (default: latest)");
  app.add_option("--batch", o.batch, "global batch (samples per step)")->capture_default_str();
  app.add_option("--microbatches", o.microbatches, "microbatches per replica and step")
      ->capture_default_str();
  AddEnumOption(app, "--schedule", &o.schedule, {ScheduleKind::kGpipe, ScheduleKind::k1F1B},
                "pipeline schedule: gpipe or 1f1b");
  app.add_option("--steps", o.steps, "optimisation steps")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--embed-dim", o.embed_dim,
                 "embedding widths of --data's category features: N for all, COL=N for one, "
                 "comma-separated (default: min(32, round(1.6 * values^0.56)))");
  app.add_option("--embed-min-count", o.embed_min_count,
                 "category values with fewer training rows share the unknown embedding")
      ->capture_default_str();
  app.add_option("--class-weight", o.class_weight,
                 "loss weight per class: balanced, or w0,w1,... (default: 1 each)");
}

// The optimiser, gradient exchange and outputs.
void AddOptimizerOptions(CLI::App& app, TrainOptions& o) {
  app.add_option("--lr", o.lr, "peak learning rate")
      ->capture_default_str()
      ->check(kFiniteNonNegative);
  app.add_option("--min-lr", o.min_lr, "learning rate at the end of the cosine decay")
      ->capture_default_str()
      ->check(kFiniteNonNegative);
  app.add_option("--warmup", o.warmup, "linear warm-up steps")->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay")
      ->capture_default_str()
      ->check(kFiniteNonNegative);
  app.add_option("--clip", o.clip, "global gradient-norm clip (0: off)")
      ->capture_default_str()
      ->check(kFiniteNonNegative);
  app.add_option("--seed", o.seed, "model initialisation seed")->capture_default_str();
  app.add_option("--bucket-mb", o.bucket_mb, "data-parallel all-reduce bucket size in MiB")
      ->capture_default_str();
  app.add_flag("--no-overlap", o.no_overlap,
               "reduce gradients after the backward pass instead of during it");
  app.add_flag("--zero1", o.zero1,
               "shard the AdamW moments over the data-parallel replicas (ZeRO-1; cpu backend)");
  app.add_option("--log-interval", o.log_interval, "steps between log lines")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--metrics", o.metrics, "JSON-lines metrics file written by rank 0");
  app.add_option("--metrics-textfile", o.metrics_textfile,
                 "Prometheus gauges (a *.prom file in node_exporter's textfile directory), "
                 "replaced by rank 0 at each log interval");
  app.add_option("--output", o.output, "final model as HDF5, written by rank 0");
}

// The held-out set, when to evaluate, the best model, early stopping.
void AddValidationOptions(CLI::App& app, TrainOptions& o) {
  app.add_option("--val-data", o.val_data,
                 "feature set (.h5) to validate on (default: --data when --val-version is given)");
  app.add_option("--val-version", o.val_version,
                 "version of --val-data (default: latest); must have --data's features and label");
  app.add_option("--val-samples", o.val_samples,
                 "--synthetic: validate on this many held-out samples (same teacher, other "
                 "features)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--eval-interval", o.eval_interval,
                 "evaluate on the validation set every N steps and after the last (0: after the "
                 "last only)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--early-stop-patience", o.early_stop_patience,
                 "stop after K evaluations without a lower validation log loss (ce) or RMSE "
                 "(mse) than the best (0: off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--best-output", o.best_output,
                 "model of the best evaluation, rewritten at each new best (default: --output "
                 "with .best.h5)");
}

// Checkpoints, preemption, placement and the Slurm job.
void AddJobOptions(CLI::App& app, TrainOptions& o) {
  app.add_option("--checkpoint-dir", o.ckpt.dir,
                 "save checkpoint sets here and resume from the newest complete one");
  app.add_option("--checkpoint-every", o.ckpt.every_steps, "save every N steps (0: off)")
      ->capture_default_str();
  app.add_option("--checkpoint-seconds", o.ckpt.every_seconds, "save every T seconds (0: off)")
      ->capture_default_str();
  app.add_option("--checkpoint-adaptive", o.ckpt_adaptive,
                 "MIN,MAX seconds: Daly's interval from the measured save cost and interruptions");
  app.add_option("--checkpoint-keep", o.ckpt.keep, "complete sets to keep")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_flag("--checkpoint-sync", o.ckpt_sync, "save synchronously (default: in the background)");
  app.add_option("--spot-url", o.ckpt.spot_url,
                 "cloud metadata URL polled for a reclaim notice (http://...)");
  AddEnumOption(
      app, "--spot-kind", &o.ckpt.spot_kind,
      {checkpoint::SpotNoticePoller::Kind::kAws, checkpoint::SpotNoticePoller::Kind::kGcp},
      "aws or gcp");
  app.add_option("--spot-poll-ms", o.ckpt.spot_poll_ms, "spot notice poll interval")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--stop-before-end", o.ckpt.stop_before_end_seconds,
                 "save and stop when Slurm's time left drops below this many seconds (0: off)")
      ->capture_default_str();
  app.add_flag("--plan", o.plan,
               "print the placement plan (dp x pp x tp, per-rank node/GPU/cores, predicted "
               "communication) for this allocation and exit");
  AddEnumOption(app, "--bind", &o.bind, {BindMode::kAuto, BindMode::kOff, BindMode::kForce},
                "bind ranks to cores near their GPU: auto (not when the launcher bound them), "
                "off, force");
  app.add_option("--usage-dir", o.usage_dir,
                 "write the attempt's usage record here (default: --checkpoint-dir)");
  app.add_option("--gpu-type", o.gpu_type, "GPU type for the usage record, e.g. h100");
  app.add_flag("--no-usage-comment", o.no_comment,
               "do not copy the usage summary into the job Comment");
  app.add_option("--stop-exit-code", o.stop_exit_code,
                 "exit code after a save-and-stop (list it in slurm.conf RequeueExit)")
      ->capture_default_str();
}

// The validation options make sense together (before any input is opened).
Status CheckValidationOptions(const TrainOptions& o) {
  const bool versioned = !o.val_data.empty() || !o.val_version.empty();
  const auto needs_set = [](const char* option, const std::string& value) {
    return InvalidArgument(
        "{} {} needs a validation set: --val-data/--val-version (with --data) or --val-samples "
        "(with --synthetic)",
        option, value);
  };
  if (!versioned && o.val_samples == 0) {
    if (o.eval_interval > 0) return needs_set("--eval-interval", std::to_string(o.eval_interval));
    if (o.early_stop_patience > 0) {
      return needs_set("--early-stop-patience", std::to_string(o.early_stop_patience));
    }
    if (!o.best_output.empty()) return needs_set("--best-output", o.best_output);
  }
  if (versioned && o.val_samples > 0) {
    return InvalidArgument(
        "--val-samples {} (a synthetic held-out set) and --val-data/--val-version exclude each "
        "other",
        o.val_samples);
  }
  if (versioned && o.data.empty()) {
    return InvalidArgument(
        "--val-data/--val-version need --data: the validation version's features are checked "
        "against the training version's (with --synthetic use --val-samples)");
  }
  if (o.val_samples > 0 && !o.synthetic) {
    return InvalidArgument(
        "--val-samples {} is for --synthetic runs; with --data give --val-data/--val-version",
        o.val_samples);
  }
  if (o.early_stop_patience > 0 && o.eval_interval == 0) {
    return InvalidArgument(
        "--early-stop-patience {} needs --eval-interval N > 0 (with 0 the model is evaluated "
        "only after the last step)",
        o.early_stop_patience);
  }
  const std::string best = BestOutputPath(o);
  if (!best.empty() && best == o.output) {
    return InvalidArgument("--best-output {} is also --output: give the best model its own file",
                           best);
  }
  return Status::Ok();
}

}  // namespace

std::string BestOutputPath(const TrainOptions& o) {
  if (!o.best_output.empty()) return o.best_output;
  if (o.output.empty()) return "";
  const std::string ext = ".h5";
  if (o.output.size() > ext.size() && o.output.ends_with(ext)) {
    return o.output.substr(0, o.output.size() - ext.size()) + ".best.h5";
  }
  return o.output + ".best.h5";
}

// In the order set-up used to meet them: with several wrong, the message is
// the one it always was.
std::string_view Name(ModelKind m) {
  return m == ModelKind::kMlp ? "mlp" : "gbdt";
}

Status CheckTrainOptions(const TrainOptions& o) {
  HPCML_RETURN_IF_ERROR(CheckValidationOptions(o));
  HPCML_RETURN_IF_ERROR(topology::ParseWidths(o.hidden, "--hidden").status());
  if (!o.data.empty() && o.synthetic) {
    return InvalidArgument("--data and --synthetic exclude each other");
  }
  if (o.data.empty() && !o.synthetic) {
    return InvalidArgument("no input: give --data <feature set> or --synthetic");
  }
  return Status::Ok();
}

namespace {

// A positive integer option value, or an error naming the option.
Result<std::int64_t> PositiveInt(std::string_view option, const std::string& text) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || v < 1) {
    return InvalidArgument("{} '{}': not a positive integer", option, text);
  }
  return static_cast<std::int64_t>(v);
}

}  // namespace

Result<EncodingOptions> ParseEncodingOptions(const TrainOptions& o) {
  EncodingOptions e;
  e.min_count = o.embed_min_count;
  for (const std::string& item : SplitList(o.embed_dim)) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      HPCML_ASSIGN_OR_RETURN(e.embed_dim, PositiveInt("--embed-dim", item));
      continue;
    }
    HPCML_ASSIGN_OR_RETURN(std::int64_t d, PositiveInt("--embed-dim", item.substr(eq + 1)));
    e.embed_dims[item.substr(0, eq)] = d;
  }
  return e;
}

Result<std::vector<float>> ClassWeights(const TrainOptions& o, std::int64_t classes,
                                        const std::vector<std::uint64_t>& class_rows) {
  if (o.class_weight.empty()) return std::vector<float>{};
  if (o.loss != LossKind::kCrossEntropy) {
    return InvalidArgument("--class-weight needs --loss ce");
  }
  std::vector<float> w;
  if (o.class_weight == "balanced") {
    if (static_cast<std::int64_t>(class_rows.size()) != classes) {
      return InvalidArgument(
          "--class-weight balanced needs the training rows per class, which only a --data "
          "version's label statistics give (a string or 0/1 label); give w0,w1,... instead");
    }
    std::uint64_t rows = 0;
    for (std::uint64_t n : class_rows) rows += n;
    for (std::int64_t c = 0; c < classes; ++c) {
      const std::uint64_t n = class_rows[static_cast<size_t>(c)];
      if (n == 0) {
        return InvalidArgument("--class-weight balanced: class {} has no training rows", c);
      }
      w.push_back(static_cast<float>(static_cast<double>(rows) /
                                     (static_cast<double>(classes) * static_cast<double>(n))));
    }
    return w;
  }
  for (const std::string& item : SplitList(o.class_weight)) {
    std::size_t used = 0;
    float v = 0.0f;
    try {
      v = std::stof(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || !(v > 0.0f) || !std::isfinite(v)) {
      return InvalidArgument("--class-weight '{}': '{}' is not a positive number", o.class_weight,
                             item);
    }
    w.push_back(v);
  }
  if (static_cast<std::int64_t>(w.size()) != classes) {
    return InvalidArgument("--class-weight gives {} weights for {} classes (--outputs)", w.size(),
                           classes);
  }
  return w;
}

// In this order, so --help lists them as before.
void AddTrainOptions(CLI::App& app, TrainOptions& o) {
  AddPlacementOptions(app, o);
  AddModelOptions(app, o);
  AddTreeOptions(app, o);
  AddOptimizerOptions(app, o);
  AddValidationOptions(app, o);
  AddJobOptions(app, o);
}

}  // namespace hpcml::trainer
