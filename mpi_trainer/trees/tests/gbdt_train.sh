#!/usr/bin/env bash
# gbdt_train.sh <hpcml-fcache> <hpcml-train> <trainer_make_fcache_fixture> <hpcml-infer>
# hpcml-train --model gbdt end to end on a table with number and category
# columns, missing cells and a string label, ingested as CSVs:
#  - trained with validation, early stopping and balanced class weights,
#    the model is the one python3-xgboost's XGBClassifier gives with the
#    same parameters, data and sample weights (the same library: its
#    predictions on the test version match to 1e-6; categories of the
#    validation and test versions mapped by value, as hpcml does);
#  - the model file holds the kept rounds, the objective, the encoding (the
#    training dictionary of each category column) and the class names; the
#    metrics file has a line per round and a done event; the Prometheus
#    textfile the round of the last log line;
#  - the lineage keeps the training version's statistics: hpcml-infer
#    reports a version whose age moved as skew, and --max-skew refuses it;
#  - an infinite feature cell stops the run naming its row and column, no model written;
#  - options trees cannot honour are refused with exit 2, naming them.
fcache=$1 train=$2 fixture=$3 infer=$4
source "$(dirname "$0")/lib.sh"

$py "$churn_table" --rows 4000 --seed 7 --split train:0:2800,val:2800:3400,test:3400:4000 \
  --legacy-plan --empty-plans
for part in train val test; do
  "$fcache" ingest set.h5 --csv $part.csv --entity id --timestamp ts --label label \
    --zone test --classification internal >/dev/null || fail "ingest $part"
done

args=(--model gbdt --data set.h5 --data-version v1 --outputs 2)
out=$(timeout 120 "$train" "${args[@]}" --val-version v2 --rounds 300 --max-depth 4 --eta 0.1 \
  --seed 3 --threads 2 --early-stop-patience 20 --class-weight balanced --log-interval 50 \
  --metrics m.jsonl --metrics-textfile run.prom --output g.h5 2>&1) || { echo "$out"; fail "training"; }
echo "$out" | grep -E "early stop|done:"
grep -Eq '^hpcml_train_step(\{[^}]*\})? 50$' run.prom || { cat run.prom; fail "the textfile's last logged round"; }

$py - <<'PY' || fail "against python3-xgboost"
import json
import h5py
import numpy as np
import pandas as pd
import xgboost as xgb

f = h5py.File("set.h5", "r")
text = lambda v: v.decode() if isinstance(v, bytes) else v

def frame(v, dicts=None):
    """Version v as XGBoost sees it in hpcml: numbers as stored, categories by
    value in the training dictionary (dicts), labels as class indices."""
    g = f["versions/" + v]
    names = [text(n) for n in g.attrs["feature_names"]]
    kinds = [text(k) for k in g.attrs["feature_types"]]
    x = g["features"][()]
    flat = [text(c) for c in g["categories"][()]]
    own, at, cols = {}, 0, {}
    for j, (n, k, c) in enumerate(zip(names, kinds, g.attrs["category_counts"])):
        own[n], at = flat[at:at + int(c)], at + int(c)
        if k == "category":
            vals = [None if np.isnan(v) else own[n][int(v)] for v in x[:, j]]
            cols[n] = pd.Categorical(vals, categories=(dicts or own)[n])
        else:
            cols[n] = x[:, j]
    return pd.DataFrame(cols), g["labels"][()].astype(int), own

xtr, ytr, dicts = frame("v1")
xva, yva, _ = frame("v2", dicts)
xte, yte, _ = frame("v3", dicts)
counts = np.bincount(ytr)
weight = (len(ytr) / (2 * counts))[ytr]
m = xgb.XGBClassifier(tree_method="hist", enable_categorical=True, n_estimators=300, max_depth=4,
                      learning_rate=0.1, early_stopping_rounds=20, n_jobs=2, random_state=3)
m.fit(xtr, ytr, sample_weight=weight, eval_set=[(xva, yva)], verbose=False)
p_py = m.predict_proba(xte)[:, 1]

g = h5py.File("g.h5", "r")
assert text(g.attrs["format"]) == "hpcml-gbdt-1" and text(g.attrs["objective"]) == "binary:logistic"
assert int(g.attrs["rounds"]) == m.best_iteration + 1, (int(g.attrs["rounds"]), m.best_iteration)
lineage = json.loads(g.attrs["lineage"])
assert lineage["input"]["label_classes"] == ["churn", "stay"], lineage["input"]
enc = {c["name"]: c for c in lineage["input"]["encoding"]["columns"]}
assert enc["plan"]["kind"] == "category" and enc["plan"]["vocabulary"] == dicts["plan"], enc
assert lineage["validation"]["step"] == int(g.attrs["rounds"]) and lineage["validation"]["selected"] == "best"
stats = lineage["input"]["stats"]
assert len(stats["mean"]) == 3 and abs(stats["mean"][0] - xtr["age"].mean()) < 1e-3, stats
b = xgb.Booster(model_file=bytearray(g["booster"][()]))
p_h = b.predict(xgb.DMatrix(xte, enable_categorical=True))
d = float(np.abs(p_py - p_h).max())
print(f"hpcml vs python3-xgboost {xgb.__version__}: {int(g.attrs['rounds'])} rounds each, "
      f"max |diff| {d:.1e} on {len(p_h)} test rows")
assert d <= 1e-6

lines = [json.loads(l) for l in open("m.jsonl")]
rounds = [l for l in lines if "round" in l]
assert rounds[0]["round"] == 1 and all("val_auc" in r for r in rounds), rounds[:2]
done = lines[-1]
assert done["event"] == "done" and done["best_round"] == int(g.attrs["rounds"]), done
assert done["early_stopped"] is True and done["rounds"] == len(rounds), done
PY

# Skew: v4 is the test rows with every age 30 years later.
$py - <<'PY'
import csv
rows = list(csv.DictReader(open("test.csv")))
with open("older.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=rows[0].keys())
    w.writeheader()
    for r in rows:
        r["age"] = f"{float(r['age']) + 30:.2f}"
        w.writerow(r)
PY
"$fcache" ingest set.h5 --csv older.csv --entity id --timestamp ts --label label --zone test \
  --classification internal >/dev/null || fail "ingest older"
out=$("$infer" score --model g.h5 --data set.h5 --data-version v3 --output t.csv 2>&1) ||
  { echo "$out"; fail "scoring v3"; }
! grep -q "skew:" <<<"$out" || fail "skew reported for rows like the training ones: $out"
out=$("$infer" score --model g.h5 --data set.h5 --data-version v4 --output o.csv 2>&1) ||
  { echo "$out"; fail "scoring v4"; }
grep -q "warning: skew: age: mean" <<<"$out" || { echo "$out"; fail "no skew reported for v4's age"; }
grep -m1 "skew:" <<<"$out"
if out=$("$infer" score --model g.h5 --data set.h5 --data-version v4 --max-skew 1 --output x.csv 2>&1); then
  fail "--max-skew 1 let v4 through"
fi
grep -q "training/serving skew beyond --max-skew 1: age" <<<"$out" || { echo "$out"; fail "--max-skew's refusal"; }

expect_usage() {  # expect_usage <fragment> <args...>
  local pat=$1
  shift
  local rc=0
  out=$("$train" "${args[@]}" "$@" 2>&1) || rc=$?
  [ "$rc" = 2 ] || { echo "$out"; fail "exit $rc (want 2) for: $*"; }
  grep -qF -- "$pat" <<<"$out" || { echo "$out"; fail "no '$pat' for: $*"; }
}
expect_usage "--early-stop-patience needs a validation version" --early-stop-patience 5
expect_usage "--colsample 0.5 with --checkpoint-dir: XGBoost's column sampling cannot be resumed" \
  --colsample 0.5 --checkpoint-dir ck
expect_usage "--checkpoint-adaptive is for the MLP" --checkpoint-dir ck --checkpoint-adaptive 60,600
expect_usage "splits the rows across all the job's ranks: leave --dp, --pp and --tp at 1" --dp 2
# An infinite cell (row 700, column 3), which XGBoost would bin silently.
"$fixture" inf.h5 1024 2 5 a,b,c,d inf@700 >/dev/null
if out=$("$train" --model gbdt --data inf.h5 --outputs 2 --rounds 5 --output inf_model.h5 2>&1); then
  fail "an infinite cell was trained on"
fi
grep -qF 'row 700, column 3 ("c") is inf' <<<"$out" || { echo "$out"; fail "the infinite cell's message"; }
[ ! -e inf_model.h5 ] || fail "a model was written from an infinite cell"
echo "gbdt_train: ok"
