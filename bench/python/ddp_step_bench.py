#!/usr/bin/python3
"""A PyTorch DDP training step fed by hpcml.Loader against the same step fed
from tensors already in memory (issue 40's goal: the loader costs <= 10% of
the step).

Usage:
  PYTHONPATH=build/default/python /usr/bin/python3 bench/python/ddp_step_bench.py
      [--ranks 2] [--rows 400000] [--batch 1024] [--steps 300] [--rounds 3]

The model is fixed: 64 -> 256 -> 256 -> 2 (ReLU, cross-entropy, Adam), DDP
over gloo on --ranks local processes (one math thread each), --batch rows
per rank per step. The set: --rows rows of 64 float columns and a binary
label, written once through hpcml.ingest and read once (page cache).

Each rank alternates the two feeds, --rounds times, --steps steps each
(after 20 warm-up steps of each):
  memory  batches taken from a tensor built before timing (no I/O, no copy)
  loader  hpcml.Loader(rank, world, shuffled, one reader thread), each batch
          through torch.from_numpy (no copy)
Printed per feed: the median over rounds of rank 0's seconds per step (all
ranks step together), and loader / memory - 1, the loader's share of the
step; <= 0.10 meets the goal.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--rows", type=int, default=400_000)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--work", default="/tmp/hpcml-ddp-bench")
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)  # a child process
    return p.parse_args()


def make_set(path, rows):
    import numpy as np
    import pandas as pd
    import hpcml
    rng = np.random.default_rng(2)
    x = rng.standard_normal((rows, 64)).astype(np.float32)
    df = pd.DataFrame(x, columns=[f"f{j}" for j in range(64)])
    df.insert(0, "ts", 1_700_000_000 + np.arange(rows))
    df.insert(0, "id", np.arange(rows))
    df["label"] = np.where(x[:, 0] + x[:, 1] > 0, "yes", "no")
    hpcml.ingest(path, df, entity="id", timestamp="ts", label="label", zone="bench",
                 classification="internal")


def child(a, path):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel
    import hpcml

    torch.set_num_threads(1)
    rank, world = hpcml.init_torch("gloo", rank=a.rank, world=a.ranks)
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(
        nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    g = torch.Generator().manual_seed(rank)
    mem_x = torch.randn(16, a.batch, 64, generator=g)
    mem_y = torch.randint(0, 2, (16, a.batch), generator=g)
    loader = hpcml.Loader(path, "v1", rank=rank, world=world, batch_rows=a.batch, seed=3,
                          epochs=0, drop_last=True)
    it = iter(loader)

    def run(feed, steps):
        dist.barrier()
        t0 = time.perf_counter()
        for i in range(steps):
            if feed == "memory":
                step(mem_x[i % 16], mem_y[i % 16])
            else:
                x, y = next(it)
                step(torch.from_numpy(x), torch.from_numpy(y).long())
        dist.barrier()
        return (time.perf_counter() - t0) / steps

    run("memory", 20)
    run("loader", 20)
    times = {"memory": [], "loader": []}
    for _ in range(a.rounds):
        for feed in ("memory", "loader"):
            times[feed].append(run(feed, a.steps))
    if rank == 0:
        print(json.dumps(times), flush=True)
    dist.destroy_process_group()


def main():
    a = parse_args()
    path = os.path.join(a.work, f"ddp-{a.rows}.h5")
    if a.rank is not None:
        return child(a, path)
    os.makedirs(a.work, exist_ok=True)
    if not os.path.exists(path):
        make_set(path, a.rows)
    with open(path, "rb") as f:  # into the page cache
        while f.read(1 << 24):
            pass
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT="29731")
    for v in ("SLURM_PROCID", "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        env.pop(v, None)
    argv = [sys.executable, __file__, "--ranks", str(a.ranks), "--rows", str(a.rows),
            "--batch", str(a.batch), "--steps", str(a.steps), "--rounds", str(a.rounds),
            "--work", a.work]
    procs = [subprocess.Popen(argv + ["--rank", str(r)], env=env, stdout=subprocess.PIPE,
                              text=True) for r in range(a.ranks)]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        sys.exit(f"ddp_step_bench: a rank failed: {[p.returncode for p in procs]}")
    times = json.loads(outs[0].strip().splitlines()[-1])
    mem, load = (statistics.median(times[k]) for k in ("memory", "loader"))
    print(f"ddp_step_bench: {a.ranks} ranks (gloo, 1 thread each), 64 -> 256 -> 256 -> 2, "
          f"batch {a.batch} per rank, {a.steps} steps x {a.rounds} rounds")
    print(f"  memory  {mem * 1e3:8.3f} ms/step   rounds {[round(t * 1e3, 3) for t in times['memory']]}")
    print(f"  loader  {load * 1e3:8.3f} ms/step   rounds {[round(t * 1e3, 3) for t in times['loader']]}")
    print(f"  loader / memory - 1 = {load / mem - 1:+.3f} (goal <= 0.10)")


if __name__ == "__main__":
    main()
