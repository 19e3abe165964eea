#!/usr/bin/env bash
# bench/mpi_trainer/run.sh [build dir] [cuda]: the trainer's benchmarks, each a
# ratio against a baseline measured in the same run (see trainer_bench.cpp).
#   run.sh build/x          the CPU benchmarks (gemm, naive, bubble, dp)
#   run.sh build/x cuda     the CUDA backend on one GPU: samples/s, model
#                           FLOP/s, MFU, step against its GEMMs alone; then
#                           PyTorch on the same MLP and batch, when a CUDA
#                           PyTorch is installed (bf16 autocast, fp32 master
#                           weights: the same arithmetic as the backend).
# With the GPU bundle (scripts/gpu-bundle.sh), pass the bundle's bin/
# directory as the build dir: run.sh hpcml-gpu/bin cuda.
set -euo pipefail
build=${1:-build/default}
bench=$build/bench/mpi_trainer/trainer_bench
[[ -x $bench ]] || bench=$build/trainer_bench
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
if [[ ${2-} == cuda ]]; then
  # One rank, no launcher (Open MPI singleton).
  shift 2
  "$bench" cuda "$@"
  python=${PYTHON:-python3}
  if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "pytorch: skipped: no CUDA PyTorch for $python"
    exit 0
  fi
  # The model of trainer_bench cuda's defaults: 1024 -> 8192 x 4 -> 1024,
  # relu, cross-entropy, batch 8192, AdamW, global-norm clip 1.0.
  "$python" - <<'PY'
import time, torch
torch.backends.cuda.matmul.allow_tf32 = False
dims, batch, steps = [1024, 8192, 8192, 8192, 8192, 1024], 8192, 20
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
t0 = time.perf_counter()
for _ in range(steps):
    loss = step()
loss.item()
t = (time.perf_counter() - t0) / steps
flops = batch * sum((4 if i == 0 else 6) * dims[i] * dims[i + 1] for i in range(len(dims) - 1))
name = torch.cuda.get_device_name()
print(f"pytorch {torch.__version__}: MLP {'-'.join(map(str, dims))} relu, batch {batch}, {name}: "
      f"step {t * 1e3:.2f} ms, {batch / t:.0f} samples/s, model {flops / t * 1e-12:.1f} TFLOP/s "
      f"(same FLOP count as trainer_bench; divide by the peak it printed for MFU)")
PY
  exit 0
fi
mpirun -n 1 "$bench" gemm
mpirun -n 1 "$bench" naive
mpirun -n 2 "$bench" bubble
mpirun -n 2 "$bench" dp
