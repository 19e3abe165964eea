#!/usr/bin/env bash
# Trainer throughput with and without hpcml's binding, in the same run:
# 2 ranks on CPU, launched unbound (mpirun --bind-to none), once with
# --bind off and once with --bind force; alternated, best of 3 each.
#   bench/topology/bind_bench.sh <build dir>
set -euo pipefail
train=${1:?build dir}/mpi_trainer/trainer/hpcml-train
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
args="--dp 2 --synthetic --input-dim 256 --hidden 1024,1024 --outputs 16 --batch 512 --steps 60 --log-interval 1000"
rate() {  # samples/s from the done line
  mpirun --bind-to none -n 2 "$train" $args --bind "$1" 2>&1 | sed -n 's/.* \([0-9.]*\) samples\/s.*/\1/p' | tail -1
}
best_off=0 best_on=0
for i in 1 2 3; do
  off=$(rate off); on=$(rate force)
  best_off=$(awk -v a="$best_off" -v b="$off" 'BEGIN{print (b>a)?b:a}')
  best_on=$(awk -v a="$best_on" -v b="$on" 'BEGIN{print (b>a)?b:a}')
  echo "bind-bench: round $i: unbound $off samples/s, bound $on samples/s"
done
awk -v a="$best_off" -v b="$best_on" 'BEGIN{printf "bind-bench: best unbound %.0f, bound %.0f samples/s: ratio bound/unbound %.2fx\n", a, b, b/a}'
