#include "hpcml/spank/mount_view.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "hpcml/common/unique_fd.hpp"

namespace hpcml::guard {
namespace {

std::size_t Depth(std::string_view path) {
  return static_cast<std::size_t>(std::count(path.begin(), path.end(), '/'));
}

std::string_view ParentOf(std::string_view p) {
  std::size_t slash = p.rfind('/');
  return slash == 0 || slash == std::string_view::npos ? std::string_view("/") : p.substr(0, slash);
}

// mkdir -p of `dir`'s missing components (inside a cover's tmpfs).
Status MakeDirectories(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0) return Status::Ok();
  if (dir != "/") HPCML_RETURN_IF_ERROR(MakeDirectories(std::string(ParentOf(dir))));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoError("mkdir " + dir, errno);
  return Status::Ok();
}

}  // namespace

std::vector<std::string> ListDirectoryNames(const std::string& dir) {
  std::vector<std::string> names;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return names;
  while (const dirent* e = ::readdir(d.get())) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  return names;
}

std::vector<MountStep> PlanDatasetView(const Policy& policy,
                                       const std::vector<std::string>& allowed,
                                       const ListDirectory& list) {
  // path -> kind; an exposed path is never also covered.
  std::map<std::string, MountStep::Kind> steps;
  auto cover = [&](std::string path) { steps.emplace(std::move(path), MountStep::Kind::kCover); };
  for (const DatasetEntry& e : policy.datasets()) {
    if (!e.string_prefix) {
      cover(e.path);
      continue;
    }
    std::string dir(ParentOf(e.path));
    std::string_view stem = std::string_view(e.path).substr(dir == "/" ? 1 : dir.size() + 1);
    for (const std::string& name : list(dir))
      if (name.starts_with(stem)) cover(dir == "/" ? "/" + name : dir + "/" + name);
  }
  for (const std::string& path : allowed) steps[path] = MountStep::Kind::kExpose;
  std::vector<MountStep> out;
  for (auto& [path, kind] : steps) out.push_back(MountStep{kind, path});
  std::stable_sort(out.begin(), out.end(), [](const MountStep& a, const MountStep& b) {
    return Depth(a.path) < Depth(b.path);
  });
  return out;
}

Status ApplyDatasetView(const std::vector<MountStep>& steps) {
  if (::unshare(CLONE_NEWNS) != 0) return ErrnoError("enforce=mount: unshare(CLONE_NEWNS)", errno);
  // Slave: the node's later mounts still reach the task, the task's never
  // reach the node.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0)
    return ErrnoError("enforce=mount: making / a slave mount", errno);
  // What will be exposed is opened before the covers hide it, and after the
  // unshare: a bind mount's source must be a mount of this namespace.
  std::map<std::string, UniqueFd> sources;
  for (const MountStep& s : steps) {
    if (s.kind != MountStep::Kind::kExpose) continue;
    int fd = ::open(s.path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return ErrnoError("enforce=mount: open " + s.path, errno);
    sources.emplace(s.path, UniqueFd(fd));
  }

  std::vector<std::string> tmpfs_covers;
  for (const MountStep& s : steps) {
    const char* path = s.path.c_str();
    struct stat st {};
    if (s.kind == MountStep::Kind::kCover) {
      if (::stat(path, &st) != 0) continue;  // absent here, or hidden by a cover above
      if (S_ISDIR(st.st_mode)) {
        if (::mount("hpcml-guard", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                    "mode=0755,size=64k") != 0)
          return ErrnoError(fmt::format("enforce=mount: covering {}", s.path), errno);
        tmpfs_covers.push_back(s.path);
      } else if (::mount("/dev/null", path, nullptr, MS_BIND, nullptr) != 0) {
        return ErrnoError(fmt::format("enforce=mount: covering {}", s.path), errno);
      }
      continue;
    }
    const UniqueFd& src = sources.at(s.path);
    if (::fstat(src.get(), &st) != 0) return ErrnoError("enforce=mount: stat " + s.path, errno);
    // The mount point: exists unless a cover above hid it; then it is made
    // inside that cover's (still writable) tmpfs.
    struct stat here {};
    if (::lstat(path, &here) != 0) {
      HPCML_RETURN_IF_ERROR(MakeDirectories(std::string(ParentOf(s.path))));
      if (S_ISDIR(st.st_mode)) {
        if (::mkdir(path, 0755) != 0) return ErrnoError("enforce=mount: mkdir " + s.path, errno);
      } else {
        int fd = ::open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0) return ErrnoError("enforce=mount: creating " + s.path, errno);
        ::close(fd);
      }
    }
    std::string from = fmt::format("/proc/self/fd/{}", src.get());
    if (::mount(from.c_str(), path, nullptr, MS_BIND | MS_REC, nullptr) != 0)
      return ErrnoError(fmt::format("enforce=mount: exposing {}", s.path), errno);
  }
  for (const std::string& path : tmpfs_covers) {
    if (::mount(nullptr, path.c_str(), nullptr,
                MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                "mode=0755,size=64k") != 0)
      return ErrnoError(fmt::format("enforce=mount: making the cover of {} read-only", path),
                        errno);
  }
  return Status::Ok();
}

}  // namespace hpcml::guard
