#include "hpcml/accounting/attempt.hpp"

#include <algorithm>
#include <cstdlib>

namespace hpcml::accounting {
namespace {

int IntEnv(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

}  // namespace

std::optional<SlurmJob> SlurmJobFromEnv() {
  const char* id = std::getenv("SLURM_JOB_ID");
  if (id == nullptr) return std::nullopt;
  SlurmJob job;
  job.job_id = id;
  job.restart_count = IntEnv("SLURM_RESTART_COUNT", 0);
  job.gpus_on_node = IntEnv("SLURM_GPUS_ON_NODE", 0);
  job.num_nodes = std::max(1, IntEnv("SLURM_JOB_NUM_NODES", 1));
  return job;
}

UsageRecord MakeUsageRecord(const SlurmJob& job, const AttemptUsage& a) {
  UsageRecord r;
  r.job_id = job.job_id;
  r.restart_count = job.restart_count;
  r.start_time = a.start_time;
  r.written_at = a.written_at;
  r.gpu_count = job.gpus_on_node * job.num_nodes;
  r.gpu_type = r.gpu_count > 0 ? a.gpu_type : "";
  r.gpu_seconds = r.gpu_count * a.wall_s;
  r.steps_done = a.steps_done;
  r.samples_done = a.steps_done * a.batch;
  r.steps_lost_to_preemption = a.steps_since_checkpoint.value_or(0);
  r.checkpoint_seconds = a.checkpoint_seconds;
  return r;
}

void PublishAttemptUsage(const std::string& dir, const AttemptUsage& a, bool no_comment,
                         Logger& log) {
  const std::optional<SlurmJob> job = SlurmJobFromEnv();
  if (!job || dir.empty()) return;
  const UsageRecord r = MakeUsageRecord(*job, a);
  accounting::PublishOptions po;
  po.update_comment = !no_comment;
  auto written = accounting::PublishUsageRecord(dir, r, po);
  if (written.ok()) {
    log.info("usage record {} ({} GPU-seconds, {} steps)", *written, r.gpu_seconds, r.steps_done);
  } else {
    log.warn("usage record not published: {}", written.status().message());
  }
}

}  // namespace hpcml::accounting
