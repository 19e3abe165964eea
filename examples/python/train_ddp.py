#!/usr/bin/python3
"""Example: a PyTorch DDP classifier (CPU, gloo) trained on an hpcml feature
set, guarded and preemptible. One process per Slurm task:

    srun /usr/bin/python3 examples/python/train_ddp.py --dir $HOME/runs/churn

examples/python/train-ddp.sbatch has the sbatch lines; docs/python.md walks
through it. What hpcml does here:
- hpcml.init_torch: torch.distributed from Slurm's environment.
- hpcml.Loader: this rank's batches of the version, read with the guard's
  checks; virtual_ranks makes every step's global batch the same on 1, 2 or
  4 ranks, so a checkpoint resumes mid-epoch on another number of ranks.
- hpcml.Preemption: SIGTERM (preemption, scancel), SIGUSR1 (the time
  limit) agreed on by every rank at a step boundary; the job saves, writes
  its usage record for hpcml-cost and exits 85, and Slurm requeues it.
- hpcml.record_lineage: the model's lineage, for hpcml-infer inspect.
The run is deterministic on CPUs: preempted and resumed on the same ranks,
it ends with the uninterrupted run's weights and final loss, bit for bit.
With a CUDA build of torch and GPUs it trains on the task's GPU over NCCL
(--device cuda; Debian's python3-torch is CPU-only, so that path is not
tested here).
"""
import argparse
import glob
import hashlib
import os
import sys
import time

# Math threads, before torch loads the BLAS: Debian's torch multiplies through
# OpenBLAS, whose threads torch.set_num_threads does not set. Left to itself
# OpenBLAS takes the cores the task is bound to, and its results (and so the
# run's) then depend on the binding.
THREADS = os.environ.get("SLURM_CPUS_PER_TASK", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", THREADS)
os.environ.setdefault("OMP_NUM_THREADS", THREADS)

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

import hpcml


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--data", default=os.environ.get("HPCML_DATASETS", "").split(",")[0],
                   help="the feature set (default: the first set the guard approved)")
    p.add_argument("--version", default="latest")
    p.add_argument("--dir", required=True, help="checkpoints, model and lineage")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch", type=int, default=512, help="rows per step, all ranks together")
    p.add_argument("--virtual-ranks", type=int, default=4,
                   help="the data layout's ranks: resume on any world that divides it")
    p.add_argument("--hidden", default="256,256")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-every", type=int, default=200, help="steps")
    p.add_argument("--log-every", type=int, default=100, help="steps")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cuda: the task's GPU (SLURM_LOCALID) and NCCL; cpu: gloo")
    a = p.parse_args()
    if not a.data:
        p.error("--data: no feature set (submit with --dataset=SET, or pass --data)")
    if a.batch % a.virtual_ranks:
        p.error(f"--batch {a.batch}: not a multiple of --virtual-ranks {a.virtual_ranks}")
    return a


class Encoder(nn.Module):
    """A version's columns as network inputs: numbers standardised by the
    version's statistics (a missing cell: 0 and a missing flag), one learned
    embedding per category column (a missing cell: a row of its own)."""

    def __init__(self, info, stats):
        super().__init__()
        n = len(info["feature_names"])
        kinds = info["feature_types"] if info["typed"] else ["float"] * n
        counts = info["category_counts"] if info["typed"] else [0] * n
        by_name = {c["name"]: c for c in stats["columns"]}
        self.num = [j for j in range(n) if kinds[j] != "category"]
        cols = [by_name.get(info["feature_names"][j], {}) for j in self.num]
        self.register_buffer("mean", torch.tensor([c.get("mean", 0.0) for c in cols]))
        self.register_buffer("std", torch.tensor([c.get("std") or 1.0 for c in cols]))
        self.flags = [i for i, c in enumerate(cols) if c.get("missing", 0) > 0]
        self.cat = [(j, counts[j]) for j in range(n) if kinds[j] == "category"]
        self.embed = nn.ModuleList(nn.Embedding(k + 1, min(16, (k + 2) // 2)) for _, k in self.cat)
        self.width = len(self.num) + len(self.flags) + sum(e.embedding_dim for e in self.embed)

    def forward(self, x):
        num = x[:, self.num]
        missing = torch.isnan(num)
        parts = [torch.where(missing, 0.0, (num - self.mean) / self.std),
                 missing[:, self.flags].float()]
        for (j, k), e in zip(self.cat, self.embed):
            codes = x[:, j]
            parts.append(e(torch.where(torch.isnan(codes), float(k), codes).long()))
        return torch.cat(parts, 1)


def make_model(info, stats, hidden, seed):
    torch.manual_seed(seed)
    enc = Encoder(info, stats)
    layers, width = [enc], enc.width
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, len(info["label_classes"])))
    return nn.Sequential(*layers)


def newest_checkpoint(ckpt_dir):
    found = sorted(glob.glob(os.path.join(ckpt_dir, "step-*.pt")))
    return found[-1] if found else None


def save_atomically(obj, path):
    tmp = f"{path}.tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def weights_digest(model):
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def mean_loss(model, data, version, loss_fn, device):
    """The model's loss over every row of the version, in row order."""
    total, rows = 0.0, 0
    loader = hpcml.Loader(data, version, rank=0, world=1, batch_rows=4096, shuffle=False)
    with torch.no_grad():
        for x, y in loader.tensors():
            total += float(loss_fn(model(x.to(device)), y.to(device).long()))
            rows += len(y)
    return total / rows


def main():
    a = parse_args()
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    if a.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("SLURM_LOCALID", "0")))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    rank, world = hpcml.init_torch("nccl" if a.device == "cuda" else "gloo")
    fs = hpcml.FeatureSet(a.data)  # the guard's checks: approved, in the job's zone
    info = fs.info(a.version)
    version = info["version"]
    if not info["label_classes"]:
        sys.exit(f"{a.data} {version}: this example trains a classifier; the label has no classes")
    hidden = [int(h) for h in a.hidden.split(",")]
    net = make_model(info, fs.stats(version), hidden, a.seed)
    net.to(device)
    model = DistributedDataParallel(net, device_ids=[device] if a.device == "cuda" else None)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    loss_fn = nn.CrossEntropyLoss()
    sum_loss = nn.CrossEntropyLoss(reduction="sum")
    loader = hpcml.Loader(a.data, version, rank=rank, world=world, seed=a.seed,
                          batch_rows=a.batch // a.virtual_ranks, virtual_ranks=a.virtual_ranks,
                          epochs=a.epochs, drop_last=True)
    total = a.epochs * loader.batches_per_epoch
    ckpt_dir = os.path.join(a.dir, "ckpt")
    os.makedirs(ckpt_dir, exist_ok=True)

    step, first_loss = 0, None
    found = newest_checkpoint(ckpt_dir)
    if found:
        state = torch.load(found, map_location=device)
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        loader.restore(state["position"])  # taken on any world dividing --virtual-ranks
        step, first_loss = state["step"], state["first_loss"]
        if rank == 0:
            print(f"resumed from {os.path.basename(found)} (step {step}, saved on "
                  f"{state['world']} ranks) on {world} ranks", flush=True)
    start = step
    stop = hpcml.Preemption(usage_dir=ckpt_dir).install()

    def save():
        if rank == 0:
            save_atomically({"model": net.state_dict(), "optimizer": opt.state_dict(),
                             "position": loader.position(), "step": step,
                             "first_loss": first_loss, "world": world},
                            os.path.join(ckpt_dir, f"step-{step:08d}.pt"))
            for old in sorted(glob.glob(os.path.join(ckpt_dir, "step-*.pt")))[:-2]:
                os.unlink(old)
        dist.barrier()  # no rank leaves before the checkpoint is whole

    if rank == 0:
        print(f"{world} ranks, zone {os.environ.get('HPCML_ZONE', 'none')}: {a.data} {version}, "
              f"{info['rows']} rows, {total} steps of {a.batch} rows", flush=True)
    t0 = time.time()
    for x, y in loader.tensors():  # this rank's batch, sharing the loader's buffer
        loss = loss_fn(model(x.to(device)), y.to(device).long())
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if first_loss is None:
            first_loss = float(loss)
        if rank == 0 and step % a.log_every == 0:
            print(f"step {step}/{total} epoch {loader.epoch} loss {float(loss):.5f}", flush=True)
        if stop.should_stop():  # every rank, every step: the same answer on all
            save()
            if rank == 0:
                print(f"{stop.reason}: saved step {step}, exiting {stop.exit_code} to be "
                      "requeued", flush=True)
                stop.publish_usage(steps_done=step - start, batch=a.batch,
                                   steps_since_checkpoint=0)
            dist.barrier()  # all exit together: srun ends a step whose first task exits
            stop.exit()
        if step % a.checkpoint_every == 0:
            save()

    if rank == 0:
        final = mean_loss(net, a.data, version, sum_loss, device)
        model_path = os.path.join(a.dir, "model.pt")
        save_atomically(net.state_dict(), model_path)
        hpcml.record_lineage(model_path, data=a.data, version=version, framework="pytorch",
                             settings={k: v for k, v in vars(a).items() if k != "dir"},
                             steps=step, first_loss=first_loss, final_loss=final)
        stop.publish_usage(steps_done=step - start, batch=a.batch)
        print(f"done: {step} steps in {time.time() - t0:.1f} s; final loss {final!r}; "
              f"weights {weights_digest(net)[:16]}", flush=True)
    dist.barrier()
    # Not the interpreter's teardown: with DDP's process group alive it can
    # deadlock in torch 1.13 (gloo joins a worker waiting for the GIL).
    hpcml.exit_now(0)


if __name__ == "__main__":
    main()
