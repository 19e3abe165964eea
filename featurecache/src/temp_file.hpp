// TempFile: a file written under a temporary name and put in place with one
// rename(2) (writer.hpp, steps 2 to 4): the copy of the set file, and the
// file of the new version.
//
// Contract: a TempFile owns its temporary *name* from construction, before
// the file need exist: until Rename() succeeds, Discard() or destruction
// unlinks whatever is there (nothing, if it was never created); after
// Rename() the file is the final name's and nothing is unlinked. Close any
// handle on the file first. Move-only; used by one thread.
#pragma once

#include <sys/stat.h>

#include <string>

#include "hpcml/common/status.hpp"

namespace hpcml::featurecache {

class TempFile {
 public:
  TempFile() = default;
  TempFile(std::string temp_path, std::string final_path)
      : temp_(std::move(temp_path)), final_(std::move(final_path)) {}
  ~TempFile() { Discard(); }
  TempFile(TempFile&& o) noexcept;
  TempFile& operator=(TempFile&& o) noexcept;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  // The temporary name; empty once renamed or discarded.
  const std::string& path() const { return temp_; }
  const std::string& final_path() const { return final_; }

  // Creates the temporary file (O_EXCL) as a copy of `src`, whose stat(2)
  // is `st`: st's mode, and st's owner where the writer may set it (root
  // adding a version to a user's file). Reflink where the file system can
  // (no bytes copied), else copy_file_range(2), else read and write.
  Status CopyFrom(const std::string& src, const struct stat& st) const;

  // fsync(2) of the file: its bytes are durable before its final name is.
  Status Sync() const;
  // rename(2) onto final_path() ("rename to <final>" on failure, the
  // temporary name still owned). Syncing the directory is the caller's.
  Status Rename();
  // Unlinks the temporary file unless renamed; idempotent.
  void Discard();

 private:
  std::string temp_, final_;
};

}  // namespace hpcml::featurecache
