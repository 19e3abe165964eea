// The guard's policy: zones, datasets, roles and bindings, read from a
// root-owned TOML file (format in docs/guard.md). Parsing is strict: an unknown
// key, a wrong type or a dangling reference is an error naming the file, the
// line and the key. A Policy is immutable after parsing and safe to share
// between threads.
//
// A job step's slurmstepd, and each srun, is a fresh process: it reads the
// policy every time. LoadPolicyCached skips the parse when the guard's
// root-owned cache directory (policy_cache=) holds the policy compiled for
// the same text (a flat binary file named by the text's SHA-256, written by
// slurmd at start or by the first root process after a change, readable by
// whoever may read the policy; policy_cache.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/guard/dataset_table.hpp"

namespace hpcml::guard {

struct Role {
  std::string name;
  std::set<std::string> zones;
  std::set<std::string> classifications;
  std::uint32_t max_gpus = 0;
  // Absent: any partition.
  std::optional<std::set<std::string>> partitions;
  int line = 0;

  friend bool operator==(const Role&, const Role&) = default;
};

enum class BindingKind { kUser, kGroup, kAccount };

struct Binding {
  BindingKind kind = BindingKind::kUser;
  std::string name;
  std::vector<std::string> roles;
  int line = 0;

  friend bool operator==(const Binding&, const Binding&) = default;
};

enum class UnknownDatasets { kDeny, kAllow };

class Policy {
 public:
  // Where it came from (a path), used in messages.
  const std::string& source() const { return source_; }
  // SHA-256 (lower-case hex) of the exact text parsed: names this policy in
  // the audit log and the slurmd log, so a decision can be tied to the file.
  const std::string& sha256() const { return sha256_; }
  const std::map<std::string, std::string>& zones() const { return zones_; }  // name -> description
  // The zones whose `nodes` ([zones.<name>] nodes = ["node[1-4]", ...])
  // name this node; empty when no zone names it.
  std::vector<std::string> ZonesOfNode(std::string_view node) const;
  bool names_nodes() const { return !zone_nodes_.empty(); }
  // Every entry, in path order (views valid while this Policy lives).
  DatasetRange datasets() const { return datasets_.all(); }
  const DatasetTable& dataset_table() const { return datasets_; }
  const std::map<std::string, Role>& roles() const { return roles_; }
  const std::vector<Binding>& bindings() const { return bindings_; }
  const std::optional<std::string>& default_role() const { return default_role_; }
  UnknownDatasets unknown_datasets() const { return unknown_datasets_; }
  // [view] roots: directories that hold only data. The step's view covers
  // each root whole (one mount) instead of each entry below it.
  const std::vector<std::string>& view_roots() const { return view_roots_; }
  // Whether any binding names a group (a decision then needs the user's
  // group names).
  bool binds_groups() const { return !group_roles_.empty(); }
  // Whether any binding names an account (a decision then needs to know that
  // slurmctld enforces associations).
  bool binds_accounts() const { return !account_roles_.empty(); }

  // The most specific entry containing `canonical` (an absolute, resolved
  // path). Cost: O(path depth), independent of the entry count.
  std::optional<DatasetEntry> MatchDataset(std::string_view canonical) const;

  // The entries strictly below the directory `canonical` ("/a" holds "/a/b"
  // and the prefix entry "/a/c-*", not "/a" itself nor "/ab"): reading the
  // directory reads them too. A range of datasets(). Cost: O(log n).
  DatasetRange EntriesBelow(std::string_view canonical) const;

  // Whether a binding gives `role` to this user, one of these groups or this
  // account. An unknown account (nullopt, the submit-side advisory check)
  // counts as bound when any account binding names the role.
  bool IsBound(const std::string& role, const std::string& user,
               const std::vector<std::string>& groups,
               const std::optional<std::string>& account) const;
  // Whether a user or group binding (no account binding) gives `role`.
  bool IsBoundToPerson(const std::string& role, const std::string& user,
                       const std::vector<std::string>& groups) const;

 private:
  friend Result<Policy> ParsePolicy(std::string_view text, std::string_view source);
  friend class PolicyParser;  // ParsePolicy's steps (policy.cpp)
  friend class PolicyCodec;   // the compiled cache's format (policy_cache.cpp)
  // The binding indexes, built after parsing and after loading.
  void BuildLookups();

  std::string source_;
  std::string sha256_;
  std::map<std::string, std::string> zones_;
  std::map<std::string, std::vector<std::string>> zone_nodes_;  // zone -> host patterns
  DatasetTable datasets_;
  std::map<std::string, Role> roles_;
  std::vector<Binding> bindings_;
  std::optional<std::string> default_role_;
  UnknownDatasets unknown_datasets_ = UnknownDatasets::kDeny;
  std::vector<std::string> view_roots_;

  // Built by BuildLookups.
  std::unordered_map<std::string, std::set<std::string>> user_roles_, group_roles_, account_roles_;
  std::set<std::string> account_bound_roles_;
};

// Parses policy text; `source` names it in errors ("<source>:<line>: ...").
Result<Policy> ParsePolicy(std::string_view text, std::string_view source);

// Opens `path`, checks that the file and every directory above it are owned by
// root and not writable by group or others (a world-writable directory with
// the sticky bit, such as /tmp, is accepted), then parses it. The checks are
// made on the opened descriptor, so the file checked is the file read.
// `required_owner` is 0 in production; tests pass their own uid.
Result<Policy> LoadPolicyFile(const std::string& path, unsigned required_owner = 0);

// LoadPolicyFile with the compiled cache in `cache_dir` (the policy_cache=
// directory; "" for none: parse every time). The policy file is opened,
// checked and read exactly as LoadPolicyFile does, and its text hashed; then
// the cache of that digest is used if it is trustworthy: a regular file (not
// a symlink) owned by root (or `required_owner`) and writable by nobody else,
// in a directory with the same properties, of this format version, recording
// that digest, whole and intact. Otherwise the text is parsed and, if it
// parses and this process runs as `required_owner`, the cache written
// (atomically, with the policy file's read bits; `cache_dir` created 0755 if
// absent).
// The result is the Policy ParsePolicy would give, errors included: a policy
// that does not parse is never cached. A cache that cannot be used or
// written never fails the load: `cache_note`, when given, gets why (empty
// when the cache was used, or written without trouble).
Result<Policy> LoadPolicyCached(const std::string& path, const std::string& cache_dir,
                                unsigned required_owner = 0, std::string* cache_note = nullptr);

}  // namespace hpcml::guard
