// The facts the guard trusts about a job (account, partition, GPU count),
// as slurmctld reported them, cached per node so that slurmctld gets one
// request per job and node rather than one per step.
//
// Why this is sound: a running job's account, partition and GPU count do not
// change (Slurm lets them be updated only while the job is pending), and the
// cache lives in a directory only root can write. A requeued job may have
// been changed while pending, so entries are per attempt: keyed by the job id
// and its restart count, both from slurmstepd. An entry is trusted only when
// the directory is a root-owned 0700 directory (not a symlink) and the file a
// root-owned regular file writable by nobody else, and only for the uid it
// was written for. Anything else is a miss, never a decision: the caller asks
// slurmctld. The job epilog removes a job's entries (when slurmd was started
// with the plugin in plugstack.conf); entries older than kMaxEntryAge are
// swept on every write; the default directory is on /run (tmpfs), so a
// reboot clears it too.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "hpcml/common/status.hpp"

namespace hpcml::guard {

struct JobFacts {
  uid_t uid = 0;
  std::string account, partition, cluster;
  std::uint32_t gpus = 0;

  friend bool operator==(const JobFacts&, const JobFacts&) = default;
};

// One attempt of one job.
struct JobKey {
  std::uint32_t job_id = 0;
  std::uint32_t restart_count = 0;
};

// Older entries are removed by WriteCachedJobFacts; a job that runs longer
// just asks slurmctld once more.
inline constexpr int kMaxEntryAgeDays = 7;

// The cached facts of `key` for `uid`; nullopt on any miss (no entry, an
// entry for another uid, unsafe ownership or mode, unreadable or malformed).
// `why_missed`, when given, gets the reason for a miss other than "no entry".
std::optional<JobFacts> ReadCachedJobFacts(const std::string& dir, JobKey key, uid_t uid,
                                           std::string* why_missed = nullptr);

// Stores the facts of `key` atomically and sweeps stale entries; creates
// `dir` (mode 0700) if it does not exist. Refuses a directory that is not
// root-owned 0700.
Status WriteCachedJobFacts(const std::string& dir, JobKey key, const JobFacts& facts);

// Removes every entry of `job_id` (all attempts); none is not an error.
Status RemoveCachedJobFacts(const std::string& dir, std::uint32_t job_id);

}  // namespace hpcml::guard
