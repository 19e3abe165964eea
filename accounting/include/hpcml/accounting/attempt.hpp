// The usage record of one training attempt (usage_record.hpp),
// built from what the attempt did and what Slurm told it. Pure: the Slurm
// side is read once by SlurmJobFromEnv, so the builder is tested without a job.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "hpcml/accounting/usage_record.hpp"
#include "hpcml/common/log.hpp"

namespace hpcml::accounting {

// What Slurm tells the job through its environment.
struct SlurmJob {
  std::string job_id;     // SLURM_JOB_ID
  int restart_count = 0;  // SLURM_RESTART_COUNT
  int gpus_on_node = 0;   // SLURM_GPUS_ON_NODE
  int num_nodes = 1;      // SLURM_JOB_NUM_NODES
};
// nullopt outside a Slurm job (no SLURM_JOB_ID).
std::optional<SlurmJob> SlurmJobFromEnv();

// What this attempt did.
struct AttemptUsage {
  std::int64_t start_time = 0;  // seconds since the epoch
  std::int64_t written_at = 0;
  double wall_s = 0;
  std::int64_t steps_done = 0;
  std::int64_t batch = 0;
  std::string gpu_type;  // --gpu-type; dropped when the job holds no GPU
  // From the checkpointer, when there is one.
  std::optional<std::int64_t> steps_since_checkpoint;
  double checkpoint_seconds = 0;
};

// GPUs are those Slurm allocated on the job's nodes (gpus_on_node x nodes);
// steps after the newest checkpoint are redone by the next attempt: lost.
UsageRecord MakeUsageRecord(const SlurmJob& job, const AttemptUsage& a);

// Inside a Slurm job: the attempt's record as JSON in `dir` and, unless
// `no_comment`, as a summary in the job's Comment, for hpcml-cost. Outside
// a job, or with no `dir`, nothing. Accounting never stops training: a
// failure is a warning in `log`.
void PublishAttemptUsage(const std::string& dir, const AttemptUsage& a, bool no_comment,
                         Logger& log);

}  // namespace hpcml::accounting
