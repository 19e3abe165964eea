// SetPaths: the names of one feature set's files (writer.hpp), formatted in
// one place, and the two directory chores that go with them:
//   <dir>/<base>                      the published set file
//   <dir>/.<base>.lock                the writers' lock (VersionLock)
//   <dir>/.<base>.tmp-<pid>-<hex>     a writer's copy of the set file
//   <dir>/<base>.d/                   the version files (VersionFileName)
//   <dir>/<base>.d/.vN.h5.tmp-<pid>-<hex>   a version file being written
// Temporary names carry the pid and 32 random bits, so two processes never
// pick the same one. Not thread-safe to mutate; const use is.
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>

#include "hpcml/common/status.hpp"

namespace hpcml::featurecache {

struct SetPaths {
  // `path` as the caller named it (messages name it); `canonical` the
  // resolved path of the set file.
  static SetPaths For(std::string path, std::string canonical);

  std::string path;
  std::string canonical;
  std::string dir, base;  // canonical's directory and file name
  std::string vdir;       // <set>.d: the version files

  std::string LockFile() const;
  // A fresh temporary name for the copy of the set file.
  std::string NewSetTemp() const;
  // A fresh temporary name for the file of `version` ("v3").
  std::string NewVersionTemp(const std::string& version) const;
  // Where the file of `version` is published.
  std::string VersionFile(const std::string& version) const;

  // Deletes the temporary files that killed writers left (set copies in
  // dir, version files in vdir). Call only holding the lock: only lock
  // holders create them, so any that exist then are stale. Best effort.
  void RemoveStaleTemps() const;

  // Creates vdir when missing (a directory of its own, never a link) and
  // syncs dir. When the set file exists (`published`), vdir gets its owner
  // where the writer may set it (root adding a version to a user's set) and
  // its mode, searchable wherever readable. FailedPrecondition when vdir
  // exists but is not a directory.
  Status MakeVersionDir(const std::optional<struct stat>& published) const;
};

}  // namespace hpcml::featurecache
