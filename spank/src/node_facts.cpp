// What slurmctld and the admin say about the job and this node, for the
// decision in slurmstepd (node_side.cpp): the job's account, partition and
// GPU count (cached per job and node: job_cache.hpp) and the node's zone.
// Never from the job's environment, which the user controls.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <slurm/slurm.h>

#include "hpcml/common/strings.hpp"
#include "plugin_parts.hpp"

namespace hpcml::guard::plugin {
namespace {

// slurmctld's AccountingStorageEnforce: associations (src/common/read_config.h).
constexpr std::uint16_t kEnforceAssociations = 1u << 0;

// What the guard needs of slurmctld's configuration (one RPC): whether it
// enforces associations, and whether slurmd runs the prolog when the job is
// allocated (PrologFlags=Alloc).
struct CtlFacts {
  bool associations_enforced = false;
  bool prolog_at_allocation = false;
};
Result<CtlFacts> LoadCtlFacts() {
  slurm_conf_t* conf = nullptr;
  if (slurm_load_ctl_conf(0, &conf) != SLURM_SUCCESS || !conf)
    return Unavailable("cannot load slurmctld's configuration: {}",
                       slurm_strerror(slurm_get_errno()));
  CtlFacts facts{(conf->accounting_storage_enforce & kEnforceAssociations) != 0,
                 (conf->prolog_flags & PROLOG_FLAG_ALLOC) != 0};
  slurm_free_ctl_conf(conf);
  return facts;
}

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

// Account, partition and GPU count from slurmctld's job record (libslurm, one
// RPC), this node's features (one more: NodeFeatures), and from slurmctld's
// configuration (one more: LoadCtlFacts).
Result<JobFacts> LoadJobFacts(std::uint32_t job_id, uid_t uid) {
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
    HPCML_ASSIGN_OR_RETURN(CtlFacts ctl, LoadCtlFacts());
    f.associations_enforced = ctl.associations_enforced;
    f.prolog_at_allocation = ctl.prolog_at_allocation;
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

// The zone "zone-<name>" among comma-separated Slurm features, if one.
Result<std::optional<std::string>> ZoneFeature(std::string_view features) {
  std::optional<std::string> zone;
  for (std::string_view f : SplitFields(features, ',')) {
    if (!f.starts_with("zone-")) continue;
    if (zone && *zone != f.substr(5))
      return PermissionDenied("this node has two zone features: zone-{} and {}", *zone, f);
    zone = std::string(f.substr(5));
  }
  return zone;
}

}  // namespace

// A cache that cannot be read or written costs a lookup, never a wrong
// answer.
Result<JobFacts> JobFactsForStep(const JobKey& key, uid_t uid, bool fresh, bool* cached) {
  const std::string& dir = State().config.job_cache;
  *cached = false;
  if (fresh) return LoadJobFacts(key.job_id, uid);
  if (!dir.empty()) {
    std::string why;
    auto hit = ReadCachedJobFacts(dir, key, uid, &why);
    // An entry of an older guard lacks slurmctld's configuration: asked again.
    if (hit && hit->associations_enforced && hit->prolog_at_allocation) {
      *cached = true;
      return *hit;
    }
    if (!why.empty()) slurm_info("hpcml-guard: job facts cache not used: %s", why.c_str());
  }
  HPCML_ASSIGN_OR_RETURN(JobFacts facts, LoadJobFacts(key.job_id, uid));
  if (!dir.empty()) {
    Status st = WriteCachedJobFacts(dir, key, facts);
    if (!st.ok()) slurm_info("hpcml-guard: job facts not cached: %s", st.message().c_str());
  }
  return facts;
}

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

}  // namespace hpcml::guard::plugin
