// The owners of the C library's file handles, each an Owner (owner.hpp):
// UniqueFd of a POSIX file descriptor (with a Close that reports the error),
// UniqueDir of a directory stream (opendir, fdopendir), UniqueFile of a
// stdio stream (fopen, popen aside).
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdio>

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

using UniqueDir = Owner<CloseWith<DIR*, ::closedir>>;
using UniqueFile = Owner<CloseWith<std::FILE*, std::fclose>>;

// open(2) with O_CLOEXEC added; the error names the path.
Result<UniqueFd> OpenFd(const std::string& path, int flags, unsigned mode = 0644);

}  // namespace hpcml
