#include "program.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <nlohmann/json.hpp>

#include "featurecache_source.hpp"
#include "hpcml/accounting/attempt.hpp"
#include "hpcml/common/identity.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/time.hpp"
#include "hpcml/topology/binding.hpp"
#include "hpcml/topology/planner.hpp"
#include "model_io.hpp"

namespace hpcml::trainer {

namespace topo = hpcml::topology;

namespace {

// The synthetic data of the options' model: `samples` rows; `held_out`: the
// validation part (the same teacher, other features).
SyntheticConfig SyntheticFor(const TrainOptions& o, bool classes, std::int64_t samples,
                             bool held_out) {
  SyntheticConfig sc;
  sc.features = o.input_dim;
  sc.outputs = o.outputs;
  sc.classification = classes;
  sc.samples = samples;
  sc.seed = o.data_seed;
  sc.held_out = held_out;
  return sc;
}

nlohmann::json Number(double v) {
  return std::isnan(v) ? nlohmann::json() : nlohmann::json(v);
}

double NumberOr(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? kNoMetric : it->get<double>();
}

nlohmann::json MetricsState(const EvalMetrics& m) {
  return {{"step", m.step},
          {"rows", m.rows},
          {"loss", Name(m.loss)},
          {"binary", m.binary},
          {"log_loss", Number(m.log_loss)},
          {"accuracy", Number(m.accuracy)},
          {"auc", Number(m.auc)},
          {"mse", Number(m.mse)},
          {"rmse", Number(m.rmse)}};
}

Result<EvalMetrics> MetricsFromState(const nlohmann::json& j) {
  EvalMetrics m;
  m.step = j.at("step").get<std::int64_t>();
  m.rows = j.at("rows").get<std::int64_t>();
  HPCML_ASSIGN_OR_RETURN(m.loss, ParseLoss(j.at("loss").get<std::string>()));
  m.binary = j.at("binary").get<bool>();
  m.log_loss = NumberOr(j, "log_loss");
  m.accuracy = NumberOr(j, "accuracy");
  m.auc = NumberOr(j, "auc");
  m.mse = NumberOr(j, "mse");
  m.rmse = NumberOr(j, "rmse");
  return m;
}

}  // namespace

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
  ShareEmbeddings();
  if (rank0_ && input_lineage_.input.encoding) LogEncoding(*input_lineage_.input.encoding);
  HPCML_RETURN_IF_ERROR(Agree(MakeTrainer()));
  HPCML_RETURN_IF_ERROR(Agree(OpenValidation()));
  HPCML_RETURN_IF_ERROR(StartCheckpointing());
  return Train();
}

// Binds this rank to the cores next to its GPU (or its share of the node's
// cores), unless the launcher already bound it (then only reported).
Status Program::Bind() {
  if (o_.bind == BindMode::kOff) return Status::Ok();
  HPCML_ASSIGN_OR_RETURN(topo::NodeTopology node, topo::DiscoverLocal());
  HPCML_ASSIGN_OR_RETURN(
      topo::RankBinding b,
      topo::BindLocalRank(node, o_.backend == BackendKind::kCuda, o_.bind == BindMode::kForce));
  if (rank0_) {
    log_.info("binding: rank 0 (local {}/{}): {}", b.local.local_rank, b.local.local_size,
              b.report.detail);
  }
  return Status::Ok();
}

Status Program::MakeBackend() {
  if (o_.backend == BackendKind::kCpu) return MakeCpuBackend();
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
  co.gemm = o_.gemm;
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

// --data or --synthetic, exactly one (CheckTrainOptions).
Status Program::OpenInput() {
  HPCML_RETURN_IF_ERROR(CheckTrainOptions(o_));
  mc_.input_dim = o_.input_dim;
  HPCML_ASSIGN_OR_RETURN(mc_.hidden, topo::ParseWidths(o_.hidden, "--hidden"));
  mc_.output_dim = o_.outputs;
  mc_.seed = o_.seed;
  mc_.activation = o_.activation;
  mc_.loss = o_.loss;
  const bool classes = mc_.loss == LossKind::kCrossEntropy;
  if (!o_.data.empty()) {
    // Only the stages that need features or labels open the feature set.
    if (!grid_->first_stage() && !grid_->last_stage()) return Status::Ok();
    FeatureCacheConfig fc;
    fc.path = o_.data;
    fc.version = o_.data_version;
    fc.num_classes = classes ? o_.outputs : 0;
    fc.seed = o_.data_seed;
    HPCML_ASSIGN_OR_RETURN(fc.encoding, ParseEncodingOptions(o_));
    HPCML_ASSIGN_OR_RETURN(
        source_, OpenFeatureCache(fc, o_.batch, grid_->dp_idx(), o_.grid.dp, &input_lineage_));
    return Status::Ok();
  }
  HPCML_ASSIGN_OR_RETURN(
      source_, MakeSyntheticSource(SyntheticFor(o_, classes, o_.synthetic_samples, false), o_.batch,
                                   grid_->dp_idx(), o_.grid.dp));
  return Status::Ok();
}

// "input: 13 features -> 27 inputs: 6 numbers, 0 missing indicators, 7
// embeddings (phist 2 values + unknown -> 3, ...)".
void Program::LogEncoding(const InputEncoding& enc) {
  std::vector<std::string> tables;
  for (const ColumnEncoding& c : enc.columns) {
    if (c.category()) {
      tables.push_back(
          fmt::format("{} {} values + unknown -> {}", c.name, c.vocabulary.size(), c.embed_dim));
    }
  }
  log_.info("input: {} features -> {} inputs: {} numbers, {} missing indicators, {} embeddings{}",
            enc.columns.size(), enc.width(), enc.numbers(), enc.indicators(), tables.size(),
            tables.empty() ? "" : fmt::format(" ({})", fmt::join(tables, ", ")));
}

// The embedding tables' shapes, from the encoding world rank 0 (a first
// stage, which opened the data) built: every rank partitions the same model.
void Program::ShareEmbeddings() {
  std::vector<std::int64_t> flat;
  if (rank0_ && input_lineage_.input.encoding) {
    for (const EmbeddingShape& e : input_lineage_.input.encoding->embeddings()) {
      flat.push_back(e.rows);
      flat.push_back(e.dim);
    }
  }
  auto n = static_cast<std::int64_t>(flat.size());
  MPI_Bcast(&n, 1, MPI_INT64_T, 0, grid_->world());
  flat.resize(static_cast<size_t>(n));
  MPI_Bcast(flat.data(), static_cast<int>(n), MPI_INT64_T, 0, grid_->world());
  mc_.embeddings.clear();
  for (size_t i = 0; i + 1 < flat.size(); i += 2) mc_.embeddings.push_back({flat[i], flat[i + 1]});
}

Status Program::MakeTrainer() {
  // Only the stages that read the data know its class rows; only the last
  // stage, which does, uses the weights.
  if (source_ != nullptr) {
    HPCML_ASSIGN_OR_RETURN(tc_.class_weights,
                           ClassWeights(o_, mc_.output_dim, input_lineage_.data.class_rows));
  }
  tc_.global_batch = o_.batch;
  tc_.microbatches = o_.microbatches;
  tc_.schedule = o_.schedule;
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
    metrics_.Write(RunStarted{o_.grid, std::string(Name(o_.backend)), o_.batch, o_.microbatches,
                              std::string(Name(o_.schedule)), o_.zero1, o_.steps,
                              IdealBubble(o_.grid.pp, o_.microbatches)});
  }
  return Status::Ok();
}

// The validation set, when one is asked for: a feature-cache version
// (--val-data/--val-version, checked against the training version) or
// held-out synthetic samples (--val-samples), read by the first and last
// stages in batches of the replica's rows.
Status Program::OpenValidation() {
  if (!validating()) return Status::Ok();
  const bool versioned = !o_.val_data.empty() || !o_.val_version.empty();
  val_.best_path = BestOutputPath(o_);
  if (grid_->first_stage() || grid_->last_stage()) {
    const std::int64_t rows = trainer_->replica_rows();
    const bool classes = mc_.loss == LossKind::kCrossEntropy;
    if (versioned) {
      FeatureCacheConfig fc;
      fc.path = o_.val_data.empty() ? o_.data : o_.val_data;
      fc.version = o_.val_version;
      fc.num_classes = classes ? o_.outputs : 0;
      fc.shuffle = false;
      HPCML_ASSIGN_OR_RETURN(
          val_.source,
          OpenFeatureCacheEval(fc, rows, grid_->dp_idx(), o_.grid.dp, input_lineage_, &val_.data));
    } else {
      HPCML_ASSIGN_OR_RETURN(
          val_.source, MakeSyntheticEvalSource(SyntheticFor(o_, classes, o_.val_samples, true),
                                               rows, grid_->dp_idx(), o_.grid.dp));
      val_.data.rows = static_cast<std::uint64_t>(o_.val_samples);
    }
  }
  if (rank0_) {
    const std::string what =
        versioned
            ? fmt::format("{} {} ({} rows)", val_.data.path, val_.data.version, val_.data.rows)
            : fmt::format("{} held-out synthetic samples", o_.val_samples);
    log_.info("validation on {}: {}, {} {}{}{}", what,
              o_.eval_interval > 0
                  ? fmt::format("every {} steps and after the last", o_.eval_interval)
                  : std::string("after the last step"),
              "monitoring", EvalMetrics::MonitorName(mc_.loss),
              val_.best_path.empty() ? "" : ", best model to " + val_.best_path,
              o_.early_stop_patience > 0
                  ? fmt::format(", early stop after {} evaluations without improvement",
                                o_.early_stop_patience)
                  : "");
  }
  return Status::Ok();
}

// The validation progress saved with each checkpoint ("run" in the
// manifest), so a resumed run keeps its best value, patience count and the
// figures of its latest evaluation.
nlohmann::json Program::ValidationState() const {
  if (!validating()) return nlohmann::json();
  return {{"validation",
           {{"evals", val_.evals},
            {"since_best", val_.since_best},
            {"best_step", val_.best_step},
            {"best", val_.best_step > 0 ? nlohmann::json(val_.best) : nlohmann::json()},
            {"last", val_.last ? MetricsState(*val_.last) : nlohmann::json()}}}};
}

Status Program::RestoreValidationState(const nlohmann::json& state) {
  if (!state.is_object() || !state.contains("validation")) return Status::Ok();
  try {
    const nlohmann::json& v = state.at("validation");
    val_.evals = v.at("evals").get<int>();
    val_.since_best = v.at("since_best").get<int>();
    val_.best_step = v.at("best_step").get<std::int64_t>();
    val_.best = v.at("best").is_null() ? 0.0 : v.at("best").get<double>();
    if (!v.at("last").is_null()) {
      HPCML_ASSIGN_OR_RETURN(EvalMetrics m, MetricsFromState(v.at("last")));
      val_.last = m;
    }
  } catch (const nlohmann::json::exception& e) {
    return Corrupt("--checkpoint-dir {}: the checkpoint's validation state: {}", o_.ckpt.dir,
                   e.what());
  }
  // A run that had stopped early stays stopped: resuming it trains no further.
  if (o_.early_stop_patience > 0 && val_.since_best >= o_.early_stop_patience) {
    val_.early_stop = fmt::format(
        "already stopped early: {} evaluations without improvement (best {} {:.6f} at step {})",
        val_.since_best, EvalMetrics::MonitorName(mc_.loss), val_.best, val_.best_step);
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
  ckpt_->set_run_state([this] { return ValidationState(); });
  HPCML_ASSIGN_OR_RETURN(std::int64_t step, ckpt_->Resume());
  // The state is the same on every rank (it was agreed before it was saved).
  HPCML_RETURN_IF_ERROR(RestoreValidationState(ckpt_->resumed_run_state()));
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
        o_.batch, o_.microbatches, Name(o_.schedule));
  }
  const std::int64_t first_step = trainer_->step();
  // Opened here, after a resume, so its first figures show the resumed step.
  if (!o_.metrics_textfile.empty()) {
    HPCML_RETURN_IF_ERROR(
        Agree(rank0_ ? textfile_.Open(o_.metrics_textfile, Gauges(nullptr)) : Status::Ok()));
  }
  const auto wall_start = std::chrono::steady_clock::now();
  const std::int64_t start_time = static_cast<std::int64_t>(std::time(nullptr));
  // A resumed run that had stopped early trains no further.
  Status ran = val_.early_stop.empty()
                   ? trainer_->Run(o_.steps, [this](const StepStats& st) { return OnStep(st); })
                   : Status::Ok();
  auto wall_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  };
  HPCML_RETURN_IF_ERROR(ran);  // errors only: a stop or an early stop is an outcome
  if (stop_) {
    if (rank0_) {
      log_.info(
          "stopping at step {} ({}): checkpoint saved in {}; exit {} so that Slurm requeues the "
          "job",
          trainer_->step(), stop_->reason, o_.ckpt.dir, o_.stop_exit_code);
      metrics_.Write(RunStopped{trainer_->step(), stop_->reason});
      WriteTextfile(nullptr);
    }
    PublishUsage(first_step, wall_s(), start_time);
    return Status::Ok();
  }
  // Early stopping ends the step loop through the hook's outcome (OnStep).
  if (!val_.early_stop.empty() && rank0_)
    log_.info("early stop at step {}: {}", trainer_->step(), val_.early_stop);
  if (ckpt_) HPCML_RETURN_IF_ERROR(ckpt_->Finish());
  PublishUsage(first_step, wall_s(), start_time);
  return Finish();
}

// The step hook: figures, metrics, log line, then the checkpointer, which may
// ask to stop (kStop, with stop_ set), and early stopping (kStop).
Result<Trainer::AfterStep> Program::OnStep(const StepStats& st) {
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
    last_loss_ = st.loss;
    last_bubble_ = Measured(st.bubble);
    if (st.step % o_.log_interval == 0 || st.step == o_.steps || st.step == 1) {
      LogStep(st);
      WriteTextfile(&st);
    }
  }
  // Before the checkpointer, so that a set saved at this step holds this
  // evaluation's best value and patience count.
  HPCML_RETURN_IF_ERROR(Evaluate(st));
  if (ckpt_) {
    HPCML_ASSIGN_OR_RETURN(auto stop, ckpt_->AfterStep(st));
    // A stop request at the step where training ends early anyway: finish
    // normally (the checkpointer has saved this step).
    if (stop && val_.early_stop.empty()) {
      stop_ = *stop;
      return Trainer::AfterStep::kStop;
    }
  }
  return val_.early_stop.empty() ? Trainer::AfterStep::kContinue : Trainer::AfterStep::kStop;
}

// Every --eval-interval steps and after the last: the metrics, the best
// model when they improve, and the early-stopping decision (all ranks
// decide alike: the metrics are the same everywhere).
Status Program::Evaluate(const StepStats& st) {
  const bool due = (o_.eval_interval > 0 && st.step % o_.eval_interval == 0) || st.step == o_.steps;
  if (!due || !validating()) return Status::Ok();
  const auto t0 = std::chrono::steady_clock::now();
  HPCML_ASSIGN_OR_RETURN(EvalMetrics m, trainer_->Evaluate(val_.source.get()));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++val_.evals;
  const double v = m.monitored();
  // Lower is better; NaN (a diverged model) never improves.
  const bool improved = !std::isnan(v) && (val_.best_step == 0 || v < val_.best);
  if (improved) {
    val_.best = v;
    val_.best_step = m.step;
    val_.since_best = 0;
  } else {
    ++val_.since_best;
  }
  val_.last = m;
  if (improved && !val_.best_path.empty()) {
    HPCML_RETURN_IF_ERROR(SaveModel(val_.best_path, "--best-output", Record(m, "best")));
  }
  if (rank0_) {
    metrics_.Write(EvalDone{m, improved, val_.best_step, val_.best, val_.since_best, seconds});
    LogEval(m, improved, seconds);
  }
  if (o_.early_stop_patience > 0 && val_.since_best >= o_.early_stop_patience &&
      st.step < o_.steps) {
    val_.early_stop =
        fmt::format("{} evaluations without a lower validation {} than {:.6f} (step {})",
                    val_.since_best, EvalMetrics::MonitorName(mc_.loss), val_.best, val_.best_step);
    if (rank0_) {
      metrics_.Write(EarlyStopped{st.step, std::string(EvalMetrics::MonitorName(mc_.loss)),
                                  val_.best_step, val_.best, o_.early_stop_patience});
    }
  }
  return Status::Ok();
}

void Program::LogEval(const EvalMetrics& m, bool improved, double seconds) {
  std::string figures;
  if (m.loss == LossKind::kCrossEntropy) {
    figures = fmt::format("log_loss {:.6f} accuracy {:.4f}", m.log_loss, m.accuracy);
    if (m.binary) {
      figures += fmt::format(
          " auc {:.4f} (always predicting the base rate {:.1f}%: log_loss {:.6f} accuracy {:.4f} "
          "auc 0.5)",
          m.auc, 100.0 * m.positive_rate, BaseRateLogLoss(m.positive_rate),
          BaseRateAccuracy(m.positive_rate));
    }
  } else {
    figures = fmt::format("rmse {:.6f} mse {:.6f}", m.rmse, m.mse);
  }
  std::string best;
  if (improved) {
    best = val_.best_path.empty() ? "new best" : "new best, model written to " + val_.best_path;
  } else {
    best = fmt::format("best {:.6f} at step {}, {} evaluation(s) without improvement", val_.best,
                       val_.best_step, val_.since_best);
  }
  log_.info("eval step {}/{}: val {} ({} rows, {:.2f} s); {}", m.step, o_.steps, figures, m.rows,
            seconds, best);
}

Status Program::SaveModel(const std::string& path, const std::string& option,
                          const std::optional<ValidationRecord>& validation) {
  auto gathered = GatherModel(trainer_->model(), grid_.get(), *backend_, WhichTensor::kParams);
  Status s = gathered.status();
  if (s.ok() && rank0_) {
    ModelLineage l = Lineage();
    l.validation = validation;
    s = SaveModelFile(path, mc_, *gathered, l);
  }
  return Agree(s.ok() ? s : std::move(s).WithContext(option + " " + path));
}

ValidationRecord Program::Record(const EvalMetrics& m, const char* selected) const {
  ValidationRecord r;
  r.data = val_.data;
  r.rows = m.rows;
  r.step = m.step;
  r.selected = selected;
  r.monitor = EvalMetrics::MonitorName(m.loss);
  r.metrics = EvalMetricsJson(m);
  return r;
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

TrainerGauges Program::Gauges(const StepStats* st) const {
  TrainerGauges g;
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* restarts = std::getenv("SLURM_RESTART_COUNT");
  g.job_id = job ? job : "";
  g.attempt = restarts ? std::atoi(restarts) : 0;
  g.step = trainer_->step();
  g.steps = o_.steps;
  g.loss = last_loss_;
  if (st) {
    const double avg = fig_.timed > 0 ? fig_.mean_step() : st->step_time_s;
    g.samples_per_s = avg > 0 ? static_cast<double>(o_.batch) / avg : 0.0;
  } else if (fig_.timed > 0) {
    g.samples_per_s = static_cast<double>(o_.batch) / fig_.mean_step();
  }
  g.bubble = last_bubble_;
  if (ckpt_ && ckpt_->stats().last_complete_unix > 0)
    g.last_checkpoint_unix = ckpt_->stats().last_complete_unix;
  g.now_unix =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return g;
}

void Program::WriteTextfile(const StepStats* st) {
  if (!textfile_.is_open()) return;
  Status s = textfile_.Write(Gauges(st));
  if (!s.ok() && !textfile_warned_) {
    // Monitoring never stops training.
    log_.warn("{} (training goes on; said once)", s.message());
    textfile_warned_ = true;
  }
}

// After the last step: the model to --output, the done line and record.
Status Program::Finish() {
  if (!o_.output.empty()) {
    std::optional<ValidationRecord> v;
    if (val_.last) v = Record(*val_.last, "final");
    HPCML_RETURN_IF_ERROR(SaveModel(o_.output, "--output", v));
  }
  if (!rank0_) return Status::Ok();
  if (val_.best_step > 0) {
    log_.info("best validation {} {:.6f} at step {}{}", EvalMetrics::MonitorName(mc_.loss),
              val_.best, val_.best_step,
              val_.best_path.empty() ? "" : ", model in " + val_.best_path);
  }
  const double mean_step = fig_.mean_step();
  const double ideal = IdealBubble(o_.grid.pp, o_.microbatches);
  log_.info(
      "done: {} steps{}, loss {:.6f} -> {:.6f}, mean step {:.2f} ms, {:.0f} samples/s, "
      "bubble {} (ideal {:.3f}){}",
      trainer_->step(), val_.early_stop.empty() ? "" : " (stopped early)", fig_.first_loss,
      fig_.last_loss, mean_step * 1e3,
      mean_step > 0 ? static_cast<double>(o_.batch) / mean_step : 0.0,
      BubbleText(Measured(fig_.mean_bubble())), ideal,
      o_.output.empty() ? "" : ", model written to " + o_.output);
  WriteTextfile(nullptr);  // the final checkpoint is in it now
  metrics_.Write(RunDone{trainer_->step(), fig_.first_loss, fig_.last_loss, mean_step,
                         Measured(fig_.mean_bubble()), oversubscribed_, ideal,
                         !val_.early_stop.empty()});
  return Status::Ok();
}

// Rank 0, inside a Slurm job: the attempt's usage record as JSON beside the
// checkpoints and as a summary in the job's Comment, for hpcml-cost.
// Accounting never stops training: a failure is a warning.
void Program::PublishUsage(std::int64_t first_step, double wall_s, std::int64_t start_time) {
  if (!rank0_) return;
  accounting::AttemptUsage a;
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
  accounting::PublishAttemptUsage(o_.usage_dir.empty() ? o_.ckpt.dir : o_.usage_dir, a,
                                  o_.no_comment, log_);
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
                              {"activation", Name(o_.activation)},
                              {"loss", Name(o_.loss)},
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
                              {"schedule", Name(o_.schedule)},
                              {"zero1", o_.zero1},
                              {"embed_dim", o_.embed_dim},
                              {"embed_min_count", o_.embed_min_count},
                              {"class_weight", o_.class_weight},
                              {"class_weights", tc_.class_weights},
                              {"backend", Name(o_.backend)},
                              {"eval_interval", o_.eval_interval},
                              {"early_stop_patience", o_.early_stop_patience}};
  return JsonText(j);
}

std::string Program::BubbleText(const Bubble& b) {
  return b ? fmt::format("{:.3f}", *b) : "n/a";
}

}  // namespace hpcml::trainer
