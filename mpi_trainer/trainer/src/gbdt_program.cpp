#include "gbdt_program.hpp"

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "hpcml/common/identity.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/time.hpp"
#include "hpcml/trees/train.hpp"
#include "metrics_textfile.hpp"

namespace hpcml::trainer {
namespace {

// Math threads: --threads, else OMP_NUM_THREADS, SLURM_CPUS_PER_TASK, the
// machine's cores (as for the MLP's CPU backend).
int Threads(const TrainOptions& o) {
  if (o.threads > 0) return o.threads;
  for (const char* var : {"OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && std::atoi(v) > 0) return std::atoi(v);
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Status CheckTreeOptions(const TrainOptions& o) {
  if (o.data.empty()) return InvalidArgument("--model gbdt trains on --data (a feature set)");
  if (o.grid.dp * o.grid.pp * o.grid.tp != 1) {
    return InvalidArgument("--model gbdt runs on one rank: leave --dp, --pp and --tp at 1");
  }
  if (!o.val_data.empty() && o.val_version.empty()) {
    return InvalidArgument("--val-data needs --val-version");
  }
  if (o.early_stop_patience > 0 && o.val_version.empty()) {
    return InvalidArgument("--early-stop-patience needs a validation version (--val-version)");
  }
  if (!o.ckpt.dir.empty()) {
    return InvalidArgument("--checkpoint-dir: checkpoints of GBDT runs are not built yet");
  }
  if (o.loss == LossKind::kMse && o.outputs != 1) {
    return InvalidArgument("--model gbdt --loss mse has one output (--outputs 1)");
  }
  return Status::Ok();
}

namespace {

std::string SettingsJson(const TrainOptions& o, const trees::GbdtParams& p) {
  nlohmann::ordered_json j = {{"model", "gbdt"},
                              {"outputs", o.outputs},
                              {"loss", Name(o.loss)},
                              {"rounds", p.rounds},
                              {"max_depth", p.max_depth},
                              {"eta", p.eta},
                              {"min_child_weight", p.min_child_weight},
                              {"lambda", p.lambda},
                              {"colsample_bytree", p.colsample_bytree},
                              {"max_bin", p.max_bin},
                              {"seed", p.seed},
                              {"threads", p.threads},
                              {"early_stop_patience", p.early_stopping_rounds},
                              {"class_weight", o.class_weight},
                              {"class_weights", p.class_weights},
                              {"xgboost", "libxgboost 1.7 (C API)"}};
  return JsonText(j);
}

}  // namespace

Status RunGbdt(const TrainOptions& o, Logger& log) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world > 1) {
    return InvalidArgument("--model gbdt runs on one rank; this job has {} (use -n 1)", world);
  }
  HPCML_RETURN_IF_ERROR(CheckTreeOptions(o));
  const std::int64_t classes = o.loss == LossKind::kCrossEntropy ? o.outputs : 0;
  trees::GbdtParams p;
  p.rounds = o.rounds;
  p.max_depth = o.max_depth;
  p.eta = o.eta;
  p.min_child_weight = o.min_child_weight;
  p.lambda = o.lambda;
  p.colsample_bytree = o.colsample;
  p.max_bin = o.max_bin;
  p.threads = Threads(o);
  p.seed = o.seed;
  p.early_stopping_rounds = o.early_stop_patience;
  p.train_loss_every = o.log_interval;
  p.balanced_weights = o.class_weight == "balanced";
  if (!o.class_weight.empty() && !p.balanced_weights) {
    HPCML_ASSIGN_OR_RETURN(p.class_weights, ClassWeights(o, classes, {}));
  }
  std::optional<trees::GbdtData> val;
  if (!o.val_version.empty()) {
    val = trees::GbdtData{o.val_data.empty() ? o.data : o.val_data, o.val_version};
  }
  std::ofstream metrics;
  if (!o.metrics.empty()) {
    metrics.open(o.metrics, std::ios::trunc);
    if (!metrics) return InvalidArgument("--metrics {}: cannot open for writing", o.metrics);
    metrics << JsonText(nlohmann::ordered_json{{"event", "start"},
                                               {"model", "gbdt"},
                                               {"rounds", p.rounds},
                                               {"threads", p.threads}})
            << '\n';
  }
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* restarts = std::getenv("SLURM_RESTART_COUNT");
  // The MLP's gauges, a round for a step (docs/monitoring.md).
  TrainerGauges gauges;
  gauges.job_id = job ? job : "";
  gauges.attempt = restarts ? std::atoi(restarts) : 0;
  gauges.steps = p.rounds;
  gauges.now_unix = UnixNow();
  MetricsTextfile textfile;
  if (!o.metrics_textfile.empty()) {
    HPCML_RETURN_IF_ERROR(textfile.Open(o.metrics_textfile, gauges));
  }
  ModelLineage lineage;
  lineage.created_by = CurrentPrincipal();
  lineage.job_id = job ? job : "";
  lineage.attempt = job ? (restarts ? restarts : "0") : "";
  lineage.tool = fmt::format("hpcml-train {}", Version());
  lineage.settings = SettingsJson(o, p);
  log.info("gbdt: {} rounds at most, depth {}, eta {}, {} thread(s){}", p.rounds, p.max_depth,
           p.eta, p.threads,
           val ? fmt::format(", validating on {} {}", val->path, val->version) : "");
  auto on_round = [&](const trees::RoundMetrics& m) {
    if (metrics.is_open()) {
      nlohmann::ordered_json j = {{"round", m.round}};
      if (m.train_loss) j["train_loss"] = *m.train_loss;
      if (m.val_loss) j["val_loss"] = *m.val_loss;
      if (m.val_auc) j["val_auc"] = *m.val_auc;
      j["seconds"] = m.seconds;
      metrics << JsonText(j) << '\n' << std::flush;
    }
    if (m.round == 1 || m.round % o.log_interval == 0 || m.round == p.rounds) {
      gauges.step = m.round;
      if (m.train_loss) gauges.loss = *m.train_loss;
      gauges.now_unix = UnixNow();
      if (Status st = textfile.Write(gauges); !st.ok()) log.warn("{}", st.message());
      log.info("round {}/{} train loss {:.6f}{}{} ({:.3f} s)", m.round, p.rounds,
               m.train_loss.value_or(NAN),
               m.val_loss ? fmt::format(" val loss {:.6f}", *m.val_loss) : "",
               m.val_auc ? fmt::format(" auc {:.4f}", *m.val_auc) : "", m.seconds);
    }
  };
  HPCML_ASSIGN_OR_RETURN(trees::GbdtRun run,
                         trees::TrainGbdt(trees::GbdtData{o.data, o.data_version}, val, classes, p,
                                          std::move(lineage), on_round));
  run.model.lineage.created_at = UtcNow();
  const bool stopped = static_cast<std::int64_t>(run.rounds.size()) < p.rounds;
  if (stopped) {
    log.info("early stop at round {}: {} rounds without a lower validation loss than at round {}",
             run.rounds.size(), p.early_stopping_rounds, run.best_round);
  }
  if (!o.output.empty()) HPCML_RETURN_IF_ERROR(trees::SaveGbdtModel(o.output, run.model));
  if (metrics.is_open()) {
    metrics << JsonText(nlohmann::ordered_json{{"event", "done"},
                                               {"rounds", run.rounds.size()},
                                               {"best_round", run.best_round},
                                               {"early_stopped", stopped},
                                               {"load_seconds", run.load_seconds}})
            << '\n';
  }
  log.info("done: {} rounds (trees of {} kept), data in {:.2f} s{}", run.rounds.size(),
           run.best_round, run.load_seconds,
           o.output.empty() ? std::string() : fmt::format(", model written to {}", o.output));
  return Status::Ok();
}

}  // namespace hpcml::trainer
