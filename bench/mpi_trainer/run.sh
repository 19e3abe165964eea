#!/usr/bin/env bash
# bench/mpi_trainer/run.sh [build dir]: the trainer's benchmarks, each a ratio
# against a baseline measured in the same run (see trainer_bench.cpp).
set -euo pipefail
build=${1:-build/default}
bench=$build/bench/mpi_trainer/trainer_bench
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
mpirun -n 1 "$bench" gemm
mpirun -n 1 "$bench" naive
mpirun -n 2 "$bench" bubble
mpirun -n 2 "$bench" dp
