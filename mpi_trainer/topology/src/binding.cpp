#include "hpcml/topology/binding.hpp"
#include "hpcml/common/unique_fd.hpp"

#include <hwloc.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "hwloc_owner.hpp"

namespace hpcml::topology {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return (*end == '\0' && x >= 0 && x < 1 << 20) ? static_cast<int>(x) : fallback;
}

// An equal contiguous share of `all` for member `i` of `n`; the first
// (size % n) members get one more. With more members than items, members
// share items round-robin (oversubscription).
std::vector<int> Share(const std::vector<int>& all, int i, int n) {
  if (all.empty() || n <= 0) return all;
  int size = static_cast<int>(all.size());
  if (n >= size) return {all[static_cast<size_t>(i % size)]};
  int base = size / n, extra = size % n;
  int begin = i * base + std::min(i, extra);
  int len = base + (i < extra ? 1 : 0);
  return {all.begin() + begin, all.begin() + begin + len};
}

}  // namespace

LocalRank LocalRankFromEnv() {
  LocalRank l;
  for (auto [rank, size] : {std::pair{"SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
                            std::pair{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                            std::pair{"PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE"}}) {
    int r = EnvInt(rank, -1);
    if (r < 0) continue;
    l.local_rank = r;
    l.local_size = EnvInt(size, -1);
    // Slurm sets SLURM_STEP_TASKS_PER_NODE like "2" or "2(x3)"; without
    // --ntasks-per-node, SLURM_NTASKS_PER_NODE is unset.
    if (l.local_size < 0) l.local_size = EnvInt("SLURM_STEP_TASKS_PER_NODE", r + 1);
    l.local_size = std::max(l.local_size, r + 1);
    return l;
  }
  return l;
}

int SelectDevice(const LocalRank& local, int num_gpus) {
  if (const char* vis = std::getenv("CUDA_VISIBLE_DEVICES"); vis != nullptr) {
    int visible =
        *vis == '\0'
            ? 0
            : 1 + static_cast<int>(std::count(vis, vis + std::char_traits<char>::length(vis), ','));
    if (visible == 0) return -1;
    return local.local_rank % visible;
  }
  if (num_gpus <= 0) return -1;
  return local.local_rank % num_gpus;
}

std::vector<int> CoresForRank(const NodeTopology& node, const LocalRank& local, int gpu) {
  if (gpu >= 0 && gpu < node.num_gpus() &&
      !node.gpus[static_cast<size_t>(gpu)].local_cpus.empty()) {
    const auto& mine = node.gpus[static_cast<size_t>(gpu)].local_cpus;
    // GPUs sharing the same local cores split them in GPU order.
    int idx = 0, count = 0;
    for (const auto& g : node.gpus) {
      if (g.local_cpus != mine) continue;
      if (g.index == gpu) idx = count;
      ++count;
    }
    // Only cores the node lists (the allowed ones) are handed out.
    std::vector<int> usable;
    for (int c : mine) {
      if (std::find(node.cores.begin(), node.cores.end(), c) != node.cores.end())
        usable.push_back(c);
    }
    return Share(usable.empty() ? mine : usable, idx, count);
  }
  return Share(node.cores, local.local_rank, local.local_size);
}

Result<RankBinding> BindLocalRank(const NodeTopology& node, bool with_gpu, bool force) {
  RankBinding b;
  b.local = LocalRankFromEnv();
  b.gpu = with_gpu ? SelectDevice(b.local, node.num_gpus()) : -1;
  HPCML_ASSIGN_OR_RETURN(b.report, BindProcess(CoresForRank(node, b.local, b.gpu), force));
  return b;
}

std::vector<int> CurrentAffinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

Result<BindReport> BindProcess(const std::vector<int>& cpus, bool force) {
  if (cpus.empty()) return InvalidArgument("no cores to bind to");
  HPCML_ASSIGN_OR_RETURN(HwlocTopology topo, HwlocTopology::Load(""));
  BindReport rep;
  // The cores this process may use at all (cgroup / container limits).
  std::vector<int> allowed;
  hwloc_const_cpuset_t allowed_set = hwloc_topology_get_allowed_cpuset(topo.get());
  for (int i = hwloc_bitmap_first(allowed_set); i != -1; i = hwloc_bitmap_next(allowed_set, i))
    allowed.push_back(i);
  std::vector<int> now = CurrentAffinity();
  if (!force && now.size() < allowed.size()) {
    rep.already_bound = true;
    rep.cpus = now;
    rep.detail = fmt::format("already bound by the launcher to cores {}: left as is (wanted {})",
                             FormatCpuList(now), FormatCpuList(cpus));
    return rep;
  }
  HwlocBitmap owner(hwloc_bitmap_alloc());
  hwloc_bitmap_t set = owner.get();
  for (int c : cpus) hwloc_bitmap_set(set, static_cast<unsigned>(c));
  int rc = hwloc_set_cpubind(topo.get(), set, HWLOC_CPUBIND_PROCESS);
  int err = errno;
  std::string mem = "memory policy unchanged";
  if (rc == 0) {
    // Memory next to those cores; not every kernel/container allows it.
    if (hwloc_set_membind(topo.get(), set, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_PROCESS) == 0) {
      mem = "memory bound to their NUMA node";
    } else {
      mem = fmt::format("memory binding not available ({})", std::strerror(errno));
    }
  }
  if (rc != 0) return ErrnoError(fmt::format("binding to cores {}", FormatCpuList(cpus)), err);
  rep.applied = true;
  rep.cpus = CurrentAffinity();
  rep.detail = fmt::format("bound to cores {}; {}", FormatCpuList(rep.cpus), mem);
  return rep;
}

int RanksSharingCores(MPI_Comm world, const std::vector<int>& cpus) {
  // Ranks are on one machine when they share the kernel's boot id, not a
  // hostname: node namespaces (the test cluster, containers) share cores
  // under different hostnames.
  struct Entry {
    char boot_id[40];
    cpu_set_t cpus;
  };
  Entry mine{};
  if (UniqueFile f(std::fopen("/proc/sys/kernel/random/boot_id", "r")); f) {
    if (std::fgets(mine.boot_id, sizeof mine.boot_id, f.get()) == nullptr) mine.boot_id[0] = '\0';
  }
  CPU_ZERO(&mine.cpus);
  for (int c : cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &mine.cpus);
  }
  int size = 1;
  MPI_Comm_size(world, &size);
  std::vector<Entry> all(static_cast<std::size_t>(size));
  MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, world);
  int sharing = 0;
  for (Entry& other : all) {
    cpu_set_t both;
    CPU_AND(&both, &other.cpus, &mine.cpus);
    if (std::strncmp(other.boot_id, mine.boot_id, sizeof mine.boot_id) == 0 &&
        CPU_COUNT(&both) > 0) {
      ++sharing;
    }
  }
  return std::max(1, sharing);
}

Result<ThreadChoice> ChooseThreads(int requested, std::string_view omp_num_threads,
                                   std::string_view slurm_cpus_per_task, int cores, int sharing) {
  ThreadChoice c;
  const int share = std::max(1, std::max(cores, 1) / std::max(sharing, 1));
  c.oversubscribed = sharing > std::max(cores, 1);
  // OMP_NUM_THREADS may list one count per nesting level: the first is ours.
  const std::string_view omp = omp_num_threads.substr(0, omp_num_threads.find(','));
  int want = 0;
  if (requested != 0) {
    if (requested < 0) return InvalidArgument("--threads {}: must be at least 1", requested);
    want = requested;
    c.source = "--threads";
  } else {
    for (auto [name, text] : {std::pair{"OMP_NUM_THREADS", omp},
                              std::pair{"SLURM_CPUS_PER_TASK", slurm_cpus_per_task}}) {
      if (text.empty()) continue;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), want);
      if (ec != std::errc() || end != text.data() + text.size() || want < 1) {
        return InvalidArgument("{}={}: expected a positive thread count", name, text);
      }
      c.source = name;
      break;
    }
  }
  if (want == 0) {
    c.threads = share;
    c.source = "cores";
    return c;
  }
  c.threads = std::min(want, share);
  c.clamped = want > share;
  return c;
}

}  // namespace hpcml::topology
