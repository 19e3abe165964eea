#include "program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <nlohmann/json.hpp>

#include "featurecache_source.hpp"
#include "hpcml/common/identity.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/time.hpp"
#include "hpcml/topology/binding.hpp"
#include "hpcml/topology/planner.hpp"
#include "model_io.hpp"
#include "usage.hpp"

namespace hpcml::trainer {

namespace topo = hpcml::topology;

Status Program::Run() {
  HPCML_ASSIGN_OR_RETURN(grid_, Agree(ProcessGrid::Create(MPI_COMM_WORLD, o_.grid)));
  rank0_ = grid_->rank() == 0;
  HPCML_RETURN_IF_ERROR(Agree(Bind()));
  HPCML_RETURN_IF_ERROR(Agree(MakeBackend()));
  HPCML_RETURN_IF_ERROR(Agree(OpenInput()));
  // The feature set decides the input width; middle stages learn it here.
  std::int64_t features = source_ ? source_->feature_dim() : 0;
  MPI_Allreduce(MPI_IN_PLACE, &features, 1, MPI_INT64_T, MPI_MAX, grid_->world());
  mc_.input_dim = features;
  HPCML_RETURN_IF_ERROR(Agree(MakeTrainer()));
  HPCML_RETURN_IF_ERROR(StartCheckpointing());
  return Train();
}

// Binds this rank to the cores next to its GPU (or its share of the node's
// cores), unless the launcher already bound it (then only reported).
Status Program::Bind() {
  if (o_.bind == "off") return Status::Ok();
  HPCML_ASSIGN_OR_RETURN(topo::NodeTopology node, topo::DiscoverLocal());
  HPCML_ASSIGN_OR_RETURN(topo::RankBinding b,
                         topo::BindLocalRank(node, o_.backend == "cuda", o_.bind == "force"));
  if (rank0_) {
    log_.info("binding: rank 0 (local {}/{}): {}", b.local.local_rank, b.local.local_size,
              b.report.detail);
  }
  return Status::Ok();
}

Status Program::MakeBackend() {
  if (o_.backend == "cpu") return MakeCpuBackend();
  HPCML_ASSIGN_OR_RETURN(backend_, MakeCudaBackend(grid_.get()));
  return Status::Ok();
}

// Threads: the user's choice cut to this rank's share of its cores; ranks
// outnumbering cores are said once.
Status Program::MakeCpuBackend() {
  // Collectives first (a failure below must not leave peers in one).
  const std::vector<int> cpus = topo::CurrentAffinity();
  const int sharing = topo::RanksSharingCores(grid_->world(), cpus);
  const int cores = std::max(1, static_cast<int>(cpus.size()));
  int over = sharing > cores ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &over, 1, MPI_INT, MPI_MAX, grid_->world());
  oversubscribed_ = over != 0;
  CpuOptions co;
  HPCML_ASSIGN_OR_RETURN(co.gemm, ParseGemmLibrary(o_.gemm));
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const char* slurm = std::getenv("SLURM_CPUS_PER_TASK");
  HPCML_ASSIGN_OR_RETURN(
      topo::ThreadChoice tc,
      topo::ChooseThreads(o_.threads, omp ? omp : "", slurm ? slurm : "", cores, sharing));
  co.threads = tc.threads;
  backend_ = trainer::MakeCpuBackend(grid_.get(), co);
  if (!rank0_) return Status::Ok();
  log_.info("cpu: {} math thread(s) per rank ({}{}), GEMMs by {}", tc.threads, tc.source,
            tc.clamped
                ? fmt::format(", cut to this rank's share: {} cores, {} ranks", cores, sharing)
                : "",
            Name(co.gemm));
  if (oversubscribed_) {
    log_.warn(
        "ranks outnumber cores on a node (rank 0: {} ranks on {} cores): step times include "
        "waiting for a core, and the pipeline bubble is not reported (n/a)",
        sharing, cores);
  }
  return Status::Ok();
}

Status Program::OpenInput() {
  mc_.input_dim = o_.input_dim;
  HPCML_ASSIGN_OR_RETURN(mc_.hidden, topo::ParseWidths(o_.hidden, "--hidden"));
  mc_.output_dim = o_.outputs;
  mc_.seed = o_.seed;
  HPCML_ASSIGN_OR_RETURN(mc_.activation, ParseActivation(o_.activation));
  HPCML_ASSIGN_OR_RETURN(mc_.loss, ParseLoss(o_.loss));
  const bool classes = mc_.loss == LossKind::kCrossEntropy;
  if (!o_.data.empty() && o_.synthetic) {
    return InvalidArgument("--data and --synthetic exclude each other");
  }
  if (!o_.data.empty()) {
    // Only the stages that need features or labels open the feature set.
    if (!grid_->first_stage() && !grid_->last_stage()) return Status::Ok();
    FeatureCacheConfig fc;
    fc.path = o_.data;
    fc.version = o_.data_version;
    fc.num_classes = classes ? o_.outputs : 0;
    fc.seed = o_.data_seed;
    HPCML_ASSIGN_OR_RETURN(
        source_, OpenFeatureCache(fc, o_.batch, grid_->dp_idx(), o_.grid.dp, &input_lineage_));
    return Status::Ok();
  }
  if (!o_.synthetic) return InvalidArgument("no input: give --data <feature set> or --synthetic");
  SyntheticConfig sc;
  sc.features = o_.input_dim;
  sc.outputs = o_.outputs;
  sc.classification = classes;
  sc.samples = o_.synthetic_samples;
  sc.seed = o_.data_seed;
  HPCML_ASSIGN_OR_RETURN(source_, MakeSyntheticSource(sc, o_.batch, grid_->dp_idx(), o_.grid.dp));
  return Status::Ok();
}

Status Program::MakeTrainer() {
  tc_.global_batch = o_.batch;
  tc_.microbatches = o_.microbatches;
  HPCML_ASSIGN_OR_RETURN(tc_.schedule, ParseSchedule(o_.schedule));
  tc_.lr = {o_.lr, o_.min_lr, o_.warmup, o_.steps};
  tc_.weight_decay = o_.weight_decay;
  tc_.clip = o_.clip;
  tc_.bucket_bytes = static_cast<std::size_t>(o_.bucket_mb * 1024.0 * 1024.0);
  tc_.overlap_dp = !o_.no_overlap;
  tc_.zero1 = o_.zero1;
  HPCML_ASSIGN_OR_RETURN(trainer_,
                         Trainer::Create(tc_, mc_, grid_.get(), backend_.get(), source_.get()));
  if (rank0_ && !o_.metrics.empty()) {
    HPCML_RETURN_IF_ERROR(metrics_.Open(o_.metrics));
    metrics_.Write(RunStarted{o_.grid, o_.backend, o_.batch, o_.microbatches, o_.schedule, o_.zero1,
                              o_.steps, IdealBubble(o_.grid.pp, o_.microbatches)});
  }
  return Status::Ok();
}

// Collective: opens the checkpoint directory and resumes from its newest
// complete set, whatever layout saved it.
Status Program::StartCheckpointing() {
  if (o_.ckpt.dir.empty()) return Status::Ok();
  CheckpointOptions c = o_.ckpt;
  c.async = !o_.ckpt_sync;
  if (!o_.ckpt_adaptive.empty()) {
    c.adaptive = true;
    if (std::sscanf(o_.ckpt_adaptive.c_str(), "%lf,%lf", &c.min_seconds, &c.max_seconds) != 2) {
      return Agree(
          InvalidArgument("--checkpoint-adaptive {}: expected MIN,MAX seconds", o_.ckpt_adaptive));
    }
  }
  auto ck =
      Checkpointer::Create(c, grid_.get(), trainer_.get(), backend_.get(), source_.get(), &log_);
  HPCML_RETURN_IF_ERROR(Agree(ck.status()));
  ckpt_ = std::move(ck).value();
  HPCML_ASSIGN_OR_RETURN(std::int64_t step, ckpt_->Resume());
  if (!rank0_) return Status::Ok();
  if (step > 0) {
    log_.info("resumed from checkpoint step {} in {}", step, o_.ckpt.dir);
  } else {
    log_.info("no checkpoint in {}: starting fresh", o_.ckpt.dir);
  }
  return Status::Ok();
}

Status Program::Train() {
  if (rank0_) {
    log_.info(
        "grid {} (dp x pp x tp), backend {}, {} layers, {} parameters on rank 0, batch {} "
        "in {} microbatches, schedule {}",
        o_.grid.ToString(), backend_->name(), mc_.num_layers(), trainer_->model().num_params(),
        o_.batch, o_.microbatches, o_.schedule);
  }
  const std::int64_t first_step = trainer_->step();
  const auto wall_start = std::chrono::steady_clock::now();
  const std::int64_t start_time = static_cast<std::int64_t>(std::time(nullptr));
  Status ran = trainer_->Run(o_.steps, [this](const StepStats& st) { return OnStep(st); });
  auto wall_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  };
  if (stop_) {
    if (rank0_) {
      log_.info(
          "stopping at step {} ({}): checkpoint saved in {}; exit {} so that Slurm requeues the "
          "job",
          trainer_->step(), stop_->reason, o_.ckpt.dir, o_.stop_exit_code);
      metrics_.Write(RunStopped{trainer_->step(), stop_->reason});
    }
    PublishUsage(first_step, wall_s(), start_time);
    return Status::Ok();
  }
  HPCML_RETURN_IF_ERROR(ran);
  if (ckpt_) HPCML_RETURN_IF_ERROR(ckpt_->Finish());
  PublishUsage(first_step, wall_s(), start_time);
  return Finish();
}

// The step hook: figures, metrics, log line, then the checkpointer, which may
// ask to stop (returned as kUnavailable, with stop_ set).
Status Program::OnStep(const StepStats& st) {
  // This attempt's first step: step 1, or the one after a resumed checkpoint.
  if (fig_.steps++ == 0) fig_.first_loss = st.loss;
  fig_.last_loss = st.loss;
  // The first step pays for warm-up (allocation, MPI connections).
  if (fig_.steps > 1 || (st.step == o_.steps && fig_.timed == 0)) {
    fig_.time_sum += st.step_time_s;
    fig_.bubble_sum += st.bubble;
    ++fig_.timed;
  }
  if (rank0_) {
    metrics_.Write(StepDone{st, Measured(st.bubble)});
    if (st.step % o_.log_interval == 0 || st.step == o_.steps || st.step == 1) LogStep(st);
  }
  if (!ckpt_) return Status::Ok();
  HPCML_ASSIGN_OR_RETURN(auto stop, ckpt_->AfterStep(st));
  if (!stop) return Status::Ok();
  stop_ = *stop;
  return Status(StatusCode::kUnavailable, "stop requested");
}

void Program::LogStep(const StepStats& st) {
  const double avg = fig_.timed > 0 ? fig_.mean_step() : st.step_time_s;
  const double eta = avg * static_cast<double>(o_.steps - st.step);
  log_.info(
      "step {}/{} loss {:.6f} lr {:.3e} grad_norm {:.4f} samples/s {:.0f} step {:.2f} ms "
      "bubble {} eta {:.1f} s",
      st.step, o_.steps, st.loss, st.lr, st.grad_norm, static_cast<double>(o_.batch) / avg,
      avg * 1e3, BubbleText(Measured(st.bubble)), eta);
}

// After the last step: the model to --output, the done line and record.
Status Program::Finish() {
  if (!o_.output.empty()) {
    auto gathered = GatherModel(trainer_->model(), grid_.get(), *backend_, WhichTensor::kParams);
    Status s = gathered.status();
    if (s.ok() && rank0_) s = SaveModelFile(o_.output, mc_, *gathered, Lineage());
    HPCML_RETURN_IF_ERROR(Agree(s.ok() ? s : std::move(s).WithContext("--output " + o_.output)));
  }
  if (!rank0_) return Status::Ok();
  const double mean_step = fig_.mean_step();
  const double ideal = IdealBubble(o_.grid.pp, o_.microbatches);
  log_.info(
      "done: {} steps, loss {:.6f} -> {:.6f}, mean step {:.2f} ms, {:.0f} samples/s, "
      "bubble {} (ideal {:.3f}){}",
      o_.steps, fig_.first_loss, fig_.last_loss, mean_step * 1e3,
      mean_step > 0 ? static_cast<double>(o_.batch) / mean_step : 0.0,
      BubbleText(Measured(fig_.mean_bubble())), ideal,
      o_.output.empty() ? "" : ", model written to " + o_.output);
  metrics_.Write(RunDone{o_.steps, fig_.first_loss, fig_.last_loss, mean_step,
                         Measured(fig_.mean_bubble()), oversubscribed_, ideal});
  return Status::Ok();
}

// Rank 0, inside a Slurm job: the attempt's usage record as JSON beside the
// checkpoints and as a summary in the job's Comment, for hpcml-cost.
// Accounting never stops training: a failure is a warning.
void Program::PublishUsage(std::int64_t first_step, double wall_s, std::int64_t start_time) {
  const std::string dir = o_.usage_dir.empty() ? o_.ckpt.dir : o_.usage_dir;
  const std::optional<SlurmJob> job = SlurmJobFromEnv();
  if (!rank0_ || !job || dir.empty()) return;
  AttemptUsage a;
  a.start_time = start_time;
  a.written_at = static_cast<std::int64_t>(std::time(nullptr));
  a.wall_s = wall_s;
  a.steps_done = trainer_->step() - first_step;
  a.batch = o_.batch;
  a.gpu_type = o_.gpu_type;
  if (ckpt_) {
    a.steps_since_checkpoint = trainer_->step() - ckpt_->stats().last_saved_step;
    a.checkpoint_seconds = ckpt_->stats().save_seconds;
  }
  const accounting::UsageRecord r = MakeUsageRecord(*job, a);
  accounting::PublishOptions po;
  po.update_comment = !o_.no_comment;
  auto written = accounting::PublishUsageRecord(dir, r, po);
  if (written.ok()) {
    log_.info("usage record {} ({} GPU-seconds, {} steps)", *written, r.gpu_seconds, r.steps_done);
  } else {
    log_.warn("usage record not published: {}", written.status().message());
  }
}

// What the model file records: the training data (from the opened
// version), the run, the settings that shaped the model and its losses.
ModelLineage Program::Lineage() const {
  ModelLineage l = input_lineage_;
  l.created_at = UtcNow();
  l.created_by = CurrentPrincipal();
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* restarts = std::getenv("SLURM_RESTART_COUNT");
  l.job_id = job ? job : "";
  l.attempt = job ? (restarts ? restarts : "0") : "";
  l.tool = fmt::format("hpcml-train {}", Version());
  l.settings = SettingsJson();
  l.steps = trainer_->step();
  l.first_loss = fig_.first_loss;
  l.final_loss = fig_.last_loss;
  return l;
}

std::string Program::SettingsJson() const {
  nlohmann::ordered_json j = {{"hidden", mc_.hidden},
                              {"activation", o_.activation},
                              {"loss", o_.loss},
                              {"outputs", o_.outputs},
                              {"seed", o_.seed},
                              {"data_seed", o_.data_seed},
                              {"synthetic", o_.synthetic},
                              {"steps", o_.steps},
                              {"batch", o_.batch},
                              {"lr", o_.lr},
                              {"min_lr", o_.min_lr},
                              {"warmup", o_.warmup},
                              {"weight_decay", o_.weight_decay},
                              {"clip", o_.clip},
                              {"grid", o_.grid.ToString()},
                              {"microbatches", o_.microbatches},
                              {"schedule", o_.schedule},
                              {"zero1", o_.zero1},
                              {"backend", o_.backend}};
  return JsonText(j);
}

std::string Program::BubbleText(const Bubble& b) {
  return b ? fmt::format("{:.3f}", *b) : "n/a";
}

}  // namespace hpcml::trainer
