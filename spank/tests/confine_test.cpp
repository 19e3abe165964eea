// The step's Landlock domain (confine.hpp), applied for real in a child
// process: issue 31's finding 2 (/proc/<pid>/root of a process outside the
// view) and what must still work inside it.

#include "confine.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace hpcml::guard {
namespace {

namespace fs = std::filesystem;

// Runs `body` in a confined child; returns its exit status (0: all held).
template <typename Body>
int InConfinedChild(Body body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);  // as an unprivileged caller must
    if (!ConfineToView().ok()) ::_exit(100);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

class ConfineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto abi = LandlockAbi();
    if (!abi.ok() || *abi < 2)
      GTEST_SKIP() << "this kernel has no Landlock ABI 2+: "
                   << (abi.ok() ? std::to_string(*abi) : abi.status().message());
    dir_ = fs::temp_directory_path() / ("hpcml-confine-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "a");
    fs::create_directories(dir_ / "b");
    std::ofstream(dir_ / "a" / "f") << "data";
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(ConfineTest, AProcessOutsideTheDomainIsOutOfReach) {
  // This test process stands for the user's srun or login shell.
  const std::string outside = "/proc/" + std::to_string(::getpid());
  ASSERT_EQ(::access((outside + "/root/").c_str(), R_OK), 0) << "unconfined, it is reachable";
  int rc = InConfinedChild([&] {
    for (const char* link : {"/root/etc/hostname", "/cwd/", "/fd/0", "/exe", "/mem"}) {
      int fd = ::open((outside + link).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0 || errno != EACCES) {
        std::fprintf(stderr, "%s%s: %s\n", outside.c_str(), link,
                     fd >= 0 ? "opened" : "not EACCES");
        return 1;
      }
    }
    char byte = 0, target = 0;
    iovec local{&byte, 1}, remote{&target, 1};
    if (::process_vm_readv(::getppid(), &local, 1, &remote, 1, 0) >= 0) return 2;
    return 0;
  });
  EXPECT_EQ(rc, 0) << "1: a magic link or /proc file of the outside process opened; 2: "
                      "process_vm_readv reached it; 100: ConfineToView failed";
}

TEST_F(ConfineTest, InsideTheDomainFilesRenamesAndPeersStillWork) {
  const fs::path dir = dir_;
  int rc = InConfinedChild([&] {
    std::ifstream in(dir / "a" / "f");
    std::string text;
    in >> text;
    if (text != "data") return 1;
    // Across directories: needs LANDLOCK_ACCESS_FS_REFER handled and allowed.
    if (::rename((dir / "a" / "f").c_str(), (dir / "b" / "f").c_str()) != 0) return 2;
    if (::link((dir / "b" / "f").c_str(), (dir / "a" / "g").c_str()) != 0) return 3;
    // A peer forked inside the domain (another rank of the step) is
    // reachable, as Open MPI's single-copy shared memory needs.
    static char secret[] = "rank";
    pid_t peer = ::fork();
    if (peer == 0) {
      ::pause();
      ::_exit(0);
    }
    char got[5] = {};
    iovec local{got, 4}, remote{secret, 4};
    ssize_t n = ::process_vm_readv(peer, &local, 1, &remote, 1, 0);
    std::string root = "/proc/" + std::to_string(peer) + "/root/";
    int seen = ::access(root.c_str(), R_OK);
    ::kill(peer, SIGKILL);
    ::waitpid(peer, nullptr, 0);
    if (n != 4 || std::string(got) != "rank") return 4;
    if (seen != 0) return 5;
    return 0;
  });
  EXPECT_EQ(rc, 0) << "1: read, 2: rename, 3: link, 4: process_vm_readv, 5: a peer's root; "
                      "100: ConfineToView failed";
}

// A denied step (review of issue 31): slurmstepd would still run the user's
// srun --task-epilog for each task it reaps.
TEST_F(ConfineTest, ADeniedStepExecutesNothing) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if (!ForbidExecution().ok()) ::_exit(100);
    if (::access("/etc/hostname", R_OK) != 0) ::_exit(1);  // files are not the lock's business
    char* const argv[] = {const_cast<char*>("true"), nullptr};
    ::execv("/bin/true", argv);
    ::_exit(errno == EACCES ? 0 : 2);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: a file could not be read, 2: exec did not fail with "
                                       "EACCES (or ran), 100: ForbidExecution failed";
}

TEST_F(ConfineTest, NoMountsEvenInANamespaceOfItsOwn) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to try a mount";
  const fs::path dir = dir_;
  int rc = InConfinedChild([&] {
    if (::unshare(CLONE_NEWNS) != 0) return 0;  // refused already: nothing to try
    if (::mount("none", dir.c_str(), "tmpfs", 0, nullptr) == 0) return 1;
    return errno == EPERM ? 0 : 2;
  });
  EXPECT_EQ(rc, 0) << "1: a confined process mounted over a directory";
}

}  // namespace
}  // namespace hpcml::guard
