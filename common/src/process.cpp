#include "hpcml/common/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace hpcml {

namespace {

// Waits for pid, retrying on EINTR; returns the wait status or -1.
int Reap(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  return r < 0 ? -1 : status;
}

Status DescribeExit(const std::string& name, int status) {
  if (status == -1) return Internal("{}: lost track of the process", name);
  if (WIFEXITED(status)) {
    int code = WEXITSTATUS(status);
    if (code == 0) return Status::Ok();
    if (code == 127) return NotFound("{}: could not be run (not installed or not in PATH?)", name);
    return Unavailable("{}: exited with status {}", name, code);
  }
  if (WIFSIGNALED(status)) return Unavailable("{}: killed by signal {}", name, WTERMSIG(status));
  return Unavailable("{}: ended abnormally", name);
}

struct Pipe {
  UniqueFd read, write;
};

Result<Pipe> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe", errno);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// Child side after fork: only async-signal-safe calls until exec.
[[noreturn]] void ExecChild(const std::vector<char*>& argv, int out_fd, int err_fd) {
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, 0);
  dup2(out_fd, 1);
  if (err_fd >= 0) dup2(err_fd, 2);
  execvp(argv[0], argv.data());
  _exit(127);
}

// Starts argv with stdin from /dev/null, stdout to out_fd and stderr to
// err_fd (-1: inherited). The argument array is built before fork, so the
// child makes only async-signal-safe calls.
Result<pid_t> Start(const std::vector<std::string>& argv, int out_fd, int err_fd) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return ErrnoError("fork " + argv[0], errno);
  if (pid == 0) ExecChild(args, out_fd, err_fd);
  return pid;
}

// A child still running when its owner goes: close its output, ask it to
// end, and reap it.
void Terminate(pid_t pid, UniqueFd& out) {
  if (pid <= 0) return;
  out.reset();
  kill(pid, SIGTERM);
  Reap(pid);
}

}  // namespace

ChildProcess::~ChildProcess() {
  Terminate(pid_, out_);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      name_(std::move(other.name_)),
      out_(std::move(other.out_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    Terminate(pid_, out_);
    pid_ = std::exchange(other.pid_, -1);
    name_ = std::move(other.name_);
    out_ = std::move(other.out_);
  }
  return *this;
}

Result<ChildProcess> ChildProcess::Spawn(const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("empty command");
  HPCML_ASSIGN_OR_RETURN(Pipe out, MakePipe());
  HPCML_ASSIGN_OR_RETURN(pid_t pid, Start(argv, out.write.get(), -1));
  ChildProcess child;
  child.pid_ = pid;
  child.name_ = argv[0];
  child.out_ = std::move(out.read);
  return child;
}

Status ChildProcess::Wait() {
  if (pid_ <= 0) return FailedPrecondition("no process to wait for");
  out_.reset();
  int status = Reap(std::exchange(pid_, -1));
  return DescribeExit(name_, status);
}

Status ChildProcess::WaitFor(std::chrono::milliseconds limit) {
  if (pid_ <= 0) return FailedPrecondition("no process to wait for");
  out_.reset();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return DescribeExit(name_, status);
    }
    if (r < 0 && errno != EINTR) {
      pid_ = -1;
      return DescribeExit(name_, -1);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    usleep(20'000);
  }
  Terminate(std::exchange(pid_, -1), out_);
  return Unavailable("{}: still running after {} ms, stopped", name_, limit.count());
}

Result<std::string> ChildProcess::ReadLine(std::chrono::milliseconds limit) {
  if (!out_) return FailedPrecondition("{}: its output is closed", name_);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string line;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{out_.get(), POLLIN, 0};
    const int n = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(name_ + ": waiting for its output", errno);
    if (n == 0) return Unavailable("{}: no line of output within {} ms", name_, limit.count());
    char c = 0;
    const ssize_t got = read(out_.get(), &c, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoError(name_ + ": reading its output", errno);
    if (got == 0) return Unavailable("{}: ended its output before a line", name_);
    if (c == '\n') return line;
    line.push_back(c);
  }
}

Result<std::string> RunAndCapture(const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("empty command");
  HPCML_ASSIGN_OR_RETURN(Pipe out, MakePipe());
  // stdout and stderr share one pipe: the message on failure shows both in order.
  HPCML_ASSIGN_OR_RETURN(pid_t pid, Start(argv, out.write.get(), out.write.get()));
  out.write.reset();
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = read(out.read.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  out.read.reset();
  Status st = DescribeExit(argv[0], Reap(pid));
  if (!st.ok()) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    if (!text.empty()) return Status(st.code(), st.message() + ": " + text);
    return st;
  }
  return text;
}

}  // namespace hpcml
