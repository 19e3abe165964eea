// hpcml-train's command line: every option, its default and its help text.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "checkpointing.hpp"
#include "hpcml/common/status.hpp"
#include "hpcml/trainer/backend.hpp"
#include "hpcml/trainer/encoding.hpp"
#include "hpcml/trainer/grid.hpp"
#include "hpcml/trainer/partition.hpp"

namespace hpcml::trainer {

// --bind: cores near the rank's GPU (or its share of the node's cores), not
// when the launcher already bound the rank (auto), never (off) or always
// (force).
enum class BindMode { kAuto, kOff, kForce };
std::string_view Name(BindMode b);

// --model: the MLP (every layout, both backends) or gradient-boosted trees
// (XGBoost, one rank; docs/trainer.md "Trees").
enum class ModelKind { kMlp, kGbdt };
std::string_view Name(ModelKind m);

struct TrainOptions {
  ModelKind model = ModelKind::kMlp;
  // --model gbdt: XGBoost's parameters (its defaults).
  std::int64_t rounds = 100;
  int max_depth = 6;
  double eta = 0.3, min_child_weight = 1.0, lambda = 1.0, colsample = 1.0, subsample = 1.0;
  int max_bin = 256;
  GridShape grid;
  BackendKind backend = BackendKind::kCpu;
  GemmLibrary gemm = GemmLibrary::kOneDnn;  // the cpu backend's
  int threads = 0;  // 0: OMP_NUM_THREADS, SLURM_CPUS_PER_TASK or the rank's cores
  std::int64_t input_dim = 32;
  std::string hidden = "64,64";
  std::int64_t outputs = 4;
  Activation activation = Activation::kRelu;
  LossKind loss = LossKind::kCrossEntropy;
  bool synthetic = false;
  std::int64_t synthetic_samples = 0;
  std::uint64_t data_seed = 1234;
  std::string data, data_version;
  std::int64_t batch = 32;
  int microbatches = 1;
  ScheduleKind schedule = ScheduleKind::k1F1B;
  std::int64_t steps = 100;
  double lr = 1e-3, min_lr = 0.0;
  std::int64_t warmup = 0;
  float weight_decay = 0.0f, clip = 1.0f;
  std::uint64_t seed = 1;
  double bucket_mb = 1.0;
  bool no_overlap = false;
  bool zero1 = false;
  // The input encoding of --data (encoding.hpp) and the loss's class weights.
  std::string embed_dim;  // "8", "zip=16,state=4" or both kinds; "": the size rule
  std::uint64_t embed_min_count = 5;
  std::string class_weight;  // "", "balanced" or "w0,w1,..."
  std::int64_t log_interval = 10;
  std::string metrics, metrics_textfile, output;
  // Validation (docs/trainer.md, "Validation").
  std::string val_data, val_version;
  std::int64_t val_samples = 0;    // --synthetic: held-out samples
  std::int64_t eval_interval = 0;  // 0: at the end only
  int early_stop_patience = 0;     // 0: off
  std::string best_output;         // default: --output's name with .best.h5
  CheckpointOptions ckpt;
  std::string ckpt_adaptive;  // "min,max" seconds
  bool ckpt_sync = false;
  int stop_exit_code = 85;
  std::string usage_dir;  // default: the checkpoint directory
  std::string gpu_type;
  bool no_comment = false;
  bool plan = false;  // print the placement plan and exit
  BindMode bind = BindMode::kAuto;
};

// Registers every option of hpcml-train on `app`, writing into `o`.
void AddTrainOptions(CLI::App& app, TrainOptions& o);

// What the command line alone shows to be wrong, beyond CLI11's own checks:
// the validation options together (docs/trainer.md, "Validation"), --hidden,
// --activation, --loss, the input (--data or --synthetic), --schedule. Pure,
// so every rank (same argv) finds the same: main calls it before any work
// and exits 2 (a usage error) without an agreement; Program::Run calls it
// again, for its own contract. Problems that need the job or the data (a
// grid larger than the world, a width the tensor group does not divide)
// are found during set-up: exit 1.
Status CheckTrainOptions(const TrainOptions& o);
// --embed-dim and --embed-min-count as the encoding's options.
Result<EncodingOptions> ParseEncodingOptions(const TrainOptions& o);
// --class-weight for `classes` classes: empty (none), given weights, or
// "balanced" (rows / (classes * class rows), as scikit-learn's), which needs
// the training rows per class (`class_rows`, from the data's statistics).
Result<std::vector<float>> ClassWeights(const TrainOptions& o, std::int64_t classes,
                                        const std::vector<std::uint64_t>& class_rows);

// --best-output, or by default --output's name with .best.h5
// (run/model.h5 -> run/model.best.h5; any other name: + ".best.h5"); empty
// when neither is given.
std::string BestOutputPath(const TrainOptions& o);

}  // namespace hpcml::trainer
