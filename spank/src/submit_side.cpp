// hpcml_guard.so in srun, sbatch and salloc (local and allocator context,
// the user's own process; plugin_parts.hpp): init_post_opt makes an early,
// advisory check of what can be known before a job exists. A denial there
// is a friendly error, nothing more (the user controls that process); the
// node decides again (node_side.cpp).

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hpcml/common/job_env.hpp"
#include "job_environment.hpp"
#include "plugin_parts.hpp"

namespace hpcml::guard::plugin {
namespace {

// The name srun/sbatch give the --dataset value in the job environment:
// _SLURM_SPANK_OPTION_<plugin>_<option>.
constexpr const char* kDatasetEnv = "_SLURM_SPANK_OPTION_hpcml_guard_dataset";

// Slurm forwards only the last value of a repeated option: forward them
// all, to this step (srun's environment, sbatch's job environment) and to
// the steps inside the job (the SPANK job environment, which Slurm hands
// down as SLURM_SPANK__SLURM_SPANK_OPTION_*).
void ForwardDatasets(spank_t sp) {
  const GuardState& s = State();
  if (s.datasets.empty()) return;
  std::string joined = JoinDatasets(s.datasets);
  ::setenv(kDatasetEnv, joined.c_str(), 1);
  (void)spank_job_control_setenv(sp, kDatasetEnv, joined.c_str(), 1);
}

// This process's primary and supplementary groups.
std::vector<gid_t> ProcessGroups() {
  int n = ::getgroups(0, nullptr);
  std::vector<gid_t> gids(static_cast<std::size_t>(n > 0 ? n : 0));
  if (n > 0) n = ::getgroups(n, gids.data());
  gids.resize(static_cast<std::size_t>(n > 0 ? n : 0));
  gids.push_back(::getgid());
  return gids;
}

// The zones of the job's data: its datasets' and --data-zone, sorted and
// comma-joined.
std::string DataZones(const Policy& policy, const std::vector<std::string>& datasets) {
  const GuardState& s = State();
  std::vector<std::string> zones = DatasetZones(policy, datasets);
  if (s.zone && std::find(zones.begin(), zones.end(), *s.zone) == zones.end()) {
    zones.push_back(*s.zone);
    std::sort(zones.begin(), zones.end());
  }
  return fmt::format("{}", fmt::join(zones, ","));
}

// The advisory check in srun/sbatch/salloc: what can be known before a job
// exists (no account, partition or GPU count yet; no node zone). Allowed,
// and if `step_env` is given, it gets what the step's environment would get
// from the same decision (job_environment.hpp).
Decision DecideOnSubmit(AuditRecord* rec, std::string* data_zones, std::vector<EnvVar>* step_env) {
  const GuardState& s = State();
  *rec = NewRecord("submit");
  rec->cluster = s.config.cluster;
  rec->uid = ::getuid();
  if (s.zone) rec->zone = *s.zone;
  auto entry = LookupUser(::getuid());
  if (!entry) return DenyForError(NotFound("no passwd entry for uid {}", ::getuid()));
  const std::string* user = &entry->name;
  rec->user = *user;
  // The cache root compiled (policy_cache.hpp): srun need not parse either.
  auto policy = LoadPolicyCached(s.config.policy_path, s.config.policy_cache);
  if (!policy.ok()) return DenyForError(policy.status());
  rec->policy_sha256 = policy->sha256();
  Request req;
  req.uid = ::getuid();
  req.user = *user;
  req.groups = GroupNames(*policy, ProcessGroups());
  req.role = s.role;
  req.zone = s.zone;
  std::vector<Result<std::string>> resolved;
  for (const std::string& p : s.datasets) resolved.push_back(CanonicalPath(p));  // as this user
  auto canonical = CanonicalDatasets(s.datasets, resolved, *user);
  if (!canonical.ok()) return DenyForError(canonical.status());
  req.datasets = std::move(canonical).value();
  rec->datasets = req.datasets;
  *data_zones = DataZones(*policy, req.datasets);
  Decision d = Decide(*policy, req);
  if (d.allow && step_env) {
    // The node's zone is not known here, but an allowed step runs in its
    // data's zone: that one, if there is exactly one.
    Decision on_node = d;
    if (on_node.zone.empty() && data_zones->find(',') == std::string::npos)
      on_node.zone = *data_zones;
    auto env = JobEnvironment(*policy, on_node, req.datasets);
    if (env.ok()) *step_env = std::move(env).value();
  }
  return d;
}

// srun only: the HPCML_* values its step will get if the node decides the
// same, put in srun's environment, which Slurm copies into the step's. They
// are hints: the node compares each with its own decision, sets those that
// differ (StepEnvHolds) and leaves the others, saving Slurm's setenvf for
// each (0.2 ms for all four here: each zeroes a 256 KB buffer). Not sbatch
// or salloc: their environment reaches the user's shell or batch script on
// a login node, where no step was decided.
void HintStepEnvironment(const std::vector<EnvVar>& env) {
  for (const EnvVar& var : env) ::setenv(var.name, var.value.c_str(), 1);
}

}  // namespace

int SubmitInitPostOpt(spank_t sp) noexcept {
  try {
    const GuardState& s = State();
    if (!s.args.ok()) return -1;
    if (!s.option_error.empty()) {
      slurm_error("hpcml-guard: %s: no job submitted", s.option_error.c_str());
      return -1;
    }
    ForwardDatasets(sp);
    AuditRecord rec;
    std::string data_zones;
    const bool is_srun = spank_context() == S_CTX_LOCAL;
    std::vector<EnvVar> step_env;
    Decision d = DecideOnSubmit(&rec, &data_zones, is_srun ? &step_env : nullptr);
    // For slurmctld's job_submit/lua (examples/guard/job_submit.lua): the
    // zones of the job's data route it to their nodes, or refuse it if
    // they are several. Only a new job takes it (sbatch, salloc, srun
    // outside an allocation).
    if (d.allow && !data_zones.empty())
      (void)spank_job_control_setenv(sp, job_env::kDataZones, data_zones.c_str(), 1);
    if (d.allow) HintStepEnvironment(step_env);
    RecordDecision(&rec, d);
    // Advisory: a failed log line blocks nothing. A user's allowed srun is
    // not logged: its step is decided and logged on each node, and a line
    // from the user's own process proves nothing. Denials, and what sbatch
    // and salloc submit, go to syslog (root's also to the file).
    const bool root = ::geteuid() == 0;
    if (!d.allow || root || !is_srun) (void)Audit(rec, root);
    if (!d.allow) {
      slurm_error("hpcml-guard: denied: %s", d.reason.c_str());
      return -1;
    }
    return 0;
  } catch (...) {
    slurm_error("hpcml-guard: internal error in the submit-side check");
    return -1;
  }
}

}  // namespace hpcml::guard::plugin
