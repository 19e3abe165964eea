#!/usr/bin/env bash
# The Python examples as guarded jobs of the ordinary user alice on zone ae:
#  - a Python job that opens a zone-eu feature set misfiled under ae's
#    approved directory (so the view shows it) is refused by hpcml's checks,
#    with hpcml.Error's PermissionDenied naming the zone; the approved ae set
#    opens in the same job;
#  - examples/python/train-xgboost.sbatch: XGBoost from the set as pandas
#    categoricals, its lineage read by hpcml-infer inspect;
#  - examples/python/train-ddp.sbatch: PyTorch DDP over gloo on both ae nodes
#    through the hpcml loader, preempted by a job in the urgent partition,
#    requeued and resumed from its checkpoint; it ends with the weights and
#    final loss of an uninterrupted two-rank run, bit for bit; hpcml-cost
#    prices both attempts from their usage records.
source "$HPCML_SOURCE_DIR/spank/tests/cluster/guard_lib.sh"
source "$HPCML_SOURCE_DIR/mpi_trainer/checkpoint/tests/cluster/interrupt_lib.sh"
FCACHE=$HPCML_BUILD_DIR/featurecache/hpcml-fcache
INFER=$HPCML_BUILD_DIR/mpi_trainer/inference/hpcml-infer
COST=$HPCML_BUILD_DIR/accounting/hpcml-cost
for b in "$FCACHE" "$INFER" "$COST"; do [ -x "$b" ] || fail "$b not built"; done
/usr/bin/python3 -c "import torch, xgboost" 2>/dev/null ||
  { echo "SKIP: $TEST_NAME: Debian's python3-torch and python3-xgboost are needed"; exit 77; }
export PYTHONPATH=$HPCML_BUILD_DIR/python  # the build tree's hpcml, for root and the jobs
EXAMPLES=$HPCML_SOURCE_DIR/examples/python
write_policy
guard_install
JOB_DIR=$(job_dir)
set_file=$DATA/ae/public/pyjobs.h5
misfiled=$DATA/ae/public/misfiled-eu.h5

/usr/bin/python3 "$HPCML_SOURCE_DIR/mpi_trainer/trees/tests/churn_table.py" --rows 24000 \
  --seed 3 --split train:0:20000,val:20000:24000 --label-name churn --regions 12 --dir "$JOB_DIR"
rm -rf "$set_file" "$set_file.d" "$misfiled" "$misfiled.d"
for part in train val; do
  "$FCACHE" ingest "$set_file" --csv "$JOB_DIR/$part.csv" --entity id --timestamp ts \
    --label churn --zone ae --classification internal >/dev/null || fail "ingest $part"
done
"$FCACHE" ingest "$misfiled" --csv "$JOB_DIR/val.csv" --entity id --timestamp ts --label churn \
  --zone eu --classification internal >/dev/null || fail "ingest the eu set"
chmod 0644 "$set_file" "$misfiled"
trap 'rm -f "$set_file" "$misfiled"; restore_plugstack' EXIT

# 1. The checks, not only the view: the eu set is visible to the ae job.
run_as $ALICE srun -N1 --ml-role=ml-engineer --dataset="$DATA/ae/public" /usr/bin/python3 -c '
import sys, hpcml
print("ok", hpcml.FeatureSet(sys.argv[1]).info("v1")["rows"], "rows")
try:
    hpcml.FeatureSet(sys.argv[2]).read()
    print("read the eu set")
except hpcml.Error as e:
    print("refused", e.code, e)' "$set_file" "$misfiled"
expect_allowed "the Python job"
echo "$OUT"
assert_contains "$OUT" "ok 20000 rows" "the approved ae set opens"
assert_contains "$OUT" "refused PermissionDenied" "the eu set is refused by hpcml's checks"
assert_contains "$OUT" "in zone 'eu' but this job runs in zone 'ae'" "the refusal names the zones"

# 2. XGBoost in Python, with lineage.
xid=$(as $ALICE env OUT="$JOB_DIR/xgb.json" TRAIN_VERSION=v1 VAL_VERSION=v2 \
  TRAIN_PY="$EXAMPLES/train_xgboost.py" TRAIN_ARGS="--rounds 200" \
  sbatch --parsable -c 1 --ml-role=ml-engineer --dataset="$set_file" \
  --output="$JOB_DIR/xgb.out" "$EXAMPLES/train-xgboost.sbatch") || fail "sbatch xgboost"
echo "$xid" >>"$TEST_JOBS"

# 3. DDP: the reference, two ranks uninterrupted outside Slurm (one thread
# each, as the job's -c 1 gives).
ddp=(--epochs 50 --batch 512 --virtual-ranks 4 --log-every 500)
timeout 300 mpirun --oversubscribe -n 2 /usr/bin/python3 "$EXAMPLES/train_ddp.py" \
  --data "$set_file" --version v1 "${ddp[@]}" --dir "$JOB_DIR/reference" \
  >"$JOB_DIR/reference.log" 2>&1 || fail "the reference run (exit $?): $(tail -n 30 "$JOB_DIR/reference.log")"
want=$(grep -o 'final loss [^;]*; weights [0-9a-f]*' "$JOB_DIR/reference.log") ||
  fail "the reference's final loss: $(cat "$JOB_DIR/reference.log")"

state=$(wait_job "$xid" 150)
xout=$(cat "$JOB_DIR/xgb.out")
echo "$xout"
assert_eq COMPLETED "$state" "the XGBoost job"
assert_contains "$xout" "zone ae" "the XGBoost job ran in zone ae"
inspect=$("$INFER" inspect "$JOB_DIR/xgb.json" 2>&1) || fail "hpcml-infer inspect: $inspect"
assert_contains "$inspect" "$set_file v1 (20000 rows, zone ae" "the lineage's training version"
assert_contains "$inspect" '"version":"v2"' "the lineage's validation"
grep -q "^format  *xgboost " <<<"$inspect" || fail "the lineage's framework: $inspect"

run=$JOB_DIR/run
id=$(as $ALICE env TRAIN_DIR="$run" TRAIN_PY="$EXAMPLES/train_ddp.py" EPOCHS=50 BATCH=512 \
  CHECKPOINT_EVERY=100 TRAIN_ARGS="--version v1 --log-every 500" \
  sbatch --parsable -N2 -c 1 --ml-role=ml-engineer --dataset="$set_file" --time=00:10:00 \
  --output="$JOB_DIR/job-%j.out" "$EXAMPLES/train-ddp.sbatch") || fail "sbatch as $ALICE"
echo "$id" >>"$TEST_JOBS"
preempt_by_urgent "$id" "$run/ckpt/step-*.pt" 1
out=$OUT
echo "$out" | grep -v "^step "
assert_contains "$out" "2 ranks, zone ae" "the job ran on two ranks in zone ae"
assert_contains "$out" "exiting 85 to be requeued" "the first attempt saved and stopped"
assert_contains "$out" "resumed from step-" "the second attempt resumed"
got=$(grep -o 'final loss [^;]*; weights [0-9a-f]*' <<<"$out") || fail "no final loss"
echo "uninterrupted: $want"
echo "preempted:     $got"
[ "$got" = "$want" ] || fail "the preempted and resumed run ended elsewhere than the uninterrupted one"
inspect=$("$INFER" inspect "$run/model.pt" 2>&1) || fail "hpcml-infer inspect model.pt: $inspect"
grep -q "^format  *pytorch " <<<"$inspect" || fail "the DDP model's lineage: $inspect"

costs_two_attempts "$id" "$run/ckpt"
pass "a misfiled eu set refused in a Python job; XGBoost with lineage; DDP preempted, resumed to the uninterrupted weights, costed"
