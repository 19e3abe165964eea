// Running a helper program (sacct, scontrol, XGBoost's tracker) without a shell.
//
// ChildProcess owns a child's pid and the read end of its stdout pipe: its
// destructor kills (SIGTERM) and reaps a child not yet waited for, so no
// zombie or orphan outlives the owner. Move-only; not thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/common/unique_fd.hpp"

namespace hpcml {

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts argv[0] (looked up in PATH) with stdin from /dev/null, stdout to
  // a pipe (stdout_fd()) and stderr inherited. Error if it cannot be run.
  static Result<ChildProcess> Spawn(const std::vector<std::string>& argv);

  int stdout_fd() const { return out_.get(); }
  // Started and not yet waited for.
  bool running() const { return pid_ > 0; }
  // Closes the pipe and waits. OK if the program exited 0; otherwise an error
  // naming the program and its exit status or signal.
  Status Wait();
  // Like Wait, but a child still running after `limit` is killed (SIGTERM)
  // and reaped, and that is an error saying so.
  Status WaitFor(std::chrono::milliseconds limit);
  // The next line of its stdout, without the newline. Unavailable when the
  // child closes its stdout (exits) first or nothing comes within `limit`.
  // Reads byte by byte: what follows the line stays in the pipe.
  Result<std::string> ReadLine(std::chrono::milliseconds limit);

 private:
  pid_t pid_ = -1;
  std::string name_;
  UniqueFd out_;
};

// Runs argv to completion and returns its stdout (stderr is captured too and
// appended to the error message on failure).
Result<std::string> RunAndCapture(const std::vector<std::string>& argv);

}  // namespace hpcml
