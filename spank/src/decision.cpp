#include "hpcml/guard/decision.hpp"

#include <algorithm>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "hpcml/common/strings.hpp"

namespace hpcml::guard {
namespace {

Decision Deny(std::string code, std::string role, std::string zone, std::string reason) {
  return Decision{false, std::move(role), std::move(zone), std::move(reason), std::move(code)};
}

std::string Join(const std::set<std::string>& s) {
  return s.empty() ? std::string("none") : fmt::format("{}", fmt::join(s, ", "));
}

}  // namespace

std::vector<std::string> DatasetZones(const Policy& policy,
                                      const std::vector<std::string>& datasets) {
  std::set<std::string> zones;
  for (const std::string& d : datasets) {
    if (auto e = policy.MatchDataset(d)) zones.emplace(e->zone);
    for (const DatasetEntry& below : policy.EntriesBelow(d)) zones.emplace(below.zone);
  }
  return {zones.begin(), zones.end()};
}

Decision DenyForError(const Status& error, std::string code) {
  if (code.empty()) {
    code = "error_" + std::string(StatusCodeName(error.code()));
    std::replace(code.begin(), code.end(), ' ', '_');
  }
  return Deny(std::move(code), "", "", error.message());
}

namespace {

// Each step of Decide returns the denial, or nullopt to go on.
using Denial = std::optional<Decision>;

// 1. The role: requested, else the policy's default; the user must be bound
// to it. Sets `role_name` (also for a denial) and `role`.
Denial CheckRole(const Policy& policy, const Request& req, std::string* role_name,
                 const Role** role) {
  if (req.role) {
    *role_name = *req.role;
  } else if (policy.default_role()) {
    *role_name = *policy.default_role();
  } else {
    return Deny("role_missing", "", "", "no --ml-role given and the policy has no [defaults] role");
  }
  const std::string& name = *role_name;
  auto role_it = policy.roles().find(name);
  if (role_it == policy.roles().end())
    return Deny("role_unknown", name, "",
                fmt::format("role '{}' is not defined in {}", name, policy.source()));
  *role = &role_it->second;
  if (!policy.IsBound(name, req.user, req.groups, req.account))
    return Deny("role_unbound", name, "",
                fmt::format("user '{}' (uid {}{}) is not bound to role '{}'", req.user, req.uid,
                            req.account ? fmt::format(", account '{}'", *req.account) : "", name));
  if (req.account && !req.associations_enforced &&
      !policy.IsBoundToPerson(name, req.user, req.groups))
    return Deny("role_account_unenforced", name, "",
                fmt::format("role '{}' comes only from the binding of account '{}', and slurmctld "
                            "does not enforce associations (any user may name any account): set "
                            "AccountingStorageEnforce=associations in slurm.conf",
                            name, *req.account));
  return std::nullopt;
}

// 2. The zone: the node's; a requested zone must equal it. On the submit
// side (no node zone) the requested zone, if any, stands in. Sets `zone`
// (empty: not known).
Denial CheckZone(const Policy& policy, const Request& req, const std::string& role_name,
                 const Role& role, std::string* zone) {
  if (req.node_zone) {
    *zone = *req.node_zone;
    if (!policy.zones().count(*zone))
      return Deny(
          "zone", role_name, *zone,
          fmt::format("this node's zone '{}' is not declared in {}", *zone, policy.source()));
    if (req.zone && *req.zone != *zone)
      return Deny(
          "zone", role_name, *zone,
          fmt::format("requested zone '{}' is not this node's zone '{}'", *req.zone, *zone));
  } else if (req.zone) {
    *zone = *req.zone;
    if (!policy.zones().count(*zone))
      return Deny("zone", role_name, *zone,
                  fmt::format("zone '{}' is not declared in {}", *zone, policy.source()));
  }
  if (!zone->empty() && !role.zones.count(*zone))
    return Deny("role_zone", role_name, *zone,
                fmt::format("role '{}' may not run in zone '{}' (allowed: {}; {}:{})", role_name,
                            *zone, Join(role.zones), policy.source(), role.line));
  return std::nullopt;
}

// 3. Resources from the job record.
Denial CheckResources(const Policy& policy, const Request& req, const std::string& role_name,
                      const Role& role, const std::string& zone) {
  if (req.gpus && *req.gpus > role.max_gpus)
    return Deny("gpus", role_name, zone,
                fmt::format("the job has {} GPUs; role '{}' allows at most {} ({}:{})", *req.gpus,
                            role_name, role.max_gpus, policy.source(), role.line));
  if (req.partition && role.partitions) {
    // Known (node side) but empty: fail closed rather than skip the rule.
    if (req.partition->empty())
      return Deny("partition", role_name, zone,
                  fmt::format("the job has no partition; role '{}' is limited to {} ({}:{})",
                              role_name, Join(*role.partitions), policy.source(), role.line));
    // Every partition of the list, an empty item included.
    for (std::string_view field : SplitFields(*req.partition, ',')) {
      const std::string part(field);
      if (!role.partitions->count(part))
        return Deny(
            "partition", role_name, zone,
            fmt::format("partition '{}' is not allowed for role '{}' (allowed: {}; {}:{})", part,
                        role_name, Join(*role.partitions), policy.source(), role.line));
    }
  }
  return std::nullopt;
}

// 4. One dataset: inside an entry of this zone with a classification the
// role allows, and so is every entry below it.
Denial CheckDataset(const Policy& policy, const std::string& path, const std::string& role_name,
                    const Role& role, const std::string& zone) {
  std::optional<DatasetEntry> e = policy.MatchDataset(path);
  if (!e && policy.unknown_datasets() == UnknownDatasets::kDeny)
    return Deny(
        "dataset_unknown", role_name, zone,
        fmt::format("dataset '{}' matches no [[datasets]] entry in {}", path, policy.source()));
  if (e && !zone.empty() && e->zone != zone)
    return Deny("dataset_zone", role_name, zone,
                fmt::format("dataset '{}' is in zone '{}' ({}:{}), not in zone '{}'", path, e->zone,
                            policy.source(), e->line, zone));
  if (e && !role.classifications.count(std::string(e->classification)))
    return Deny("dataset_classification", role_name, zone,
                fmt::format("dataset '{}' is classified '{}' ({}:{}); role '{}' allows: {}", path,
                            e->classification, policy.source(), e->line, role_name,
                            Join(role.classifications)));
  // A directory holds every entry below it: each must pass as well, also
  // when the directory itself is outside every entry (unknown_datasets =
  // "allow" must not let "/" through with every dataset under it).
  for (const DatasetEntry& below : policy.EntriesBelow(path)) {
    if (!zone.empty() && below.zone != zone)
      return Deny("dataset_zone", role_name, zone,
                  fmt::format("dataset '{}' contains '{}', which is in zone '{}' ({}:{}), not "
                              "in zone '{}'",
                              path, below.path, below.zone, policy.source(), below.line, zone));
    if (!role.classifications.count(std::string(below.classification)))
      return Deny("dataset_classification", role_name, zone,
                  fmt::format("dataset '{}' contains '{}', classified '{}' ({}:{}); role '{}' "
                              "allows: {}",
                              path, below.path, below.classification, policy.source(), below.line,
                              role_name, Join(role.classifications)));
  }
  return std::nullopt;
}

}  // namespace

// The steps in order; the first denial stands (fail closed).
Decision Decide(const Policy& policy, const Request& req) {
  std::string role_name;
  const Role* role = nullptr;
  if (Denial d = CheckRole(policy, req, &role_name, &role)) return std::move(*d);
  std::string zone;
  if (Denial d = CheckZone(policy, req, role_name, *role, &zone)) return std::move(*d);
  if (Denial d = CheckResources(policy, req, role_name, *role, zone)) return std::move(*d);
  for (const std::string& path : req.datasets) {
    if (Denial d = CheckDataset(policy, path, role_name, *role, zone)) return std::move(*d);
  }
  return Decision{true, role_name, zone,
                  fmt::format("role '{}' in zone '{}' with {} dataset(s)", role_name,
                              zone.empty() ? "?" : zone, req.datasets.size()),
                  ""};
}

}  // namespace hpcml::guard
