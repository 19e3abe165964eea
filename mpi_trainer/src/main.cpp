// hpcml-train: trains an MLP across dp x pp x tp ranks (see docs/trainer.md).
//
// Error contract: every failure is agreed on by all ranks (AgreeOnStatus),
// rank 0 prints one message naming the option or file, and every rank exits
// non-zero: 2 for a usage error, 1 for anything else. No rank is left waiting.
#include <mpi.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hpcml/accounting/usage_record.hpp"
#include "hpcml/common/log.hpp"
#include "hpcml/topology/binding.hpp"
#include "hpcml/topology/gather.hpp"
#include "hpcml/topology/planner.hpp"
#include "hpcml/trainer/backend.hpp"
#include "hpcml/trainer/checkpointing.hpp"
#include "hpcml/trainer/data.hpp"
#include "hpcml/trainer/featurecache_source.hpp"
#include "hpcml/trainer/grid.hpp"
#include "hpcml/trainer/model_io.hpp"
#include "hpcml/trainer/plan.hpp"
#include "hpcml/trainer/trainer.hpp"

namespace ht = hpcml::trainer;

namespace {

struct Options {
  ht::GridShape grid;
  std::string backend = "cpu";
  std::string gemm = "onednn";  // cpu backend: onednn | openblas
  int threads = 0;              // 0: OMP_NUM_THREADS, SLURM_CPUS_PER_TASK or the rank's cores
  std::int64_t input_dim = 32;
  std::string hidden = "64,64";
  std::int64_t outputs = 4;
  std::string activation = "relu";
  std::string loss = "ce";
  bool synthetic = false;
  std::int64_t synthetic_samples = 0;
  std::uint64_t data_seed = 1234;
  std::string data, data_version;
  std::int64_t batch = 32;
  int microbatches = 1;
  std::string schedule = "1f1b";
  std::int64_t steps = 100;
  double lr = 1e-3, min_lr = 0.0;
  std::int64_t warmup = 0;
  float weight_decay = 0.0f, clip = 1.0f;
  std::uint64_t seed = 1;
  double bucket_mb = 1.0;
  bool no_overlap = false;
  bool zero1 = false;
  std::int64_t log_interval = 10;
  std::string metrics, output;
  ht::CheckpointOptions ckpt;
  std::string ckpt_adaptive;  // "min,max" seconds
  bool ckpt_sync = false;
  int stop_exit_code = 85;
  std::string usage_dir;  // default: the checkpoint directory
  std::string gpu_type;
  bool no_comment = false;
  bool plan = false;          // print the placement plan and exit
  std::string bind = "auto";  // auto | off | force
};

std::string Iso8601Now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// "256,128" -> {256, 128}; "" -> {} (no hidden layer: a linear model).
hpcml::Result<std::vector<std::int64_t>> ParseWidths(const std::string& text) {
  std::vector<std::int64_t> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size() || v < 1) {
      return hpcml::InvalidArgument("--hidden {}: '{}' is not a positive layer width", text, item);
    }
    out.push_back(v);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

class Program {
 public:
  explicit Program(const Options& o) : o_(o) {}

  // Every phase ends in an agreement so that all ranks fail together.
  hpcml::Status Run() {
    HPCML_ASSIGN_OR_RETURN(grid_, Agree(ht::ProcessGrid::Create(MPI_COMM_WORLD, o_.grid)));
    rank0_ = grid_->rank() == 0;
    HPCML_RETURN_IF_ERROR(Agree(Bind()));
    // A collective inside a phase would hang if a peer had already failed,
    // so collectives sit between the agreements.
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

  // Set when training stopped early (signal, spot notice, time limit) after a save.
  const std::optional<ht::StopRequest>& stopped() const { return stop_; }

 private:
  template <typename T>
  hpcml::Result<std::unique_ptr<T>> Agree(hpcml::Result<T> r) {
    hpcml::Status s = ht::AgreeOnStatus(MPI_COMM_WORLD, r.status());
    if (!s.ok()) return s;
    return std::make_unique<T>(std::move(r).value());
  }
  hpcml::Status Agree(const hpcml::Status& s) { return ht::AgreeOnStatus(grid_->world(), s); }

  hpcml::Status MakeBackend() {
    if (o_.backend == "cpu") {
      namespace topo = hpcml::topology;
      // Collectives first (a failure below must not leave peers in one).
      const std::vector<int> cpus = topo::CurrentAffinity();
      const int sharing = topo::RanksSharingCores(grid_->world(), cpus);
      const int cores = std::max(1, static_cast<int>(cpus.size()));
      int over = sharing > cores ? 1 : 0;
      MPI_Allreduce(MPI_IN_PLACE, &over, 1, MPI_INT, MPI_MAX, grid_->world());
      oversubscribed_ = over != 0;
      ht::CpuOptions co;
      HPCML_ASSIGN_OR_RETURN(co.gemm, ht::ParseGemmLibrary(o_.gemm));
      const char* omp = std::getenv("OMP_NUM_THREADS");
      const char* slurm = std::getenv("SLURM_CPUS_PER_TASK");
      HPCML_ASSIGN_OR_RETURN(
          topo::ThreadChoice tc,
          topo::ChooseThreads(o_.threads, omp ? omp : "", slurm ? slurm : "", cores, sharing));
      co.threads = tc.threads;
      backend_ = ht::MakeCpuBackend(grid_.get(), co);
      if (rank0_) {
        log_.info("cpu: {} math thread(s) per rank ({}{}), GEMMs by {}", tc.threads, tc.source,
                  tc.clamped ? fmt::format(", cut to this rank's share: {} cores, {} ranks", cores,
                                           sharing)
                             : "",
                  ht::Name(co.gemm));
      }
      if (rank0_ && oversubscribed_) {
        log_.warn(
            "ranks outnumber cores on a node (rank 0: {} ranks on {} cores): step times include "
            "waiting for a core, and the pipeline bubble is not reported (n/a)",
            sharing, cores);
      }
      return hpcml::Status::Ok();
    }
    HPCML_ASSIGN_OR_RETURN(backend_, ht::MakeCudaBackend(grid_.get()));
    return hpcml::Status::Ok();
  }

  hpcml::Status OpenInput() {
    mc_.input_dim = o_.input_dim;
    HPCML_ASSIGN_OR_RETURN(mc_.hidden, ParseWidths(o_.hidden));
    mc_.output_dim = o_.outputs;
    mc_.seed = o_.seed;
    HPCML_ASSIGN_OR_RETURN(mc_.activation, ht::ParseActivation(o_.activation));
    HPCML_ASSIGN_OR_RETURN(mc_.loss, ht::ParseLoss(o_.loss));
    const bool reads = grid_->first_stage() || grid_->last_stage();
    if (!o_.data.empty() && o_.synthetic) {
      return hpcml::InvalidArgument("--data and --synthetic exclude each other");
    }
    if (!o_.data.empty()) {
      // Only the stages that need features or labels open the feature set.
      if (reads) {
        ht::FeatureCacheConfig fc;
        fc.path = o_.data;
        fc.version = o_.data_version;
        fc.num_classes = mc_.loss == ht::LossKind::kCrossEntropy ? o_.outputs : 0;
        fc.seed = o_.data_seed;
        HPCML_ASSIGN_OR_RETURN(source_,
                               ht::OpenFeatureCache(fc, o_.batch, grid_->dp_idx(), o_.grid.dp));
      }
    } else if (o_.synthetic) {
      ht::SyntheticConfig sc;
      sc.features = o_.input_dim;
      sc.outputs = o_.outputs;
      sc.classification = mc_.loss == ht::LossKind::kCrossEntropy;
      sc.samples = o_.synthetic_samples;
      sc.seed = o_.data_seed;
      HPCML_ASSIGN_OR_RETURN(source_,
                             ht::MakeSyntheticSource(sc, o_.batch, grid_->dp_idx(), o_.grid.dp));
    } else {
      return hpcml::InvalidArgument("no input: give --data <feature set> or --synthetic");
    }
    return hpcml::Status::Ok();
  }

  hpcml::Status MakeTrainer() {
    tc_.global_batch = o_.batch;
    tc_.microbatches = o_.microbatches;
    HPCML_ASSIGN_OR_RETURN(tc_.schedule, ht::ParseSchedule(o_.schedule));
    tc_.lr = {o_.lr, o_.min_lr, o_.warmup, o_.steps};
    tc_.weight_decay = o_.weight_decay;
    tc_.clip = o_.clip;
    tc_.bucket_bytes = static_cast<std::size_t>(o_.bucket_mb * 1024.0 * 1024.0);
    tc_.overlap_dp = !o_.no_overlap;
    tc_.zero1 = o_.zero1;
    HPCML_ASSIGN_OR_RETURN(
        trainer_, ht::Trainer::Create(tc_, mc_, grid_.get(), backend_.get(), source_.get()));
    if (rank0_ && !o_.metrics.empty()) {
      metrics_.open(o_.metrics, std::ios::out | std::ios::trunc);
      if (!metrics_) return hpcml::IoError("--metrics {}: cannot open for writing", o_.metrics);
      nlohmann::json start = {{"event", "start"},
                              {"time", Iso8601Now()},
                              {"grid", o_.grid.ToString()},
                              {"dp", o_.grid.dp},
                              {"pp", o_.grid.pp},
                              {"tp", o_.grid.tp},
                              {"backend", o_.backend},
                              {"batch", o_.batch},
                              {"microbatches", o_.microbatches},
                              {"schedule", o_.schedule},
                              {"zero1", o_.zero1},
                              {"steps", o_.steps},
                              {"ideal_bubble", ht::IdealBubble(o_.grid.pp, o_.microbatches)}};
      metrics_ << start.dump() << '\n' << std::flush;
    }
    return hpcml::Status::Ok();
  }

  // Binds this rank to the cores next to its GPU (or its share of the node's
  // cores), unless the launcher already bound it (then only reported).
  hpcml::Status Bind() {
    if (o_.bind == "off") return hpcml::Status::Ok();
    namespace topo = hpcml::topology;
    HPCML_ASSIGN_OR_RETURN(topo::NodeTopology node, topo::DiscoverLocal());
    topo::LocalRank local = topo::LocalRankFromEnv();
    int gpu = o_.backend == "cuda" ? topo::SelectDevice(local, node.num_gpus()) : -1;
    HPCML_ASSIGN_OR_RETURN(
        topo::BindReport rep,
        topo::BindProcess(topo::CoresForRank(node, local, gpu), o_.bind == "force"));
    if (rank0_)
      log_.info("binding: rank 0 (local {}/{}): {}", local.local_rank, local.local_size,
                rep.detail);
    return hpcml::Status::Ok();
  }

  // Rank 0, inside a Slurm job: the attempt's usage record as JSON beside the
  // checkpoints and as a summary in the job's Comment, for hpcml-cost.
  // Accounting never stops training: a failure is a warning.
  void PublishUsage(std::int64_t first_step, double wall_s, std::int64_t start_time) {
    const char* job = std::getenv("SLURM_JOB_ID");
    const std::string dir = o_.usage_dir.empty() ? o_.ckpt.dir : o_.usage_dir;
    if (!rank0_ || job == nullptr || dir.empty()) return;
    namespace acct = hpcml::accounting;
    acct::UsageRecord r;
    r.job_id = job;
    const char* restarts = std::getenv("SLURM_RESTART_COUNT");
    r.restart_count = restarts ? std::atoi(restarts) : 0;
    r.start_time = start_time;
    r.written_at = static_cast<std::int64_t>(std::time(nullptr));
    // GPUs the job holds on its nodes, as Slurm allocated them.
    const char* per_node = std::getenv("SLURM_GPUS_ON_NODE");
    const char* nodes = std::getenv("SLURM_JOB_NUM_NODES");
    r.gpu_count = per_node ? std::atoi(per_node) * (nodes ? std::max(1, std::atoi(nodes)) : 1) : 0;
    r.gpu_type = r.gpu_count > 0 ? o_.gpu_type : "";
    r.gpu_seconds = r.gpu_count * wall_s;
    r.steps_done = trainer_->step() - first_step;
    r.samples_done = r.steps_done * o_.batch;
    // Steps after the newest checkpoint are redone by the next attempt.
    if (ckpt_) r.steps_lost_to_preemption = trainer_->step() - ckpt_->stats().last_saved_step;
    if (ckpt_) r.checkpoint_seconds = ckpt_->stats().save_seconds;
    acct::PublishOptions po;
    po.update_comment = !o_.no_comment;
    auto written = acct::PublishUsageRecord(dir, r, po);
    if (written.ok()) {
      log_.info("usage record {} ({} GPU-seconds, {} steps)", *written, r.gpu_seconds,
                r.steps_done);
    } else {
      log_.warn("usage record not published: {}", written.status().message());
    }
  }

  // Collective: opens the checkpoint directory and resumes from its newest
  // complete set, whatever layout saved it.
  hpcml::Status StartCheckpointing() {
    if (o_.ckpt.dir.empty()) return hpcml::Status::Ok();
    ht::CheckpointOptions c = o_.ckpt;
    c.async = !o_.ckpt_sync;
    if (!o_.ckpt_adaptive.empty()) {
      c.adaptive = true;
      if (std::sscanf(o_.ckpt_adaptive.c_str(), "%lf,%lf", &c.min_seconds, &c.max_seconds) != 2) {
        return Agree(hpcml::InvalidArgument("--checkpoint-adaptive {}: expected MIN,MAX seconds",
                                            o_.ckpt_adaptive));
      }
    }
    auto ck = ht::Checkpointer::Create(c, grid_.get(), trainer_.get(), backend_.get(),
                                       source_.get(), &log_);
    HPCML_RETURN_IF_ERROR(Agree(ck.status()));
    ckpt_ = std::move(ck).value();
    HPCML_ASSIGN_OR_RETURN(std::int64_t step, ckpt_->Resume());
    if (rank0_) {
      if (step > 0) {
        log_.info("resumed from checkpoint step {} in {}", step, o_.ckpt.dir);
      } else {
        log_.info("no checkpoint in {}: starting fresh", o_.ckpt.dir);
      }
    }
    return hpcml::Status::Ok();
  }

  hpcml::Status Train() {
    hpcml::Logger& log = log_;
    if (rank0_) {
      log.info(
          "grid {} (dp x pp x tp), backend {}, {} layers, {} parameters on rank 0, batch {} "
          "in {} microbatches, schedule {}",
          o_.grid.ToString(), backend_->name(), mc_.num_layers(), trainer_->model().num_params(),
          o_.batch, o_.microbatches, o_.schedule);
    }
    double time_sum = 0.0, bubble_sum = 0.0, first_loss = 0.0, last_loss = 0.0;
    std::int64_t timed = 0, attempt_steps = 0;
    auto hook = [&](const ht::StepStats& st) -> hpcml::Status {
      // This attempt's first step: step 1, or the one after a resumed checkpoint.
      if (attempt_steps++ == 0) first_loss = st.loss;
      last_loss = st.loss;
      // The first step pays for warm-up (allocation, MPI connections).
      if (attempt_steps > 1 || (st.step == o_.steps && timed == 0)) {
        time_sum += st.step_time_s;
        bubble_sum += st.bubble;
        ++timed;
      }
      if (rank0_) {
        const double avg = timed > 0 ? time_sum / static_cast<double>(timed) : st.step_time_s;
        if (metrics_.is_open()) {
          nlohmann::json j = {{"step", st.step},
                              {"loss", st.loss},
                              {"lr", st.lr},
                              {"grad_norm", st.grad_norm},
                              {"step_time_s", st.step_time_s},
                              {"samples_per_s", st.samples_per_s},
                              {"bubble", BubbleJson(st.bubble)}};
          metrics_ << j.dump() << '\n' << std::flush;
        }
        if (st.step % o_.log_interval == 0 || st.step == o_.steps || st.step == 1) {
          const double eta = avg * static_cast<double>(o_.steps - st.step);
          log.info(
              "step {}/{} loss {:.6f} lr {:.3e} grad_norm {:.4f} samples/s {:.0f} step {:.2f} ms "
              "bubble {} eta {:.1f} s",
              st.step, o_.steps, st.loss, st.lr, st.grad_norm, static_cast<double>(o_.batch) / avg,
              avg * 1e3, BubbleText(st.bubble), eta);
        }
      }
      if (ckpt_) {
        HPCML_ASSIGN_OR_RETURN(auto stop, ckpt_->AfterStep(st));
        if (stop) {
          stop_ = *stop;
          return hpcml::Status(hpcml::StatusCode::kUnavailable, "stop requested");
        }
      }
      return hpcml::Status::Ok();
    };
    const std::int64_t first_step = trainer_->step();
    const auto wall_start = std::chrono::steady_clock::now();
    const std::int64_t start_time = static_cast<std::int64_t>(std::time(nullptr));
    hpcml::Status ran = trainer_->Run(o_.steps, hook);
    auto publish = [&] {
      PublishUsage(
          first_step,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count(),
          start_time);
    };
    if (stop_) {
      if (rank0_) {
        log.info(
            "stopping at step {} ({}): checkpoint saved in {}; exit {} so that Slurm requeues the "
            "job",
            trainer_->step(), stop_->reason, o_.ckpt.dir, o_.stop_exit_code);
        if (metrics_.is_open()) {
          nlohmann::json j = {{"event", "stopped"},
                              {"time", Iso8601Now()},
                              {"step", trainer_->step()},
                              {"reason", stop_->reason}};
          metrics_ << j.dump() << '\n' << std::flush;
        }
      }
      publish();
      return hpcml::Status::Ok();
    }
    HPCML_RETURN_IF_ERROR(ran);
    if (ckpt_) HPCML_RETURN_IF_ERROR(ckpt_->Finish());
    publish();

    const double mean_bubble = timed > 0 ? bubble_sum / static_cast<double>(timed) : 0.0;
    const double mean_step = timed > 0 ? time_sum / static_cast<double>(timed) : 0.0;
    if (!o_.output.empty()) {
      auto gathered =
          ht::GatherModel(trainer_->model(), grid_.get(), *backend_, ht::WhichTensor::kParams);
      hpcml::Status s = gathered.status();
      if (s.ok() && rank0_) s = ht::SaveModelHdf5(o_.output, mc_, *gathered);
      HPCML_RETURN_IF_ERROR(Agree(s.ok() ? s : std::move(s).WithContext("--output " + o_.output)));
    }
    if (rank0_) {
      log.info(
          "done: {} steps, loss {:.6f} -> {:.6f}, mean step {:.2f} ms, {:.0f} samples/s, "
          "bubble {} (ideal {:.3f}){}",
          o_.steps, first_loss, last_loss, mean_step * 1e3,
          mean_step > 0 ? static_cast<double>(o_.batch) / mean_step : 0.0, BubbleText(mean_bubble),
          ht::IdealBubble(o_.grid.pp, o_.microbatches),
          o_.output.empty() ? "" : ", model written to " + o_.output);
      if (metrics_.is_open()) {
        nlohmann::json j = {{"event", "done"},
                            {"time", Iso8601Now()},
                            {"steps", o_.steps},
                            {"first_loss", first_loss},
                            {"final_loss", last_loss},
                            {"mean_step_time_s", mean_step},
                            {"mean_bubble", BubbleJson(mean_bubble)},
                            {"oversubscribed", oversubscribed_},
                            {"ideal_bubble", ht::IdealBubble(o_.grid.pp, o_.microbatches)}};
        metrics_ << j.dump() << '\n' << std::flush;
      }
    }
    return hpcml::Status::Ok();
  }

  // With more ranks than cores, a stage's busy time includes waiting for a
  // core, so the bubble measures the scheduler, not the pipeline: n/a.
  std::string BubbleText(double b) const {
    return oversubscribed_ ? "n/a" : fmt::format("{:.3f}", b);
  }
  nlohmann::json BubbleJson(double b) const {
    return oversubscribed_ ? nlohmann::json(nullptr) : nlohmann::json(b);
  }

  Options o_;
  std::unique_ptr<ht::ProcessGrid> grid_;
  bool rank0_ = false;
  bool oversubscribed_ = false;
  std::unique_ptr<ht::Backend> backend_;
  ht::ModelConfig mc_;
  ht::TrainConfig tc_;
  std::unique_ptr<ht::BatchSource> source_;
  std::unique_ptr<ht::Trainer> trainer_;
  std::ofstream metrics_;
  hpcml::Logger log_{"hpcml-train"};
  std::unique_ptr<ht::Checkpointer> ckpt_;
  std::optional<ht::StopRequest> stop_;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  Options o;
  CLI::App app{"hpcml-train: data, pipeline and tensor parallel MLP training over MPI",
               "hpcml-train"};
  app.add_option("--dp", o.grid.dp, "data-parallel replicas")->capture_default_str();
  app.add_option("--pp", o.grid.pp, "pipeline stages")->capture_default_str();
  app.add_option("--tp", o.grid.tp, "tensor-parallel shards per layer pair")->capture_default_str();
  app.add_option("--threads", o.threads,
                 "math threads per rank (default: OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, "
                 "else the rank's cores); never more than the rank's share of its node's cores")
      ->check(CLI::PositiveNumber);
  app.add_option("--gemm", o.gemm, "cpu backend GEMM library: onednn or openblas (fallback)")
      ->check(CLI::IsMember({"onednn", "openblas"}))
      ->capture_default_str();
  app.add_option("--backend", o.backend, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--input-dim", o.input_dim, "features per sample (--synthetic only)")
      ->capture_default_str();
  app.add_option("--hidden", o.hidden,
                 "hidden layer widths, comma-separated, e.g. 256,256,256 ('' for none)")
      ->capture_default_str();
  app.add_option("--outputs", o.outputs, "classes (ce) or regression targets (mse)")
      ->capture_default_str();
  app.add_option("--activation", o.activation, "relu, gelu or tanh")->capture_default_str();
  app.add_option("--loss", o.loss, "ce (softmax cross-entropy) or mse")->capture_default_str();
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
  app.add_option("--schedule", o.schedule, "pipeline schedule: gpipe or 1f1b")
      ->capture_default_str();
  app.add_option("--steps", o.steps, "optimisation steps")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", o.lr, "peak learning rate")->capture_default_str();
  app.add_option("--min-lr", o.min_lr, "learning rate at the end of the cosine decay")
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "linear warm-up steps")->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay")
      ->capture_default_str();
  app.add_option("--clip", o.clip, "global gradient-norm clip (0: off)")->capture_default_str();
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
  app.add_option("--output", o.output, "final model as HDF5, written by rank 0");
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
  app.add_option("--spot-kind", o.ckpt.spot_kind, "aws or gcp")
      ->check(CLI::IsMember({"aws", "gcp"}))
      ->capture_default_str();
  app.add_option("--spot-poll-ms", o.ckpt.spot_poll_ms, "spot notice poll interval")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--stop-before-end", o.ckpt.stop_before_end_seconds,
                 "save and stop when Slurm's time left drops below this many seconds (0: off)")
      ->capture_default_str();
  app.add_flag("--plan", o.plan,
               "print the placement plan (dp x pp x tp, per-rank node/GPU/cores, predicted "
               "communication) for this allocation and exit");
  app.add_option("--bind", o.bind,
                 "bind ranks to cores near their GPU: auto (not when the launcher bound them), "
                 "off, force")
      ->check(CLI::IsMember({"auto", "off", "force"}))
      ->capture_default_str();
  app.add_option("--usage-dir", o.usage_dir,
                 "write the attempt's usage record here (default: --checkpoint-dir)");
  app.add_option("--gpu-type", o.gpu_type, "GPU type for the usage record, e.g. h100");
  app.add_flag("--no-usage-comment", o.no_comment,
               "do not copy the usage summary into the job Comment");
  app.add_option("--stop-exit-code", o.stop_exit_code,
                 "exit code after a save-and-stop (list it in slurm.conf RequeueExit)")
      ->capture_default_str();

  int code = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same argv and fails the same way: no agreement needed.
    if (rank == 0)
      code = app.exit(e);
    else
      code = e.get_exit_code();
    MPI_Finalize();
    return code == 0 ? 0 : 2;
  }
  if (o.plan) {
    // The plan for this allocation: every rank's node topology, gathered.
    namespace topo = hpcml::topology;
    std::vector<int> node_of_rank;
    auto cluster = topo::GatherTopology(MPI_COMM_WORLD, &node_of_rank);
    hpcml::Status st = cluster.status();
    if (st.ok() && rank == 0) {
      topo::PlanRequest req;
      int size = 1;
      MPI_Comm_size(MPI_COMM_WORLD, &size);
      req.world = size;
      // Degrees given on the command line are fixed; --dp/--pp/--tp left at 1 are not.
      req.dp = o.grid.dp > 1 ? o.grid.dp : 0;
      req.pp = o.grid.pp > 1 ? o.grid.pp : 0;
      req.tp = o.grid.tp > 1 ? o.grid.tp : 0;
      auto hidden = ParseWidths(o.hidden);
      st = hidden.status();
      if (st.ok()) {
        req.model.widths.push_back(o.input_dim);
        for (auto w : *hidden) req.model.widths.push_back(w);
        req.model.widths.push_back(o.outputs);
        req.model.global_batch = o.batch;
        req.model.microbatches = o.microbatches;
        // Sustained FLOP/s per rank: an H100 in bf16, or one AVX-512 core in
        // fp32 through oneDNN (220-240 GFLOP/s measured in a step: docs/trainer.md).
        req.model.flops_per_device = o.backend == "cuda" ? 400e12 : 200e9;
        auto plan = topo::MakePlan(*cluster, req);
        st = plan.status();
        if (st.ok()) std::printf("%s", topo::FormatPlan(*cluster, *plan).c_str());
      }
    }
    if (!st.ok() && rank == 0) hpcml::Logger("hpcml-train").error("--plan: {}", st.message());
    int failed = st.ok() ? 0 : 1, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any;
  }
  {
    Program program(o);
    hpcml::Status s = program.Run();
    if (!s.ok()) {
      if (rank == 0) hpcml::Logger("hpcml-train").error("{}", s.message());
      code = 1;
    } else if (program.stopped()) {
      code = o.stop_exit_code;
    }
  }
  MPI_Finalize();
  return code;
}
