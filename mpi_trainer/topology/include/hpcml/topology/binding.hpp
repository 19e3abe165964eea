// Binding a rank to the cores (and memory) next to its GPU, without fighting
// a binding that Slurm or mpirun already applied.
#pragma once

#include <string>
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

}  // namespace hpcml::topology
