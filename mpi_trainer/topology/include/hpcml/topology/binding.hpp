// Binding a rank to the cores (and memory) next to its GPU, without fighting
// a binding that Slurm or mpirun already applied.
#pragma once

#include <mpi.h>

#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/topology/topology.hpp"

namespace hpcml::topology {

// Where this process runs, from the launcher's environment (Slurm, then
// Open MPI, then PMIx); local_size 1 / local_rank 0 when not launched.
struct LocalRank {
  int local_rank = 0;
  int local_size = 1;
};
LocalRank LocalRankFromEnv();

// The device this rank should use, consistent with what Slurm assigned:
// with CUDA_VISIBLE_DEVICES set (Slurm's --gpus-per-task / --gpu-bind set it
// per task), the index into the visible list is local_rank modulo its length
// when several are visible, else 0; without it, local_rank modulo
// `num_gpus`. -1 when there is no GPU.
int SelectDevice(const LocalRank& local, int num_gpus);

// The cores a rank should use: those local to its GPU shared among the
// ranks on that GPU's NUMA node, or on a CPU-only node an equal contiguous
// share of all cores (uneven divisions give the first ranks one more).
std::vector<int> CoresForRank(const NodeTopology& node, const LocalRank& local, int gpu);

struct BindReport {
  bool applied = false;        // we bound the process
  bool already_bound = false;  // the launcher had bound it: left alone
  std::vector<int> cpus;       // the cpuset in force afterwards
  std::string detail;          // one line for the log
};

// Binds the calling process (all threads) to `cpus` and its memory to their
// NUMA node, unless its current affinity is already narrower than the cores
// it may use (a launcher binding), in which case nothing changes and the
// report says so. `force` rebinds anyway.
Result<BindReport> BindProcess(const std::vector<int>& cpus, bool force = false);

// The calling thread's current affinity as OS core indexes.
std::vector<int> CurrentAffinity();

// Binds the calling rank where the planner places it: its local rank from the
// launcher's environment, its GPU (when `with_gpu`; else -1) from what Slurm
// made visible, its cores next to that GPU or its share of the node
// (CoresForRank), then BindProcess(cores, force).
struct RankBinding {
  LocalRank local;
  int gpu = -1;
  BindReport report;
};
Result<RankBinding> BindLocalRank(const NodeTopology& node, bool with_gpu, bool force);

// How many ranks on this machine (this one included) may run on at least one
// of `cpus`, this rank's cores. Collective over `world`.
int RanksSharingCores(MPI_Comm world, const std::vector<int>& cpus);

// The math threads of one rank (GEMMs and elementwise loops).
struct ThreadChoice {
  int threads = 1;
  std::string source;           // --threads, OMP_NUM_THREADS, SLURM_CPUS_PER_TASK or cores
  bool clamped = false;         // the request was cut to this rank's share of its cores
  bool oversubscribed = false;  // more ranks than cores on this rank's cores
};

// The request is --threads (`requested`, 0 when not given), else
// OMP_NUM_THREADS (its first entry), else SLURM_CPUS_PER_TASK, else every
// core of the rank's share. The share is `cores` (the rank's affinity)
// divided among the `sharing` ranks that may run there, at least one: ranks
// on one node never run more threads together than it has cores. A value
// that is not a positive integer is an error naming where it came from.
Result<ThreadChoice> ChooseThreads(int requested, std::string_view omp_num_threads,
                                   std::string_view slurm_cpus_per_task, int cores, int sharing);

}  // namespace hpcml::topology
