// enforce=mount (the default): the step's own view of the datasets. Each
// data root of the policy ([view] roots, else each outermost dataset entry)
// is covered (a directory by an empty,
// read-only tmpfs, a file by /dev/null), then each dataset the step was
// allowed is mounted back, read-only, at its own path, so code that ignores
// HPCML_DATASETS, and slurmstepd opening the step's stdin/stdout/stderr files,
// reach nothing else of the policy's data. Paths outside every entry are
// untouched.
//
// What is checked is what is mounted: an allowed dataset is mounted from the
// descriptor it was resolved to as the user (canonical.hpp), never by a fresh
// lookup; covers are found as root without following any symlink.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/guard/canonical.hpp"
#include "hpcml/guard/policy.hpp"

namespace hpcml::guard {

struct DatasetView {
  // Policy paths to hide: no one is below (or equal to) another, and none is
  // within an allowed path.
  std::vector<std::string> covers;
  // Policy paths within an allowed path: made read-only where they are.
  // Nothing below them is covered: the decision allows a directory only when
  // it allows every entry below it (decision.hpp).
  std::vector<std::string> read_only;
  // Allowed paths strictly below a cover, to mount back read-only: none below
  // another. An allowed path outside every policy path needs no mount.
  std::vector<std::string> exposed;

  friend bool operator==(const DatasetView&, const DatasetView&) = default;
};

// The names in a directory (no "." or "..").
using ListDirectory = std::function<Result<std::vector<std::string>>(const std::string& dir)>;

// The view for `allowed` (canonical paths the decision allowed). A prefix
// entry ("/data/ae/fraud-*") covers each name in its directory that starts
// with it (`list` is asked for the names); a directory that cannot be listed
// is an error (the caller denies), never a prefix with nothing to cover.
Result<DatasetView> PlanDatasetView(const Policy& policy, const std::vector<std::string>& allowed,
                                    const ListDirectory& list);

// The directory lister of the real file system, for PlanDatasetView: the
// directory is opened without following a symlink anywhere in its path, and
// must be root-owned and writable by nobody else (else any user could make
// names for the view to cover, one mount each, on every step).
Result<std::vector<std::string>> ListDirectoryNames(const std::string& dir);

// Builds the view for the calling thread and the processes it forks: first a
// read-only detached copy of each exposed dataset, cloned from its resolved
// descriptor in `resolved` (in the node's mount namespace), then a new mount
// namespace (unshare(CLONE_NEWNS); the node's later mounts still reach it,
// its mounts never reach the node), the read-only paths and the covers (each
// opened with no symlink followed; one that is absent, or is itself a
// symlink, is skipped: its target is a policy path of its own, or outside the
// policy), and the copies moved onto mount points made inside the covers. Needs CAP_SYS_ADMIN. On
// error the view is half-built: the caller must run no task.
Status ApplyDatasetView(const DatasetView& view, const std::vector<ResolvedPath>& resolved);

}  // namespace hpcml::guard
