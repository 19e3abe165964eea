"""torch.distributed from a Slurm job's environment, with nothing to set by
hand: one process per task (srun), rank and world from Slurm (or MPI),
rank 0's node address from slurmctld, a port from the job id, and for gloo
the network interface that holds this node's address.

    rank, world = hpcml.init_torch("gloo")     # every task of `srun python3 train.py`

Variables already set (MASTER_ADDR, MASTER_PORT, GLOO_SOCKET_IFNAME) are
kept, so torchrun and hand-made settings still win.
"""
import datetime
import os
import socket
import subprocess


def _error(message):
    from . import _error as make
    return make(message, "InvalidArgument")


def _run(*argv):
    """stdout of a command; an hpcml.Error naming it when it fails."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise _error(f"init_torch: {' '.join(argv)}: {e}") from None
    if out.returncode != 0:
        raise _error(f"init_torch: {' '.join(argv)} exited {out.returncode}: "
                     f"{out.stderr.strip()}")
    return out.stdout


def rank_zero_address(env=os.environ):
    """The address of the node rank 0 runs on: the first node of the step
    (srun's block and cyclic layouts both put rank 0 there), as slurmctld
    knows it (NodeAddr); 127.0.0.1 outside Slurm."""
    nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST")
    if not nodes:
        return "127.0.0.1"
    first = _run("scontrol", "show", "hostnames", nodes).split()[0]
    fields = dict(f.split("=", 1) for f in _run("scontrol", "-o", "show", "node", first).split()
                  if "=" in f)
    addr = fields.get("NodeAddr", first)
    try:
        return socket.gethostbyname(addr)
    except OSError as e:
        raise _error(f"init_torch: rank 0's node {first}: address {addr!r}: {e}") from None


def interface_towards(address):
    """The name of the local interface this host reaches `address` from
    (the source address the kernel routes by, looked up in `ip -o addr`)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((address, 9))  # UDP: picks a route, sends nothing
        local = s.getsockname()[0]
    for line in _run("ip", "-o", "-4", "addr", "show").splitlines():
        f = line.split()  # "2: eth0    inet 10.0.0.2/24 ..."
        if len(f) >= 4 and f[2] == "inet" and f[3].split("/")[0] == local:
            return f[1].split("@")[0]
    raise _error(f"init_torch: no interface holds {local} (the route to {address})")


def default_port(env=os.environ):
    """A port for the job's rendezvous: 29500 outside Slurm, else one from
    the job id so that two jobs on a node do not meet."""
    job = env.get("SLURM_JOB_ID", "")
    return 29500 if not job.isdigit() else 20000 + int(job) % 20000


def init_torch(backend="gloo", timeout_s=600, rank=None, world=None):
    """Initialises torch.distributed for this task and returns (rank, world).
    rank and world default to hpcml.rank_and_world() (Slurm's or MPI's)."""
    import torch.distributed as dist
    from . import rank_and_world

    r, w = rank_and_world()
    rank = r if rank is None else rank
    world = w if world is None else world
    env = os.environ
    env.setdefault("MASTER_ADDR", rank_zero_address())
    env.setdefault("MASTER_PORT", str(default_port()))
    if backend == "gloo" and "GLOO_SOCKET_IFNAME" not in env and world > 1 and \
            not env["MASTER_ADDR"].startswith("127."):
        env["GLOO_SOCKET_IFNAME"] = interface_towards(env["MASTER_ADDR"])
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    return rank, world
