#include "set_paths.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "hpcml/common/fs.hpp"
#include "hpcml/common/unique_fd.hpp"
#include "hpcml/featurecache/format.hpp"

namespace hpcml::featurecache {
namespace {

std::string RandomSuffix() {
  std::random_device rd;
  return fmt::format("{}-{:08x}", ::getpid(), rd());
}

// Unlinks the entries of `in` that `stale` picks; a missing directory has none.
template <typename Pred>
void RemoveIn(const std::string& in, Pred stale) {
  UniqueDir d(::opendir(in.c_str()));
  if (!d) return;
  while (struct dirent* ent = ::readdir(d.get())) {
    if (stale(ent->d_name)) ::unlinkat(::dirfd(d.get()), ent->d_name, 0);
  }
}

}  // namespace

SetPaths SetPaths::For(std::string path, std::string canonical) {
  SetPaths p;
  p.path = std::move(path);
  p.canonical = std::move(canonical);
  std::filesystem::path c(p.canonical);
  p.dir = c.parent_path().string();
  p.base = c.filename().string();
  p.vdir = (std::filesystem::path(p.dir) / (p.base + ".d")).string();
  return p;
}

std::string SetPaths::LockFile() const {
  return (std::filesystem::path(dir) / ("." + base + ".lock")).string();
}

std::string SetPaths::NewSetTemp() const {
  return (std::filesystem::path(dir) / ("." + base + ".tmp-" + RandomSuffix())).string();
}

std::string SetPaths::NewVersionTemp(const std::string& version) const {
  return fmt::format("{}/.{}.h5.tmp-{}", vdir, version, RandomSuffix());
}

std::string SetPaths::VersionFile(const std::string& version) const {
  return (std::filesystem::path(dir) / VersionFileName(base, version)).string();
}

void SetPaths::RemoveStaleTemps() const {
  const std::string prefix = "." + base + ".tmp-";
  RemoveIn(dir, [&](const char* n) { return std::strncmp(n, prefix.c_str(), prefix.size()) == 0; });
  RemoveIn(vdir,
           [](const char* n) { return n[0] == '.' && std::strstr(n, ".h5.tmp-") != nullptr; });
}

Status SetPaths::MakeVersionDir(const std::optional<struct stat>& published) const {
  struct stat st;
  if (::lstat(vdir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      return FailedPrecondition("{}: exists but is not a directory (it holds the versions)", vdir);
    return Status::Ok();
  }
  if (errno != ENOENT) return ErrnoError(vdir, errno);
  if (::mkdir(vdir.c_str(), 0777) != 0) return ErrnoError("mkdir " + vdir, errno);
  if (published) {
    if (::chown(vdir.c_str(), published->st_uid, published->st_gid) != 0) { /* not permitted */
    }
    ::chmod(vdir.c_str(), (published->st_mode & 0777) | ((published->st_mode & 0444) >> 2));
  }
  return SyncDirectory(dir);
}

}  // namespace hpcml::featurecache
