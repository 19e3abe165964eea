#include "hpcml/common/unique_fd.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace hpcml {

Status UniqueFd::Close() {
  if (!valid()) return Status::Ok();
  int fd = release();
  if (::close(fd) != 0) return ErrnoError("close", errno);
  return Status::Ok();
}

Result<UniqueFd> OpenFd(const std::string& path, int flags, unsigned mode) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoError(path, errno);
  return UniqueFd(fd);
}

}  // namespace hpcml
