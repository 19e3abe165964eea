#include "gbdt_program.hpp"

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "checkpointing.hpp"
#include "hpcml/accounting/attempt.hpp"
#include "hpcml/checkpoint/triggers.hpp"
#include "hpcml/common/identity.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/mpi.hpp"
#include "hpcml/common/time.hpp"
#include "hpcml/trees/checkpoint.hpp"
#include "hpcml/trees/train.hpp"
#include "metrics_textfile.hpp"
#include "xgb_world.hpp"

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
    return InvalidArgument(
        "--model gbdt splits the rows across all the job's ranks: leave --dp, --pp and --tp at 1");
  }
  if (!o.val_data.empty() && o.val_version.empty()) {
    return InvalidArgument("--val-data needs --val-version");
  }
  if (o.early_stop_patience > 0 && o.val_version.empty()) {
    return InvalidArgument("--early-stop-patience needs a validation version (--val-version)");
  }
  if (!o.ckpt.dir.empty() && o.colsample < 1.0) {
    return InvalidArgument(
        "--colsample {} with --checkpoint-dir: XGBoost's column sampling cannot be resumed "
        "exactly (a resumed run would end with another model); leave --colsample at 1, or "
        "train without checkpoints",
        o.colsample);
  }
  if (!o.ckpt_adaptive.empty()) {
    return InvalidArgument(
        "--checkpoint-adaptive is for the MLP; trees save every --checkpoint-every rounds or "
        "--checkpoint-seconds (a save is one small file)");
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
                              {"subsample", p.subsample},
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

// Rank 0's newest checkpoint in every rank (the directory may be rank 0's
// only); warnings are rank 0's.
Result<std::optional<trees::GbdtCheckpoint>> LoadLatest(const std::string& dir, bool rank0,
                                                        Logger& log) {
  std::optional<trees::GbdtCheckpoint> mine;
  Status st = Status::Ok();
  if (rank0) {
    std::vector<std::string> warnings;
    auto loaded = trees::LoadLatestGbdtCheckpoint(dir, &warnings);
    for (const std::string& w : warnings) log.warn("{}", w);
    if (loaded.ok()) mine = std::move(*loaded);
    st = loaded.status();
  }
  HPCML_RETURN_IF_ERROR(AgreeOnStatus(MPI_COMM_WORLD, st));
  const std::vector<std::string> header =
      AllGatherStrings(MPI_COMM_WORLD, mine ? trees::GbdtCheckpointHeader(*mine) : std::string());
  if (header[0].empty()) return std::optional<trees::GbdtCheckpoint>();
  std::vector<std::string> booster =
      AllGatherStrings(MPI_COMM_WORLD, mine ? mine->booster : std::string());
  HPCML_ASSIGN_OR_RETURN(trees::GbdtCheckpoint c,
                         trees::ParseGbdtCheckpointHeader(header[0], std::move(booster[0])));
  return std::optional<trees::GbdtCheckpoint>(std::move(c));
}

}  // namespace

Result<bool> RunGbdt(const TrainOptions& o, Logger& log) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const bool rank0 = rank == 0;
  // One voice: rank 0 logs progress, every rank its warnings and errors.
  if (!rank0 && log.level() < LogLevel::kWarning) log.set_level(LogLevel::kWarning);
  HPCML_RETURN_IF_ERROR(CheckTreeOptions(o));
  const std::int64_t classes = o.loss == LossKind::kCrossEntropy ? o.outputs : 0;
  trees::GbdtParams p;
  p.rounds = o.rounds;
  p.max_depth = o.max_depth;
  p.eta = o.eta;
  p.min_child_weight = o.min_child_weight;
  p.lambda = o.lambda;
  p.colsample_bytree = o.colsample;
  p.subsample = o.subsample;
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
  if (!o.metrics.empty() && rank0) metrics.open(o.metrics, std::ios::trunc);
  HPCML_RETURN_IF_ERROR(AgreeOnStatus(
      MPI_COMM_WORLD, rank0 && !o.metrics.empty() && !metrics
                          ? InvalidArgument("--metrics {}: cannot open for writing", o.metrics)
                          : Status::Ok()));
  if (metrics.is_open()) {
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
    HPCML_RETURN_IF_ERROR(AgreeOnStatus(
        MPI_COMM_WORLD, rank0 ? textfile.Open(o.metrics_textfile, gauges) : Status::Ok()));
  }
  ModelLineage lineage;
  lineage.created_by = CurrentPrincipal();
  lineage.job_id = job ? job : "";
  lineage.attempt = job ? (restarts ? restarts : "0") : "";
  lineage.tool = fmt::format("hpcml-train {}", Version());
  lineage.settings = SettingsJson(o, p);
  log.info("gbdt: {} rounds at most, depth {}, eta {}, {} thread(s){}{}", p.rounds, p.max_depth,
           p.eta, p.threads, world > 1 ? fmt::format(" on each of {} ranks", world) : "",
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
      if (rank0) {
        if (Status st = textfile.Write(gauges); !st.ok()) log.warn("{}", st.message());
      }
      log.info("round {}/{} train loss {:.6f}{}{} ({:.3f} s)", m.round, p.rounds,
               m.train_loss.value_or(NAN),
               m.val_loss ? fmt::format(" val loss {:.6f}", *m.val_loss) : "",
               m.val_auc ? fmt::format(" auc {:.4f}", *m.val_auc) : "", m.seconds);
    }
  };
  trees::GbdtHooks hooks;
  hooks.on_round = on_round;
  // The settings that shape the model: a resume must match them (rounds
  // may grow, threads may change).
  {
    nlohmann::json key = nlohmann::json::parse(lineage.settings);
    key.erase("rounds");
    key.erase("threads");
    hooks.settings = JsonText(key);
  }
  const auto wall_start = std::chrono::steady_clock::now();
  const auto start_time = static_cast<std::int64_t>(std::time(nullptr));
  // Checkpoints: resume, schedule, stop triggers, save.
  std::unique_ptr<checkpoint::StopTriggers> triggers;
  std::string stop_reason;
  std::int64_t last_saved = 0;
  double save_seconds = 0;
  auto last_save = std::chrono::steady_clock::now();
  const CheckpointOptions& ck = o.ckpt;
  if (!ck.dir.empty()) {
    HPCML_ASSIGN_OR_RETURN(hooks.resume, LoadLatest(ck.dir, rank0, log));
    if (hooks.resume) {
      last_saved = hooks.resume->round;
      log.info("resumed from checkpoint round {} in {}", hooks.resume->round, ck.dir);
    }
    checkpoint::StopTriggerOptions t;
    t.spot_url = ck.spot_url;
    t.spot_kind = ck.spot_kind;
    t.spot_poll_ms = ck.spot_poll_ms;
    t.stop_before_end_seconds = ck.stop_before_end_seconds;
    auto started = checkpoint::StopTriggers::Start(t);
    HPCML_RETURN_IF_ERROR(AgreeOnStatus(MPI_COMM_WORLD, started.status()));
    triggers = std::move(*started);
    // Every rank's triggers and clock, one answer: a signal on any rank stops
    // all at the same round (the largest action wins).
    hooks.after_round = [&](std::int64_t round) {
      using Action = trees::GbdtHooks::Action;
      stop_reason = triggers->Poll();
      const double since =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - last_save).count();
      const bool due = (ck.every_steps > 0 && round % ck.every_steps == 0) ||
                       (ck.every_seconds > 0 && since >= ck.every_seconds);
      int act = static_cast<int>(!stop_reason.empty() ? Action::kSaveAndStop
                                 : due                ? Action::kSave
                                                      : Action::kContinue);
      const int mine = act;
      MPI_Allreduce(MPI_IN_PLACE, &act, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      if (act == static_cast<int>(Action::kSaveAndStop) && mine != act) {
        stop_reason = "another rank's stop signal";
      }
      return static_cast<Action>(act);
    };
    // Rank 0 writes (the trees are every rank's); all agree on the outcome.
    hooks.save = [&](const trees::GbdtCheckpoint& c) {
      const auto t0 = std::chrono::steady_clock::now();
      HPCML_RETURN_IF_ERROR(AgreeOnStatus(
          MPI_COMM_WORLD, rank0 ? trees::SaveGbdtCheckpoint(ck.dir, ck.keep, c) : Status::Ok()));
      last_save = std::chrono::steady_clock::now();
      save_seconds += std::chrono::duration<double>(last_save - t0).count();
      last_saved = c.round;
      return Status::Ok();
    };
  }
  // Across ranks: each reads its shard; XGBoost's collective is joined once
  // every rank has its data open.
  XgbWorld xgb_world;
  hooks.ranks.rank = static_cast<std::uint32_t>(rank);
  hooks.ranks.world = static_cast<std::uint32_t>(world);
  hooks.ranks.agree = [](const Status& local) { return AgreeOnStatus(MPI_COMM_WORLD, local); };
  hooks.ranks.connect = [&]() -> Status {
    HPCML_ASSIGN_OR_RETURN(xgb_world, XgbWorld::Join(MPI_COMM_WORLD, log));
    return Status::Ok();
  };
  HPCML_ASSIGN_OR_RETURN(trees::GbdtRun run,
                         trees::TrainGbdt(trees::GbdtData{o.data, o.data_version}, val, classes, p,
                                          std::move(lineage), hooks));
  HPCML_RETURN_IF_ERROR(AgreeOnStatus(MPI_COMM_WORLD, xgb_world.Leave()));
  const auto rounds_done = static_cast<std::int64_t>(run.rounds.size());
  auto publish_usage = [&] {
    accounting::AttemptUsage a;
    a.start_time = start_time;
    a.written_at = static_cast<std::int64_t>(std::time(nullptr));
    a.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    a.steps_done = rounds_done - run.resumed_round;
    a.batch = static_cast<std::int64_t>(run.train_rows);  // a round sees every row
    a.gpu_type = o.gpu_type;
    if (!ck.dir.empty()) {
      a.steps_since_checkpoint = rounds_done - last_saved;
      a.checkpoint_seconds = save_seconds;
    }
    if (rank0)
      accounting::PublishAttemptUsage(o.usage_dir.empty() ? ck.dir : o.usage_dir, a, o.no_comment,
                                      log);
  };
  if (run.interrupted) {
    log.info(
        "stopping at round {} ({}): checkpoint saved in {}; exit {} so that Slurm requeues the job",
        rounds_done, stop_reason, ck.dir, o.stop_exit_code);
    if (metrics.is_open()) {
      metrics << JsonText(nlohmann::ordered_json{
                     {"event", "stopped"}, {"round", rounds_done}, {"reason", stop_reason}})
              << '\n';
    }
    publish_usage();
    return true;
  }
  run.model.lineage.created_at = UtcNow();
  const bool stopped = rounds_done < p.rounds;
  if (stopped) {
    log.info("early stop at round {}: {} rounds without a lower validation loss than at round {}",
             rounds_done, p.early_stopping_rounds, run.best_round);
  }
  if (!o.output.empty()) {
    HPCML_RETURN_IF_ERROR(AgreeOnStatus(
        MPI_COMM_WORLD, rank0 ? trees::SaveGbdtModel(o.output, run.model) : Status::Ok()));
  }
  if (metrics.is_open()) {
    metrics << JsonText(nlohmann::ordered_json{{"event", "done"},
                                               {"rounds", rounds_done},
                                               {"best_round", run.best_round},
                                               {"early_stopped", stopped},
                                               {"resumed_round", run.resumed_round},
                                               {"load_seconds", run.load_seconds}})
            << '\n';
  }
  log.info("done: {} rounds (trees of {} kept), data in {:.2f} s{}", rounds_done, run.best_round,
           run.load_seconds,
           o.output.empty() ? std::string() : fmt::format(", model written to {}", o.output));
  publish_usage();
  return false;
}

}  // namespace hpcml::trainer
