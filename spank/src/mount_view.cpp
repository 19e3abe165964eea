#include "hpcml/guard/mount_view.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "hpcml/common/strings.hpp"
#include "hpcml/common/unique_fd.hpp"

namespace hpcml::guard {
namespace {

using PathSet = std::set<std::string, std::less<>>;

std::string_view ParentOf(std::string_view p) {
  std::size_t slash = p.rfind('/');
  return slash == 0 || slash == std::string_view::npos ? std::string_view("/") : p.substr(0, slash);
}

// Whether `p` or one of its ancestors is in `set`.
bool SelfOrAncestorIn(std::string_view p, const PathSet& set) {
  for (std::string_view cur = p;; cur = ParentOf(cur)) {
    if (set.contains(cur)) return true;
    if (cur == "/") return false;
  }
}
bool StrictAncestorIn(std::string_view p, const PathSet& set) {
  return p != "/" && SelfOrAncestorIn(ParentOf(p), set);
}
bool IsStrictlyBelow(std::string_view p, std::string_view dir) {
  return p != dir && IsWithin(p, dir);
}

// The paths that no other path of the list contains, shallowest first.
std::vector<std::string> Outermost(std::vector<std::string> paths) {
  auto depth = [](const std::string& p) { return std::count(p.begin(), p.end(), '/'); };
  std::sort(paths.begin(), paths.end(), [&](const std::string& a, const std::string& b) {
    return std::pair(depth(a), std::string_view(a)) < std::pair(depth(b), std::string_view(b));
  });
  PathSet kept;
  std::vector<std::string> out;
  for (std::string& p : paths) {
    if (SelfOrAncestorIn(p, kept)) continue;
    kept.insert(p);
    out.push_back(std::move(p));
  }
  return out;
}

// `path` below `dir`, without the leading slash ("/a/b" below "/a" is "b").
std::string_view RelativeTo(std::string_view path, std::string_view dir) {
  return path.substr(dir == "/" ? 1 : dir.size() + 1);
}

// An O_PATH descriptor of `path` found as root with no symlink followed on
// the way; a trailing symlink is opened itself (O_NOFOLLOW).
Result<UniqueFd> OpenNoFollow(const std::string& path, int flags) {
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_NOFOLLOW | O_CLOEXEC);
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how);
  if (fd < 0) {
    if (errno == ELOOP)
      return InvalidArgument("{}: a symlink on the way (the policy's paths must be canonical)",
                             path);
    return ErrnoError(path, errno);
  }
  return UniqueFd(static_cast<int>(fd));
}

Status SetAttributes(int mount_fd, std::uint64_t attrs, unsigned flags, const std::string& what) {
  mount_attr attr{};
  attr.attr_set = attrs;
  if (::mount_setattr(mount_fd, "", AT_EMPTY_PATH | flags, &attr, sizeof attr) != 0)
    return ErrnoError(fmt::format("enforce=mount: mount attributes of {}", what), errno);
  return Status::Ok();
}

Status MoveMount(int from, int to, const std::string& what) {
  if (::move_mount(from, "", to, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    return ErrnoError(fmt::format("enforce=mount: mounting {}", what), errno);
  return Status::Ok();
}

// A read-only detached copy of what `from` (`path`) names, with its submounts.
Result<UniqueFd> ReadOnlyCopy(int from, const std::string& path) {
  int fd =
      ::open_tree(from, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
  if (fd < 0) return ErrnoError("enforce=mount: copying " + path, errno);
  UniqueFd tree(fd);
  HPCML_RETURN_IF_ERROR(SetAttributes(
      tree.get(), MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, AT_RECURSIVE, path));
  return tree;
}

// An empty tmpfs, not yet attached anywhere.
Result<UniqueFd> NewTmpfs(const std::string& what) {
  UniqueFd fs(::fsopen("tmpfs", FSOPEN_CLOEXEC));
  if (!fs) return ErrnoError("enforce=mount: fsopen(tmpfs)", errno);
  if (::fsconfig(fs.get(), FSCONFIG_SET_STRING, "mode", "0755", 0) != 0 ||
      ::fsconfig(fs.get(), FSCONFIG_SET_STRING, "size", "64k", 0) != 0 ||
      ::fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
    return ErrnoError(fmt::format("enforce=mount: a tmpfs to cover {}", what), errno);
  int mnt = ::fsmount(fs.get(), FSMOUNT_CLOEXEC,
                      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
  if (mnt < 0) return ErrnoError(fmt::format("enforce=mount: fsmount for {}", what), errno);
  return UniqueFd(mnt);
}

// Makes `rel` (a directory, or an empty file) inside the tmpfs `root`, with
// its missing parent directories. Only this process can reach the tmpfs.
Status MakeMountPoint(int root, std::string_view rel, bool dir, const std::string& what) {
  UniqueFd cur;
  int at = root;
  std::size_t start = 0;
  for (;;) {
    std::size_t slash = rel.find('/', start);
    std::string name(rel.substr(start, slash == std::string_view::npos ? rel.npos : slash - start));
    bool last = slash == std::string_view::npos;
    if (last && !dir) {
      UniqueFd f(
          ::openat(at, name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644));
      if (!f) return ErrnoError(fmt::format("enforce=mount: mount point for {}", what), errno);
      return Status::Ok();
    }
    if (::mkdirat(at, name.c_str(), 0755) != 0 && errno != EEXIST)
      return ErrnoError(fmt::format("enforce=mount: mount point for {}", what), errno);
    if (last) return Status::Ok();
    cur.reset(::openat(at, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!cur) return ErrnoError(fmt::format("enforce=mount: mount point for {}", what), errno);
    at = cur.get();
    start = slash + 1;
  }
}

bool IsDirectory(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
}

// A policy path as root, with no symlink followed: nullopt when absent or
// itself a symlink.
Result<std::optional<UniqueFd>> OpenPolicyPath(const std::string& path) {
  auto fd = OpenNoFollow(path, O_PATH);
  if (!fd.ok() && fd.status().code() == StatusCode::kNotFound) return std::optional<UniqueFd>();
  if (!fd.ok()) return fd.status().WithContext("enforce=mount");
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return ErrnoError("enforce=mount: stat " + path, errno);
  if (S_ISLNK(st.st_mode)) return std::optional<UniqueFd>();
  return std::optional<UniqueFd>(std::move(fd).value());
}

// Covers the directory `cover` (opened as `target`) with an empty tmpfs, the
// view's exposed datasets below it (their read-only `copies`, in the order of
// view.exposed) mounted back on mount points made inside it, then the tmpfs
// made read-only.
Status CoverDirectory(const DatasetView& view, const std::vector<UniqueFd>& copies,
                      const std::string& cover, int target) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd tmpfs, NewTmpfs(cover));
  std::vector<std::size_t> below;
  for (std::size_t i = 0; i < view.exposed.size(); ++i) {
    const std::string& path = view.exposed[i];
    if (!IsStrictlyBelow(path, cover)) continue;
    below.push_back(i);
    HPCML_RETURN_IF_ERROR(
        MakeMountPoint(tmpfs.get(), RelativeTo(path, cover), IsDirectory(copies[i].get()), path));
  }
  HPCML_RETURN_IF_ERROR(MoveMount(tmpfs.get(), target, cover));
  for (std::size_t i : below) {
    const std::string& path = view.exposed[i];
    std::string rel(RelativeTo(path, cover));
    UniqueFd point(::openat(tmpfs.get(), rel.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!point) return ErrnoError("enforce=mount: mount point " + path, errno);
    HPCML_RETURN_IF_ERROR(MoveMount(copies[i].get(), point.get(), path));
  }
  return SetAttributes(tmpfs.get(),
                       MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                       0, "the cover of " + cover);
}

}  // namespace

Result<std::vector<std::string>> ListDirectoryNames(const std::string& dir) {
  std::vector<std::string> names;
  auto fd = OpenNoFollow(dir, O_RDONLY | O_DIRECTORY);
  if (!fd.ok() && fd.status().code() == StatusCode::kNotFound) return names;
  if (!fd.ok()) return fd.status().WithContext("the directory of a prefix entry");
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return ErrnoError("stat " + dir, errno);
  if (st.st_uid != 0 || (st.st_mode & 022) != 0)
    return PermissionDenied(
        "{}, the directory of a prefix entry, must be root-owned and writable only by root", dir);
  UniqueDir d(::fdopendir(fd->get()));
  if (!d) return ErrnoError("opendir " + dir, errno);
  fd->release();  // the DIR owns it now
  while (const dirent* e = ::readdir(d.get())) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  return names;
}

Result<DatasetView> PlanDatasetView(const Policy& policy, const std::vector<std::string>& allowed,
                                    const ListDirectory& list) {
  std::vector<std::string> outer_allowed = Outermost(allowed);
  const PathSet allowed_set(outer_allowed.begin(), outer_allowed.end());
  // A root holds only data: covered whole, the entries below it with it.
  std::vector<std::string> candidates = policy.view_roots();
  // The entries outside every root: the table less each root's range (the
  // entries strictly below it), so a policy's entries under its roots cost
  // nothing here.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> skip;
  for (const std::string& root : policy.view_roots()) {
    DatasetRange below = policy.EntriesBelow(root);
    skip.emplace_back(below.first(), below.first() + below.size());
  }
  std::sort(skip.begin(), skip.end());
  std::vector<DatasetEntry> outside;
  std::uint32_t from = 0;
  auto take = [&](std::uint32_t to) {
    for (std::uint32_t k = from; k < to; ++k) outside.push_back(policy.dataset_table().at(k));
  };
  for (auto [a, b] : skip) {
    if (a > from) take(a);
    from = std::max(from, b);
  }
  take(static_cast<std::uint32_t>(policy.datasets().size()));
  for (const DatasetEntry& e : outside) {
    if (!e.string_prefix) {
      candidates.emplace_back(e.path);
      continue;
    }
    std::string dir(ParentOf(e.path));
    std::string_view stem = RelativeTo(e.path, dir);
    HPCML_ASSIGN_OR_RETURN(std::vector<std::string> names, list(dir));
    for (const std::string& name : names)
      if (name.starts_with(stem)) candidates.push_back(dir == "/" ? "/" + name : dir + "/" + name);
  }
  DatasetView view;
  for (std::string& c : Outermost(std::move(candidates)))
    (SelfOrAncestorIn(c, allowed_set) ? view.read_only : view.covers).push_back(std::move(c));
  const PathSet cover_set(view.covers.begin(), view.covers.end());
  for (const std::string& a : outer_allowed)
    if (StrictAncestorIn(a, cover_set)) view.exposed.push_back(a);
  return view;
}

Status ApplyDatasetView(const DatasetView& view, const std::vector<ResolvedPath>& resolved) {
  // The copies first, in the node's namespace: open_tree clones only mounts
  // of the caller's namespace, and the descriptors were resolved in it.
  std::vector<UniqueFd> copies;
  for (const std::string& path : view.exposed) {
    auto it = std::find_if(resolved.begin(), resolved.end(),
                           [&](const ResolvedPath& r) { return r.path == path; });
    if (it == resolved.end() || !it->fd)
      return Internal("enforce=mount: {} was allowed but not resolved", path);
    HPCML_ASSIGN_OR_RETURN(UniqueFd copy, ReadOnlyCopy(it->fd.get(), it->path));
    copies.push_back(std::move(copy));
  }

  if (::unshare(CLONE_NEWNS) != 0) return ErrnoError("enforce=mount: unshare(CLONE_NEWNS)", errno);
  // Slave: the node's later mounts still reach the step, the step's never
  // reach the node.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0)
    return ErrnoError("enforce=mount: making / a slave mount", errno);

  for (const std::string& path : view.read_only) {
    HPCML_ASSIGN_OR_RETURN(auto target, OpenPolicyPath(path));
    if (!target) continue;
    // The copy goes back onto the very object it was made from.
    HPCML_ASSIGN_OR_RETURN(UniqueFd copy, ReadOnlyCopy(target->get(), path));
    HPCML_RETURN_IF_ERROR(MoveMount(copy.get(), target->get(), path));
  }

  for (const std::string& cover : view.covers) {
    HPCML_ASSIGN_OR_RETURN(auto target, OpenPolicyPath(cover));
    if (!target) continue;
    if (!IsDirectory(target->get())) {
      UniqueFd null(::open_tree(AT_FDCWD, "/dev/null", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
      if (!null) return ErrnoError("enforce=mount: open_tree(/dev/null)", errno);
      HPCML_RETURN_IF_ERROR(MoveMount(null.get(), target->get(), cover));
      continue;
    }
    HPCML_RETURN_IF_ERROR(CoverDirectory(view, copies, cover, target->get()));
  }
  return Status::Ok();
}

}  // namespace hpcml::guard
