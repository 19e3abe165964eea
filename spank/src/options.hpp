// Parsers for what reaches the guard from outside: the plugstack.conf
// arguments (written by the admin) and the option values of srun, sbatch and
// salloc (written by the user, possibly hostile). Pure functions, no Slurm
// dependency, thread-safe; fuzzed by spank/fuzz/options_fuzzer.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml::guard {

// Limits on user input: a request beyond them is an error, never truncated.
inline constexpr std::size_t kMaxDatasets = 256;
inline constexpr std::size_t kMaxPathLength = 4096;
inline constexpr std::size_t kMaxNameLength = 64;
// All datasets comma-joined: they travel in one environment variable, and
// Linux refuses an execve with a single string over 128 KiB.
inline constexpr std::size_t kMaxDatasetsBytes = 64 * 1024;

// The plugstack.conf arguments:
//   policy=/abs/path.toml   required
//   zone=NAME               required: this node's zone
//   audit=/abs/path.jsonl   optional (default kDefaultAuditPath)
//   cluster=NAME            optional: cluster name for submit-side audit lines
//   audit_sync=yes|no       optional (default no): fdatasync every audit line
//   audit_collector=HOST:PORT  optional: the collector each audit line is sent
//                           to as it is written (an rsyslog TCP input, off the
//                           node); a step is allowed only once the collector
//                           has its line (audit.hpp, ForwardAudit)
//   enforce=mount|none      optional (default none): mount_view.hpp in each task
//   job_cache=/abs/dir|off  optional (default kDefaultJobCache): where slurmstepd
//                           keeps each job's slurmctld facts and the prolog the
//                           job's declared datasets (job_cache.hpp)
//   policy_cache=/abs/dir|off optional (default kDefaultPolicyCache): the
//                           policy compiled by root (slurmd, slurmstepd, root's
//                           srun), read by every side (policy_cache.hpp)
//   confine=landlock|none   optional (default landlock): confine.hpp
// Where audit lines go off the node (audit_collector=).
struct Collector {
  std::string host;  // a name or an address
  std::uint16_t port = 0;
  std::string text() const { return host + ":" + std::to_string(port); }
};

struct PluginConfig {
  static constexpr const char* kDefaultAuditPath = "/var/log/hpcml/audit.jsonl";
  std::string policy_path;
  std::string zone;  // "" when not given: from the policy or the node's feature
  std::string audit_path = kDefaultAuditPath;
  static constexpr const char* kDefaultJobCache = "/run/hpcml-guard";
  std::string cluster;
  bool audit_sync = false;
  std::optional<Collector> collector;  // none: the log stays on the node
  // enforce=mount (default): each step runs in a view where only its allowed
  // datasets of the policy are visible (mount_view.hpp). enforce=advisory: no
  // view; declared datasets and stdio files are still decided. Audited.
  bool enforce_mount = true;
  const char* enforce_name() const { return enforce_mount ? "mount" : "advisory"; }
  std::string job_cache = kDefaultJobCache;  // "" (job_cache=off): ask slurmctld every step
  static constexpr const char* kDefaultPolicyCache = "/var/cache/hpcml-guard";
  std::string policy_cache = kDefaultPolicyCache;  // "" (policy_cache=off): parse every time
  // confine=landlock (default): an allowed step's tasks share one Landlock
  // domain and reach no process outside it (confine.hpp). confine=none: for
  // kernels without Landlock; /proc/<pid>/root of the user's other processes
  // then reaches outside the view. Logged by slurmd when it starts.
  bool confine_landlock = true;
  const char* confine_name() const { return confine_landlock ? "landlock" : "none"; }
};

// Unknown, repeated, empty or malformed arguments are errors naming the
// argument; so is a missing policy= or zone=.
Result<PluginConfig> ParsePluginArgs(const std::vector<std::string_view>& args);

// Zone, role and classification names: 1..kMaxNameLength characters of
// [A-Za-z0-9._-]. `what` names the option in the error ("--data-zone").
Status ValidateName(std::string_view what, std::string_view value);

// One --dataset value: a comma-separated list of paths. Empty entries,
// control characters and over-long paths are errors. A relative path is made
// absolute against `cwd` (lexically, nothing is resolved here) when `cwd` is
// given, and is an error otherwise. New paths are appended to `out` unless
// already present; more than kMaxDatasets paths or kMaxDatasetsBytes in
// total is an error.
Status AppendDatasets(std::string_view value, const std::optional<std::string>& cwd,
                      std::vector<std::string>* out);

// The datasets as one option value / environment value: comma-joined.
std::string JoinDatasets(const std::vector<std::string>& paths);

}  // namespace hpcml::guard

namespace hpcml::guard {

// The GPU count in a Slurm TRES string ("cpu=2,gres/gpu=2,gres/gpu:h100=2"
// -> 2, "gres/gpu:h100=3" -> 3): hpcml::GpuTres's rule, shared with
// accounting. A malformed GPU count is an error (the caller denies).
Result<std::uint32_t> GpusFromTres(std::string_view tres);

}  // namespace hpcml::guard
