// Checkpointing of a training run: when to save (steps, seconds, Daly's
// adaptive interval, SIGTERM/SIGUSR1, a cloud spot notice, Slurm's time
// limit), saving the parameters, the AdamW moments, the step and the data
// position as a checkpoint set (hpcml::checkpoint), and resuming from the
// newest complete set in any layout.
//
// Every method is collective over the grid's world and must be called by all
// ranks in lock step. Decisions (save now, stop now) are agreed on with one
// small all-reduce per step, so every rank takes the same branch.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "hpcml/checkpoint/async.hpp"
#include "hpcml/checkpoint/store.hpp"
#include "hpcml/checkpoint/triggers.hpp"
#include "hpcml/common/log.hpp"
#include "hpcml/trainer/trainer.hpp"

namespace hpcml::trainer {

struct CheckpointOptions {
  std::string dir;               // empty: checkpointing off
  int keep = 2;                  // complete sets kept
  std::int64_t every_steps = 0;  // 0: off
  double every_seconds = 0;      // 0: off
  bool adaptive = false;         // Daly's interval from measured cost and interruptions
  double min_seconds = 30, max_seconds = 3600;
  double prior_mtbi_seconds = 4 * 3600;  // assumed time between interruptions until one is seen
  bool async = true;                     // snapshot, then write in the background
  std::string spot_url;                  // cloud metadata URL to poll; empty: off
  checkpoint::SpotNoticePoller::Kind spot_kind = checkpoint::SpotNoticePoller::Kind::kAws;
  int spot_poll_ms = 5000;
  double stop_before_end_seconds = 0;  // save and stop when Slurm's time left drops below; 0: off
};

// Why a run stopped early: the process should exit so that Slurm requeues it.
struct StopRequest {
  std::string reason;  // "SIGTERM", "spot notice", "time limit"
};

struct CheckpointStats {
  int saves = 0;
  double save_seconds = 0;        // time training waited for saves (snapshots, sync saves)
  std::int64_t resumed_step = 0;  // 0: fresh start
  std::int64_t last_saved_step = 0;
  // When the newest complete set was committed (or, after a resume, written:
  // its manifest's created_at), seconds since the epoch; 0: none yet.
  double last_complete_unix = 0;
};

class Checkpointer {
  using Clock = std::chrono::steady_clock;

 public:
  static Result<std::unique_ptr<Checkpointer>> Create(const CheckpointOptions& options,
                                                      const ProcessGrid* grid, Trainer* trainer,
                                                      Backend* backend, BatchSource* source,
                                                      Logger* log);
  ~Checkpointer();

  // Loads the newest complete set, if any, into the trainer and the source:
  // parameters and moments for this rank's slices whatever layout saved them,
  // the step, and the data position. Returns the step resumed from (0: fresh).
  Result<std::int64_t> Resume();

  // After each step: commits a finished background save, saves when due,
  // and when a stop was requested on any rank saves synchronously and
  // returns the request (the caller exits for requeue).
  Result<std::optional<StopRequest>> AfterStep(const StepStats& stats);

  // At the end of training: waits for and commits a save in flight, then
  // saves the final step if it is not saved yet.
  Status Finish();

  const CheckpointStats& stats() const { return stats_; }

  // The caller's own run state (e.g. validation: best value, patience),
  // saved in each set's manifest under "run". `f` runs on every rank when a
  // save starts, so the state is that of the step saved; rank 0's is
  // written. Set it before Resume().
  void set_run_state(std::function<nlohmann::json()> f) { run_state_ = std::move(f); }
  // After Resume(): the "run" state of the set resumed from (null when
  // fresh, or when that set has none). The same on every rank.
  const nlohmann::json& resumed_run_state() const { return resumed_run_state_; }

 private:
  Checkpointer() = default;
  Status StartSave(std::int64_t step, bool sync);
  // This rank's tensors, copied to host memory. Collective over the
  // data-parallel group (ZeRO-1 moments are gathered to the first replica).
  std::vector<checkpoint::OwnedTensor> Snapshot() const;
  nlohmann::json RankState() const;
  int world_rank() const;
  int world_size() const;
  Status CommitPending();
  bool LocalStopWanted(std::string* reason);
  // Resume's steps: which set (collective), then this rank's part of it.
  Result<std::int64_t> NewestCompleteStep(MPI_Comm world);
  Status LoadTensors(const checkpoint::LoadedSet& set);
  Status RestoreDataPosition(const checkpoint::LoadedSet& set);

  CheckpointOptions opt_;
  const ProcessGrid* grid_ = nullptr;
  Trainer* trainer_ = nullptr;
  Backend* backend_ = nullptr;
  BatchSource* source_ = nullptr;
  Logger* log_ = nullptr;
  std::unique_ptr<checkpoint::CheckpointDir> dir_;
  std::unique_ptr<checkpoint::AsyncWriter> writer_;
  std::unique_ptr<checkpoint::StopTriggers> triggers_;
  checkpoint::AdaptiveInterval interval_{30, 3600, 4 * 3600};
  std::int64_t pending_step_ = -1;    // set written in the background, not yet committed
  nlohmann::json pending_run_state_;  // run_state_() when pending_step_'s save started
  std::function<nlohmann::json()> run_state_;
  nlohmann::json resumed_run_state_;
  Clock::time_point pending_started_;
  Clock::time_point last_save_ = Clock::now();
  Clock::time_point attempt_start_ = Clock::now();
  double elapsed_before_ = 0;  // training seconds of earlier attempts (from the manifest)
  CheckpointStats stats_;
};

}  // namespace hpcml::trainer
