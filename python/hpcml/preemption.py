"""Preemption for Python jobs: stop at a step boundary that every rank
agrees on, save, write the attempt's usage record and exit with the code
Slurm requeues on (docs/python.md has the sbatch lines).

    stop = hpcml.Preemption(stop_before_end_s=120).install()
    for step in range(start, steps):
        train_one_step()
        if stop.should_stop():            # every rank calls it, every rank gets the same answer
            save_checkpoint(step + 1)
            stop.publish_usage(steps_done=step + 1 - start, batch=1024, steps_since_checkpoint=0)
            stop.exit()                   # exit code 85: the requeued job resumes

The triggers are hpcml-train's: SIGTERM (scancel, preemption, requeue),
SIGUSR1 (sbatch --signal=B:USR1@T, forwarded by the batch script), a cloud
spot notice polled by hpcml's C++ poller, and Slurm's time left under a
margin. The signal handlers are installed through Python's `signal` module,
so they run between bytecodes and only set a flag.
"""
import os
import signal
import sys
import time

from . import _hpcml

# hpcml-train's --stop-exit-code default: a job script that exits with it
# after a save is requeued (docs/trainer.md, "Preemption and requeue").
REQUEUE_EXIT_CODE = 85


def agree_max(value):
    """The largest of every rank's int `value`: over torch.distributed when
    it is initialised, else over mpi4py's COMM_WORLD when the job imported
    it, else this process's own value. Collective: every rank calls it."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        import torch
        t = torch.tensor([int(value)], dtype=torch.int64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized():
        return int(mpi.COMM_WORLD.allreduce(int(value), op=mpi.MAX))
    return int(value)


class Preemption:
    """When to save and stop (see the module's docstring). Nothing happens
    until install()."""

    def __init__(self, *, signals=("SIGTERM", "SIGUSR1"), spot_url=None, spot_kind="aws",
                 spot_poll_s=5.0, stop_before_end_s=0, exit_code=REQUEUE_EXIT_CODE,
                 usage_dir=None, gpu_type=""):
        self._signals = [getattr(signal, s) if isinstance(s, str) else s for s in signals]
        self._spot = (spot_url, spot_kind, spot_poll_s)
        self._margin = float(stop_before_end_s)
        self.exit_code = exit_code
        self._usage_dir, self._gpu_type = usage_dir, gpu_type
        self._old = {}
        self._poller = None
        self._signalled = ""
        self._reason = ""
        self._next_time_check = 0.0
        self._time_left = -1
        self._start = time.time()

    def install(self):
        """Installs the handlers (and starts the spot poller when a URL was
        given). Returns self."""
        for s in self._signals:
            self._old[s] = signal.signal(s, self._handler)
        url, kind, poll_s = self._spot
        if url:
            self._poller = _hpcml.SpotPoller(url, kind, int(poll_s * 1000))
        self._start = time.time()
        return self

    def uninstall(self):
        """Restores the previous handlers and stops the poller."""
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old = {}
        if self._poller is not None:
            self._poller.stop()
            self._poller = None

    def _handler(self, signum, frame):
        if not self._signalled:
            self._signalled = signal.Signals(signum).name

    def local_reason(self):
        """Why this rank would stop now ("SIGTERM", "SIGUSR1", "spot notice",
        "time limit (N s left)"), or ""."""
        if self._signalled:
            return self._signalled
        if self._poller is not None and self._poller.noticed:
            return "spot notice"
        job = os.environ.get("SLURM_JOB_ID", "")
        if self._margin > 0 and job.isdigit():
            now = time.monotonic()
            if now >= self._next_time_check:  # slurmctld is asked at most every 30 s
                self._time_left = _hpcml.slurm_seconds_left(int(job))
                self._next_time_check = now + 30
                self._checked_at = now
            if self._time_left >= 0:
                left = self._time_left - (now - self._checked_at)
                if left <= self._margin:
                    return f"time limit ({int(left)} s left)"
        return ""

    def should_stop(self):
        """Whether to save and stop at this step boundary: true on every rank
        when any rank has a reason (agree_max). Collective."""
        mine = self.local_reason()
        stop = agree_max(1 if mine else 0) > 0
        if stop and not self._reason:
            self._reason = mine or "another rank's stop signal"
        return stop

    @property
    def reason(self):
        """Why should_stop() said stop ("" until it did)."""
        return self._reason

    def publish_usage(self, steps_done, batch, steps_since_checkpoint=None,
                      checkpoint_seconds=0.0, no_comment=False):
        """This attempt's usage record for hpcml-cost, as hpcml-train writes
        it: a JSON file in usage_dir (or $HPCML_USAGE_DIR) and, unless
        no_comment, the job's Comment. Only inside a Slurm job; a failure is
        a warning, never an exception (accounting does not stop training)."""
        d = self._usage_dir or os.environ.get("HPCML_USAGE_DIR", "")
        now = time.time()
        _hpcml.publish_usage(d, int(self._start), int(now), now - self._start, int(steps_done),
                             int(batch), self._gpu_type, steps_since_checkpoint,
                             float(checkpoint_seconds), no_comment)

    def exit(self):
        """Ends the process now with exit_code (85: requeue): stdout, stderr
        and logging flushed, then os._exit, without the interpreter's
        teardown. Save everything first. Why: tearing down a live
        torch.distributed process group at interpreter exit can deadlock
        (torch 1.13's gloo: the destructor joins a worker that waits for the
        GIL; seen in the DDP example), and a preempted job has only
        GraceTime. The handlers stay until then: when another task exits
        first, srun signals the rest of the step, and a default SIGTERM
        would turn this exit into a kill, which Slurm does not requeue."""
        if self._poller is not None:
            self._poller.stop()
            self._poller = None
        exit_now(self.exit_code)


def exit_now(code=0):
    """Flushes stdout, stderr and logging, then ends the process with `code`
    at once (os._exit): no interpreter teardown, so no destructor of a
    torch.distributed process group can hang the job's end."""
    import logging
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
