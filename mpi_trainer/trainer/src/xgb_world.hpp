// XGBoost across the ranks of an MPI job (hpcml-train --model gbdt on more
// than one rank). Slurm starts no XGBoost tracker, so rank 0 runs the one
// Debian ships (python3-xgboost's xgboost.tracker, ranks sorted by task id)
// on an address the other ranks' nodes reach, hands host and port to them
// over MPI, and every rank joins with its MPI rank as XGBoost's rank.
// docs/trainer.md ("Trees across nodes") is the reference.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "hpcml/common/log.hpp"
#include "hpcml/common/process.hpp"
#include "hpcml/common/status.hpp"
#include "hpcml/trees/xgb.hpp"

namespace hpcml::trainer {

// Collective over `comm`: the address rank 0's tracker listens on. Every
// rank sends its host name and first non-loopback IPv4 address; on rank 0
// that is 127.0.0.1 when every rank runs on its host, else the local address
// its kernel routes to another host's rank by (a UDP socket's connect picks
// it; nothing is sent). HPCML_XGB_TRACKER_HOST on rank 0 overrides (a node
// with several networks). Empty on the other ranks.
std::string TrackerHost(MPI_Comm comm);

// Rank 0's side: the host names and addresses of every rank (rank order),
// and the address chosen from them (the rule above).
std::string ChooseTrackerHost(const std::vector<std::string>& hosts,
                              const std::vector<std::string>& addresses);

// XGBoost 1.7's collective takes a poll() that a signal interrupts (EINTR)
// for a failed allreduce. While one is held, SIGTERM and SIGUSR1 are blocked
// in the thread that joined it (and in threads it starts later: OpenMP's)
// and taken by a thread kept for them, whose handler (StopSignals) sets the
// flag the rounds poll. The mask is restored and the thread ended on
// destruction.
class SignalsAside {
 public:
  SignalsAside();
  ~SignalsAside();
  SignalsAside(const SignalsAside&) = delete;
  SignalsAside& operator=(const SignalsAside&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Held by every rank for the run: the joined collective and, on rank 0, the
// tracker. Leave() at the end lets the tracker finish; when the owner goes
// without it (an error), the collective is left and the tracker stopped.
class XgbWorld {
 public:
  // Collective over `comm`; every failure (no python3-xgboost, a tracker
  // that does not start, a rank that cannot reach it) is agreed on. With
  // one rank, nothing is started.
  static Result<XgbWorld> Join(MPI_Comm comm, Logger& log);

  // Leaves the collective; rank 0 waits (a bounded time) for the tracker.
  Status Leave();

 private:
  ChildProcess tracker_;                   // rank 0
  std::unique_ptr<SignalsAside> signals_;  // while joined
  trees::Communicator joined_;             // left first, then the signals, then the tracker
};

}  // namespace hpcml::trainer
