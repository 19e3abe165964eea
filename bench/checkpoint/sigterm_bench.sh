#!/usr/bin/env bash
# Time from SIGTERM to a durable checkpoint, and the training stall of an
# async save, for a stated model: hpcml-train on 2 ranks (dp=2), an MLP
# 1024-2048x3-16 (about 10.5 M parameters: 126 MB of parameters and AdamW
# moments, saved once by replica 0).
#   bench/checkpoint/sigterm_bench.sh <build dir>
set -euo pipefail
train=${1:?build dir}/mpi_trainer/trainer/hpcml-train
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
dir=$(mktemp -d /tmp/hpcml-sigterm.XXXXXX)
trap 'rm -rf "$dir"' EXIT
args="--dp 2 --synthetic --input-dim 1024 --hidden 2048,2048,2048 --outputs 16 --batch 64 --steps 100000 --log-interval 100000"

# 1. Stall: mean step time with an async save every 10 steps against none, same run length.
step_ms() { sed -n 's/.*mean step \([0-9.]*\) ms.*/\1/p' "$1" | tail -1; }
mpirun -n 2 "$train" ${args/--steps 100000/--steps 60} >"$dir/plain.log" 2>&1
mpirun -n 2 "$train" ${args/--steps 100000/--steps 60} --checkpoint-dir "$dir/a" --checkpoint-every 10 >"$dir/async.log" 2>&1
plain=$(step_ms "$dir/plain.log") async=$(step_ms "$dir/async.log")
echo "sigterm-bench: mean step without checkpoints $plain ms, with an async save every 10 steps $async ms"
awk -v a="$plain" -v b="$async" 'BEGIN{printf "sigterm-bench: training stall from async checkpointing: %.1f%% of step time\n", 100*(b/a-1)}'

# 2. SIGTERM to durable: signal the ranks mid-run; they agree at the next step
#    boundary, save synchronously (manifest last, fsync'd) and exit.
mpirun -n 2 "$train" $args --checkpoint-dir "$dir/t" >"$dir/term.log" 2>&1 &
mpirun_pid=$!
until grep -q "starting fresh" "$dir/term.log" 2>/dev/null; do sleep 0.2; done
sleep 3
t0=$(date +%s.%N)
pkill -TERM -P "$mpirun_pid" -f hpcml-train
wait "$mpirun_pid" || true
t1=$(date +%s.%N)
grep -q "stopping at step" "$dir/term.log" || { echo "sigterm-bench: trainer did not save on SIGTERM" >&2; cat "$dir/term.log" >&2; exit 1; }
bytes=$(du -sb "$dir/t"/step-* | tail -1 | cut -f1)
awk -v a="$t0" -v b="$t1" -v n="$bytes" 'BEGIN{printf "sigterm-bench: SIGTERM -> durable checkpoint and exit: %.2f s for %.0f MB of state\n", b-a, n/1e6}'
