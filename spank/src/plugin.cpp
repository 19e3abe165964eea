// hpcml_guard.so: the thin C-ABI SPANK shim around the policy engine.
//
// Where it decides (Slurm 22.05, see /work/shared/DESIGN.md):
// - allocator (sbatch, salloc) and local (srun) context, init_post_opt: an
//   early advisory check in the user's own process; a denial there is a
//   friendly error, nothing more (the user controls that process).
// - remote context (slurmstepd, root), init_post_opt: the authoritative
//   decision, made once per step on each node (the job's facts from
//   slurmctld, one lookup per job and node: job_cache.hpp), logged, and only
//   *stored*: failing init_post_opt or user_init drains the node. An allowed
//   step gets HPCML_ZONE, HPCML_ROLE and HPCML_DATASETS in its environment
//   there. With enforce=mount (the default) an allowed step's slurmstepd
//   then moves into its view of the datasets (mount_view.hpp), before it
//   opens the step's stdin/stdout/stderr files and forks the tasks, so both
//   see only what was allowed.
// - remote context, task_init_privileged (each task, root): delivers a
//   denial (the task exits 1, the node stays idle), and denies a task whose
//   open files (its stdio files) read a dataset it was not allowed or write
//   into any dataset.
// - job script context, job_prolog and job_epilog: drop the job's cached
//   facts, so each attempt of a job is decided on its own facts
//   (job_cache.hpp).
// Every callback catches everything: no exception crosses into Slurm, and in
// remote context every failure becomes a denial, never a drained node.

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <slurm/slurm.h>
// spank.h declares the slurm_spank_* callbacks outside its extern "C" block.
extern "C" {
#include <slurm/spank.h>
}

#include "hpcml/guard/audit.hpp"
#include "hpcml/guard/canonical.hpp"
#include "hpcml/guard/decision.hpp"
#include "job_cache.hpp"
#include "hpcml/guard/mount_view.hpp"
#include "hpcml/guard/options.hpp"
#include "hpcml/guard/policy.hpp"

// Everything else is hidden (-fvisibility=hidden, version script).
#define HPCML_GUARD_EXPORT __attribute__((visibility("default")))

extern "C" {
HPCML_GUARD_EXPORT extern const char plugin_name[];
HPCML_GUARD_EXPORT extern const char plugin_type[];
HPCML_GUARD_EXPORT extern const unsigned int plugin_version;
}
const char plugin_name[] = "hpcml_guard";
const char plugin_type[] = "spank";
const unsigned int plugin_version = SLURM_VERSION_NUMBER;

namespace {

using namespace hpcml;
using namespace hpcml::guard;

// The name srun/sbatch give the --dataset value in the job environment:
// _SLURM_SPANK_OPTION_<plugin>_<option>.
constexpr const char* kDatasetEnv = "_SLURM_SPANK_OPTION_hpcml_guard_dataset";

enum OptionId { kOptZone = 1, kOptDataset = 2, kOptRole = 3 };

// Per-process state: one slurmstepd runs one step, one srun/sbatch one
// submission. Written only from Slurm's callbacks, which run on one thread.
struct GuardState {
  Status args = InvalidArgument("plugin arguments were not parsed");
  PluginConfig config;
  std::vector<std::string> datasets;
  std::optional<std::string> zone;
  std::optional<std::string> role;
  std::string option_error;  // first bad option value: denied on the node, refused on submit
  bool decided = false;
  Decision decision;
  std::string datasets_env;              // canonical datasets, comma-joined
  const char* facts_source = "nowhere";  // where the node decision got the job facts
  AuditRecord record;                    // the node decision's line, for a task's denial
  std::optional<Policy> policy;          // the policy the step was decided on
  std::vector<std::string> allowed;      // the step's canonical datasets
  ino_t view_namespace = 0;              // enforce=mount: the view's mount namespace
};

GuardState& State() {
  static GuardState* state = new GuardState();  // never destroyed: outlives every callback
  return *state;
}

bool IsRemote() {
  return spank_context() == S_CTX_REMOTE;
}
bool IsSubmitSide() {
  spank_context_t ctx = spank_context();
  return ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR;
}

std::string ShortHostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  std::string h(buf);
  return h.substr(0, h.find('.'));
}

std::optional<std::string> UserName(uid_t uid) {
  std::vector<char> buf(16384);
  struct passwd pw {
  }, *res = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &res) != 0 || !res) return std::nullopt;
  return std::string(pw.pw_name);
}

// The names of these groups, each gid looked up once. Only a policy that
// binds roles to groups needs them (each lookup reads /etc/group or asks the
// directory service): otherwise none.
std::vector<std::string> GroupNames(const Policy& policy, std::vector<gid_t> gids) {
  std::vector<std::string> names;
  if (!policy.binds_groups()) return names;
  std::sort(gids.begin(), gids.end());
  gids.erase(std::unique(gids.begin(), gids.end()), gids.end());
  std::vector<char> buf(65536);
  for (gid_t g : gids) {
    struct group gr {
    }, *res = nullptr;
    if (::getgrgid_r(g, &gr, buf.data(), buf.size(), &res) == 0 && res)
      names.emplace_back(gr.gr_name);
  }
  return names;
}

Status ApplyOption(int id, const char* optarg, bool remote) {
  GuardState& s = State();
  std::string_view value = optarg ? optarg : "";
  switch (id) {
    case kOptZone:
      HPCML_RETURN_IF_ERROR(ValidateName("--data-zone", value));
      s.zone = std::string(value);
      return Status::Ok();
    case kOptRole:
      HPCML_RETURN_IF_ERROR(ValidateName("--ml-role", value));
      s.role = std::string(value);
      return Status::Ok();
    case kOptDataset: {
      std::optional<std::string> cwd;
      if (!remote) {
        char buf[4096];
        if (::getcwd(buf, sizeof buf)) cwd = buf;
      }
      return AppendDatasets(value, cwd, &s.datasets);
    }
    default:
      return InvalidArgument("unknown option id {}", id);
  }
}

int OnOption(int id, const char* optarg, int remote) noexcept {
  try {
    Status st = ApplyOption(id, optarg, remote != 0);
    if (st.ok()) return 0;
    if (remote) {
      // Never fail in slurmstepd: remember it, deny in task_init_privileged.
      if (State().option_error.empty()) State().option_error = st.message();
      return 0;
    }
    // Remembered too: should a command go on after a failed option
    // callback, init_post_opt refuses it before any job exists.
    slurm_error("hpcml-guard: %s", st.message().c_str());
    if (State().option_error.empty()) State().option_error = st.message();
    return -1;
  } catch (...) {
    State().option_error = "internal error while reading an option";
    return remote ? 0 : -1;
  }
}

Status RegisterOptions(spank_t sp) {
  static char zone_name[] = "data-zone", zone_arg[] = "ZONE",
              zone_usage[] = "Run in data residency zone ZONE (must be the node's zone).";
  static char ds_name[] = "dataset", ds_arg[] = "PATH[,PATH...]",
              ds_usage[] = "Datasets the job reads (repeatable); checked against the zone policy.";
  static char role_name[] = "ml-role", role_arg[] = "ROLE",
              role_usage[] = "Run with ML role ROLE (default: the policy's default role).";
  struct spank_option opts[] = {
      {zone_name, zone_arg, zone_usage, 1, kOptZone, OnOption},
      {ds_name, ds_arg, ds_usage, 1, kOptDataset, OnOption},
      {role_name, role_arg, role_usage, 1, kOptRole, OnOption},
  };
  for (auto& opt : opts) {
    spank_err_t rc = spank_option_register(sp, &opt);
    if (rc != ESPANK_SUCCESS)
      return Internal("cannot register --{}: {}", opt.name, spank_strerror(rc));
  }
  return Status::Ok();
}

// The audit line goes to syslog always and to the file when we may write it
// (root: slurmstepd, or root submitting). A user's srun/sbatch cannot write
// the root-owned log; its advisory decisions are in syslog only.
Status Audit(const AuditRecord& rec, bool write_file) {
  Status file_status;
  std::string line;
  if (write_file) {
    auto appended = AppendAudit(State().config.audit_path, rec, State().config.audit_sync);
    if (appended.ok()) {
      line = *appended;
    } else {
      file_status = appended.status();
    }
  }
  if (line.empty()) line = FormatAuditLine(rec, 0, std::string(64, '0'));
  syslog(LOG_AUTHPRIV | (rec.allow ? LOG_INFO : LOG_WARNING), "hpcml-guard: %s", line.c_str());
  return file_status;
}

// slurmctld's AccountingStorageEnforce: associations (src/common/read_config.h).
constexpr std::uint16_t kEnforceAssociations = 1u << 0;

// Whether slurmctld enforces associations (one RPC).
Result<bool> AssociationsEnforced() {
  slurm_conf_t* conf = nullptr;
  if (slurm_load_ctl_conf(0, &conf) != SLURM_SUCCESS || !conf)
    return Unavailable("cannot load slurmctld's configuration: {}",
                       slurm_strerror(slurm_get_errno()));
  bool enforced = (conf->accounting_storage_enforce & kEnforceAssociations) != 0;
  slurm_free_ctl_conf(conf);
  return enforced;
}

// Account, partition and GPU count from slurmctld's job record (libslurm, one
// RPC), and with `need_enforcement` whether slurmctld enforces associations
// (one more): never from the job's environment, which the user controls.
// This node's features in slurmctld's node record (one RPC), found by its
// short hostname. NotFound when slurmctld has no node of that name (a
// NodeName other than the hostname): the zone must then come from elsewhere.
Result<std::string> NodeFeatures(const std::string& node) {
  node_info_msg_t* msg = nullptr;
  if (slurm_load_node_single(&msg, const_cast<char*>(node.c_str()), SHOW_ALL) != SLURM_SUCCESS ||
      !msg) {
    int err = slurm_get_errno();
    if (err == ESLURM_INVALID_NODE_NAME) return NotFound("slurmctld has no node named {}", node);
    return Unavailable("cannot load node {} from slurmctld: {}", node, slurm_strerror(err));
  }
  std::unique_ptr<node_info_msg_t, void (*)(node_info_msg_t*)> owner(msg, slurm_free_node_info_msg);
  for (std::uint32_t i = 0; i < msg->record_count; ++i) {
    const node_info_t& n = msg->node_array[i];
    if (n.name && node == n.name) return std::string(n.features ? n.features : "");
  }
  return NotFound("node {} not found in slurmctld's answer", node);
}

Result<JobFacts> LoadJobFacts(std::uint32_t job_id, uid_t uid, bool need_enforcement) {
  job_info_msg_t* msg = nullptr;
  if (slurm_load_job(&msg, job_id, SHOW_ALL) != SLURM_SUCCESS || !msg)
    return Unavailable("cannot load job {} from slurmctld: {}", job_id,
                       slurm_strerror(slurm_get_errno()));
  std::unique_ptr<job_info_msg_t, void (*)(job_info_msg_t*)> owner(msg, slurm_free_job_info_msg);
  for (std::uint32_t i = 0; i < msg->record_count; ++i) {
    const slurm_job_info_t& job = msg->job_array[i];
    if (job.job_id != job_id) continue;
    if (job.user_id != uid)
      return PermissionDenied("job {} belongs to uid {}, the step runs as uid {}", job_id,
                              job.user_id, uid);
    if (!job.account || !*job.account)
      return Unavailable("job {}: slurmctld reports no account", job_id);
    JobFacts f;
    f.uid = uid;
    f.account = job.account;
    if (!job.partition || !*job.partition)
      return Unavailable("job {}: slurmctld reports no partition", job_id);
    f.partition = job.partition;
    f.cluster = job.cluster ? job.cluster : "";
    const char* tres = job.tres_alloc_str ? job.tres_alloc_str : job.tres_req_str;
    HPCML_ASSIGN_OR_RETURN(f.gpus, GpusFromTres(tres ? tres : ""));
    if (need_enforcement) {
      HPCML_ASSIGN_OR_RETURN(f.associations_enforced, AssociationsEnforced());
    }
    auto features = NodeFeatures(ShortHostname());
    if (features.ok()) {
      f.node_features = std::move(features).value();
    } else if (features.status().code() != StatusCode::kNotFound) {
      return features.status();
    }
    return f;
  }
  return NotFound("job {} not found in slurmctld's answer", job_id);
}

// The job facts from this node's cache (job_cache.hpp), else from slurmctld,
// then cached for the job's next steps here. A cache that cannot be read or
// written costs a lookup, never a wrong answer. With `need_enforcement` the
// facts say whether slurmctld enforces associations.
Result<JobFacts> JobFactsForStep(const JobKey& key, uid_t uid, bool need_enforcement,
                                 bool* cached) {
  const std::string& dir = State().config.job_cache;
  *cached = false;
  if (!dir.empty()) {
    std::string why;
    auto hit = ReadCachedJobFacts(dir, key, uid, &why);
    if (hit && (!need_enforcement || hit->associations_enforced)) {
      *cached = true;
      return *hit;
    }
    if (!why.empty()) slurm_info("hpcml-guard: job facts cache not used: %s", why.c_str());
  }
  HPCML_ASSIGN_OR_RETURN(JobFacts facts, LoadJobFacts(key.job_id, uid, need_enforcement));
  if (!dir.empty()) {
    Status st = WriteCachedJobFacts(dir, key, facts);
    if (!st.ok()) slurm_info("hpcml-guard: job facts not cached: %s", st.message().c_str());
  }
  return facts;
}

std::string StepName(std::uint32_t step) {
  switch (step) {
    case SLURM_BATCH_SCRIPT:
      return "batch";
    case SLURM_EXTERN_CONT:
      return "extern";
    case SLURM_INTERACTIVE_STEP:
      return "interactive";
    default:
      return std::to_string(step);
  }
}

const std::string& PathOf(const std::string& path) {
  return path;
}
const std::string& PathOf(const ResolvedPath& resolved) {
  return resolved.path;
}

// The resolved datasets, in request order, each once. A path that did not
// resolve, or whose canonical form has a comma (HPCML_DATASETS is
// comma-separated), is an error naming it.
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
    if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(path);
  }
  return out;
}

// The inode of the calling thread's mount namespace (0 if unknown).
ino_t MountNamespace() {
  struct stat st {};
  return ::stat("/proc/thread-self/ns/mnt", &st) == 0 ? st.st_ino : 0;
}

// enforce=mount: moves this slurmstepd (the thread that goes on to open the
// step's stdio files and fork its tasks) into the view where only `allowed`
// of the policy's datasets are visible (mount_view.hpp), and remembers the
// view's namespace for task_init_privileged.
Status EnterDatasetView(const std::vector<std::string>& allowed,
                        const std::vector<ResolvedPath>& resolved) {
  GuardState& s = State();
  if (!s.policy) return Internal("enforce=mount: no policy to build the view from");
  HPCML_ASSIGN_OR_RETURN(DatasetView view, PlanDatasetView(*s.policy, allowed, ListDirectoryNames));
  HPCML_RETURN_IF_ERROR(ApplyDatasetView(view, resolved));
  s.view_namespace = MountNamespace();
  if (s.view_namespace == 0) return Internal("enforce=mount: cannot stat the view's namespace");
  return Status::Ok();
}

// The zone "zone-<name>" among comma-separated Slurm features, if one.
Result<std::optional<std::string>> ZoneFeature(std::string_view features) {
  std::optional<std::string> zone;
  std::size_t start = 0;
  while (start < features.size()) {
    std::size_t comma = features.find(',', start);
    if (comma == std::string_view::npos) comma = features.size();
    std::string_view f = features.substr(start, comma - start);
    if (f.starts_with("zone-")) {
      if (zone && *zone != f.substr(5))
        return PermissionDenied("this node has two zone features: zone-{} and {}", *zone, f);
      zone = std::string(f.substr(5));
    }
    start = comma + 1;
  }
  return zone;
}

// This node's zone. Each source that is there must agree: the plugin's
// zone= argument, the policy's [zones.<name>] nodes, the node's Slurm
// feature zone-<name>; at least one must be there.
Result<std::string> NodeZone(const Policy& policy, const std::string& arg, const std::string& node,
                             std::string_view features) {
  std::vector<std::pair<std::string, std::string>> said;  // (source, zone)
  if (!arg.empty()) said.emplace_back("plugin argument zone=", arg);
  std::vector<std::string> in_policy = policy.ZonesOfNode(node);
  if (in_policy.size() > 1)
    return PermissionDenied("{} names node {} in zones {} and {}", policy.source(), node,
                            in_policy[0], in_policy[1]);
  if (in_policy.size() == 1) said.emplace_back(policy.source() + " [zones] nodes", in_policy[0]);
  HPCML_ASSIGN_OR_RETURN(auto feature, ZoneFeature(features));
  if (feature) said.emplace_back("its Slurm feature", *feature);
  if (said.empty())
    return PermissionDenied(
        "node {} has no zone: give it the Slurm feature zone-<name>, list it under "
        "[zones.<name>] nodes in {}, or set zone= in plugstack.conf",
        node, policy.source());
  for (const auto& [source, zone] : said)
    if (zone != said[0].second)
      return PermissionDenied("node {}: the zones disagree: {} says '{}', {} says '{}'", node,
                              said[0].first, said[0].second, source, zone);
  return said[0].second;
}

// The authoritative decision in slurmstepd. Everything trusted comes from
// Slurm (spank items, slurmctld) or the admin (plugin arguments, policy).
Decision DecideOnNode(spank_t sp, AuditRecord* rec) {
  GuardState& s = State();
  rec->context = "node";
  rec->enforce = s.config.enforce_name();
  rec->node = ShortHostname();
  rec->zone = s.config.zone;
  rec->datasets = s.datasets;
  std::uint32_t job_id = 0, step_id = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  gid_t* gids = nullptr;
  int ngids = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
    return DenyForError(Internal("cannot read the job's ids from slurmstepd"));
  rec->job_id = std::to_string(job_id);
  rec->step_id = StepName(step_id);
  rec->uid = uid;
  if (!s.args.ok()) return DenyForError(s.args);
  if (!s.option_error.empty()) return DenyForError(InvalidArgument("{}", s.option_error));

  auto user = UserName(uid);
  if (!user) return DenyForError(NotFound("no passwd entry for uid {}", uid));
  rec->user = *user;
  UserCredentials creds{uid, gid, {}};
  if (spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &gids, &ngids) == ESPANK_SUCCESS && gids &&
      ngids > 0) {
    creds.groups.assign(gids, gids + ngids);
  } else {
    // A credential without groups: ask NSS on this node.
    int n = 64;
    creds.groups.resize(static_cast<std::size_t>(n));
    if (::getgrouplist(user->c_str(), gid, creds.groups.data(), &n) < 0) {
      creds.groups.resize(static_cast<std::size_t>(n));
      ::getgrouplist(user->c_str(), gid, creds.groups.data(), &n);
    }
    creds.groups.resize(static_cast<std::size_t>(n));
  }

  auto loaded = LoadPolicyFile(s.config.policy_path);
  if (!loaded.ok()) return DenyForError(loaded.status());
  s.policy = std::move(loaded).value();  // kept: the view and the tasks' checks use it
  const Policy& policy = *s.policy;
  bool cached = false;
  auto facts =
      JobFactsForStep(JobKey{s.config.cluster, job_id}, uid, policy.binds_accounts(), &cached);
  if (!facts.ok()) return DenyForError(facts.status());
  s.facts_source = cached ? "this node's cache" : "slurmctld";
  rec->cluster = facts->cluster;
  if (!s.config.cluster.empty() && facts->cluster != s.config.cluster)
    return DenyForError(PermissionDenied(
        "slurmctld reports job {} in cluster '{}', but this node's plugin argument is cluster={}",
        job_id, facts->cluster, s.config.cluster));

  auto resolved = CanonicalPathsAsUser(creds, s.datasets);
  if (!resolved.ok()) return DenyForError(resolved.status());
  Request req;
  req.uid = uid;
  req.user = *user;
  std::vector<gid_t> all_gids = creds.groups;
  all_gids.push_back(gid);
  req.groups = GroupNames(policy, std::move(all_gids));
  req.account = facts->account;
  req.partition = facts->partition;
  req.gpus = facts->gpus;
  req.associations_enforced = facts->associations_enforced.value_or(true);
  auto zone = NodeZone(policy, s.config.zone, rec->node, facts->node_features);
  if (!zone.ok()) return DenyForError(zone.status());
  rec->zone = *zone;
  req.node_zone = *zone;
  req.role = s.role;
  req.zone = s.zone;
  auto canonical = CanonicalDatasets(s.datasets, *resolved, *user);
  if (!canonical.ok()) return DenyForError(canonical.status());
  req.datasets = std::move(canonical).value();
  rec->datasets = req.datasets;
  Decision d = Decide(policy, req);
  if (d.allow && s.config.enforce_mount) {
    // From the descriptors resolved above, never from a fresh lookup.
    std::vector<ResolvedPath> fds;
    for (auto& r : *resolved) fds.push_back(std::move(r).value());
    Status view = EnterDatasetView(req.datasets, fds);
    if (!view.ok()) return DenyForError(view);
  }
  if (d.allow) {
    s.datasets_env = JoinDatasets(req.datasets);
    s.allowed = req.datasets;
  }
  return d;
}

// The advisory check in srun/sbatch/salloc: what can be known before a job
// exists (no account, partition or GPU count yet; no node zone).
Decision DecideOnSubmit(AuditRecord* rec, std::string* data_zones) {
  GuardState& s = State();
  rec->context = "submit";
  rec->enforce = s.config.enforce_name();
  rec->node = ShortHostname();
  rec->cluster = s.config.cluster;
  rec->uid = ::getuid();
  rec->datasets = s.datasets;
  if (s.zone) rec->zone = *s.zone;
  auto user = UserName(::getuid());
  if (!user) return DenyForError(NotFound("no passwd entry for uid {}", ::getuid()));
  rec->user = *user;
  auto policy = LoadPolicyFile(s.config.policy_path);
  if (!policy.ok()) return DenyForError(policy.status());
  Request req;
  req.uid = ::getuid();
  req.user = *user;
  int n = ::getgroups(0, nullptr);
  std::vector<gid_t> gids(static_cast<std::size_t>(n > 0 ? n : 0));
  if (n > 0) n = ::getgroups(n, gids.data());
  gids.resize(static_cast<std::size_t>(n > 0 ? n : 0));
  gids.push_back(::getgid());
  req.groups = GroupNames(*policy, std::move(gids));
  req.role = s.role;
  req.zone = s.zone;
  std::vector<Result<std::string>> resolved;
  for (const std::string& p : s.datasets) resolved.push_back(CanonicalPath(p));  // as this user
  auto canonical = CanonicalDatasets(s.datasets, resolved, *user);
  if (!canonical.ok()) return DenyForError(canonical.status());
  req.datasets = std::move(canonical).value();
  rec->datasets = req.datasets;
  std::vector<std::string> zones = DatasetZones(*policy, req.datasets);
  if (s.zone && std::find(zones.begin(), zones.end(), *s.zone) == zones.end()) {
    zones.push_back(*s.zone);
    std::sort(zones.begin(), zones.end());
  }
  *data_zones = fmt::format("{}", fmt::join(zones, ","));
  return Decide(*policy, req);
}

// Whether `path` is `dir` or below it.
bool IsWithin(std::string_view path, std::string_view dir) {
  return path == dir || dir == "/" ||
         (path.starts_with(dir) && path.size() > dir.size() && path[dir.size()] == '/');
}

// The task's open files, before it runs: slurmstepd opened its stdin, stdout
// and stderr files for it. A file or directory of a policy dataset open for
// reading must be within an allowed dataset; nothing of a dataset may be open
// for writing. With enforce=mount the view already hid or made read-only
// every such file; this check makes the advisory mode decide them too.
Status CheckOpenFiles(const Policy& policy, const std::vector<std::string>& allowed) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir("/proc/self/fd"), ::closedir);
  if (!dir) return ErrnoError("listing /proc/self/fd", errno);
  while (const dirent* e = ::readdir(dir.get())) {
    int fd = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == ::dirfd(dir.get())) continue;
    int flags = ::fcntl(fd, F_GETFL);
    struct stat st {};
    if (flags < 0 || (flags & O_PATH) || ::fstat(fd, &st) != 0) continue;
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) continue;
    char link[64], buf[PATH_MAX];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = ::readlink(link, buf, sizeof buf - 1);
    if (n <= 0) return ErrnoError(fmt::format("reading {}", link), errno);
    std::string path(buf, static_cast<std::size_t>(n));
    const DatasetEntry* entry = policy.MatchDataset(path);
    bool holds_entries = S_ISDIR(st.st_mode) && !policy.EntriesBelow(path).empty();
    if (!entry && !holds_entries) continue;
    if ((flags & O_ACCMODE) != O_RDONLY)
      return PermissionDenied("'{}' (a stdio file?) is open for writing in a data root{}", path,
                              entry ? fmt::format(" (dataset entry '{}')", entry->path) : "");
    bool within = std::any_of(allowed.begin(), allowed.end(),
                              [&](const std::string& a) { return IsWithin(path, a); });
    if (!within)
      return PermissionDenied(
          "'{}' (a stdio file?) is open for reading but is not within the "
          "step's datasets",
          path);
  }
  return Status::Ok();
}

std::vector<std::string_view> Args(int ac, char** av) {
  std::vector<std::string_view> args;
  for (int i = 0; i < ac; ++i) args.emplace_back(av[i] ? av[i] : "");
  return args;
}

// The prolog starts a new attempt of the job in this node's facts cache, the
// epilog removes the job's files (job_cache.hpp). Always 0: a failing prolog
// or epilog drains the node. A failure is logged; an entry is then trusted
// only under the marker of the attempt that wrote it.
int CacheJobAttempt(spank_t sp, int ac, char** av, bool begin) noexcept {
  try {
    auto config = ParsePluginArgs(Args(ac, av));
    std::uint32_t job_id = 0;
    if (!config.ok() || config->job_cache.empty() ||
        spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS)
      return 0;
    JobKey key{config->cluster, job_id};
    Status st = begin ? BeginJobAttempt(config->job_cache, key)
                      : RemoveCachedJobFacts(config->job_cache, key);
    if (!st.ok()) slurm_error("hpcml-guard: %s", st.message().c_str());
  } catch (...) {
  }
  return 0;
}

}  // namespace

extern "C" {

HPCML_GUARD_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
  bool submit = false;
  try {
    spank_context_t ctx = spank_context();
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR && ctx != S_CTX_REMOTE) return 0;
    submit = ctx != S_CTX_REMOTE;
    GuardState& s = State();
    auto config = ParsePluginArgs(Args(ac, av));
    if (config.ok()) {
      s.config = *config;
      s.args = Status::Ok();
    } else {
      s.args = config.status().WithContext("plugstack.conf arguments of hpcml_guard.so");
    }
    Status reg = RegisterOptions(sp);
    if (!reg.ok() && s.args.ok()) s.args = std::move(reg);
    if (!s.args.ok()) {
      slurm_error("hpcml-guard: %s", s.args.message().c_str());
      return submit ? -1 : 0;  // remote: denied later, never drain the node
    }
    return 0;
  } catch (...) {
    State().args = Internal("internal error in slurm_spank_init");
    return submit ? -1 : 0;
  }
}

HPCML_GUARD_EXPORT int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  if (IsRemote()) {
    try {
      std::uint32_t step = 0;
      if (spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS && step == SLURM_EXTERN_CONT)
        return 0;  // runs no user task
      AuditRecord rec;
      auto start = std::chrono::steady_clock::now();
      Decision d = DecideOnNode(sp, &rec);
      // Set here, before slurmstepd forks the tasks, the variables reach every
      // task without work in each (task_init_privileged runs once per task).
      if (d.allow &&
          (spank_setenv(sp, "HPCML_ZONE", d.zone.c_str(), 1) != ESPANK_SUCCESS ||
           spank_setenv(sp, "HPCML_ROLE", d.role.c_str(), 1) != ESPANK_SUCCESS ||
           spank_setenv(sp, "HPCML_DATASETS", State().datasets_env.c_str(), 1) != ESPANK_SUCCESS))
        d = DenyForError(Internal("cannot set HPCML_* in the job step's environment"));
      rec.allow = d.allow;
      rec.role = d.role;
      if (!d.zone.empty()) rec.zone = d.zone;
      rec.reason = d.reason;
      State().record = rec;
      Status logged = Audit(rec, true);
      if (!logged.ok() && d.allow) {
        // No record, no run: an unlogged allow would defeat the audit.
        d = DenyForError(logged.WithContext("audit log"));
      }
      GuardState& s = State();
      if (!d.allow && s.config.enforce_mount && s.policy && s.view_namespace == 0) {
        // Denied: the tasks will not run, but slurmstepd still opens the
        // step's stdio files as the user. Let those reach no dataset either.
        Status covered = EnterDatasetView({}, {});
        if (!covered.ok())
          slurm_info("hpcml-guard: denied step not covered: %s", covered.message().c_str());
      }
      slurm_debug(
          "hpcml-guard: job %s step %s decided and logged in %.2f ms (job facts from %s)",
          rec.job_id.c_str(), rec.step_id.c_str(),
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count(),
          s.facts_source);
      s.decision = std::move(d);
      s.decided = true;
      if (!s.decision.allow)
        slurm_info("hpcml-guard: job %s step %s denied: %s", rec.job_id.c_str(),
                   rec.step_id.c_str(), s.decision.reason.c_str());
    } catch (...) {
      State().decided = false;  // task_init_privileged denies
    }
    return 0;
  }
  if (!IsSubmitSide()) return 0;
  try {
    GuardState& s = State();
    if (!s.args.ok()) return -1;
    if (!s.option_error.empty()) {
      slurm_error("hpcml-guard: %s: no job submitted", s.option_error.c_str());
      return -1;
    }
    // Slurm forwards only the last value of a repeated option: forward them
    // all, to this step (srun's environment, sbatch's job environment) and to
    // the steps inside the job (the SPANK job environment, which Slurm hands
    // down as SLURM_SPANK__SLURM_SPANK_OPTION_*).
    if (!s.datasets.empty()) {
      std::string joined = JoinDatasets(s.datasets);
      ::setenv(kDatasetEnv, joined.c_str(), 1);
      (void)spank_job_control_setenv(sp, kDatasetEnv, joined.c_str(), 1);
    }
    AuditRecord rec;
    std::string data_zones;
    Decision d = DecideOnSubmit(&rec, &data_zones);
    // For slurmctld's job_submit/lua (examples/guard/job_submit.lua): the
    // zones of the job's data route it to their nodes, or refuse it if
    // they are several. Only a new job takes it (sbatch, salloc, srun
    // outside an allocation).
    if (d.allow && !data_zones.empty())
      (void)spank_job_control_setenv(sp, "HPCML_DATA_ZONES", data_zones.c_str(), 1);
    rec.allow = d.allow;
    rec.role = d.role;
    rec.reason = d.reason;
    (void)Audit(rec, ::geteuid() == 0);  // advisory: a failed log line blocks nothing
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

HPCML_GUARD_EXPORT int slurm_spank_task_init_privileged(spank_t, int, char**) {
  try {
    if (!IsRemote()) return 0;
    GuardState& s = State();
    if (!s.decided) {
      slurm_error("hpcml-guard: denied: no decision was made for this step");
      return -1;
    }
    if (!s.decision.allow) {
      slurm_error("hpcml-guard: denied: %s", s.decision.reason.c_str());
      return -1;
    }
    if (!s.policy) {
      slurm_error("hpcml-guard: denied: the step's policy is gone");
      return -1;
    }
    Status files = Status::Ok();
    if (s.config.enforce_mount && MountNamespace() != s.view_namespace)
      files = FailedPrecondition(
          "the task is not in its step's dataset view (a job container plugin, such as "
          "job_container/tmpfs, moved it): the guard's view cannot be combined with one");
    if (files.ok()) files = CheckOpenFiles(*s.policy, s.allowed);
    if (!files.ok()) {
      AuditRecord rec = s.record;
      rec.allow = false;
      rec.reason = "task: " + files.message();
      (void)Audit(rec, true);  // the task is denied whether or not the line is written
      slurm_error("hpcml-guard: denied: %s", rec.reason.c_str());
      return -1;
    }
    return 0;
  } catch (...) {
    return -1;  // the task fails, the node stays up
  }
}

// Each attempt's start on each node (slurmd's prolog, as root, before any of
// its steps) and its end.
HPCML_GUARD_EXPORT int slurm_spank_job_prolog(spank_t sp, int ac, char** av) {
  return CacheJobAttempt(sp, ac, av, true);
}
HPCML_GUARD_EXPORT int slurm_spank_job_epilog(spank_t sp, int ac, char** av) {
  return CacheJobAttempt(sp, ac, av, false);
}

}  // extern "C"
