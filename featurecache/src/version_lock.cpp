#include "version_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace hpcml::featurecache {

Result<VersionLock> VersionLock::Acquire(const std::string& lock_file, const std::string& set_path,
                                         double timeout_s) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(lock_file, O_RDWR | O_CREAT, 0666));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) break;
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) return ErrnoError("flock " + lock_file, errno);
    if (std::chrono::steady_clock::now() >= deadline) {
      return Unavailable("{}: another writer holds {} (waited {:.0f} s)", set_path, lock_file,
                         timeout_s);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return VersionLock(std::move(fd));
}

}  // namespace hpcml::featurecache
