// hpcml_guard.so in slurmstepd (remote context, root) and in slurmd's job
// prolog and epilog (plugin_parts.hpp):
// - init_post_opt: the authoritative decision, made once per step on each
//   node (the policy, parsed once per change: policy_cache.hpp; the job's
//   facts from slurmctld, one lookup per job and node: job_cache.hpp; the
//   node's data file systems: data_mounts.hpp; the step's
//   datasets within the job's declared ones), logged, and only *stored*:
//   failing init_post_opt or user_init drains the node. An allowed step gets
//   the HPCML_* variables (hpcml/common/job_env.hpp) in its environment
//   there. With enforce=mount (the default) an allowed step's slurmstepd then
//   moves into its view of the datasets (mount_view.hpp), before it opens the
//   step's stdin/stdout/stderr files and forks the tasks, so both see only
//   what was allowed; with confine=landlock (the default) it then confines
//   itself, and so every task, to processes of the step (confine.hpp).
// - task_init_privileged (each task, root): delivers a denial (the task
//   exits 1, the node stays idle), and denies a task whose open files (its
//   stdio files) read a dataset it was not allowed or write into any dataset.
// - job_prolog and job_epilog (job script context): start and end the job's
//   attempt in the facts cache, so each attempt of a job is decided on its
//   own facts, and record the datasets it was submitted with (job_cache.hpp).
// In remote context every failure becomes a denial, never a drained node.

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <slurm/slurm.h>

#include "confine.hpp"
#include "data_mounts.hpp"
#include "hpcml/common/fs.hpp"
#include "hpcml/common/strings.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "hpcml/guard/mount_view.hpp"
#include "job_environment.hpp"
#include "plugin_parts.hpp"

namespace hpcml::guard::plugin {
namespace {

// The step's decision and what the tasks' checks need of it; one slurmstepd
// runs one step.
struct StepState {
  bool decided = false;
  Decision decision;
  const char* facts_source = "nowhere";  // where the decision got the job facts
  AuditRecord record;                    // the decision's line, for a task's denial
  std::optional<Policy> policy;          // the policy the step was decided on
  std::vector<std::string> allowed;      // the step's canonical datasets
  ino_t view_namespace = 0;              // enforce=mount: the view's mount namespace
};

StepState& Step() {
  static StepState* step = new StepState();  // never destroyed: outlives every callback
  return *step;
}

// The step's ids and credentials, as slurmstepd reports them.
struct StepIds {
  std::uint32_t job_id = 0, step_id = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

Result<StepIds> ReadStepIds(spank_t sp) {
  StepIds ids;
  if (spank_get_item(sp, S_JOB_ID, &ids.job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &ids.step_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_UID, &ids.uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &ids.gid) != ESPANK_SUCCESS)
    return Internal("cannot read the job's ids from slurmstepd");
  return ids;
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

// The user's credentials for resolving the datasets: the supplementary
// groups from slurmstepd's credential, else (a credential without groups)
// from NSS on this node.
UserCredentials StepCredentials(spank_t sp, const StepIds& ids, const std::string& user) {
  UserCredentials creds{ids.uid, ids.gid, {}};
  gid_t* gids = nullptr;
  int ngids = 0;
  if (spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &gids, &ngids) == ESPANK_SUCCESS && gids &&
      ngids > 0) {
    creds.groups.assign(gids, gids + ngids);
    return creds;
  }
  int n = 64;
  creds.groups.resize(static_cast<std::size_t>(n));
  if (::getgrouplist(user.c_str(), ids.gid, creds.groups.data(), &n) < 0) {
    creds.groups.resize(static_cast<std::size_t>(n));
    ::getgrouplist(user.c_str(), ids.gid, creds.groups.data(), &n);
  }
  creds.groups.resize(static_cast<std::size_t>(n));
  return creds;
}

// The job's facts for this step, from slurmctld or this node's cache (for
// the batch step always from slurmctld: BeginBatchAttempt); the job's
// cluster must be this node's cluster= when that is given.
Result<JobFacts> StepJobFacts(const StepIds& ids, AuditRecord* rec) {
  const GuardState& s = State();
  bool cached = false;
  HPCML_ASSIGN_OR_RETURN(JobFacts facts,
                         JobFactsForStep(JobKey{s.config.cluster, ids.job_id, ShortHostname()},
                                         ids.uid, ids.step_id == SLURM_BATCH_SCRIPT, &cached));
  Step().facts_source = cached ? "this node's cache" : "slurmctld";
  rec->cluster = facts.cluster;
  if (!s.config.cluster.empty() && facts.cluster != s.config.cluster)
    return PermissionDenied(
        "slurmctld reports job {} in cluster '{}', but this node's plugin argument is cluster={}",
        ids.job_id, facts.cluster, s.config.cluster);
  return facts;
}

// The request to decide: who (from slurmstepd), the job's facts (from
// slurmctld), this node's zone, and what the user asked for, with the
// datasets as the user resolved them.
Result<Request> NodeRequest(const Policy& policy, const UserCredentials& creds,
                            const std::string& user, const JobFacts& facts,
                            const std::vector<std::string>& requested,
                            const std::vector<Result<ResolvedPath>>& resolved, AuditRecord* rec) {
  const GuardState& s = State();
  Request req;
  req.uid = creds.uid;
  req.user = user;
  std::vector<gid_t> all_gids = creds.groups;
  all_gids.push_back(creds.gid);
  req.groups = GroupNames(policy, std::move(all_gids));
  req.account = facts.account;
  req.partition = facts.partition;
  req.gpus = facts.gpus;
  req.associations_enforced = facts.associations_enforced.value_or(true);
  HPCML_ASSIGN_OR_RETURN(std::string zone,
                         NodeZone(policy, s.config.zone, rec->node, facts.node_features));
  rec->zone = zone;
  req.node_zone = zone;
  req.role = s.role;
  req.zone = s.zone;
  HPCML_ASSIGN_OR_RETURN(req.datasets, CanonicalDatasets(requested, resolved, user));
  rec->datasets = req.datasets;
  return req;
}

// A feature set is a file and the directory of its versions beside it,
// <file>.d (docs/featurecache.md): for each requested dataset that resolved
// to a regular file, its <canonical>.d, when the user resolves it to exactly
// that path (a directory, not through a symlink), joins the request as one
// more dataset: decided on, listed and mounted like the others. Nothing else
// is added; an error resolving the companions denies.
Status AddFeatureSetVersions(const UserCredentials& creds, std::vector<std::string>* requested,
                             std::vector<Result<ResolvedPath>>* resolved) {
  std::vector<std::string> companions;
  for (const auto& r : *resolved) {
    struct stat st {};
    if (r.ok() && ::fstat(r->fd.get(), &st) == 0 && S_ISREG(st.st_mode))
      companions.push_back(r->path + ".d");
  }
  if (companions.empty()) return Status::Ok();
  HPCML_ASSIGN_OR_RETURN(auto found, CanonicalPathsAsUser(creds, companions));
  for (std::size_t i = 0; i < found.size(); ++i) {
    struct stat st {};
    if (!found[i].ok() || found[i]->path != companions[i] ||
        ::fstat(found[i]->fd.get(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      continue;
    }
    requested->push_back(companions[i]);
    resolved->push_back(std::move(found[i]));
  }
  return Status::Ok();
}

// The batch step starts its attempt on its node itself. slurmd runs the
// prolog only for a job id its credential cache does not hold, and a job
// requeued and started again within cred_expire (its user may set
// StartTime=now) is still held there: no prolog, and the previous attempt's
// marker, facts and record, should its epilog not have removed them, would
// be taken for this attempt's. The batch step runs once per attempt, with
// the job's submitted environment, so its datasets are the job's declared
// ones: it starts a new attempt with them and caches the facts it just
// asked slurmctld for. A failure is logged: the job's later steps then ask
// slurmctld, and may name no dataset.
void BeginBatchAttempt(const StepIds& ids, const JobFacts& facts,
                       const std::vector<Result<ResolvedPath>>& resolved) {
  const GuardState& s = State();
  if (s.config.job_cache.empty()) return;
  std::vector<std::string> canonical;
  for (const auto& r : resolved)
    if (r.ok()) canonical.push_back(r->path);
  JobKey key{s.config.cluster, ids.job_id, ShortHostname()};
  Status st = BeginJobAttempt(s.config.job_cache, key, JoinDatasets(canonical));
  if (st.ok()) st = WriteCachedJobFacts(s.config.job_cache, key, facts);
  if (!st.ok())
    slurm_info("hpcml-guard: job %u: batch attempt not recorded: %s", ids.job_id,
               st.message().c_str());
}

// A step may only narrow the job's datasets: each dataset the step asks for,
// as the user resolves it now, must be within one the job was submitted
// with, as the job's prolog resolved and recorded them at allocation
// (job_cache.hpp), never as the step's own options or environment say.
// Only PrologFlags=Alloc makes that record the job's: otherwise slurmd runs
// the prolog at the first step on each node, with that step's SPANK
// environment. `resolved` starts with the step's own datasets, in order (a
// feature set's versions, added after them, follow their file).
Status CheckStepNarrowsJob(const StepIds& ids, const JobFacts& facts,
                           const std::vector<Result<ResolvedPath>>& resolved) {
  const GuardState& s = State();
  if (s.datasets.empty() || ids.step_id == SLURM_BATCH_SCRIPT) return Status::Ok();
  if (s.config.job_cache.empty())
    return FailedPrecondition(
        "job_cache=off: the job's declared datasets are not recorded on this node, so no step "
        "may name a dataset");
  if (!facts.prolog_at_allocation.value_or(false))
    return FailedPrecondition(
        "slurm.conf has no PrologFlags=Alloc: the job prolog's record of the job's datasets would "
        "be the first step's on each node, so no step may name a dataset");
  JobKey key{s.config.cluster, ids.job_id, ShortHostname()};
  auto recorded = JobDeclaredDatasets(s.config.job_cache, key);
  if (!recorded.ok()) return recorded.status().WithContext("the job's declared datasets");
  std::vector<std::string> job_paths;
  if (!recorded->empty())
    HPCML_RETURN_IF_ERROR(AppendDatasets(*recorded, std::nullopt, &job_paths)
                              .WithContext("the job's declared datasets"));
  for (std::size_t i = 0; i < s.datasets.size() && i < resolved.size(); ++i) {
    if (!resolved[i].ok()) continue;  // denied by NodeRequest, naming it
    const std::string& path = resolved[i]->path;
    bool within = std::any_of(job_paths.begin(), job_paths.end(),
                              [&](const std::string& j) { return IsWithin(path, j); });
    if (!within)
      return PermissionDenied(
          "dataset '{}' is not among the job's datasets (submitted with: {}): a step may only "
          "narrow them",
          s.datasets[i], recorded->empty() ? "none" : *recorded);
  }
  return Status::Ok();
}

// The data file systems this node mounts (data_mounts.hpp), from slurmstepd's
// mountinfo before the view: only the node's zone's, none shared with a
// place users can write.
Status CheckNodeDataMounts(const Policy& policy, const std::string& node_zone,
                           const std::string& home) {
  HPCML_ASSIGN_OR_RETURN(std::string text, ReadFile("/proc/self/mountinfo"));
  HPCML_ASSIGN_OR_RETURN(std::vector<Mount> mounts, ParseMountInfo(text));
  std::vector<std::string> writable = {"/tmp", "/var/tmp", "/dev/shm"};
  if (!home.empty() && home[0] == '/') writable.push_back(home);
  return CheckDataMounts(policy, node_zone, mounts, writable, ReadZoneMarkerFile)
      .WithContext("data file systems");
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
  StepState& step = Step();
  if (!step.policy) return Internal("enforce=mount: no policy to build the view from");
  HPCML_ASSIGN_OR_RETURN(DatasetView view,
                         PlanDatasetView(*step.policy, allowed, ListDirectoryNames));
  HPCML_RETURN_IF_ERROR(ApplyDatasetView(view, resolved));
  step.view_namespace = MountNamespace();
  if (step.view_namespace == 0) return Internal("enforce=mount: cannot stat the view's namespace");
  return Status::Ok();
}

// The decision, or the error that stops it (DecideOnNode denies for it).
// Every check in order; each error is final.
Result<Decision> DecideOnNodeOrError(spank_t sp, AuditRecord* rec) {
  const GuardState& s = State();
  StepState& step = Step();
  HPCML_ASSIGN_OR_RETURN(StepIds ids, ReadStepIds(sp));
  rec->job_id = std::to_string(ids.job_id);
  rec->step_id = StepName(ids.step_id);
  rec->uid = ids.uid;
  HPCML_RETURN_IF_ERROR(s.args);
  // The policy first: a step denied for any later reason still gets its
  // covers from it (CoverDeniedStep). Compiled once per policy text into
  // policy_cache= (policy_cache.hpp): a step reads and hashes the text, but
  // parses it only after a change.
  HPCML_ASSIGN_OR_RETURN(Policy loaded,
                         LoadPolicyCached(s.config.policy_path, s.config.policy_cache));
  step.policy = std::move(loaded);  // kept: the view and the tasks' checks use it
  const Policy& policy = *step.policy;
  rec->policy_sha256 = policy.sha256();
  if (!s.option_error.empty()) return InvalidArgument("{}", s.option_error);

  auto entry = LookupUser(ids.uid);
  if (!entry) return NotFound("no passwd entry for uid {}", ids.uid);
  const std::string* user = &entry->name;
  rec->user = *user;
  UserCredentials creds = StepCredentials(sp, ids, *user);
  HPCML_ASSIGN_OR_RETURN(JobFacts facts, StepJobFacts(ids, rec));

  HPCML_ASSIGN_OR_RETURN(auto resolved, CanonicalPathsAsUser(creds, s.datasets));
  if (ids.step_id == SLURM_BATCH_SCRIPT) BeginBatchAttempt(ids, facts, resolved);
  std::vector<std::string> requested = s.datasets;
  HPCML_RETURN_IF_ERROR(AddFeatureSetVersions(creds, &requested, &resolved));
  HPCML_ASSIGN_OR_RETURN(Request req,
                         NodeRequest(policy, creds, *user, facts, requested, resolved, rec));
  HPCML_RETURN_IF_ERROR(CheckNodeDataMounts(policy, rec->zone, entry->home));
  Decision d = Decide(policy, req);
  // After the policy: its reasons are the more telling.
  if (d.allow) HPCML_RETURN_IF_ERROR(CheckStepNarrowsJob(ids, facts, resolved));
  if (d.allow && s.config.enforce_mount) {
    // From the descriptors resolved above, never from a fresh lookup.
    std::vector<ResolvedPath> fds;
    for (auto& r : resolved) fds.push_back(std::move(r).value());
    HPCML_RETURN_IF_ERROR(EnterDatasetView(req.datasets, fds));
  }
  // After the view, before the tasks: they all inherit this domain.
  if (d.allow && s.config.confine_landlock) HPCML_RETURN_IF_ERROR(ConfineToView());
  if (d.allow) step.allowed = req.datasets;
  return d;
}

// The authoritative decision in slurmstepd. Everything trusted comes from
// Slurm (spank items, slurmctld) or the admin (plugin arguments, policy).
// Any error denies, with its message as the reason.
Decision DecideOnNode(spank_t sp, AuditRecord* rec) {
  *rec = NewRecord("node");
  rec->zone = State().config.zone;
  Result<Decision> d = DecideOnNodeOrError(sp, rec);
  return d.ok() ? std::move(d).value() : DenyForError(d.status());
}

// True when the step's environment holds exactly `value` for `name`.
bool StepEnvHolds(spank_t sp, const char* name, const std::string& value) {
  std::string buf(value.size() + 1, '\0');  // a longer value does not fit: ESPANK_NOSPACE
  return spank_getenv(sp, name, buf.data(), static_cast<int>(buf.size())) == ESPANK_SUCCESS &&
         std::string_view(buf.c_str()) == value;
}

// Sets the HPCML_* variables (job_environment.hpp) in the step's
// environment. Set here, before slurmstepd forks the tasks, they reach every
// task without work in each (task_init_privileged runs once per task). A
// variable that already holds the decided value (srun's hint, see
// submit_side.cpp; an srun inside a batch script inherits the batch step's)
// is left as it is: each spank_setenv costs 0.05-0.15 ms (Slurm's setenvf
// zeroes a 256 KB buffer).
Status SetJobEnvironment(spank_t sp, const Decision& allowed) {
  const StepState& step = Step();
  if (!step.policy) return Internal("no policy for the job step's environment");
  HPCML_ASSIGN_OR_RETURN(std::vector<EnvVar> env,
                         JobEnvironment(*step.policy, allowed, step.allowed));
  for (const EnvVar& var : env) {
    if (StepEnvHolds(sp, var.name, var.value)) continue;
    if (spank_setenv(sp, var.name, var.value.c_str(), 1) != ESPANK_SUCCESS)
      return Internal("cannot set HPCML_* in the job step's environment");
  }
  return Status::Ok();
}

// Denied: the tasks will not run, but slurmstepd still opens the step's
// stdio files as the user. With enforce=mount, let those reach no dataset
// either (unless the step is already in its view).
void CoverDeniedStep() {
  const StepState& step = Step();
  if (!State().config.enforce_mount || !step.policy || step.view_namespace != 0) return;
  Status covered = EnterDatasetView({}, {});
  if (!covered.ok())
    slurm_info("hpcml-guard: denied step not covered: %s", covered.message().c_str());
}

// Denied: its tasks fail in task_init_privileged, but slurmstepd would
// still run the user's srun --task-epilog (and the like) as the user, from
// this thread, for each task it reaps. Executing anything is forbidden to a
// denied step (confine.hpp), whatever the view: no user code runs.
void LockDeniedStep() noexcept {
  Status locked = ForbidExecution();
  if (!locked.ok()) slurm_info("hpcml-guard: denied step not locked: %s", locked.message().c_str());
}

// The task's open files, before it runs: slurmstepd opened its stdin, stdout
// and stderr files for it. A file or directory of a policy dataset open for
// reading must be within an allowed dataset; nothing of a dataset may be open
// for writing. With enforce=mount the view already hid or made read-only
// every such file; this check makes the advisory mode decide them too.
Status CheckOpenFiles(const Policy& policy, const std::vector<std::string>& allowed) {
  UniqueDir dir(::opendir("/proc/self/fd"));
  if (!dir) return ErrnoError("listing /proc/self/fd", errno);
  while (const dirent* e = ::readdir(dir.get())) {
    int fd = std::atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == ::dirfd(dir.get())) continue;
    // Pipes, sockets and devices (most of a task's descriptors) first, with
    // one system call each.
    struct stat st {};
    if (::fstat(fd, &st) != 0 || (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))) continue;
    int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_PATH)) continue;
    char link[64], buf[PATH_MAX];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = ::readlink(link, buf, sizeof buf - 1);
    if (n <= 0) return ErrnoError(fmt::format("reading {}", link), errno);
    std::string path(buf, static_cast<std::size_t>(n));
    std::optional<DatasetEntry> entry = policy.MatchDataset(path);
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

// The job's declared datasets for the prolog's record: the --dataset paths
// of its SPANK environment (as slurmd hands it to the prolog, "SPANK_"
// prefixed), each resolved as the job's user now, comma-joined; those that
// do not resolve are left out (no step can narrow to them). "" for none.
Result<std::string> CanonicalJobDatasets(spank_t sp) {
  const char* raw = std::getenv("SPANK__SLURM_SPANK_OPTION_hpcml_guard_dataset");
  if (!raw || !*raw) return std::string();
  std::vector<std::string> paths;
  HPCML_RETURN_IF_ERROR(AppendDatasets(raw, std::nullopt, &paths));
  StepIds ids;
  if (spank_get_item(sp, S_JOB_UID, &ids.uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &ids.gid) != ESPANK_SUCCESS)
    return Internal("cannot read the job's uid and gid");
  auto entry = LookupUser(ids.uid);
  if (!entry) return NotFound("no passwd entry for uid {}", ids.uid);
  HPCML_ASSIGN_OR_RETURN(auto resolved,
                         CanonicalPathsAsUser(StepCredentials(sp, ids, entry->name), paths));
  std::vector<std::string> canonical;
  for (const auto& r : resolved)
    if (r.ok()) canonical.push_back(r->path);
  return JoinDatasets(canonical);
}

// The prolog starts a new attempt of the job in this node's facts cache,
// recording the job's datasets; the epilog removes the job's files
// (job_cache.hpp). Always 0: a failing prolog or epilog drains the node. A
// failure is logged; an entry is then trusted only under the marker of the
// attempt that wrote it, and a job without a record runs no step that names
// a dataset.
int CacheJobAttempt(spank_t sp, int ac, char** av, bool begin) noexcept {
  try {
    auto config = ParsePluginArgs(Args(ac, av));
    std::uint32_t job_id = 0;
    if (!config.ok() || config->job_cache.empty() ||
        spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS)
      return 0;
    JobKey key{config->cluster, job_id, ShortHostname()};
    if (!begin) {
      Status st = RemoveCachedJobFacts(config->job_cache, key);
      if (!st.ok()) slurm_error("hpcml-guard: %s", st.message().c_str());
      return 0;
    }
    auto datasets = CanonicalJobDatasets(sp);
    if (!datasets.ok()) {
      // Recorded as none: the job's steps may name no dataset.
      slurm_error("hpcml-guard: job %u: its datasets: %s", job_id,
                  datasets.status().message().c_str());
    }
    Status st = BeginJobAttempt(config->job_cache, key, datasets.ok() ? *datasets : "");
    if (!st.ok()) slurm_error("hpcml-guard: %s", st.message().c_str());
  } catch (...) {
  }
  return 0;
}

}  // namespace

int NodeInitPostOpt(spank_t sp) noexcept {
  try {
    std::uint32_t step_id = 0;
    if (spank_get_item(sp, S_JOB_STEPID, &step_id) == ESPANK_SUCCESS &&
        step_id == SLURM_EXTERN_CONT)
      return 0;  // runs no user task
    StepState& step = Step();
    AuditRecord rec;
    auto start = std::chrono::steady_clock::now();
    Decision d = DecideOnNode(sp, &rec);
    if (d.allow) {
      Status env = SetJobEnvironment(sp, d);
      if (!env.ok()) d = DenyForError(env);
    }
    RecordDecision(&rec, d);
    step.record = rec;
    std::string failure_code;
    Status logged = Audit(rec, true, &failure_code);
    if (!logged.ok() && d.allow) {
      // No record, no run: an unlogged allow would defeat the audit. The
      // denial is logged in turn (and sent, if the collector is back).
      d = DenyForError(logged, failure_code);
      RecordDecision(&rec, d);
      step.record = rec;
      (void)Audit(rec, true);
    }
    if (!d.allow) {
      CoverDeniedStep();
      LockDeniedStep();
    }
    slurm_debug(
        "hpcml-guard: job %s step %s decided and logged in %.2f ms (job facts from %s)",
        rec.job_id.c_str(), rec.step_id.c_str(),
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(),
        step.facts_source);
    step.decision = std::move(d);
    step.decided = true;
    if (!step.decision.allow)
      slurm_info("hpcml-guard: job %s step %s denied: %s", rec.job_id.c_str(), rec.step_id.c_str(),
                 step.decision.reason.c_str());
  } catch (...) {
    Step().decided = false;  // task_init_privileged denies
    LockDeniedStep();
  }
  return 0;
}

int NodeTaskInitPrivileged() noexcept {
  try {
    const StepState& step = Step();
    if (!step.decided) {
      slurm_error("hpcml-guard: denied: no decision was made for this step");
      return -1;
    }
    if (!step.decision.allow) {
      slurm_error("hpcml-guard: denied: %s", step.decision.reason.c_str());
      return -1;
    }
    if (!step.policy) {
      slurm_error("hpcml-guard: denied: the step's policy is gone");
      return -1;
    }
    Status files = Status::Ok();
    if (State().config.enforce_mount && MountNamespace() != step.view_namespace)
      files = FailedPrecondition(
          "the task is not in its step's dataset view (a job container plugin, such as "
          "job_container/tmpfs, moved it): the guard's view cannot be combined with one");
    if (files.ok()) files = CheckOpenFiles(*step.policy, step.allowed);
    if (!files.ok()) {
      AuditRecord rec = step.record;
      rec.allow = false;
      rec.reason = "task: " + files.message();
      rec.reason_code = "task";
      (void)Audit(rec, true);  // the task is denied whether or not the line is written
      slurm_error("hpcml-guard: denied: %s", rec.reason.c_str());
      return -1;
    }
    return 0;
  } catch (...) {
    return -1;  // the task fails, the node stays up
  }
}

int NodeJobProlog(spank_t sp, int ac, char** av) noexcept {
  return CacheJobAttempt(sp, ac, av, true);
}
int NodeJobEpilog(spank_t sp, int ac, char** av) noexcept {
  return CacheJobAttempt(sp, ac, av, false);
}

}  // namespace hpcml::guard::plugin
