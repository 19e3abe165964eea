// Canonical dataset paths as the user sees them: absolute, with every symlink
// and '..' resolved by the kernel under the user's own credentials, so a path
// the user cannot traverse does not resolve and a symlink cannot point the
// check at one place and the job at another.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "hpcml/common/status.hpp"

namespace hpcml::guard {

// realpath(3) in this process, with its credentials.
Result<std::string> CanonicalPath(const std::string& path);

struct UserCredentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary
};

// Resolves each path as the user: a short-lived thread takes the user's
// groups, gid and uid (for itself only, see canonical.cpp) and calls
// realpath(3) on each path. Used by root in slurmstepd; the caller's
// credentials do not change. A resolver that has not answered within
// `timeout_ms` (a hung file system) is abandoned and the call fails. When this
// process already runs as the user (and is not root), resolves in-process.
// Results are in input order; each is a path or the error for that path.
Result<std::vector<Result<std::string>>> CanonicalPathsAsUser(const UserCredentials& user,
                                                              const std::vector<std::string>& paths,
                                                              int timeout_ms = 10000);

}  // namespace hpcml::guard
