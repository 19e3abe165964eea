#!/usr/bin/env bash
# Scoring as a guarded Slurm job, as the ordinary user alice, through
# examples/inference/score.sbatch (2 nodes of zone ae, srun --mpi=pmix):
#  - the approved feature set is scored on both nodes: CSV and lineage;
#  - a model trained on zone eu's data is refused inside the ae job;
#  - a feature set whose zone is eu, at a path the guard approved for ae, is
#    refused by the feature cache's zone check;
#  - another zone's feature set, not declared, is not even visible.
source "$HPCML_SOURCE_DIR/spank/tests/cluster/guard_lib.sh"
FCACHE=$HPCML_BUILD_DIR/featurecache/hpcml-fcache
TRAIN=$HPCML_BUILD_DIR/mpi_trainer/trainer/hpcml-train
INFER=$HPCML_BUILD_DIR/mpi_trainer/inference/hpcml-infer
SBATCH_SCRIPT=$HPCML_SOURCE_DIR/examples/inference/score.sbatch
for b in "$FCACHE" "$TRAIN" "$INFER"; do [ -x "$b" ] || fail "$b not built"; done
write_policy
guard_install
JOB_DIR=$(job_dir)

# Feature sets, written as root outside any job: zone ae's and eu's, and a
# file that says zone eu inside ae's approved directory.
/usr/bin/python3 - "$JOB_DIR/rows.csv" <<'PY'
import random, sys
random.seed(5)
with open(sys.argv[1], "w") as f:
    f.write("id,t,y,a,b\n")
    for i in range(2000):
        a, b = random.uniform(0, 10), random.uniform(-5, 5)
        f.write(f"{i},{1700000000 + i},{int(a + b > 5)},{a:.3f},{b:.3f}\n")
PY
make_set() {  # make_set <file> <zone>
  rm -rf "$1" "$1.d"
  "$FCACHE" ingest "$1" --csv "$JOB_DIR/rows.csv" --entity id --timestamp t --label y \
    --zone "$2" --classification internal >/dev/null || fail "ingest $1"
  chmod 0644 "$1"
}
make_set "$DATA/ae/public/churn.h5" ae
make_set "$DATA/ae/public/wrong-zone.h5" eu
make_set "$DATA/eu/churn.h5" eu
for z in ae eu; do
  src=$DATA/ae/public/churn.h5
  [ $z = ae ] || src=$DATA/eu/churn.h5
  "$TRAIN" --data "$src" --outputs 2 --hidden 8 --batch 100 --steps 50 --lr 1e-2 \
    --log-interval 50 --output "$JOB_DIR/model-$z.h5" >/dev/null 2>&1 || fail "training model-$z"
  chmod 0644 "$JOB_DIR/model-$z.h5"
done

# score <model> <data> <out>: submits the example as alice with the ae set
# declared; prints "<state>" and leaves the job's output in $JOB_DIR/<out>.txt.
score() {
  local id
  # From the submit environment: an --export list is refused (job_submit.lua).
  id=$(as $ALICE env HPCML_INFER="$INFER" MODEL="$1" DATA="$2" OUT="$JOB_DIR/$3.csv" \
    sbatch --parsable --ml-role=ml-engineer --dataset="$DATA/ae/public" \
    --output="$JOB_DIR/$3.txt" "$SBATCH_SCRIPT") ||
    fail "sbatch as $ALICE"
  echo "$id" >>"$TEST_JOBS"
  wait_job "$id" 150
}

state=$(score "$JOB_DIR/model-ae.h5" "$DATA/ae/public/churn.h5" ok)
out=$(cat "$JOB_DIR/ok.txt")
echo "$out"
assert_eq COMPLETED "$state" "scoring the approved set ($out)"
assert_contains "$out" "zone ae" "the job ran in zone ae"
assert_contains "$out" "on 2 rank(s)" "the rows were sharded over both nodes"
rows=$(($(wc -l <"$JOB_DIR/ok.csv") - 1))
assert_eq 2000 "$rows" "rows in ok.csv"
/usr/bin/python3 - "$JOB_DIR/ok.csv.lineage.json" "$(sha256sum "$JOB_DIR/model-ae.h5" | cut -d' ' -f1)" <<'PY' ||
import json, sys
j = json.load(open(sys.argv[1]))
assert j["model"]["sha256"] == sys.argv[2], j["model"]
assert j["input"]["uri"].endswith("/ae/public/churn.h5#v1"), j["input"]
assert "job" in j["created_by"], j["created_by"]
PY
  fail "ok.csv.lineage.json"

state=$(score "$JOB_DIR/model-eu.h5" "$DATA/ae/public/churn.h5" eu-model)
out=$(cat "$JOB_DIR/eu-model.txt")
[ "$state" != COMPLETED ] || fail "a model trained on zone eu's data scored in zone ae: $out"
assert_contains "$out" 'the model was trained on data of zone "eu"' "the eu model's refusal"
[ ! -e "$JOB_DIR/eu-model.csv" ] || fail "a refused run left eu-model.csv"

state=$(score "$JOB_DIR/model-ae.h5" "$DATA/ae/public/wrong-zone.h5" wrong-zone)
out=$(cat "$JOB_DIR/wrong-zone.txt")
[ "$state" != COMPLETED ] || fail "a zone-eu feature set was scored in zone ae: $out"
assert_contains "$out" "zone" "the wrong-zone refusal names the zone"
echo "refused: $(grep -m1 'error' <<<"$out")"

state=$(score "$JOB_DIR/model-ae.h5" "$DATA/eu/churn.h5" eu-data)
out=$(cat "$JOB_DIR/eu-data.txt")
[ "$state" != COMPLETED ] || fail "zone eu's feature set was scored in zone ae: $out"
echo "refused: $(grep -m1 'error' <<<"$out")"
assert_node_idle "after the refusals"
rm -f "$DATA/ae/public/churn.h5" "$DATA/ae/public/wrong-zone.h5" "$DATA/eu/churn.h5"
pass "guarded scoring on 2 nodes; eu model, eu-zoned file and eu data refused"
