// When to checkpoint: on a schedule, on a signal from Slurm, on a cloud
// spot notice, or before the job's time runs out; and how often (Young/Daly).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "hpcml/common/status.hpp"

namespace hpcml::checkpoint {

// SIGTERM (scancel, preemption, requeue) and SIGUSR1 (sbatch
// --signal=B:USR1@T) set a flag instead of killing the process; the training
// loop polls it at step boundaries. Install is idempotent; process-wide.
class StopSignals {
 public:
  static void Install();
  // The first signal received since Install/Reset, or 0.
  static int Pending();
  static void Reset();
};

// Polls a cloud metadata URL for a reclaim notice on a background thread.
//   aws: http://169.254.169.254/latest/meta-data/spot/instance-action
//        (404 = no notice; 200 with a JSON body = notice)
//   gcp: http://metadata.google.internal/computeMetadata/v1/instance/preempted
//        (body "TRUE" = notice; sends Metadata-Flavor: Google)
// Only plain http:// (metadata services are link-local). Errors while
// polling are not notices; the last one is kept for the log.
class SpotNoticePoller {
 public:
  enum class Kind { kAws, kGcp };

  // Starts polling `url` every `interval`. Fails on a malformed URL.
  static Result<std::unique_ptr<SpotNoticePoller>> Start(const std::string& url, Kind kind,
                                                         std::chrono::milliseconds interval);
  ~SpotNoticePoller();  // stops and joins the thread

  bool noticed() const { return noticed_.load(); }
  int polls() const { return polls_.load(); }
  std::string last_error() const;

 private:
  SpotNoticePoller(std::string host, std::string port, std::string target, Kind kind,
                   std::chrono::milliseconds interval);
  void Run();
  bool PollOnce();  // true when a notice is present

  std::string host_, port_, target_;
  Kind kind_;
  std::chrono::milliseconds interval_;
  std::atomic<bool> noticed_{false};
  std::atomic<int> polls_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string last_error_;
  std::thread thread_;
};

std::string_view Name(SpotNoticePoller::Kind k);  // "aws", "gcp"

// Seconds left before Slurm ends job `job_id` (libslurm's
// slurm_get_rem_time), or -1 when unknown (no limit, not in a job).
long SlurmSecondsLeft(std::uint32_t job_id);

// Everything that asks a run to save and stop now, polled at step (or
// round) boundaries: SIGTERM/SIGUSR1 (StopSignals, installed by Start), a
// spot notice, and Slurm's time left under a margin (asked of slurmctld at
// most every 30 s). One per process; the MLP's checkpointer and the tree
// trainer share it.
struct StopTriggerOptions {
  std::string spot_url;  // empty: no poller
  SpotNoticePoller::Kind spot_kind = SpotNoticePoller::Kind::kAws;
  int spot_poll_ms = 5000;
  double stop_before_end_seconds = 0;  // 0: off
};

class StopTriggers {
 public:
  static Result<std::unique_ptr<StopTriggers>> Start(const StopTriggerOptions& options);
  // Why to stop now ("SIGTERM", "SIGUSR1", "spot notice", "time limit (N s
  // left)"), or "" to go on.
  std::string Poll();

 private:
  using Clock = std::chrono::steady_clock;
  StopTriggerOptions opt_;
  std::unique_ptr<SpotNoticePoller> poller_;
  Clock::time_point last_time_check_ = Clock::now() - std::chrono::hours(1);
  long time_left_s_ = -1;
};

// Young/Daly: the checkpoint interval that minimises expected lost work for
// a checkpoint cost `cost_s` and mean time between interruptions `mtbi_s`.
// Daly's higher-order form; for cost >= 2*mtbi it returns mtbi.
double DalyInterval(double cost_s, double mtbi_s);

// Adapts the interval from what is observed: the measured checkpoint cost
// and the interruption rate (restarts of this job plus notices), within the
// user's bounds. With no interruption seen yet, the rate is taken as one per
// `prior_mtbi_s`.
class AdaptiveInterval {
 public:
  AdaptiveInterval(double min_s, double max_s, double prior_mtbi_s)
      : min_s_(min_s), max_s_(max_s), prior_mtbi_s_(prior_mtbi_s) {}
  void ObserveCheckpointCost(double seconds);  // exponential moving average
  // `interruptions` seen over `elapsed_s` of this job's life (all attempts).
  void ObserveInterruptions(int interruptions, double elapsed_s);
  double cost_s() const { return cost_s_; }
  double mtbi_s() const { return mtbi_s_; }
  double interval_s() const;

 private:
  double min_s_, max_s_, prior_mtbi_s_;
  double cost_s_ = 0;
  double mtbi_s_ = 0;
};

}  // namespace hpcml::checkpoint
