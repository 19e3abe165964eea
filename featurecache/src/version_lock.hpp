// VersionLock: one writer at a time per feature set (writer.hpp, step 1), an
// exclusive flock(2) on the set's lock file (SetPaths::LockFile).
//
// Contract: held from a successful Acquire until Release() or destruction,
// which close the descriptor and so drop the flock (a killed writer's lock
// goes with its process). The lock file is never deleted: a writer that
// deleted it could leave two others locking different inodes. Move-only;
// used by one thread.
#pragma once

#include <string>

#include "hpcml/common/status.hpp"
#include "hpcml/common/unique_fd.hpp"

namespace hpcml::featurecache {

class VersionLock {
 public:
  VersionLock() = default;

  // Opens (creating, mode 0666 less the umask) `lock_file` and takes the
  // lock, polling every 20 ms for up to `timeout_s`. Unavailable, naming
  // `set_path` and the lock file, when another writer holds it that long.
  static Result<VersionLock> Acquire(const std::string& lock_file, const std::string& set_path,
                                     double timeout_s);

  bool held() const { return fd_.valid(); }
  void Release() { fd_.reset(); }

 private:
  explicit VersionLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace hpcml::featurecache
