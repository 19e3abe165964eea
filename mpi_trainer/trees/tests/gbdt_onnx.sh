#!/usr/bin/env bash
# gbdt_onnx.sh <hpcml-fcache> <hpcml-train> <hpcml-infer> <node> <ort_score.mjs> <ort-dir>
# hpcml-infer export-onnx of GBDT models, scored by ONNX Runtime from the
# test CSV's raw cells (category strings, "" where empty, a plan the
# training rows never had) against XGBoost's own predictions from the
# booster in the model file (gbdt_onnx_check.py), to 1e-5: a binary
# classifier on a table whose 12-value region gets set (partition) splits,
# three classes, and a regression; one trained on a standardised version
# (the graph, and hpcml-infer, standardise raw numbers first). hpcml-infer's
# own scores of the same CSV must agree too. The binary graph must
# hold categorical chains (BRANCH_EQ) and numeric splits (BRANCH_LT).
fcache=$1 train=$2 infer=$3 node=$4 runner=$5 ort_dir=$6
source "$(dirname "$0")/lib.sh"
check=$(dirname "$0")/gbdt_onnx_check.py

$py "$churn_table" --rows 3000 --seed 5 --split train:0:2400,test:2400:3000 \
  --labels two,three,reg --label-name y --regions 12 --legacy-plan --empty-plans
# The legacy plan only in the test rows: a value the model never saw.
for kind in two three reg; do
  grep -v ',legacy,' $kind-train.csv >$kind-train-seen.csv
  for part in train-seen test; do
    "$fcache" ingest $kind.h5 --csv $kind-$part.csv --entity id --timestamp ts --label y \
      --zone test --classification internal >/dev/null || fail "ingest $kind $part"
  done
done
grep -q ',legacy,' two-test.csv || fail "the test rows have no unseen plan"
"$fcache" derive two.h5 --from v1 --standardize-columns age,income >/dev/null || fail "derive"

# export <name> <train args...>: trains <name>.h5, exports <name>.onnx.
export_model() {
  local name=$1
  shift
  timeout 120 "$train" --model gbdt --rounds 40 --max-depth 4 --eta 0.2 --seed 3 --threads 2 \
    --output $name.h5 "$@" >$name.log 2>&1 || { cat $name.log; fail "training $name"; }
  "$infer" export-onnx $name.h5 -o $name.onnx >>$name.log 2>&1 || { cat $name.log; fail "export $name"; }
}
score() {  # score <name> <csv>
  $py "$check" --model $1.h5 --onnx $1.onnx --csv $2 --runner "$runner" --node "$node" \
    --ort-dir "$ort_dir" --infer "$infer" || fail "$1 in ONNX Runtime or hpcml-infer"
}

export_model m-two --data two.h5 --data-version v1 --outputs 2
score m-two two-test.csv
$py - <<'PY' || fail "the binary graph's node kinds"
import collections, onnx
m = onnx.load("m-two.onnx")
n = [x for x in m.graph.node if x.op_type == "TreeEnsembleClassifier"][0]
modes = collections.Counter(s.decode() for a in n.attribute if a.name == "nodes_modes" for s in a.strings)
print("binary graph:", dict(modes))
assert modes["BRANCH_EQ"] > 0 and modes["BRANCH_LT"] > 0, modes
PY
export_model m-three --data three.h5 --data-version v1 --outputs 3
score m-three three-test.csv
export_model m-reg --data reg.h5 --data-version v1 --outputs 1 --loss mse
score m-reg reg-test.csv
export_model m-scaled --data two.h5 --data-version v3 --outputs 2
score m-scaled two-test.csv
echo "PASS: $TEST_NAME"
