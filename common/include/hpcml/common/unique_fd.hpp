// UniqueFd: the single owner of a POSIX file descriptor.
//
// Move-only; closes the descriptor on destruction. Not thread-safe: one owner
// uses it at a time.
#pragma once

#include <string>

#include "hpcml/common/status.hpp"

namespace hpcml {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() { reset(); }

  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }

  // Gives up ownership without closing.
  int release() noexcept {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes the held descriptor (errors on close are ignored: nothing useful
  // can be done in a destructor) and takes `fd`.
  void reset(int fd = -1) noexcept;

  // Closes and reports the result of close(2): use where a failed close
  // means lost data (a file just written).
  Status Close();

 private:
  int fd_ = -1;
};

// open(2) with O_CLOEXEC added; the error names the path.
Result<UniqueFd> OpenFd(const std::string& path, int flags, unsigned mode = 0644);

}  // namespace hpcml
