"""hpcml with PyTorch (Debian's python3-torch): init_torch from a job's
environment, two ranks meeting over gloo, the errors it names, and the
loader's batches as tensors without a copy."""
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import hpcml
from hpcml import distributed

torch = pytest.importorskip("torch", reason="Debian's python3-torch is not installed")

JOB_VARS = ["SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_STEP_NODELIST", "SLURM_PROCID",
            "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",
            "PMI_SIZE", "PMIX_RANK", "PMIX_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "GLOO_SOCKET_IFNAME"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_meet_outside_slurm():
    """Two processes with Slurm's task variables only: rank 0 on 127.0.0.1,
    an all-reduce over gloo sums both ranks."""
    env = {k: v for k, v in os.environ.items() if k not in JOB_VARS}
    env["MASTER_PORT"] = str(free_port())
    code = ("import hpcml, os, torch, torch.distributed as d\n"
            "rank, world = hpcml.init_torch('gloo', timeout_s=60)\n"
            "t = torch.tensor([float(rank + 1)]); d.all_reduce(t)\n"
            "print(rank, world, os.environ['MASTER_ADDR'], int(t.item()))\n"
            "d.destroy_process_group()\n")
    procs = [subprocess.Popen([sys.executable, "-c", code], env=dict(env, SLURM_PROCID=str(r),
                                                                     SLURM_NTASKS="2"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sorted(o[0].strip() for o in outs) == ["0 2 127.0.0.1 3", "1 2 127.0.0.1 3"]


def test_addresses_and_ports(monkeypatch):
    for v in JOB_VARS:
        monkeypatch.delenv(v, raising=False)
    assert distributed.rank_zero_address() == "127.0.0.1"
    assert distributed.default_port() == 29500
    monkeypatch.setenv("SLURM_JOB_ID", "123456")
    assert distributed.default_port() == 20000 + 123456 % 20000
    assert distributed.interface_towards("127.0.0.1") == "lo"


def test_rank_zero_address_names_what_failed(monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[1-2]")
    monkeypatch.setenv("PATH", str(tmp_path))  # no scontrol
    with pytest.raises(hpcml.Error, match="init_torch: scontrol show hostnames node\\[1-2\\]") as e:
        distributed.rank_zero_address()
    assert e.value.code == "InvalidArgument"


def test_loader_tensors_share_the_batches(tmp_path):
    import pandas as pd
    df = pd.DataFrame({"id": range(300), "ts": range(300), "a": np.arange(300.0),
                       "label": ["x", "y", "z"] * 100})
    hpcml.ingest(tmp_path / "t.h5", df, entity="id", timestamp="ts", label="label", zone="test",
                 classification="internal")
    loader = hpcml.Loader(tmp_path / "t.h5", batch_rows=64, shuffle=False)
    batches = list(loader.tensors())
    x, y = batches[0]
    assert isinstance(x, torch.Tensor) and x.dtype == torch.float32 and x.shape == (64, 1)
    assert not x.numpy().flags.owndata  # the loader's buffer, not a copy
    assert torch.equal(x[:, 0], torch.arange(64, dtype=torch.float32))
    assert y.tolist()[:3] == [0.0, 1.0, 2.0]
    assert sum(len(b[0]) for b in batches) == 300
