#!/usr/bin/env bash
# The main job, end to end on one machine: install dependencies, build, bring
# up the local Slurm cluster, submit a training job (examples/trainer/
# train-preemptible.sbatch: hpcml-train on 4 ranks through srun --mpi=pmix,
# 2 typed GPUs allocated, checkpoints), wait for it, and show its log, its
# accounting record and what it cost (hpcml-cost over sacct).
# The cluster is left running; stop it with: tests/cluster/hpcml-cluster down
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/build.sh" default
cd "$top"
bin=$top/build/default
tests/cluster/hpcml-cluster up
eval "$(tests/cluster/hpcml-cluster env)"
# wait_job, and the environment jobs on this oversubscribed cluster need
# (Open MPI ranks that yield when idle).
source tests/cluster/lib.sh
run=$HPCML_CLUSTER_DIR/jobs/demo
mkdir -p "$run"
job=$(sbatch --parsable --gres=gpu:h100:2 --time=00:10:00 --output="$run/%j.out" \
  --export=ALL,HPCML_TRAIN="$bin/mpi_trainer/hpcml-train",TRAIN_DIR="$run",TRAIN_STEPS=300,GPU_TYPE=h100 \
  examples/trainer/train-preemptible.sbatch)
echo "demo: submitted training job $job; waiting for it"
state=$(wait_job "$job" 600)
echo "demo: job $job finished: $state"
echo "----- job output ($run/$job.out) -----"
cat "$run/$job.out"
echo "----- sacct -j $job -----"
sacct -j "$job" -o JobID,JobName,User,Account,Partition,AllocTRES%60,Elapsed,State,ExitCode
echo "----- hpcml-cost -j $job (examples/accounting/prices.toml) -----"
"$bin/accounting/hpcml-cost" --prices examples/accounting/prices.toml -j "$job" --by job \
  --usage-dir "$run/ckpt"
[ "$state" = COMPLETED ] || { echo "demo: job $job did not complete" >&2; exit 1; }
echo "demo: ok. Model: $run/model.h5, metrics: $run/metrics-0.jsonl."
echo "demo: the cluster is still up: eval \"\$(tests/cluster/hpcml-cluster env)\"; stop it with tests/cluster/hpcml-cluster down"
