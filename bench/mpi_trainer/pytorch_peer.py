#!/usr/bin/env python3
"""PyTorch CPU on the MLP of trainer_bench step: the peer for hpcml-train.

    pytorch_peer.py --input 64 --hidden 1024,1024,1024,1024 --outputs 2 \
        --batch 512 --threads 1

Same model (linear + ReLU, cross-entropy), batch, optimizer (AdamW, lr 1e-3,
no weight decay, global-norm clip 1.0) and thread count as hpcml-train's
defaults. Prints one line ending in "samples/s N" (best of rounds).

The caller pins the process (taskset) and sets OPENBLAS_NUM_THREADS and
OPENBLAS_CORETYPE (Debian's PyTorch runs its linear layers on the system
OpenBLAS, which needs OPENBLAS_CORETYPE=SKYLAKEX for its AVX-512 kernels on
AMD Zen cores). Both are read when torch loads, so set them before starting.
Needs Debian's python3-torch: apt-get install python3-torch (run.sh skips the
peer with that hint when it is missing).
"""
import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", type=int, required=True)
    ap.add_argument("--hidden", required=True)
    ap.add_argument("--outputs", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    torch.manual_seed(1)
    torch.set_num_threads(a.threads)
    dims = [a.input] + [int(w) for w in a.hidden.split(",")] + [a.outputs]
    layers = []
    for i in range(len(dims) - 1):
        layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    x = torch.randn(a.batch, a.input)
    y = torch.randint(0, a.outputs, (a.batch,))

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for _ in range(2):
        step()
    t0 = time.perf_counter()
    step()
    steps = max(2, int(0.5 / (time.perf_counter() - t0)))  # rounds of about half a second
    best = float("inf")
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - t0) / steps)
    print(f"pytorch {torch.__version__}: MLP {'-'.join(map(str, dims))} relu, batch {a.batch}, "
          f"AdamW, {a.threads} thread(s): step {best * 1e3:.2f} ms, samples/s {a.batch / best:.0f}")


if __name__ == "__main__":
    main()
