// enforce=mount: the task's own view of the datasets. Every dataset entry of
// the policy is covered (a directory by an empty tmpfs, a file by /dev/null),
// then each dataset the step was allowed is bind-mounted back at its own path,
// so code that ignores HPCML_DATASETS still reads nothing else under the
// policy's entries. Paths outside every entry are untouched.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/spank/policy.hpp"

namespace hpcml::guard {

struct MountStep {
  enum class Kind { kCover, kExpose };
  Kind kind = Kind::kCover;
  std::string path;

  friend bool operator==(const MountStep&, const MountStep&) = default;
};

// The names in a directory (no "." or ".."); empty if it cannot be read.
using ListDirectory = std::function<std::vector<std::string>(const std::string& dir)>;

// The steps, in the order to apply them: shallower paths first, so an exposed
// path inside a cover is mounted on top of it, and an entry nested inside an
// exposed directory is covered again. A path both covered and exposed is only
// exposed. A prefix entry ("/data/ae/fraud-*") covers each name in its
// directory that starts with it (`list` is asked for the names). `allowed`
// are canonical paths the decision allowed.
std::vector<MountStep> PlanDatasetView(const Policy& policy,
                                       const std::vector<std::string>& allowed,
                                       const ListDirectory& list);

// The directory lister of the real file system, for PlanDatasetView.
std::vector<std::string> ListDirectoryNames(const std::string& dir);

// Applies the plan to the calling process: a new mount namespace
// (unshare(CLONE_NEWNS)) whose mounts do not propagate back to the node, then
// the steps; covers are made read-only at the end. A step whose path does not
// exist in this view (already hidden by a cover above it) is skipped. Needs
// CAP_SYS_ADMIN: call as root in the task process before exec
// (task_init_privileged). On error the process's view is half-built: the
// caller must not run the task.
Status ApplyDatasetView(const std::vector<MountStep>& steps);

}  // namespace hpcml::guard
