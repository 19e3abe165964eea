#!/usr/bin/env bash
# bench/mpi_trainer/run.sh [build dir] [cuda]: the trainer's benchmarks, each a
# ratio against a baseline measured in the same run (see trainer_bench.cpp).
#   run.sh build/x          the CPU benchmarks (step against the peak and
#                           PyTorch, naive, bubble, dp)
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
# OpenBLAS with its best kernel for the peak and the peer: Debian's 0.3.21
# takes AVX-512 Zen cores for Haswell (AVX2, half speed) unless told.
if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SKYLAKEX; fi
cores=$(nproc)
python=${PYTHON:-/usr/bin/python3}
peer=$(dirname "$0")/pytorch_peer.py
have_torch=1
"$python" -c 'import torch' 2>/dev/null || have_torch=0
# The training step against the machine's peak and against PyTorch: each
# model on one core and on all cores, every process pinned to those cores.
for model in "--input 64 --hidden 1024,1024,1024,1024 --outputs 2 --batch 512" \
             "--input 256 --hidden 4096,4096,4096 --outputs 16 --batch 1024"; do
  for t in 1 "$cores"; do
    pin=0-$((t - 1))
    # shellcheck disable=SC2086
    ours=$(taskset -c "$pin" "$bench" step $model --threads "$t")
    echo "$ours"
    if ((have_torch == 0)); then
      echo "pytorch: skipped: no torch for $python (apt-get install python3-torch)"
      continue
    fi
    # PyTorch's linear layers run on OpenBLAS's own threads; its intra-op
    # OpenMP threads only do the elementwise work, and both pools at $t
    # threads fight over the cores. Given the best of both settings.
    best=0
    for tt in "$t" 1; do
      # shellcheck disable=SC2086
      line=$(OPENBLAS_NUM_THREADS=$t taskset -c "$pin" "$python" "$peer" $model --threads "$tt")
      echo "  $line (OPENBLAS_NUM_THREADS=$t)"
      rate=${line##*samples/s }
      ((rate > best)) && best=$rate
      ((t == 1)) && break
    done
    awk -v o="${ours##*samples/s }" -v p="$best" \
      'BEGIN { printf "  hpcml / pytorch samples/s: %.2f (goal >= 1.1)\n", o / p }'
  done
done
mpirun -n 1 "$bench" naive
mpirun -n 2 "$bench" bubble
mpirun -n 2 "$bench" dp
