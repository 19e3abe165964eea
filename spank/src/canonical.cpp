#include "hpcml/guard/canonical.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>

#include <fmt/format.h>

#include "hpcml/common/unique_fd.hpp"

// How the user's view is taken: Linux keeps credentials per thread, and the
// raw setgroups/setresgid/setresuid system calls change only the calling
// thread (glibc's wrappers change every thread of the process). The calling
// thread takes the user's groups, gid and uid as its *effective* ids for the
// openat2 calls only, then takes root's back: its real and saved uid stay 0,
// which is what allows the way back, and an effective uid other than 0 clears
// its effective capabilities meanwhile, so the kernel checks every directory
// as it would for the user. slurmstepd does the same around its own work as
// the user (with the process-wide calls). A resolver thread that dropped to
// the user for good cost 0.45 ms more per step here (its 8 MiB stack, its
// malloc arena, TLB shootdowns after it ended), a forked child more still.
//
// RESOLVE_NO_MAGICLINKS refuses /proc's magic links (/proc/self/fd/N,
// /proc/self/cwd, ...): they would name this root process's open files.

namespace hpcml::guard {
namespace {

#if defined(SYS_setresuid32)  // 32-bit x86: the 16-bit calls have the plain names
constexpr long kSetgroups = SYS_setgroups32, kSetresgid = SYS_setresgid32,
               kSetresuid = SYS_setresuid32;
#else
constexpr long kSetgroups = SYS_setgroups, kSetresgid = SYS_setresgid, kSetresuid = SYS_setresuid;
#endif

// An O_PATH descriptor of `path` resolved by the kernel with this thread's
// credentials.
Result<UniqueFd> OpenPath(const std::string& path) {
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how);
  if (fd < 0) {
    if (errno == ELOOP)
      return InvalidArgument("{}: a symlink loop, or a /proc link to an open file", path);
    return ErrnoError(path, errno);
  }
  return UniqueFd(static_cast<int>(fd));
}

// The absolute path the kernel holds for an open descriptor.
Result<std::string> PathOf(int fd, const std::string& requested) {
  char link[64], buf[PATH_MAX];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = ::readlink(link, buf, sizeof buf);
  if (n < 0) return ErrnoError(fmt::format("{} (reading {})", requested, link), errno);
  if (static_cast<std::size_t>(n) >= sizeof buf)
    return InvalidArgument("{}: path too long", requested);
  return std::string(buf, static_cast<std::size_t>(n));
}

// Runs fn() with the user's groups, gid and uid as this thread's effective
// credentials (see the top of the file); root's are back when it returns. A
// failure to take the user's credentials or to give them back, or an
// exception from fn (caught here, after root's credentials are back), is an
// error: the caller denies.
template <typename Fn>
Status AsUser(const UserCredentials& user, Fn fn) {
  const gid_t saved_egid = ::getegid();
  int n = ::getgroups(0, nullptr);
  std::vector<gid_t> saved_groups(static_cast<std::size_t>(n > 0 ? n : 0));
  if (n > 0 && ::getgroups(n, saved_groups.data()) != n)
    return ErrnoError("reading this thread's groups", errno);

  int stage = 0;  // how many of the groups, the gid and the uid were taken
  int take_errno = 0;
  auto take = [&](long sys, auto... args) {
    if (take_errno != 0) return;
    if (::syscall(sys, args...) == 0) {
      ++stage;
    } else {
      take_errno = errno;
    }
  };
  take(kSetgroups, user.groups.size(), user.groups.data());
  take(kSetresgid, -1, user.gid, -1);
  take(kSetresuid, -1, user.uid, -1);
  if (take_errno == 0 && static_cast<uid_t>(::syscall(SYS_geteuid)) != user.uid) take_errno = EPERM;
  bool fn_threw = false;
  if (take_errno == 0) {
    try {
      fn();
    } catch (...) {
      fn_threw = true;  // root's credentials come back first
    }
  }

  // Back in the reverse order: root's uid first, which gives back the
  // capabilities the other two calls need.
  int back_errno = 0;
  if (stage >= 3 && ::syscall(kSetresuid, -1, 0, -1) != 0) back_errno = errno;
  if (stage >= 2 && ::syscall(kSetresgid, -1, saved_egid, -1) != 0 && !back_errno)
    back_errno = errno;
  if (stage >= 1 && ::syscall(kSetgroups, saved_groups.size(), saved_groups.data()) != 0 &&
      !back_errno)
    back_errno = errno;
  if (back_errno != 0) return ErrnoError("taking root's credentials back", back_errno);
  if (take_errno != 0)
    return ErrnoError(fmt::format("taking the credentials of uid {}", user.uid), take_errno);
  if (fn_threw) return Internal("error while resolving paths as uid {}", user.uid);
  return Status::Ok();
}

}  // namespace

Result<std::string> CanonicalPath(const std::string& path) {
  HPCML_ASSIGN_OR_RETURN(UniqueFd fd, OpenPath(path));
  return PathOf(fd.get(), path);
}

Result<std::vector<Result<ResolvedPath>>> CanonicalPathsAsUser(
    const UserCredentials& user, const std::vector<std::string>& paths) {
  std::vector<Result<UniqueFd>> fds;
  if (paths.empty()) return std::vector<Result<ResolvedPath>>{};
  fds.reserve(paths.size());
  if (::geteuid() != 0) {
    if (::geteuid() != user.uid)
      return PermissionDenied("cannot resolve paths as uid {}: not running as root", user.uid);
    for (const std::string& p : paths) fds.push_back(OpenPath(p));
  } else {
    for (std::size_t i = 0; i < paths.size(); ++i) fds.emplace_back(Internal("not resolved"));
    HPCML_RETURN_IF_ERROR(AsUser(user, [&] {
      for (std::size_t i = 0; i < paths.size(); ++i) fds[i] = OpenPath(paths[i]);
    }));
  }
  std::vector<Result<ResolvedPath>> out;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (!fds[i].ok()) {
      out.push_back(fds[i].status());
      continue;
    }
    auto path = PathOf(fds[i]->get(), paths[i]);
    if (!path.ok()) {
      out.push_back(path.status());
      continue;
    }
    out.push_back(ResolvedPath{std::move(path).value(), std::move(fds[i]).value()});
  }
  return out;
}

}  // namespace hpcml::guard
