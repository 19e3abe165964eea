#include "hpcml/spank/canonical.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

// Why a thread of its own: the kernel must resolve the path with the user's
// permissions (a directory the user cannot search does not resolve), and
// slurmstepd, which calls this as root, must keep its own credentials. Linux
// keeps credentials per thread; glibc's setgroups/setresgid/setresuid change
// every thread of the process (it signals each one), so the resolver thread
// makes the raw system calls, which change only the calling thread. It drops
// to the user for good (real, effective and saved ids and the groups; root's
// capabilities go with the uid) and ends when done, so nothing else ever
// runs with its credentials. A forked child did the same with 0.6 ms more on
// every step launch. /proc/self names the process, whose other threads stay
// root, so paths through it do not resolve for the user: a denial.

namespace hpcml::guard {
namespace {

#if defined(SYS_setresuid32)  // 32-bit x86: the 16-bit calls have the plain names
constexpr long kSetgroups = SYS_setgroups32, kSetresgid = SYS_setresgid32,
               kSetresuid = SYS_setresuid32;
#else
constexpr long kSetgroups = SYS_setgroups, kSetresgid = SYS_setresgid, kSetresuid = SYS_setresuid;
#endif

// Shared by the caller and the resolver thread, which may outlive the call
// (a hung file system): whoever finishes last frees it.
struct Resolution {
  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  int cred_errno = 0;  // non-zero: the credentials could not be taken
  std::vector<Result<std::string>> results;
};

// Runs on the resolver thread only.
void ResolveAsUser(const UserCredentials& user, const std::vector<std::string>& paths,
                   Resolution* out) {
  std::vector<Result<std::string>> results;
  int cred_errno = 0;
  if (::syscall(kSetgroups, user.groups.size(), user.groups.data()) != 0 ||
      ::syscall(kSetresgid, user.gid, user.gid, user.gid) != 0 ||
      ::syscall(kSetresuid, user.uid, user.uid, user.uid) != 0) {
    cred_errno = errno;
  } else if (static_cast<uid_t>(::syscall(SYS_geteuid)) != user.uid) {
    cred_errno = EPERM;
  } else {
    for (const std::string& path : paths) results.push_back(CanonicalPath(path));
  }
  std::lock_guard lock(out->mu);
  out->cred_errno = cred_errno;
  out->results = std::move(results);
  out->done = true;
  out->done_cv.notify_all();
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
  auto shared = std::make_shared<Resolution>();
  try {
    // The thread owns copies of its inputs and a reference to the result.
    std::thread([shared, user, paths] {
      try {
        ResolveAsUser(user, paths, shared.get());
      } catch (...) {
        std::lock_guard lock(shared->mu);
        shared->cred_errno = ENOMEM;
        shared->done = true;
        shared->done_cv.notify_all();
      }
    }).detach();
  } catch (const std::system_error& e) {
    return Internal("cannot start the path resolver thread: {}", e.what());
  }
  std::unique_lock lock(shared->mu);
  if (!shared->done_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                [&] { return shared->done; }))
    return Unavailable("resolving datasets as uid {} did not finish within {} ms", user.uid,
                       timeout_ms);
  if (shared->cred_errno != 0)
    return ErrnoError(fmt::format("taking the credentials of uid {}", user.uid),
                      shared->cred_errno);
  return std::move(shared->results);
}

}  // namespace hpcml::guard
