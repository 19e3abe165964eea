// The decision: may this user run this request on this node? A pure function
// of the policy and the request; every input that came from the user is in
// the request, every input from the system (uid, groups, account, partition,
// GPU count, node zone) is filled by the caller from trusted sources.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hpcml/guard/policy.hpp"

namespace hpcml::guard {

struct Request {
  std::uint32_t uid = 0;
  std::string user;                 // name of uid
  std::vector<std::string> groups;  // names of the primary and supplementary groups
  // From slurmctld's job record on the node. nullopt on the submit side
  // (advisory check): checks that need them are skipped there.
  std::optional<std::string> account;
  std::optional<std::string> partition;  // comma-separated if several
  std::optional<std::uint32_t> gpus;
  // Whether slurmctld enforces associations: without it a user may name any
  // account, and an account binding proves nothing.
  bool associations_enforced = true;
  // This node's zone (plugin argument); nullopt on the submit side, where
  // datasets are checked against the requested zone instead.
  std::optional<std::string> node_zone;
  // The user's request (--ml-role, --data-zone, --dataset after
  // canonicalisation: absolute, symlinks and '..' resolved).
  std::optional<std::string> role;
  std::optional<std::string> zone;
  std::vector<std::string> datasets;
};

struct Decision {
  bool allow = false;
  std::string role;    // effective role ("" if none could be chosen)
  std::string zone;    // effective zone ("" if unknown)
  std::string reason;  // why; names the policy line where one applies
  // A denial's stable class, for the audit line's reason_code and metrics:
  // role_missing, role_unknown, role_unbound, role_account_unenforced, zone,
  // role_zone, gpus, partition, dataset_unknown, dataset_zone,
  // dataset_classification; error_<status> for a failure before the
  // decision (DenyForError); "" for an allow.
  std::string code;
};

Decision Decide(const Policy& policy, const Request& request);

// The zones the datasets (canonical paths) are in, sorted: each one's entry,
// and for a directory every entry below it. --data-zone is not included.
std::vector<std::string> DatasetZones(const Policy& policy,
                                      const std::vector<std::string>& datasets);

// A denial for a failure before the decision (policy unreadable, lookup
// failed): the reason is the error's message, the code `code`, else
// error_<the status's code> (error_permission_denied, ...).
Decision DenyForError(const Status& error, std::string code = "");

}  // namespace hpcml::guard
