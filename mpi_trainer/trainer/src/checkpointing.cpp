#include "checkpointing.hpp"

#include "hpcml/common/finite.hpp"
#include "hpcml/common/json.hpp"
#include "hpcml/common/time.hpp"

#include <mpi.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>

namespace hpcml::trainer {
namespace ck = hpcml::checkpoint;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Flags agreed on once per step (bitwise OR over all ranks).
enum : int { kStop = 1, kSaveDue = 2, kPendingNotReady = 4 };

int SlurmRestartCount() {
  const char* v = std::getenv("SLURM_RESTART_COUNT");
  return v ? std::atoi(v) : 0;
}

ck::Slice SliceOf(const ParamInfo& p) {
  if (p.global_shape.size() == 1) return ck::Slice{{p.row_begin}, {p.row_end - p.row_begin}};
  return ck::Slice{{p.row_begin, p.col_begin}, {p.row_end - p.row_begin, p.col_end - p.col_begin}};
}

}  // namespace

Result<std::unique_ptr<Checkpointer>> Checkpointer::Create(const CheckpointOptions& options,
                                                           const ProcessGrid* grid,
                                                           Trainer* trainer, Backend* backend,
                                                           BatchSource* source, Logger* log) {
  std::unique_ptr<Checkpointer> c(new Checkpointer());
  c->opt_ = options;
  c->grid_ = grid;
  c->trainer_ = trainer;
  c->backend_ = backend;
  c->source_ = source;
  c->log_ = log;
  if (options.min_seconds <= 0 || options.max_seconds < options.min_seconds) {
    return InvalidArgument("--checkpoint-adaptive: need 0 < min <= max seconds, got {} and {}",
                           options.min_seconds, options.max_seconds);
  }
  c->interval_ =
      ck::AdaptiveInterval(options.min_seconds, options.max_seconds, options.prior_mtbi_seconds);
  HPCML_ASSIGN_OR_RETURN(ck::CheckpointDir dir, ck::CheckpointDir::Open(options.dir, options.keep));
  c->dir_ = std::make_unique<ck::CheckpointDir>(std::move(dir));
  c->writer_ = std::make_unique<ck::AsyncWriter>(*c->dir_);
  // The spot poller and the time-left check on rank 0 only; a signal is
  // seen by the rank it reaches. AfterStep agrees on what any rank saw.
  ck::StopTriggerOptions t;
  if (c->world_rank() == 0) {
    t.spot_url = options.spot_url;
    t.spot_kind = options.spot_kind;
    t.spot_poll_ms = options.spot_poll_ms;
    t.stop_before_end_seconds = options.stop_before_end_seconds;
  }
  HPCML_ASSIGN_OR_RETURN(c->triggers_, ck::StopTriggers::Start(t));
  return c;
}

Checkpointer::~Checkpointer() = default;

int Checkpointer::world_rank() const {
  return grid_ ? grid_->rank() : 0;
}
int Checkpointer::world_size() const {
  return grid_ ? grid_->size() : 1;
}

std::vector<ck::OwnedTensor> Checkpointer::Snapshot() const {
  std::vector<ck::OwnedTensor> out;
  const int dp = grid_ ? grid_->dp_idx() : 0, tp = grid_ ? grid_->tp_idx() : 0;
  // The moments of the whole flat buffer at the first replica (collective
  // over the data group: with ZeRO-1 each replica holds one shard), so the
  // set has the same tensors with or without --zero1.
  std::vector<float> adam_m, adam_v;
  trainer_->GatherMoments(&adam_m, &adam_v);
  if (dp != 0) return out;  // data-parallel replicas hold identical copies
  const Model& m = trainer_->model();
  std::vector<float> params(m.num_params());
  backend_->ToHost(params.data(), m.param_data(), params.size());
  struct Source {
    const char* suffix;
    const float* base;
  } sources[] = {{"", params.data()}, {".adam_m", adam_m.data()}, {".adam_v", adam_v.data()}};
  for (const ParamInfo& p : m.params()) {
    if (p.tp_replicated && tp != 0) continue;  // one copy per tensor group
    for (const auto& src : sources) {
      const float* b = src.base + p.offset;
      out.push_back(ck::OwnedTensor{p.name + src.suffix, p.global_shape, SliceOf(p),
                                    std::vector<float>(b, b + p.size)});
    }
  }
  return out;
}

nlohmann::json Checkpointer::RankState() const {
  // Middle pipeline stages read no data: they have no source.
  // The trainer's: a batch it read ahead is not yet trained on.
  return {{"loader", source_ ? trainer_->SourcePosition() : std::string()},
          {"dp_idx", grid_ ? grid_->dp_idx() : 0},
          {"pp_idx", grid_ ? grid_->pp_idx() : 0},
          {"tp_idx", grid_ ? grid_->tp_idx() : 0}};
}

Status Checkpointer::StartSave(std::int64_t step, bool sync) {
  auto t0 = Clock::now();
  std::vector<ck::OwnedTensor> tensors = Snapshot();
  // A set with a NaN or an infinity is never started: the last one stays the
  // newest, and every rank learns it.
  Status finite;
  for (const ck::OwnedTensor& t : tensors) {
    finite = CheckFinite(t.data, t.name);
    if (!finite.ok()) break;
  }
  if (!finite.ok()) {
    finite = std::move(finite).WithContext(
        fmt::format("step {}: no checkpoint written (the newest complete one is kept)", step));
  }
  HPCML_RETURN_IF_ERROR(AgreeOnStatus(grid_ ? grid_->world() : MPI_COMM_SELF, finite));
  HPCML_RETURN_IF_ERROR(writer_->StartOwned(step, world_rank(), std::move(tensors), RankState()));
  pending_step_ = step;
  pending_run_state_ = run_state_ ? run_state_() : nlohmann::json();
  pending_started_ = t0;
  last_save_ = t0;
  if (sync) HPCML_RETURN_IF_ERROR(CommitPending());
  stats_.save_seconds += Seconds(Clock::now() - t0);
  return Status::Ok();
}

// Collective: waits for this rank's write, gathers every shard description
// at rank 0, which writes the manifest; all ranks learn the outcome.
Status Checkpointer::CommitPending() {
  if (pending_step_ < 0) return Status::Ok();
  Result<ck::ShardInfo> info = writer_->Wait();
  std::string mine = info.ok() ? JsonText(ck::ToJson(*info)) : std::string();
  Status local = info.ok() ? Status::Ok() : info.status();
  MPI_Comm world = grid_ ? grid_->world() : MPI_COMM_SELF;
  std::vector<std::string> all = GatherStrings(world, mine);
  if (world_rank() == 0 && local.ok()) {
    ck::Manifest m;
    m.step = pending_step_;
    const GridShape shape = grid_ ? grid_->shape() : GridShape{};
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r].empty()) {
        local = Internal("rank {} failed to write its checkpoint shard", r);
        break;
      }
      auto shard = ck::ShardFromJson(nlohmann::json::parse(all[r]));
      if (!shard.ok()) {
        local = shard.status();
        break;
      }
      m.shards.push_back(std::move(shard).value());
    }
    if (local.ok()) {
      m.state = {{"step", pending_step_},
                 {"layout", {{"dp", shape.dp}, {"pp", shape.pp}, {"tp", shape.tp}}},
                 {"world", world_size()},
                 {"restart_count", SlurmRestartCount()},
                 {"elapsed_s", elapsed_before_ + Seconds(Clock::now() - attempt_start_)},
                 {"job_id", std::getenv("SLURM_JOB_ID") ? std::getenv("SLURM_JOB_ID") : ""}};
      if (!pending_run_state_.is_null()) m.state["run"] = pending_run_state_;
      local = dir_->Commit(m);
    }
  }
  HPCML_RETURN_IF_ERROR(AgreeOnStatus(world, local));
  double cost = Seconds(Clock::now() - pending_started_);
  interval_.ObserveCheckpointCost(cost);
  stats_.saves++;
  stats_.last_saved_step = pending_step_;
  stats_.last_complete_unix =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (world_rank() == 0)
    log_->info("checkpoint: step {} saved in {:.2f} s to {}", pending_step_, cost,
               dir_->SetPath(pending_step_));
  pending_step_ = -1;
  return Status::Ok();
}

bool Checkpointer::LocalStopWanted(std::string* reason) {
  *reason = triggers_->Poll();
  return !reason->empty();
}

Result<std::optional<StopRequest>> Checkpointer::AfterStep(const StepStats& stats) {
  std::string reason;
  int flags = LocalStopWanted(&reason) ? kStop : 0;
  if (world_rank() == 0) {
    double since = Seconds(Clock::now() - last_save_);
    bool due = (opt_.every_steps > 0 && stats.step % opt_.every_steps == 0) ||
               (opt_.every_seconds > 0 && since >= opt_.every_seconds) ||
               (opt_.adaptive && since >= interval_.interval_s());
    if (due) flags |= kSaveDue;
  }
  if (pending_step_ >= 0 && !writer_->ready()) flags |= kPendingNotReady;
  int all = flags;
  if (grid_) MPI_Allreduce(&flags, &all, 1, MPI_INT, MPI_BOR, grid_->world());

  // A background save that every rank has finished is committed now.
  if (pending_step_ >= 0 && (!(all & kPendingNotReady) || (all & (kStop | kSaveDue)))) {
    HPCML_RETURN_IF_ERROR(CommitPending());
  }
  if (all & kStop) {
    // Tell everyone why (the reason is known on the rank that saw it).
    int code = reason.empty() ? 0 : world_rank() + 1, first = 0;
    MPI_Comm world = grid_ ? grid_->world() : MPI_COMM_SELF;
    MPI_Allreduce(&code, &first, 1, MPI_INT, MPI_MAX, world);
    char buf[128] = {};
    if (first == world_rank() + 1) std::snprintf(buf, sizeof buf, "%s", reason.c_str());
    MPI_Bcast(buf, sizeof buf, MPI_CHAR, first > 0 ? first - 1 : 0, world);
    if (stats_.last_saved_step != stats.step)
      HPCML_RETURN_IF_ERROR(StartSave(stats.step, /*sync=*/true));
    return std::optional<StopRequest>(StopRequest{buf});
  }
  if (all & kSaveDue) HPCML_RETURN_IF_ERROR(StartSave(stats.step, /*sync=*/!opt_.async));
  return std::optional<StopRequest>();
}

Status Checkpointer::Finish() {
  HPCML_RETURN_IF_ERROR(CommitPending());
  if (stats_.last_saved_step != trainer_->step())
    HPCML_RETURN_IF_ERROR(StartSave(trainer_->step(), true));
  return Status::Ok();
}

Result<std::int64_t> Checkpointer::Resume() {
  MPI_Comm world = grid_ ? grid_->world() : MPI_COMM_SELF;
  HPCML_ASSIGN_OR_RETURN(const std::int64_t step, NewestCompleteStep(world));
  if (step == 0) return std::int64_t{0};
  auto set = dir_->Load(step, /*verify=*/false);
  Status local = set.status();
  if (local.ok()) local = LoadTensors(*set);
  if (local.ok()) local = RestoreDataPosition(*set);
  HPCML_RETURN_IF_ERROR(AgreeOnStatus(world, local));
  trainer_->set_step(step);
  stats_.resumed_step = step;
  stats_.last_saved_step = step;
  if (auto t = ParseIsoMillis(set->manifest().created_at); t.ok())
    stats_.last_complete_unix = static_cast<double>(*t) / 1e3;
  // Interruptions so far: Slurm's restart count over this job's life.
  elapsed_before_ = set->manifest().state.value("elapsed_s", 0.0);
  resumed_run_state_ = set->manifest().state.value("run", nlohmann::json());
  interval_.ObserveInterruptions(SlurmRestartCount(), elapsed_before_);
  return step;
}

// Rank 0 picks the set (verifying every shard); every rank learns its step
// (0: none).
Result<std::int64_t> Checkpointer::NewestCompleteStep(MPI_Comm world) {
  std::int64_t step = 0;
  Status local;
  if (world_rank() == 0) {
    std::vector<std::string> warnings;
    auto set = dir_->LoadLatest(/*verify=*/true, &warnings);
    for (const auto& w : warnings) log_->warn("checkpoint: {}", w);
    if (set.ok()) {
      step = set->manifest().step;
    } else if (set.status().code() != StatusCode::kNotFound) {
      local = set.status();
    }
  }
  HPCML_RETURN_IF_ERROR(AgreeOnStatus(world, local));
  MPI_Bcast(&step, 1, MPI_INT64_T, 0, world);
  return step;
}

// This rank's parameters and moments, whatever layout saved them. Moments
// cover [begin, end) of the flat buffer (a ZeRO-1 shard, or all).
Status Checkpointer::LoadTensors(const checkpoint::LoadedSet& set) {
  Model& m = trainer_->model();
  std::vector<float> host;
  const std::size_t begin = trainer_->moments_begin(), end = trainer_->moments_end();
  struct Target {
    const char* suffix;
    float* base;
    bool sharded;
  } targets[] = {{"", m.param_data(), false},
                 {".adam_m", trainer_->adam_m(), true},
                 {".adam_v", trainer_->adam_v(), true}};
  for (const ParamInfo& p : m.params()) {
    for (const auto& t : targets) {
      host.resize(p.size);
      HPCML_RETURN_IF_ERROR(set.Read(p.name + t.suffix, SliceOf(p), host.data()));
      if (!t.sharded) {
        backend_->ToDevice(t.base + p.offset, host.data(), p.size);
        continue;
      }
      const std::size_t lo = std::max(p.offset, begin), hi = std::min(p.offset + p.size, end);
      if (lo < hi) {
        backend_->ToDevice(t.base + (lo - begin), host.data() + (lo - p.offset), hi - lo);
      }
    }
  }
  return Status::Ok();
}

// The data position: the saved replica with the same index when the
// data-parallel degree is unchanged; otherwise it must be the same for every
// saved replica (a position that does not depend on the replica).
Status Checkpointer::RestoreDataPosition(const checkpoint::LoadedSet& set) {
  const nlohmann::json& layout = set.manifest().state["layout"];
  int saved_dp = layout.value("dp", 1);
  int my_dp = grid_ ? grid_->dp_idx() : 0, dp = grid_ ? grid_->shape().dp : 1;
  std::vector<std::string> positions(static_cast<size_t>(saved_dp));
  for (const auto& s : set.manifest().shards) {
    HPCML_ASSIGN_OR_RETURN(nlohmann::json st, set.RankState(s.rank));
    if (st["pp_idx"] == 0 && st["tp_idx"] == 0) {
      positions[st["dp_idx"].get<size_t>()] = st["loader"].get<std::string>();
    }
  }
  std::string pos;
  if (saved_dp == dp) {
    pos = positions[static_cast<size_t>(my_dp)];
  } else if (std::all_of(positions.begin(), positions.end(),
                         [&](const auto& p) { return p == positions[0]; })) {
    pos = positions[0];
  } else {
    return FailedPrecondition(
        "{}: saved with {} data-parallel replicas whose data positions differ; this data "
        "source cannot "
        "resume them as {} replicas (resume with dp={})",
        set.path(), saved_dp, dp, saved_dp);
  }
  return source_ != nullptr ? trainer_->RestoreSourcePosition(pos) : Status::Ok();
}

}  // namespace hpcml::trainer
