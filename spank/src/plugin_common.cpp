// What every context of hpcml_guard.so shares (plugin_parts.hpp): the
// plugstack.conf arguments, the options, the audit line, user and group
// lookups.

#include <grp.h>
#include <pwd.h>
#include <syslog.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "hpcml/common/identity.hpp"
#include "plugin_parts.hpp"

namespace hpcml::guard::plugin {
namespace {

enum OptionId { kOptZone = 1, kOptDataset = 2, kOptRole = 3 };

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

}  // namespace

GuardState& State() {
  static GuardState* state = new GuardState();  // never destroyed: outlives every callback
  return *state;
}

int InitGuard(spank_t sp, int ac, char** av, bool submit) noexcept {
  try {
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

int SlurmdInit(int ac, char** av) noexcept {
  try {
    const std::string version(Version());
    auto config = ParsePluginArgs(Args(ac, av));
    if (!config.ok()) {
      slurm_error("hpcml-guard %s: plugstack.conf arguments of hpcml_guard.so: %s", version.c_str(),
                  config.status().message().c_str());
      return 0;
    }
    // Also compiles the policy into policy_cache= for the steps (policy_cache.hpp).
    std::string cache_note;
    auto policy = LoadPolicyCached(config->policy_path, config->policy_cache, 0, &cache_note);
    if (policy.ok()) {
      slurm_info("hpcml-guard %s loaded: policy %s sha256 %s, enforce=%s, confine=%s, audit %s",
                 version.c_str(), config->policy_path.c_str(), policy->sha256().c_str(),
                 config->enforce_name(), config->confine_name(), config->audit_path.c_str());
      if (!cache_note.empty()) slurm_info("hpcml-guard: %s", cache_note.c_str());
    } else {
      slurm_error(
          "hpcml-guard %s loaded: policy %s: %s (every job step is denied until it is fixed)",
          version.c_str(), config->policy_path.c_str(), policy.status().message().c_str());
    }
  } catch (...) {
    slurm_error("hpcml-guard: internal error in slurm_spank_init (slurmd)");
  }
  return 0;
}

std::vector<std::string_view> Args(int ac, char** av) {
  std::vector<std::string_view> args;
  for (int i = 0; i < ac; ++i) args.emplace_back(av[i] ? av[i] : "");
  return args;
}

std::string ShortHostname() {
  // Once per process: a step asks several times (the audit line, the job
  // facts cache's names), each a system call.
  static const std::string name = [] {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0) return std::string("unknown");
    std::string h(buf);
    return h.substr(0, h.find('.'));
  }();
  return name;
}

std::optional<PasswdEntry> LookupUser(uid_t uid) {
  std::vector<char> buf(16384);
  struct passwd pw {
  }, *res = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &res) != 0 || !res) return std::nullopt;
  return PasswdEntry{pw.pw_name, pw.pw_dir ? pw.pw_dir : ""};
}

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

AuditRecord NewRecord(const char* context) {
  const GuardState& s = State();
  AuditRecord rec;
  rec.context = context;
  rec.enforce = s.config.enforce_name();
  rec.guard_version = std::string(Version());
  rec.node = ShortHostname();
  rec.datasets = s.datasets;
  return rec;
}

void RecordDecision(AuditRecord* rec, const Decision& d) {
  rec->allow = d.allow;
  rec->role = d.role;
  if (!d.zone.empty()) rec->zone = d.zone;
  rec->reason = d.reason;
  rec->reason_code = d.code;
}

Status Audit(const AuditRecord& rec, bool write_file, std::string* failure_code) {
  const PluginConfig& config = State().config;
  Status status;
  std::string line;
  if (write_file) {
    auto appended = AppendAudit(config.audit_path, rec, config.audit_sync);
    if (appended.ok()) {
      line = *appended;
    } else {
      status = appended.status().WithContext("audit log");
      if (failure_code) *failure_code = "audit_log";
    }
  }
  if (line.empty()) line = FormatAuditLine(rec, 0, std::string(64, '0'));
  syslog(LOG_AUTHPRIV | (rec.allow ? LOG_INFO : LOG_WARNING), "hpcml-guard: %s", line.c_str());
  if (write_file && status.ok() && config.collector) {
    auto sent =
        ForwardAudit(config.audit_path, config.collector->host, config.collector->port, rec.node);
    if (!sent.ok()) {
      status = sent.status();
      if (failure_code) *failure_code = "audit_collector";
    }
  }
  return status;
}

}  // namespace hpcml::guard::plugin
