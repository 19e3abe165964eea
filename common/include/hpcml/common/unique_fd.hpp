// UniqueFd: the single owner of a POSIX file descriptor.
//
// An Owner (owner.hpp) of an int closed with close(2), plus a Close that
// reports the error.
#pragma once

#include <unistd.h>

#include <string>

#include "hpcml/common/owner.hpp"
#include "hpcml/common/status.hpp"

namespace hpcml {

class UniqueFd : public Owner<CloseWith<int, ::close, -1>> {
 public:
  using Owner::Owner;

  // Closes and reports the result of close(2): use where a failed close
  // means lost data (a file just written). The destructor and reset() ignore
  // close errors: nothing useful can be done there.
  Status Close();
};

// open(2) with O_CLOEXEC added; the error names the path.
Result<UniqueFd> OpenFd(const std::string& path, int flags, unsigned mode = 0644);

}  // namespace hpcml
