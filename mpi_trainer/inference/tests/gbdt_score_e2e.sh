#!/usr/bin/env bash
# gbdt_score_e2e.sh <mpiexec> <hpcml-fcache> <hpcml-infer> <inference_gbdt_fixture>
# GBDT models (binary, multi-class, regression; written by the fixture
# through XGBoost's C API) scored by hpcml-infer on 2 ranks:
#  - from a CSV with string categories (a value never seen in training,
#    missing cells empty or NA, the features in another order): the
#    predictions are python3-xgboost's on the same rows (a pandas category
#    column whose categories are the vocabulary in order) to 1e-6, under
#    p_<class> columns and the class by name; the CSV's lineage names the
#    model file's SHA-256 and format;
#  - from an ingested version of the same rows (its own dictionary order):
#    the same predictions, to a CSV and to a feature-set output whose
#    lineage names the model;
#  - inspect shows the objective, rounds, features and classes;
#  - int8, ONNX export and a CSV without a model column are refused clearly.
set -eu
mpiexec=$1 fcache=$2 infer=$3 fixture=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset HPCML_ZONE
cd "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
run() { timeout 120 "$@" 2>&1 || { echo "FAIL: $*"; exit 1; }; }
expect_error() {  # <pattern> <command...>
  local pat=$1 out
  shift
  if out=$(timeout 60 "$@" 2>&1); then fail "accepted: $*"; fi
  grep -q -- "$pat" <<<"$out" || { echo "$out"; fail "no '$pat' from: $*"; }
  echo "refused: $(grep -m1 -- "$pat" <<<"$out")"
}

run "$fixture" . 500 >/dev/null
for kind in binary multi regression; do
  out=$(run "$mpiexec" --oversubscribe -n 2 "$infer" score --model $kind/model.h5 --csv rows.csv \
    --keep id --batch 64 --threads 1 --output $kind.csv)
  grep -q "GBDT .*, 20 rounds" <<<"$out" || fail "the log does not name the GBDT model: $out"
done

# python3-xgboost on the same rows, as XGBoost's Python users would score
# them: the booster from the file's bytes, the features in the model's
# order, colour a category whose categories are the vocabulary in order
# (an unseen value becomes missing).
/usr/bin/python3 - <<'PY' || fail "hpcml-infer against python3-xgboost"
import csv, hashlib, json
import h5py, numpy as np, pandas as pd, xgboost

raw = pd.read_csv("rows.csv", dtype={"colour": str})
want_header = {
    "binary": ["id", "p_stay", "p_churn", "class"],
    "multi": ["id", "p_low", "p_mid", "p_high", "class"],
    "regression": ["id", "amount_pred"],
}
for kind, header in want_header.items():
    f = h5py.File(f"{kind}/model.h5", "r")
    lineage = json.loads(f.attrs["lineage"])
    booster = xgboost.Booster(model_file=bytearray(f["booster"][()]))
    cols = lineage["input"]["encoding"]["columns"]
    df = pd.DataFrame()
    for c in cols:
        if c["kind"] == "category":
            df[c["name"]] = pd.Categorical(raw[c["name"]], categories=c["vocabulary"])
        else:
            df[c["name"]] = raw[c["name"]].astype(np.float32)
    assert df["colour"].isna().sum() > raw["colour"].isna().sum(), "no unseen colour in the rows"
    p = booster.predict(xgboost.DMatrix(df, enable_categorical=True))
    rows = list(csv.reader(open(f"{kind}.csv", newline="")))
    assert rows[0] == header, (kind, rows[0])
    assert [int(r[0]) for r in rows[1:]] == list(raw["id"]), kind
    got = np.array([[float(v) for v in r[1:len(header) - (kind != "regression")]] for r in rows[1:]])
    classes = lineage["input"].get("label_classes", [])
    if kind == "binary":
        want = np.column_stack([1 - p, p])
    else:
        want = p.reshape(len(got), -1)
    d = np.abs(got - want).max()
    print(f"{kind}: hpcml-infer --csv on 2 ranks against python3-xgboost {xgboost.__version__} "
          f"on {len(got)} rows: max |diff| {d:.1e}")
    assert d <= 1e-6, d
    if classes:
        assert [r[-1] for r in rows[1:]] == [classes[i] for i in got.argmax(1)], kind
    j = json.load(open(f"{kind}.csv.lineage.json"))
    sha = hashlib.sha256(open(f"{kind}/model.h5", "rb").read()).hexdigest()
    assert j["model"]["sha256"] == sha and j["model"]["format"] == "hpcml-gbdt-1", j["model"]
    assert j["input"]["sha256"] == hashlib.sha256(open("rows.csv", "rb").read()).hexdigest()
    assert j["precision"] == "fp32" and j["output"]["columns"] == header[1:], j
PY

# The same rows ingested (colour's dictionary in order of appearance, purple
# in it): scored from the version, to a CSV and to a feature set.
run "$fcache" ingest rows.h5 --csv rows.csv --entity id --timestamp event_time \
  --features age,colour,spend,visits --types visits=int --zone ae \
  --classification internal >/dev/null
run "$mpiexec" --oversubscribe -n 2 "$infer" score --model binary/model.h5 --data rows.h5 \
  --batch 64 --threads 1 --output fromset.csv >/dev/null
run "$mpiexec" --oversubscribe -n 2 "$infer" score --model multi/model.h5 --data rows.h5 \
  --batch 64 --threads 1 --output scores.h5 >/dev/null
/usr/bin/python3 - "$(sha256sum multi/model.h5 | cut -d' ' -f1)" <<'PY' || fail "version input"
import csv, json, sys
import h5py, numpy as np
a = list(csv.reader(open("binary.csv", newline="")))
b = list(csv.reader(open("fromset.csv", newline="")))
assert b[0] == ["id", "event_time", "p_stay", "p_churn", "class"], b[0]
assert [r[0] for r in a[1:]] == [r[0] for r in b[1:]]
pa = np.array([[float(v) for v in r[1:3]] for r in a[1:]])
pb = np.array([[float(v) for v in r[2:4]] for r in b[1:]])
assert [r[3] for r in a[1:]] == [r[4] for r in b[1:]]
d = np.abs(pa - pb).max()
print(f"binary: the ingested version against the CSV: max |diff| {d:.1e}")
assert d <= 1e-6, d
m = list(csv.reader(open("multi.csv", newline="")))
pm = np.array([[float(v) for v in r[1:4]] for r in m[1:]])
out = h5py.File("scores.h5", "r")["versions/v1"]
assert list(out.attrs["feature_names"]) == ["p_low", "p_mid", "p_high", "class"], out.attrs["feature_names"]
t = json.loads(out.attrs["transform"])
assert t["model"]["sha256"] == sys.argv[1] and t["model"]["format"] == "hpcml-gbdt-1", t["model"]
assert t["model"]["trained_on"]["path"] == "/data/ae/churn.h5", t["model"]
x = out["features"][:]
d = np.abs(x[:, :3] - pm).max()
assert (x[:, 3] == pm.argmax(1)).all()
print(f"multi: feature-set output against the CSV scoring: max |diff| {d:.1e}; lineage names the model")
assert d <= 1e-6, d
PY

text=$(run "$infer" inspect binary/model.h5)
for want in "format      hpcml-gbdt-1" "trees       binary:logistic, 20 rounds, 2 output(s)" \
  "input       4 features, label class" "  2  colour  \[category: 4 values\]" \
  "  4  visits  \[int\]" "classes     stay, churn" "trained on  /data/ae/churn.h5 v1"; do
  grep -q -- "$want" <<<"$text" || { echo "$text"; fail "inspect: no '$want'"; }
done
json=$(run "$infer" inspect regression/model.h5 --json)
/usr/bin/python3 - "$json" "$(sha256sum regression/model.h5 | cut -d' ' -f1)" <<'PY' || fail "inspect --json"
import json, sys
j = json.loads(sys.argv[1])
assert j["sha256"] == sys.argv[2] and j["format"] == "hpcml-gbdt-1", j
assert j["trees"] == {"objective": "reg:squarederror", "rounds": 20, "outputs": 1,
                      "booster_bytes": j["trees"]["booster_bytes"]}, j["trees"]
assert j["lineage"]["input"]["features"] == ["age", "colour", "spend", "visits"]
print("inspect: objective, rounds, features, classes and lineage")
PY

cut -d, -f1,2,3,5,6 rows.csv >nocolour.csv
expect_error 'the header has no column "colour" (a feature of the model)' \
  "$mpiexec" --oversubscribe -n 2 "$infer" score --model binary/model.h5 --csv nocolour.csv \
  --keep id --output x.csv
expect_error '--precision int8: binary/model.h5 is a GBDT model, which scores in fp32 only' \
  "$infer" score --model binary/model.h5 --csv rows.csv --precision int8 --output x.csv
[ ! -e x.csv ] || fail "a refused run left its output"
# export-onnx writes the tree ensemble (checked in ONNX Runtime by trees_gbdt_onnx).
"$infer" export-onnx binary/model.h5 -o x.onnx >/dev/null 2>&1 && [ -s x.onnx ] ||
  fail "export-onnx of a GBDT model"
echo "PASS: GBDT models in hpcml-infer"
