#include "hpcml/topology/binding.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace hpcml::topology {
namespace {

NodeTopology CpuNode(int cores) {
  NodeTopology n;
  n.hostname = "test";
  for (int i = 0; i < cores; ++i) {
    n.cores.push_back(i);
    n.core_numa.push_back(i < cores / 2 ? 0 : 1);
  }
  return n;
}

TEST(CoresForRank, EqualContiguousShares) {
  NodeTopology n = CpuNode(32);
  EXPECT_EQ(FormatCpuList(CoresForRank(n, {0, 2}, -1)), "0-15");
  EXPECT_EQ(FormatCpuList(CoresForRank(n, {1, 2}, -1)), "16-31");
  NodeTopology four = CpuNode(4);
  // Uneven: the first ranks get one more.
  EXPECT_EQ(FormatCpuList(CoresForRank(four, {0, 3}, -1)), "0-1");
  EXPECT_EQ(FormatCpuList(CoresForRank(four, {1, 3}, -1)), "2");
  EXPECT_EQ(FormatCpuList(CoresForRank(four, {2, 3}, -1)), "3");
  // Oversubscribed: one core each, round robin.
  NodeTopology two = CpuNode(2);
  EXPECT_EQ(CoresForRank(two, {3, 4}, -1), std::vector<int>{1});
}

TEST(CoresForRank, GpusOnOneSocketSplitItsCores) {
  NodeTopology n = CpuNode(8);
  for (int g = 0; g < 4; ++g) {
    Gpu gpu;
    gpu.index = g;
    gpu.local_cpus = g < 2 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{4, 5, 6, 7};
    n.gpus.push_back(gpu);
  }
  EXPECT_EQ(FormatCpuList(CoresForRank(n, {0, 4}, 0)), "0-1");
  EXPECT_EQ(FormatCpuList(CoresForRank(n, {1, 4}, 1)), "2-3");
  EXPECT_EQ(FormatCpuList(CoresForRank(n, {2, 4}, 3)), "6-7");
}

class EnvGuard {
 public:
  explicit EnvGuard(std::initializer_list<const char*> names) : names_(names) {
    for (const char* n : names_) ::unsetenv(n);
  }
  ~EnvGuard() {
    for (const char* n : names_) ::unsetenv(n);
  }

 private:
  std::vector<const char*> names_;
};

TEST(SelectDevice, FollowsWhatSlurmMadeVisible) {
  EnvGuard env({"CUDA_VISIBLE_DEVICES"});
  EXPECT_EQ(SelectDevice({3, 4}, 4), 3);
  EXPECT_EQ(SelectDevice({5, 8}, 4), 1);
  EXPECT_EQ(SelectDevice({0, 1}, 0), -1);
  ::setenv("CUDA_VISIBLE_DEVICES", "2,3", 1);  // two visible: pick by local rank
  EXPECT_EQ(SelectDevice({1, 2}, 8), 1);
  ::setenv("CUDA_VISIBLE_DEVICES", "5", 1);  // --gpus-per-task=1: the one visible device
  EXPECT_EQ(SelectDevice({3, 4}, 8), 0);
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  EXPECT_EQ(SelectDevice({0, 1}, 8), -1);
}

TEST(LocalRank, FromSlurmThenOpenMpi) {
  EnvGuard env({"SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE",
                "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_LOCAL_RANK",
                "PMIX_LOCAL_SIZE"});
  EXPECT_EQ(LocalRankFromEnv().local_size, 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  EXPECT_EQ(LocalRankFromEnv().local_rank, 2);
  EXPECT_EQ(LocalRankFromEnv().local_size, 4);
  ::setenv("SLURM_LOCALID", "1", 1);
  ::setenv("SLURM_STEP_TASKS_PER_NODE", "3", 1);
  EXPECT_EQ(LocalRankFromEnv().local_rank, 1);
  EXPECT_EQ(LocalRankFromEnv().local_size, 3);
}

// Runs `body` in a child process (binding must not leak into the test
// runner) and returns its exit status.
template <typename F>
int InChild(F body) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

TEST(BindProcess, BindsAndDetectsAnExistingBinding) {
  std::vector<int> all = CurrentAffinity();
  ASSERT_FALSE(all.empty());
  int last = all.back();
  EXPECT_EQ(InChild([&] {
              auto rep = BindProcess({last}, true);
              if (!rep.ok() || !rep->applied) return 1;
              return CurrentAffinity() == std::vector<int>{last} ? 0 : 2;
            }),
            0);
  if (all.size() < 2) GTEST_SKIP() << "needs 2 cores to tell a launcher binding apart";
  EXPECT_EQ(InChild([&] {
              cpu_set_t set;
              CPU_ZERO(&set);
              CPU_SET(all.front(), &set);
              if (sched_setaffinity(0, sizeof set, &set) != 0) return 1;
              auto rep = BindProcess({last}, false);
              if (!rep.ok() || !rep->already_bound || rep->applied) return 2;
              return CurrentAffinity() == std::vector<int>{all.front()} ? 0 : 3;  // left alone
            }),
            0);
  EXPECT_FALSE(BindProcess({}, false).ok());
}

}  // namespace
TEST(ChooseThreads, RequestThenEnvironmentThenCores) {
  auto c = ChooseThreads(0, "", "", 8, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->threads, 4);  // 8 cores shared by 2 ranks
  EXPECT_EQ(c->source, "cores");
  c = ChooseThreads(0, "", "3", 8, 1);
  EXPECT_EQ(c->threads, 3);
  EXPECT_EQ(c->source, "SLURM_CPUS_PER_TASK");
  c = ChooseThreads(0, "2,1", "3", 8, 1);  // a nesting list: the first level is ours
  EXPECT_EQ(c->threads, 2);
  EXPECT_EQ(c->source, "OMP_NUM_THREADS");
  c = ChooseThreads(5, "2", "3", 8, 1);
  EXPECT_EQ(c->threads, 5);
  EXPECT_EQ(c->source, "--threads");
  EXPECT_FALSE(c->clamped);
}

TEST(ChooseThreads, NeverMoreThanTheRanksShareOfItsCores) {
  auto c = ChooseThreads(8, "", "", 4, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->threads, 2);
  EXPECT_TRUE(c->clamped);
  EXPECT_FALSE(c->oversubscribed);
  c = ChooseThreads(0, "", "", 2, 4);  // 4 ranks on 2 cores
  EXPECT_EQ(c->threads, 1);
  EXPECT_TRUE(c->oversubscribed);
}

TEST(ChooseThreads, ABadValueNamesWhereItCameFrom) {
  auto c = ChooseThreads(0, "four", "", 4, 1);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("OMP_NUM_THREADS=four"), std::string::npos);
  c = ChooseThreads(0, "", "0", 4, 1);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("SLURM_CPUS_PER_TASK=0"), std::string::npos);
  EXPECT_FALSE(ChooseThreads(-1, "", "", 4, 1).ok());
}

}  // namespace hpcml::topology
