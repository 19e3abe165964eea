// Access control inside a job the guard (spank/) has approved.
//
// The guard hands the task HPCML_ZONE, HPCML_ROLE, HPCML_DATASETS (canonical
// paths, comma-separated; a directory covers everything below it) and
// HPCML_CLASSIFICATIONS (the role's readable classifications); the contract is
// common/job_env.hpp.
// HPCML_ZONE being present at all means "inside a guarded job"; then every
// feature set this library opens or writes, and every file it reads data from
// or exports to, must be approved, in the job's zone and of an allowed
// classification. Nothing in the library or the CLI switches this off; with no
// HPCML_ZONE (a workstation, CI) nothing is checked.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml::featurecache {

struct AccessContext {
  bool guarded = false;
  std::string zone;
  std::string role;
  std::vector<std::string> datasets;                        // canonical paths
  std::optional<std::vector<std::string>> classifications;  // unset: not restricted

  // Reads the HPCML_* variables now (not cached: tests change them).
  static AccessContext FromEnvironment();
};

// Absolute, symlink-free path. When must_exist is false the file itself may
// be missing (a feature set about to be created): its directory is resolved.
Result<std::string> CanonicalPath(const std::string& path, bool must_exist);

// Whether `canonical` is one of the approved paths or below an approved
// directory (component-wise: /data/ae does not cover /data/aex).
bool PathApproved(const std::vector<std::string>& approved, std::string_view canonical);

// Inside a guarded job: PermissionDenied unless `canonical` is approved.
// `what` says what is being done ("open feature set", "read CSV").
Status CheckPath(const AccessContext& ctx, const std::string& canonical, std::string_view what);

// Inside a guarded job: PermissionDenied unless the zone matches HPCML_ZONE
// and (when HPCML_CLASSIFICATIONS is set) the classification is listed.
Status CheckLabels(const AccessContext& ctx, const std::string& canonical, std::string_view zone,
                   std::string_view classification);

}  // namespace hpcml::featurecache
