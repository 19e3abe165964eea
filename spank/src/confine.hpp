// The step's processes confined to its own view with Landlock (Linux 5.19+,
// ABI 2; unprivileged, inherited by every child, never lifted).
//
// Why: a task could read outside its dataset view through the magic links
// of processes that are not in it, /proc/<pid>/root, cwd, fd/* and exe of
// any process of the same user (a login shell, a leftover of another job,
// the srun that launched it). A PID namespace per step is out of reach of a
// Slurm 22.05 SPANK plugin, and hidepid hides only other users' processes.
// A Landlock domain denies every ptrace-mode access (those links, /proc/<pid>/
// mem and environ, ptrace, process_vm_readv) from inside it to any process
// outside it or in a sibling domain, while allowing it within the domain.
//
// ConfineToView() restricts the calling thread, and so every process it
// forks afterwards: slurmstepd calls it once, after entering the step's view
// and before forking the tasks, so all tasks of one step on one node share
// one domain (Open MPI's single-copy shared memory, process_vm_readv, works
// between them) and no task of it reaches a process of another step. The
// file system rule allows every access beneath the view's "/" (the view is
// the file system control); as a side effect a confined process can no
// longer mount, unmount or pivot_root, even in a user namespace of its own.
#pragma once

#include "hpcml/common/status.hpp"

namespace hpcml::guard {

// The kernel's Landlock ABI version; an error when Landlock is absent or
// disabled (not in the kernel's lsm= list).
Result<int> LandlockAbi();

// Confines the calling thread as above. On ABI 6+ the domain is also scoped:
// no signal to, and no abstract unix socket of, a process outside it. The
// caller needs CAP_SYS_ADMIN or no_new_privs. FailedPrecondition when the
// kernel has no Landlock ABI 2+ (renames and links across directories would
// fail under ABI 1).
Status ConfineToView();

// For a denied step: the calling thread, and everything it forks, can
// execute no file at all (and is confined as above against other
// processes), so no program of the user's (srun --task-epilog) runs.
Status ForbidExecution();

}  // namespace hpcml::guard
