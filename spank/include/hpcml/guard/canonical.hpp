// Canonical dataset paths as the user sees them: absolute, with every symlink
// and '..' resolved by the kernel under the user's own credentials, so a path
// the user cannot traverse does not resolve and a symlink cannot point the
// check at one place and the job at another.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/common/unique_fd.hpp"

namespace hpcml::guard {

// The absolute path the kernel resolves `path` to with this thread's
// credentials (openat2 with O_PATH, then the descriptor's path): symlinks and
// '..' resolved, /proc's magic links (/proc/self/fd/N and the like) refused.
Result<std::string> CanonicalPath(const std::string& path);

// IsWithin (path is dir or below it) is hpcml::IsWithin in common/strings.hpp.

struct UserCredentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary
};

// A path as the user resolved it: the O_PATH descriptor the kernel gave and
// the absolute path it names. The descriptor is what was decided on: use it,
// never the path, to reach the object again (mount_view.hpp).
struct ResolvedPath {
  std::string path;
  UniqueFd fd;
};

// Resolves each path as the user. Called by root in slurmstepd: the calling
// thread takes the user's groups, gid and uid as its effective credentials
// for the lookups only (see canonical.cpp) and has root's back on return;
// other threads never change. When this process already runs as the user
// (not root), resolves in-process. Results are in input order; each is a
// resolution or the error for that path. An error for the whole call
// (credentials that could not be taken or given back) means: deny.
Result<std::vector<Result<ResolvedPath>>> CanonicalPathsAsUser(
    const UserCredentials& user, const std::vector<std::string>& paths);

}  // namespace hpcml::guard
