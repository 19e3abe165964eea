// Running a helper program (sacct, scontrol) without a shell.
//
// ChildProcess owns a child's pid and the read end of its stdout pipe: its
// destructor kills (SIGTERM) and reaps a child not yet waited for, so no
// zombie or orphan outlives the owner. Move-only; not thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "hpcml/common/status.hpp"
#include "hpcml/common/unique_fd.hpp"

namespace hpcml::accounting {

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
  // Closes the pipe and waits. OK if the program exited 0; otherwise an error
  // naming the program and its exit status or signal.
  Status Wait();

 private:
  pid_t pid_ = -1;
  std::string name_;
  UniqueFd out_;
};

// Runs argv to completion and returns its stdout (stderr is captured too and
// appended to the error message on failure).
Result<std::string> RunAndCapture(const std::vector<std::string>& argv);

}  // namespace hpcml::accounting
