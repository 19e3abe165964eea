#include "hpcml/accounting/attempt.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace hpcml::accounting {
namespace {

TEST(MakeUsageRecord, CountsTheGpusSlurmAllocatedOnEveryNode) {
  SlurmJob job{"123_4", 2, 4, 3};
  AttemptUsage a;
  a.start_time = 1000;
  a.written_at = 1600;
  a.wall_s = 500;
  a.steps_done = 40;
  a.batch = 64;
  a.gpu_type = "h100";
  a.steps_since_checkpoint = 7;
  a.checkpoint_seconds = 12.5;
  const accounting::UsageRecord r = MakeUsageRecord(job, a);
  EXPECT_EQ(r.job_id, "123_4");
  EXPECT_EQ(r.restart_count, 2);
  EXPECT_EQ(r.start_time, 1000);
  EXPECT_EQ(r.written_at, 1600);
  EXPECT_EQ(r.gpu_count, 12);
  EXPECT_EQ(r.gpu_type, "h100");
  EXPECT_DOUBLE_EQ(r.gpu_seconds, 6000.0);
  EXPECT_EQ(r.steps_done, 40);
  EXPECT_EQ(r.samples_done, 2560);
  EXPECT_EQ(r.steps_lost_to_preemption, 7);
  EXPECT_DOUBLE_EQ(r.checkpoint_seconds, 12.5);
  EXPECT_TRUE(accounting::ValidateUsageRecord(r).ok());
}

TEST(MakeUsageRecord, ACpuJobHasNoGpuTypeAndNoGpuSeconds) {
  AttemptUsage a;
  a.wall_s = 100;
  a.gpu_type = "h100";  // --gpu-type given, but the job holds no GPU
  const accounting::UsageRecord r = MakeUsageRecord(SlurmJob{"9", 0, 0, 2}, a);
  EXPECT_EQ(r.gpu_count, 0);
  EXPECT_EQ(r.gpu_type, "");
  EXPECT_EQ(r.gpu_seconds, 0.0);
  EXPECT_EQ(r.steps_lost_to_preemption, 0);  // no checkpointer: nothing counted lost
}

TEST(SlurmJobFromEnv, ReadsTheJobAndDefaultsTheRest) {
  ::unsetenv("SLURM_JOB_ID");
  EXPECT_FALSE(SlurmJobFromEnv().has_value());
  ::setenv("SLURM_JOB_ID", "77", 1);
  ::setenv("SLURM_GPUS_ON_NODE", "2", 1);
  ::setenv("SLURM_JOB_NUM_NODES", "0", 1);  // never fewer than one node
  ::unsetenv("SLURM_RESTART_COUNT");
  auto job = SlurmJobFromEnv();
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->job_id, "77");
  EXPECT_EQ(job->restart_count, 0);
  EXPECT_EQ(job->gpus_on_node, 2);
  EXPECT_EQ(job->num_nodes, 1);
}

}  // namespace
}  // namespace hpcml::accounting
