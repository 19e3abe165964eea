#!/usr/bin/env bash
# A guarded GBDT job across zone ae's two nodes (one rank each, XGBoost's
# collective through the tracker rank 0 starts on its node's address), as
# the ordinary user alice, through examples/trainer/train-gbdt.sbatch on
# zone ae's feature set with category columns: preempted by a job in the
# urgent partition, requeued, resumed from its checkpoint; its model equals
# an uninterrupted two-rank run's byte for byte (booster SHA-256); its ONNX
# export gives XGBoost's probabilities in ONNX Runtime; hpcml-infer scores the set with it as a guarded job
# (examples/inference/score.sbatch); hpcml-cost reports both attempts from
# their usage records.
source "$HPCML_SOURCE_DIR/spank/tests/cluster/guard_lib.sh"
source "$HPCML_SOURCE_DIR/mpi_trainer/checkpoint/tests/cluster/interrupt_lib.sh"
FCACHE=$HPCML_BUILD_DIR/featurecache/hpcml-fcache
TRAIN=$HPCML_BUILD_DIR/mpi_trainer/trainer/hpcml-train
INFER=$HPCML_BUILD_DIR/mpi_trainer/inference/hpcml-infer
COST=$HPCML_BUILD_DIR/accounting/hpcml-cost
for b in "$FCACHE" "$TRAIN" "$INFER" "$COST"; do [ -x "$b" ] || fail "$b not built"; done
write_policy
guard_install
JOB_DIR=$(job_dir)
set_file=$DATA/ae/public/gbdt.h5

# 20000 rows: two numbers (one with missing cells), two category columns
# (one with missing cells), a string label; v1 to train, v2 to validate.
/usr/bin/python3 "$HPCML_SOURCE_DIR/mpi_trainer/trees/tests/churn_table.py" --rows 24000 \
  --seed 21 --split train:0:20000,val:20000:24000 --label-name churn --regions 12 --dir "$JOB_DIR"
rm -rf "$set_file" "$set_file.d"
for part in train val; do
  "$FCACHE" ingest "$set_file" --csv "$JOB_DIR/$part.csv" --entity id --timestamp ts \
    --label churn --zone ae --classification internal >/dev/null || fail "ingest $part"
done
chmod 0644 "$set_file"
trap 'rm -f "$set_file"; restore_plugstack' EXIT

# The settings of the example, as the job runs them: two ranks (one per ae
# node), one thread each (-c 1).
settings=(--rounds 1500 --max-depth 8 --eta 0.05 --subsample 0.8 --seed 1)
# Reference: the same training on two ranks, uninterrupted, outside Slurm
# (both on this host: the tracker on 127.0.0.1).
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 mpirun --oversubscribe -n 2 \
  "$TRAIN" --model gbdt --data "$set_file" --data-version v1 --val-version v2 \
  --early-stop-patience 1000 --outputs 2 "${settings[@]}" --threads 1 --log-interval 500 \
  --output "$JOB_DIR/reference.h5" >"$JOB_DIR/reference.log" 2>&1 ||
  fail "the reference run: $(tail -5 "$JOB_DIR/reference.log")"

run=$JOB_DIR/run
id=$(as $ALICE env HPCML_TRAIN="$TRAIN" TRAIN_DIR="$run" DATA="$set_file" DATA_VERSION=v1 \
  VAL_VERSION=v2 PATIENCE=1000 ROUNDS=1500 DEPTH=8 ETA=0.05 SUBSAMPLE=0.8 SEED=1 \
  CHECKPOINT_EVERY=20 \
  sbatch --parsable -N2 -c 1 --ml-role=ml-engineer --dataset="$DATA/ae/public" --time=00:10:00 \
  --output="$JOB_DIR/job-%j.out" "$HPCML_SOURCE_DIR/examples/trainer/train-gbdt.sbatch") ||
  fail "sbatch as $ALICE"
echo "$id" >>"$TEST_JOBS"

# Past its first checkpoints, then the urgent partition takes both ae nodes.
preempt_by_urgent "$id" "$run/ckpt/gbdt-round-*.h5" 2
out=$OUT
echo "$out" | grep -v "round [0-9]*/1500 train loss"
assert_contains "$out" "zone ae" "the job ran in zone ae"
assert_contains "$out" "resumed from checkpoint round" "the second attempt resumed"
grep -q '"event":"stopped"' "$run/metrics-0.jsonl" || fail "the first attempt did not save and stop"

digest() { /usr/bin/python3 -c 'import h5py,sys; print(h5py.File(sys.argv[1], "r").attrs["booster_sha256"])' "$1"; }
[ "$(digest "$run/model.h5")" = "$(digest "$JOB_DIR/reference.h5")" ] ||
  fail "the preempted and resumed model differs from the uninterrupted one"
resumed=$(grep -o 'resumed from checkpoint round [0-9]*' <<<"$out" | grep -o '[0-9]*$')
echo "preempted, $resumed; model = uninterrupted ($(digest "$run/model.h5" | cut -c1-16))"
# Two ranks on two nodes: the tracker on rank 0's node address, not 127.0.0.1.
grep -Eq "XGBoost tracker on 10\.[0-9.]+:[0-9]+ for 2 ranks" <<<"$out" ||
  fail "no tracker on a node address in the job's log"
grep -q "on each of 2 ranks" <<<"$out" || fail "the job did not train on two ranks"

# ONNX: the export of the resumed model gives XGBoost's probabilities in ONNX
# Runtime (raw CSV cells in; gbdt_onnx_check.py compares to 1e-5).
"$INFER" export-onnx "$run/model.h5" -o "$JOB_DIR/model.onnx" >/dev/null || fail "export-onnx"
/usr/bin/python3 "$HPCML_SOURCE_DIR/mpi_trainer/trees/tests/gbdt_onnx_check.py" \
  --model "$run/model.h5" --onnx "$JOB_DIR/model.onnx" --csv "$JOB_DIR/val.csv" \
  --runner "$HPCML_SOURCE_DIR/mpi_trainer/inference/ort/ort_score.mjs" --node "$(command -v node)" \
  --ort-dir "$HPCML_SOURCE_DIR/build/ort" --infer "$INFER" || fail "the ONNX export in ONNX Runtime"

# Scoring, guarded, with the same model.
sid=$(as $ALICE env HPCML_INFER="$INFER" MODEL="$run/model.h5" DATA="$set_file" DATA_VERSION=v2 \
  OUT="$JOB_DIR/scores.csv" sbatch --parsable --ml-role=ml-engineer --dataset="$DATA/ae/public" \
  --output="$JOB_DIR/score.txt" "$HPCML_SOURCE_DIR/examples/inference/score.sbatch") ||
  fail "sbatch scoring"
echo "$sid" >>"$TEST_JOBS"
state=$(wait_job "$sid" 150)
assert_eq COMPLETED "$state" "scoring job ($(cat "$JOB_DIR/score.txt"))"
/usr/bin/python3 - "$JOB_DIR/scores.csv" <<'PY' || fail "the scores"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 4000, len(rows)
p = [float(r["p_churn"]) for r in rows]
assert len(set(p)) > 1000 and all(0 < v < 1 for v in p), (len(set(p)), min(p), max(p))
print(f"scored {len(rows)} rows: p_churn from {min(p):.3f} to {max(p):.3f}")
PY

# Cost: both attempts, from their usage records.
costs_two_attempts "$id" "$run/ckpt"
pass "guarded GBDT job on two nodes preempted at a checkpoint, resumed from round $resumed to the uninterrupted two-rank model, exported to ONNX, scored, costed"
