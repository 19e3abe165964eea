"""The PyTorch baseline of trainer_bench cuda: the same MLP (1024 -> 8192 x 4
-> 1024, relu, cross-entropy), batch 8192, AdamW (fused), global-norm clip
1.0, bf16 autocast with fp32 master weights (the backend's arithmetic), on
the same GPU. Prints one line: step time, samples/s, model TFLOP/s (the
FLOP count trainer_bench uses), given --peak-tflops the MFU, and the time
of the step's GEMMs alone.

    python3 pytorch_cuda_peer.py [--steps 20] [--peak-tflops P] [--chrome-trace FILE]
The timed steps are the CUDA profiler window (cudaProfilerStart/Stop, as in
trainer_bench cuda), for a timeline library (cuda_timeline.cpp);
--chrome-trace FILE also records them with torch.profiler (device events
only) into FILE for timeline_summary.py. Exits 77 when PyTorch sees no
CUDA device.
"""
import argparse
import contextlib
import sys
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=20)
p.add_argument("--peak-tflops", type=float, default=0.0)
p.add_argument("--chrome-trace", default="")
a = p.parse_args()
if not torch.cuda.is_available():
    print("pytorch: skipped: no GPU on this machine (torch.cuda.is_available() is False)")
    sys.exit(77)
torch.backends.cuda.matmul.allow_tf32 = False
dims, batch = [1024, 8192, 8192, 8192, 8192, 1024], 8192
layers = []
for i in range(len(dims) - 1):
    layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
    if i < len(dims) - 2:
        layers.append(torch.nn.ReLU())
model = torch.nn.Sequential(*layers).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0, fused=True)
x = torch.randn(batch, dims[0], device="cuda")
y = torch.randint(0, dims[-1], (batch,), device="cuda")


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss


for _ in range(3):
    step()
torch.cuda.synchronize()
trace = (torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
         if a.chrome_trace else contextlib.nullcontext())
with trace:
    torch.cuda.profiler.start()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    loss.item()
    t = (time.perf_counter() - t0) / a.steps
    torch.cuda.profiler.stop()
if a.chrome_trace:
    trace.export_chrome_trace(a.chrome_trace)
# Forward 2, backward 4 FLOPs per weight and row; the first layer has no
# input gradient (as trainer_bench counts).
flops = batch * sum((4 if i == 0 else 6) * dims[i] * dims[i + 1] for i in range(len(dims) - 1))
tflops = flops / t * 1e-12
mfu = f", MFU {tflops / a.peak_tflops:.3f} (peak {a.peak_tflops:.1f} TFLOP/s)" if a.peak_tflops > 0 else ""

# The step's 14 GEMMs alone, bf16 in and out as autocast runs them, in step
# order (m x k times k x n): how much of the step is matrix products, to set
# beside trainer_bench's own "GEMMs alone".
shapes = []
for i in range(len(dims) - 1):
    shapes.append((batch, dims[i], dims[i + 1]))  # forward: x W^T
    shapes.append((dims[i + 1], batch, dims[i]))  # weight gradient: dz^T x
    if i > 0:
        shapes.append((batch, dims[i + 1], dims[i]))  # input gradient: dz W
del model, opt, x, y, loss
torch.cuda.empty_cache()
mats = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
         torch.randn(k, n, device="cuda", dtype=torch.bfloat16)) for m, k, n in shapes]


def gemms():
    for l, r in mats:
        torch.mm(l, r)


gemms()
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(a.steps):
    gemms()
torch.cuda.synchronize()
tg = (time.perf_counter() - t0) / a.steps
print(f"pytorch {torch.__version__}: MLP {'-'.join(map(str, dims))} relu, batch {batch}, "
      f"{torch.cuda.get_device_name()}: step {t * 1e3:.2f} ms, {batch / t:.0f} samples/s, "
      f"model {tflops:.1f} TFLOP/s{mfu}; GEMMs alone {tg * 1e3:.2f} ms")
