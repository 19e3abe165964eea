// The exit status of every hpcml command: one convention, stated here, in
// docs/architecture.md ("Exit status") and, through ExitStatusHelp, at the
// end of each command's --help and so in its man page. Checked for every
// command by the exit_status test (tests/cli/test_exit_status.sh).
//
//   0  kExitOk           done; a check found nothing wrong
//   1  kExitError        the work failed: a file missing, unreadable or
//                        malformed, I/O, refused by the access policy, an
//                        error of MPI, CUDA or a program run (sacct)
//   2  kExitUsage        the command line is wrong, found from it alone
//                        before any work: an unknown option or subcommand, a
//                        missing argument, a value or a combination of
//                        options refused (CLI11's parse errors and the
//                        command's own checks of its options)
//   3  kExitCheckFailed  a command whose job is to check something ran the
//                        check and it found a problem (a digest that does not
//                        match, a broken rule, drift, a log not intact, a
//                        wrong all-reduce); being unable to run it is 1
//   77 kExitSkipped      the probes only: nothing to check on this machine
//                        (no GPU); ctest's SKIP_RETURN_CODE
//
// hpcml-train also ends with its --stop-exit-code (85) after a save and
// stop, for Slurm's RequeueExit. MPI commands leave every rank with the same
// code (AgreeOnExitCode, common/mpi.hpp: the largest of the ranks').
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace hpcml {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitCheckFailed = 3;
inline constexpr int kExitSkipped = 77;

// One more line of a command's "Exit status:" help: its code and meaning.
struct ExitCodeHelp {
  int code;
  std::string_view meaning;
};

// The "Exit status:" block that ends each command's --help (CLI11's footer):
// 0, 1 and 2 in the words every command shares, then `extra` in order, one
// line each, indented as help2man turns into a tagged list.
std::string ExitStatusHelp(std::initializer_list<ExitCodeHelp> extra = {});

}  // namespace hpcml
