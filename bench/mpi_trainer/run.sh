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
  # The model of trainer_bench cuda's defaults, in PyTorch.
  "$python" "$(dirname "$0")/pytorch_cuda_peer.py"
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
