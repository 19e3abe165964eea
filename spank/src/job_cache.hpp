// The facts the guard trusts about a job (account, partition, GPU count),
// as slurmctld reported them, cached per node so that slurmctld gets one
// request per job and node rather than one per step.
//
// Why this is sound: a running job's account, partition and GPU count do not
// change (Slurm lets them be updated only while the job is pending), and the
// cache lives in a directory only root can write. A requeued job may have
// been changed while pending, so an entry serves one attempt on one node:
// the job prolog, which slurmd runs on each node of each attempt before any
// of its steps, starts the attempt (BeginJobAttempt: a fresh random marker,
// the old entry removed), and an entry is trusted only when it was written
// under the marker that is there now. Nothing relies on the epilog (a crash
// skips it) or on the restart count slurmstepd reports (Slurm 22.05 never
// sets it). Without a marker (slurmd was started before the plugin was in
// plugstack.conf, so it runs no prolog of ours) nothing is cached: every step
// asks slurmctld. Entries are keyed by cluster (the plugin's cluster=) and job
// id, so two clusters, or a cluster whose job ids started again, never share
// one. Files are trusted only in a root-owned 0700 directory (not a symlink),
// as root-owned regular files writable by nobody else, and an entry only for
// the uid it was written for. Anything else is a miss, never a decision: the
// caller asks slurmctld. Files older than kMaxEntryAge are swept on every
// write; the default directory is on /run (tmpfs), so a reboot clears it too.
//
// The attempt marker also records the job's declared datasets, read by the
// prolog from the job's SPANK environment (set at submission, never by a
// step): the job's steps are decided against it, so a step launched with a
// user's own SLURM_CONF and forged option variables cannot add a dataset.
// Without a marker no step may name a dataset (the guard fails closed).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hpcml/common/status.hpp"

namespace hpcml::guard {

struct JobFacts {
  uid_t uid = 0;
  std::string account, partition, cluster;
  std::uint32_t gpus = 0;
  // Whether slurmctld enforces associations (AccountingStorageEnforce has
  // associations): only then is a job's account one its user may charge.
  // nullopt: not asked (the policy binds no account).
  std::optional<bool> associations_enforced;
  // This node's Slurm features (slurmctld's node record), comma-separated.
  std::string node_features;
  // Whether slurmd runs the job prolog at allocation (PrologFlags=Alloc):
  // only then is the prolog's record of the job's datasets the job's own,
  // not the first step's on this node. nullopt: not asked.
  std::optional<bool> prolog_at_allocation;

  friend bool operator==(const JobFacts&, const JobFacts&) = default;
};

// One job of one cluster ("" when the plugin has no cluster=) on one node
// (its short hostname). The node is part of the key because an entry holds
// that node's features, which decide its zone: where the cache directory is
// shared between nodes (a shared file system; this project's test cluster),
// one node must never take another's entry or attempt marker.
struct JobKey {
  std::string cluster;
  std::uint32_t job_id = 0;
  std::string node;
};

// Older entries are removed by WriteCachedJobFacts; a job that runs longer
// just asks slurmctld once more.
inline constexpr int kMaxEntryAgeDays = 7;

// The cached facts of `key` for `uid`; nullopt on any miss (no entry, an
// entry for another uid or job, unsafe ownership or mode, unreadable or
// malformed).
// `why_missed`, when given, gets the reason for a miss other than "no entry".
std::optional<JobFacts> ReadCachedJobFacts(const std::string& dir, const JobKey& key, uid_t uid,
                                           std::string* why_missed = nullptr);

// Stores the facts of `key` for the current attempt atomically and sweeps
// stale files. Refuses a directory that is not root-owned 0700, and a job
// with no attempt marker (FailedPrecondition).
Status WriteCachedJobFacts(const std::string& dir, const JobKey& key, const JobFacts& facts);

// The job prolog: removes the entry of `key` and writes a new attempt marker
// holding the job's declared datasets (`datasets`: the --dataset paths the
// job was submitted with, comma-joined as the option's value; "" for none);
// creates `dir` (mode 0700) if it does not exist.
Status BeginJobAttempt(const std::string& dir, const JobKey& key, std::string_view datasets);

// The datasets the job of `key` was declared with, as its prolog (or batch
// step) recorded them: a step may only narrow them (node_side.cpp). The
// record outlives the epilog: it is the same for every attempt, and slurmd
// skips the prolog of an attempt started again within cred_expire. An error
// when there is no trusted record (FailedPrecondition: no prolog ran).
Result<std::string> JobDeclaredDatasets(const std::string& dir, const JobKey& key);

// The job epilog: removes the entry and the marker of `key`; none is not an
// error.
Status RemoveCachedJobFacts(const std::string& dir, const JobKey& key);

}  // namespace hpcml::guard
