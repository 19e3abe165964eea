#!/usr/bin/env bash
# The example sbatch script trains on 4 ranks (dp 2 x pp 2) through
# srun --mpi=pmix on the local cluster: the job completes, the metrics file
# has one line per step, the loss went down, and the model file exists.
# Then a rank given two CPUs (srun -c 2) runs two math threads.
source "$HPCML_SOURCE_DIR/tests/cluster/lib.sh"
train=$HPCML_BUILD_DIR/mpi_trainer/trainer/hpcml-train
[ -x "$train" ] || fail "$train not built"
dir=$(job_dir)
id=$(HPCML_TRAIN=$train TRAIN_DIR=$dir TRAIN_STEPS=60 \
  submit --export=ALL --output="$dir/out.txt" "$HPCML_SOURCE_DIR/examples/trainer/train.sbatch")
state=$(wait_job "$id" 150)
out=$(cat "$dir/out.txt" 2>/dev/null || true)
echo "$out"
assert_eq COMPLETED "$state" "job $id state"
assert_contains "$out" "grid 2x2x1 (dp x pp x tp)" "log header"
assert_contains "$out" "step 60/60 loss" "last step logged"
# 4 ranks on this machine's cores (node namespaces share one kernel): said
# once, and no bubble figure that would only measure the scheduler.
if [ "$(nproc)" -lt 4 ]; then
  assert_contains "$out" "ranks outnumber cores" "oversubscription note"
  assert_contains "$out" "bubble n/a" "bubble not reported"
fi
[ -s "$dir/metrics.jsonl" ] || fail "metrics file $dir/metrics.jsonl missing"
[ -s "$dir/model.h5" ] || fail "model file $dir/model.h5 missing"
steps=$(grep -c '"step":' "$dir/metrics.jsonl" || true)
assert_eq 60 "$steps" "metrics lines with a step"
# Mean loss of the first and the last 10 steps, from the metrics file.
read -r first last < <(/usr/bin/python3 - "$dir/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
loss = [r["loss"] for r in rows if "step" in r and "loss" in r]
print(sum(loss[:10]) / 10, sum(loss[-10:]) / 10)
PY
)
echo "mean loss first 10 steps $first, last 10 steps $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.8 * a) }' \
  || fail "loss did not go down: $first -> $last"
echo "loss $first -> $last"

# srun --cpus-per-task gives a rank its threads (SLURM_CPUS_PER_TASK), never
# more than the cores it may run on.
want=$(( $(nproc) < 2 ? $(nproc) : 2 ))
id=$(submit --export=ALL --output="$dir/threads.txt" -n 1 -c 2 \
  --wrap="srun --mpi=pmix $train --synthetic --synthetic-samples 64 --hidden 16,16 --batch 16 --steps 2")
state=$(wait_job "$id" 120)
out=$(cat "$dir/threads.txt" 2>/dev/null || true)
assert_eq COMPLETED "$state" "job $id state ($out)"
assert_contains "$out" "cpu: $want math thread(s) per rank (SLURM_CPUS_PER_TASK" "threads from -c 2"
pass "loss $first -> $last; srun -c 2: $want threads"
