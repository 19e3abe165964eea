// The parts of hpcml_guard.so, split by the process they run in (as NVIDIA
// Pyxis splits pyxis_dispatch.c, pyxis_srun.c and pyxis_slurmstepd.c):
// - plugin.cpp: the plugin's symbols and the slurm_spank_* callbacks, each
//   dispatching on the SPANK context to one of the parts below;
// - plugin_common.cpp: what every context shares: the plugstack.conf
//   arguments, the options, the audit line, user and group lookups;
// - submit_side.cpp: srun, sbatch and salloc (local and allocator context):
//   the advisory check before a job exists;
// - node_side.cpp: slurmstepd (remote context): the authoritative decision,
//   the step's dataset view and environment, the tasks' checks; and slurmd's
//   job prolog and epilog;
// - node_facts.cpp: what slurmctld and the admin say about the job and this
//   node (the job facts, cached per node; the node's zone), for node_side.cpp.
// Where each part runs and why: docs/guard.md, "Where it runs (Slurm 22.05)".
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// spank.h declares the slurm_spank_* callbacks outside its extern "C" block.
extern "C" {
#include <slurm/spank.h>
}

#include "hpcml/common/status.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/guard/audit.hpp"
#include "hpcml/guard/canonical.hpp"
#include "hpcml/guard/decision.hpp"
#include "hpcml/guard/policy.hpp"
#include "job_cache.hpp"
#include "options.hpp"

namespace hpcml::guard::plugin {

// ---- plugin_common.cpp ----

// Per-process state every context shares: one slurmstepd runs one step, one
// srun/sbatch one submission. Written only from Slurm's callbacks, which run
// on one thread.
struct GuardState {
  Status args = InvalidArgument("plugin arguments were not parsed");
  PluginConfig config;
  // The user's options (--dataset, --data-zone, --ml-role).
  std::vector<std::string> datasets;
  std::optional<std::string> zone;
  std::optional<std::string> role;
  std::string option_error;  // first bad option value: denied on the node, refused on submit
};
GuardState& State();

// slurm_spank_init in srun/sbatch/salloc (`submit`) and slurmstepd: parses
// the plugstack.conf arguments and registers the options. A failure fails
// the command on the submit side; in slurmstepd it is remembered and denies
// the step later (a failing callback there drains the node).
int InitGuard(spank_t sp, int ac, char** av, bool submit) noexcept;

// slurm_spank_init in slurmd itself, when it starts: writes the guard's
// version and the SHA-256 of the policy it finds to the slurmd log
// (slurm_info), so an admin can see what a node runs, and compiles it into
// job_cache= (policy_cache.hpp) for the steps. The policy is read again at
// every step (a changed policy applies at once; each audit line carries the
// digest it was decided by). Always 0: a failing init in slurmd would stop
// it.
int SlurmdInit(int ac, char** av) noexcept;

// The plugstack.conf arguments as ParsePluginArgs takes them.
std::vector<std::string_view> Args(int ac, char** av);

std::string ShortHostname();
struct PasswdEntry {
  std::string name, home;
};
std::optional<PasswdEntry> LookupUser(uid_t uid);
// The names of these groups, each gid looked up once. Only a policy that
// binds roles to groups needs them (each lookup reads /etc/group or asks the
// directory service): otherwise none.
std::vector<std::string> GroupNames(const Policy& policy, std::vector<gid_t> gids);

// An audit record of `context` ("node" or "submit") with what is known
// before deciding: the enforce mode, this host, the requested datasets.
AuditRecord NewRecord(const char* context);
// The decision's outcome in the record: allow, role, zone (when it has one)
// and reason.
void RecordDecision(AuditRecord* rec, const Decision& d);
// The audit line goes to syslog always and to the file when we may write it
// (root: slurmstepd, or root submitting), and from the file to the collector
// (audit_collector=). A user's srun/sbatch cannot write the root-owned log;
// its advisory decisions are in syslog only. Returns the first failure
// (naming the log or the collector), its reason code in `failure_code`
// ("audit_log", "audit_collector").
Status Audit(const AuditRecord& rec, bool write_file, std::string* failure_code = nullptr);

inline const std::string& PathOf(const std::string& path) {
  return path;
}
inline const std::string& PathOf(const ResolvedPath& resolved) {
  return resolved.path;
}

// The resolved datasets, in request order, each once. A path that did not
// resolve, or whose canonical form has a comma, a control character or a
// blank at its end (HPCML_DATASETS is a comma list of exact paths), is an
// error naming it.
template <typename Resolved>
Result<std::vector<std::string>> CanonicalDatasets(const std::vector<std::string>& requested,
                                                   const std::vector<Result<Resolved>>& resolved,
                                                   const std::string& user) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < resolved.size(); ++i) {
    const auto& r = resolved[i];
    if (!r.ok())
      return InvalidArgument("dataset '{}' cannot be resolved as user '{}': {}", requested[i], user,
                             r.status().message());
    const std::string& path = PathOf(*r);
    if (path.find(',') != std::string::npos)
      return InvalidArgument("dataset '{}' resolves to '{}', which contains a comma", requested[i],
                             path);
    // The job environment's lists hold no blanks and no control characters
    // (common/job_env.hpp): a reader that trims would see another path.
    if (TrimBlanks(path) != path || std::any_of(path.begin(), path.end(), [](unsigned char c) {
          return c < 0x20 || c == 0x7f;
        }))
      return InvalidArgument(
          "dataset '{}' resolves to a path that has a control character or ends in a blank",
          requested[i]);
    if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(path);
  }
  return out;
}

// ---- submit_side.cpp (local and allocator context) ----

// The advisory check; a denial fails the command and creates no job.
int SubmitInitPostOpt(spank_t sp) noexcept;

// ---- node_side.cpp (remote context, and slurmd's prolog and epilog) ----

// The authoritative decision, stored for the tasks; always 0 (a failing
// init_post_opt drains the node).
int NodeInitPostOpt(spank_t sp) noexcept;
// Delivers the stored decision to each task, and checks its open files.
int NodeTaskInitPrivileged() noexcept;
// Each attempt's start on each node (slurmd's prolog, as root, before any of
// its steps) and its end; always 0 (a failing prolog or epilog drains the
// node).
int NodeJobProlog(spank_t sp, int ac, char** av) noexcept;
int NodeJobEpilog(spank_t sp, int ac, char** av) noexcept;

// ---- node_facts.cpp ----

// The job facts from this node's cache (job_cache.hpp), else from slurmctld,
// then cached for the job's next steps here. `cached` says which. With
// `fresh`, from slurmctld and not cached (the caller starts a new attempt
// first). The facts always say whether slurmctld enforces associations and
// runs the prolog at allocation.
Result<JobFacts> JobFactsForStep(const JobKey& key, uid_t uid, bool fresh, bool* cached);

// This node's zone. Each source that is there must agree: the plugin's
// zone= argument (`arg`), the policy's [zones.<name>] nodes, the node's Slurm
// feature zone-<name> (among `features`); at least one must be there.
Result<std::string> NodeZone(const Policy& policy, const std::string& arg, const std::string& node,
                             std::string_view features);

}  // namespace hpcml::guard::plugin
