#include "hpcml/spank/canonical.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "hpcml/common/unique_fd.hpp"

// Why a child process: the kernel must resolve the path with the user's
// permissions (a directory the user cannot search does not resolve, and
// /proc/self means the user's process), and slurmstepd is multithreaded, so
// changing its own credentials is not an option. openat2(RESOLVE_*) could
// confine the walk but would still walk with root's permissions. The child
// is a plain fork; it only calls setgroups/setresgid/setresuid, realpath and
// write before _exit.

namespace hpcml::guard {
namespace {

// Wire format child -> parent: 'K' (credentials taken) or 'E' + errno, then
// per path 'P' + u32 length + bytes or 'X' + u32 errno, then 'Z'.
bool WriteAllRaw(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

void WriteRecord(int fd, char kind, std::uint32_t value, const char* bytes) {
  WriteAllRaw(fd, &kind, 1);
  WriteAllRaw(fd, &value, sizeof value);
  if (bytes) WriteAllRaw(fd, bytes, value);
}

[[noreturn]] void ChildMain(int fd, const UserCredentials& user,
                            const std::vector<std::string>& paths) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::setgroups(user.groups.size(), user.groups.data()) != 0 ||
      ::setresgid(user.gid, user.gid, user.gid) != 0 ||
      ::setresuid(user.uid, user.uid, user.uid) != 0 || ::geteuid() != user.uid) {
    WriteRecord(fd, 'E', static_cast<std::uint32_t>(errno), nullptr);
    ::_exit(1);
  }
  WriteRecord(fd, 'K', 0, nullptr);
  for (const std::string& path : paths) {
    char buf[PATH_MAX];
    if (::realpath(path.c_str(), buf)) {
      WriteRecord(fd, 'P', static_cast<std::uint32_t>(std::strlen(buf)), buf);
    } else {
      WriteRecord(fd, 'X', static_cast<std::uint32_t>(errno), nullptr);
    }
  }
  char end = 'Z';
  WriteAllRaw(fd, &end, 1);
  ::_exit(0);
}

}  // namespace

Result<std::string> CanonicalPath(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return ErrnoError(path, errno);
  return std::string(buf);
}

Result<std::vector<Result<std::string>>> CanonicalPathsAsUser(const UserCredentials& user,
                                                              const std::vector<std::string>& paths,
                                                              int timeout_ms) {
  std::vector<Result<std::string>> out;
  if (paths.empty()) return out;
  if (::geteuid() != 0) {
    if (::geteuid() != user.uid)
      return PermissionDenied("cannot resolve paths as uid {}: not running as root", user.uid);
    for (const std::string& p : paths) out.push_back(CanonicalPath(p));
    return out;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  UniqueFd rd(fds[0]), wr(fds[1]);
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork", errno);
  if (pid == 0) {
    rd.reset();
    ChildMain(wr.get(), user, paths);
  }
  wr.reset();

  // Read everything the child writes, up to the deadline.
  std::string data;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd pfd {
      rd.get(), POLLIN, 0
    };
    int r = ::poll(&pfd, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    char buf[8192];
    ssize_t n = ::read(rd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buf, static_cast<std::size_t>(n));
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return Unavailable("resolving datasets as uid {} did not finish within {} ms", user.uid,
                       timeout_ms);

  std::size_t pos = 0;
  auto take = [&](void* dst, std::size_t n) {
    if (data.size() - pos < n) return false;
    std::memcpy(dst, data.data() + pos, n);
    pos += n;
    return true;
  };
  char kind = 0;
  std::uint32_t value = 0;
  if (!take(&kind, 1) || !take(&value, sizeof value))
    return Internal("path resolver for uid {} exited without an answer", user.uid);
  if (kind == 'E')
    return ErrnoError(fmt::format("taking the credentials of uid {}", user.uid),
                      static_cast<int>(value));
  for (const std::string& p : paths) {
    if (!take(&kind, 1) || !take(&value, sizeof value))
      return Internal("path resolver for uid {}: truncated answer", user.uid);
    if (kind == 'P') {
      if (value > PATH_MAX || data.size() - pos < value)
        return Internal("path resolver for uid {}: malformed answer", user.uid);
      out.emplace_back(data.substr(pos, value));
      pos += value;
    } else if (kind == 'X') {
      out.emplace_back(ErrnoError(p, static_cast<int>(value)));
    } else {
      return Internal("path resolver for uid {}: malformed answer", user.uid);
    }
  }
  if (!take(&kind, 1) || kind != 'Z')
    return Internal("path resolver for uid {}: truncated answer", user.uid);
  return out;
}

}  // namespace hpcml::guard
