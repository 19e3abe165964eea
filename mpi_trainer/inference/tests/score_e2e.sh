#!/usr/bin/env bash
# score_e2e.sh <mpiexec> <hpcml-fcache> <hpcml-train> <hpcml-infer> <node> <ort_score.mjs> <ort dir>
#              <inference_onnx_fixture>
# A newcomer's path end to end: ingest a CSV, derive a standardised version,
# train on it, then score with hpcml-infer on 1, 2 and 3 ranks:
#  - the raw version (the model applies its recorded standardisation) and
#    the standardised one give the same predictions, on any number of ranks;
#  - a feature-set output keeps entity, timestamp and label, and its lineage
#    names the input version's digest and the model file's SHA-256, whose
#    own lineage names the training version's digest (an auditor's walk);
#  - a CSV input with its columns in another order scores the same;
#  - the model exported to ONNX gives hpcml-infer's numbers in ONNX Runtime;
#  - a model trained on a real table with category features and missing
#    cells (HouseVotes84) scores the raw CSV, and its ONNX export gives the
#    same numbers in ONNX Runtime from the cells as strings;
#  - a version whose feature moved is reported as skew, and refused with
#    --max-skew;
#  - a different schema, a bad CSV cell and a missing model fail clearly;
#  - an encoded model (format 3, from inference_onnx_fixture) scores a CSV
#    with string categories and missing cells, and an ingested version of
#    the same rows (its own dictionaries), alike; a version whose column
#    kind differs from the model's, or a CSV without a model column, fails
#    naming the column.
set -eu
mpiexec=$1 fcache=$2 train=$3 infer=$4 node=$5 ort_runner=$6 ort_dir=$7 fixture=$8
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset HPCML_ZONE
cd "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
run() { timeout 120 "$@" 2>&1 || { echo "FAIL: $*"; exit 1; }; }

/usr/bin/python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(3)
n = 3000
x = np.column_stack([rng.uniform(18, 80, n), rng.uniform(10, 500, n), rng.integers(0, 10, n)])
y = ((x[:, 2] * 3 - x[:, 0] * 0.1 + x[:, 1] * 0.01 + rng.normal(0, 1, n)) > 4).astype(int)
with open("train.csv", "w") as f:
    f.write("customer,event_time,churned,age,spend,calls\n")
    for i in range(n):
        f.write(f"{1000 + i},{1700000000 + 60 * i},{y[i]},{x[i, 0]:.3f},{x[i, 1]:.2f},{int(x[i, 2])}\n")
# The same rows with spend 1.8 times larger: training/serving skew.
with open("shifted.csv", "w") as f:
    f.write("customer,event_time,churned,age,spend,calls\n")
    for i in range(n):
        f.write(f"{1000 + i},{1700000000 + 60 * i},{y[i]},{x[i, 0]:.3f},{1.8 * x[i, 1]:.2f},{int(x[i, 2])}\n")
# The same rows for CSV scoring, columns in another order, with an id column.
with open("score.csv", "w") as f:
    f.write("calls,id,spend,age\n")
    for i in range(n):
        f.write(f"{int(x[i, 2])},{1000 + i},{x[i, 1]:.2f},{x[i, 0]:.3f}\n")
PY
run "$fcache" ingest set.h5 --csv train.csv --entity customer --timestamp event_time \
  --label churned --zone ae --classification internal >/dev/null
run "$fcache" derive set.h5 --standardize >/dev/null                            # v2
run "$fcache" derive set.h5 --from v1 --select spend,age,calls >/dev/null       # v3: other order
run "$fcache" ingest set.h5 --csv shifted.csv --entity customer --timestamp event_time \
  --label churned --classification internal >/dev/null                           # v4: skewed
# 256 x 256 in the middle: a layer large enough to run in int8 below.
run "$train" --data set.h5 --data-version v2 --outputs 2 --hidden 256,256 --batch 100 --steps 300 \
  --lr 1e-2 --log-interval 300 --output model.h5 >/dev/null

# The model's lineage names the training version and its digest.
inspect=$(run "$infer" inspect model.h5 --json)
/usr/bin/python3 - "$inspect" <<'PY' || fail "model lineage"
import json, sys, h5py
m = json.loads(sys.argv[1])
v2 = h5py.File("set.h5", "r")["versions/v2"].attrs
d = m["lineage"]["data"]
assert d["version"] == "v2" and d["data_sha256"] == v2["data_sha256"], d
assert m["lineage"]["input"]["features"] == ["age", "spend", "calls"], m["lineage"]["input"]
assert m["lineage"]["input"]["standardized"] == [True, True, True]
assert m["lineage"]["steps"] == 300 and m["lineage"]["final_loss"] < m["lineage"]["first_loss"]
print("lineage ok:", d["path"], d["version"], d["data_sha256"][:12])
PY

for np in 1 2 3; do
  run "$mpiexec" --oversubscribe -n $np "$infer" score --model model.h5 --data set.h5 \
    --data-version v1 --batch 128 --threads 1 --output raw$np.csv >/dev/null
done
# The same batch and threads as raw1: oneDNN's float kernels may block
# other row counts otherwise (on AVX2 the last digit moved, 6e-8).
run "$infer" score --model model.h5 --data set.h5 --data-version v2 --batch 128 --threads 1 \
  --output std.csv >/dev/null
for f in raw2.csv raw3.csv std.csv; do
  cmp -s raw1.csv $f || fail "$f differs from raw1.csv"
done
[ "$(head -1 raw1.csv)" = "customer,event_time,p_0,p_1,class" ] || fail "header: $(head -1 raw1.csv)"
/usr/bin/python3 - "$(sha256sum raw1.csv | cut -d' ' -f1)" <<'PY' || fail "raw1.csv.lineage.json"
import json, sys, h5py
j = json.load(open("raw1.csv.lineage.json"))
assert j["output"]["sha256"] == sys.argv[1] and j["output"]["rows"] == 3000, j["output"]
assert j["input"]["sha256"] == h5py.File("set.h5", "r")["versions/v1"].attrs["data_sha256"]
print("CSV lineage ok")
PY
echo "1, 2 and 3 ranks and the standardised version: identical predictions"

run "$mpiexec" --oversubscribe -n 2 "$infer" score --model model.h5 --data set.h5 \
  --data-version v1 --output scores.h5 >/dev/null
model_sha=$(sha256sum model.h5 | cut -d' ' -f1)
/usr/bin/python3 - "$model_sha" <<'PY' || fail "scores.h5"
import json, sys, h5py, numpy as np
src = h5py.File("set.h5", "r")["versions/v1"]
out = h5py.File("scores.h5", "r")["versions/v1"]
a = out.attrs
assert a["operation"] == "infer", a["operation"]
assert a["zone"] == "ae" and a["classification"] == "internal"
t = json.loads(a["transform"])
assert t["input"]["uri"].endswith("/set.h5#v1") and t["input"]["sha256"] == src.attrs["data_sha256"]
assert t["model"]["sha256"] == sys.argv[1], (t["model"], sys.argv[1])
assert t["model"]["trained_on"]["version"] == "v2"
assert (out["entity_ids"][:] == src["entity_ids"][:]).all()
assert (out["timestamps"][:] == src["timestamps"][:]).all()
assert (out["labels"][:] == src["labels"][:]).all()
p = out["features"][:]
assert np.abs(p[:, 0] + p[:, 1] - 1).max() < 1e-6
assert (p[:, 2] == p[:, :2].argmax(1)).all()
acc = (p[:, 2] == out["labels"][:]).mean()
assert acc > 0.85, acc
print(f"scores.h5 v1: lineage ok, accuracy {acc:.3f}")
PY

# The exported model in ONNX Runtime on the same rows as hpcml-infer's raw1.csv.
run "$infer" export-onnx model.h5 -o model.onnx >/dev/null
/usr/bin/python3 -c '
import h5py
h5py.File("set.h5", "r")["versions/v1/features"][:].astype("<f4").tofile("rows.f32")'
run "$node" "$ort_runner" score --model model.onnx --input rows.f32 --output ort.f32 \
  --ort-dir "$ort_dir" >/dev/null
/usr/bin/python3 - <<'PY' || fail "ONNX Runtime against hpcml-infer"
import numpy as np
h = np.loadtxt("raw1.csv", delimiter=",", skiprows=1, usecols=(2, 3))
o = np.fromfile("ort.f32", dtype="<f4").reshape(h.shape)
d = np.abs(h - o).max()
print(f"ONNX Runtime against hpcml-infer on {len(h)} rows: max |diff| {d:.2e}")
assert d <= 1e-5
PY

# A real table with category features and missing cells (HouseVotes84: 16
# y/n votes, NA where a member did not vote, a string class), ingested as it
# is and trained by hpcml-train: hpcml-infer scores the raw CSV, and the ONNX
# export, given the same cells as strings, agrees in ONNX Runtime to 1e-5.
votes=$(cd "$(dirname "$0")/../../.." && pwd)/featurecache/tests/data/house_votes84.csv
run "$fcache" ingest votes.h5 --csv "$votes" --entity id --timestamp ts --label Class \
  --zone ae --classification internal >/dev/null
run "$train" --data votes.h5 --outputs 2 --hidden 16 --batch 29 --steps 60 --lr 1e-2 \
  --log-interval 60 --output votes_model.h5 >/dev/null
run "$infer" score --model votes_model.h5 --csv "$votes" --keep id --output votes_scored.csv >/dev/null
run "$infer" export-onnx votes_model.h5 -o votes.onnx >/dev/null
/usr/bin/python3 - "$votes" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
json.dump({f"V{i}": [r[f"V{i}"] for r in rows] for i in range(1, 17)}, open("votes.json", "w"))
PY
run "$node" "$ort_runner" score --model votes.onnx --strings votes.json --output votes_ort.f32 \
  --ort-dir "$ort_dir" >/dev/null
/usr/bin/python3 - <<'PY' || fail "the HouseVotes84 model in ONNX Runtime"
import csv
import numpy as np
rows = list(csv.reader(open("votes_scored.csv", newline="")))
assert rows[0] == ["id", "p_democrat", "p_republican", "class"], rows[0]
h = np.array([[float(r[1]), float(r[2])] for r in rows[1:]])
o = np.fromfile("votes_ort.f32", dtype="<f4").reshape(h.shape)
d = np.abs(h - o).max()
print(f"HouseVotes84 (categories, missing votes): ONNX Runtime against hpcml-infer --csv on {len(h)} rows: max |diff| {d:.2e}")
assert d <= 1e-5
PY

# int8: the accuracy on the labels moves by at most 0.02; the lineage says int8.
out=$(run "$infer" score --model model.h5 --data set.h5 --data-version v1 --precision int8 \
  --output int8.csv)
grep -q "int8 (1 of 3 layers" <<<"$out" || fail "int8 did not run on the 256 x 256 layer: $out"
/usr/bin/python3 - <<'PY' || fail "int8"
import json, h5py, numpy as np
y = h5py.File("set.h5", "r")["versions/v1/labels"][:]
f = np.loadtxt("raw1.csv", delimiter=",", skiprows=1, usecols=(2, 3, 4))
q = np.loadtxt("int8.csv", delimiter=",", skiprows=1, usecols=(2, 3, 4))
af, aq = (f[:, 2] == y).mean(), (q[:, 2] == y).mean()
print(f"int8: accuracy {aq:.4f} (fp32 {af:.4f}), max |p - p_fp32| {np.abs(q[:, :2] - f[:, :2]).max():.4f}, "
      f"same class {(q[:, 2] == f[:, 2]).mean():.4f}")
assert aq >= af - 0.02
assert json.load(open("int8.csv.lineage.json"))["precision"] == "int8"
PY

# CSV input, columns in another order, an id column kept.
run "$infer" score --model model.h5 --csv score.csv --keep id --output fromcsv.csv >/dev/null
/usr/bin/python3 - <<'PY' || fail "CSV input"
import numpy as np
a = np.loadtxt("raw1.csv", delimiter=",", skiprows=1, usecols=(0, 2, 3, 4))
b = np.loadtxt("fromcsv.csv", delimiter=",", skiprows=1)
assert (a[:, 0] == b[:, 0]).all() and np.abs(a[:, 1:] - b[:, 1:]).max() < 1e-6
print("CSV input: same predictions")
PY

# Skew: the training version's statistics are in the model; v1 has none to
# report, v4's spend moved, and --max-skew turns that into a refusal.
out=$(run "$infer" score --model model.h5 --data set.h5 --data-version v1 --output s1.csv)
! grep -q "skew:" <<<"$out" || fail "skew reported for the training rows themselves: $out"
out=$(run "$infer" score --model model.h5 --data set.h5 --data-version v4 --output s4.csv)
grep -q "warning: skew: spend: mean" <<<"$out" || fail "no skew reported for v4: $out"
echo "$(grep -m1 'skew:' <<<"$out")"

expect_error() {  # <pattern> <command...>
  local pat=$1 out
  shift
  if out=$(timeout 60 "$@" 2>&1); then fail "accepted: $*"; fi
  grep -q -- "$pat" <<<"$out" || { echo "$out"; fail "no '$pat' from: $*"; }
  echo "refused: $(grep -m1 -- "$pat" <<<"$out")"
}
expect_error 'feature 1 is "spend", but the model model.h5 was trained with "age"' \
  "$mpiexec" --oversubscribe -n 2 "$infer" score --model model.h5 --data set.h5 \
  --data-version v3 --output x.csv
[ ! -e x.csv ] || fail "a refused run left x.csv"
# A number feature cell that is neither a number nor a missing word (the model is
# encoded: "NA" or an empty cell would be imputed).
printf 'calls,id,spend,age\n1,7,oops,30\n' >bad.csv
expect_error 'bad.csv: line 2, column 3: "oops" is not a number' \
  "$infer" score --model model.h5 --csv bad.csv --output x.csv
expect_error 'nope.h5: cannot open' "$infer" score --model nope.h5 --data set.h5 --output x.csv
expect_error 'a feature-set output needs a feature-set input' \
  "$infer" score --model model.h5 --csv score.csv --output x.h5
expect_error 'exactly one of --data and --csv' "$infer" score --model model.h5 --output x.csv
# A version with a missing cell (v5). The model hpcml-train wrote is encoded:
# the cell is imputed as in training and both rows are scored. A model
# without an encoding (format 2, as written before encodings: made here from
# model.h5, whose three number features need no indicator) given NaN could
# print a finite, wrong score, so there the cell is refused by row and feature.
printf 'customer,event_time,churned,age,spend,calls\n1,1700000000,0,30,10,1\n2,1700000060,1,40,NA,2\n' >holes.csv
run "$fcache" ingest set.h5 --csv holes.csv --entity customer --timestamp event_time \
  --label churned --classification internal >/dev/null
run "$infer" score --model model.h5 --data set.h5 --data-version v5 --output holes_scored.csv >/dev/null
/usr/bin/python3 - <<'PY' || fail "the encoded model on a version with a missing cell"
import csv, math
rows = list(csv.DictReader(open("holes_scored.csv", newline="")))
assert len(rows) == 2 and all(math.isfinite(float(r["p_1"])) for r in rows), rows
PY
/usr/bin/python3 - <<'PY' || fail "making a format-2 model"
import json, shutil
import h5py
shutil.copy("model.h5", "legacy.h5")
with h5py.File("legacy.h5", "r+") as f:
    lineage = json.loads(f.attrs["lineage"])
    assert all(c["kind"] != "category" and not c["indicator"]
               for c in lineage["input"].pop("encoding")["columns"])
    f.attrs["lineage"] = json.dumps(lineage)
    f.attrs["format"] = "hpcml-mlp-2"
PY
expect_error 'set.h5 v5: row 1, feature "spend": a missing (NaN) value; the model needs every cell' \
  "$mpiexec" --oversubscribe -n 2 "$infer" score --model legacy.h5 --data set.h5 \
  --data-version v5 --output x.csv
expect_error 'training/serving skew beyond --max-skew 1: spend' \
  "$infer" score --model model.h5 --data set.h5 --data-version v4 --max-skew 1 --output x.csv

# An encoded model with category features, the fixture's
# (age, colour, spend, plan name, calls, active; classes stay, churn,
# "up,grade"). Its rows.csv has the features in reverse order, categories as
# text (a kept "NA" colour, values never kept), missing cells empty or NA.
run "$fixture" enc 300 >/dev/null
m=enc/encoded_relu_ce
run "$infer" score --model $m/model.h5 --csv $m/rows.csv --keep id --output enc_csv.csv >/dev/null
# The same rows ingested: in file order, with a timestamp; colour keeps "NA"
# as a value. The version's dictionaries number values by first appearance.
/usr/bin/python3 - $m/rows.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
with open("enc.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(rows[0] + ["event_time"])
    for i, r in enumerate(rows[1:]):
        w.writerow(r + [1700000000 + 60 * i])
drop = rows[0].index("plan name")  # for the missing-column error below
with open("cut.csv", "w", newline="") as f:
    csv.writer(f).writerows([r[:drop] + r[drop + 1:] for r in rows])
PY
run "$fcache" ingest enc.h5 --csv enc.csv --entity id --timestamp event_time \
  --features 'age,colour,spend,plan name,calls,active' --column-na-values colour= \
  --types calls=int,active=bool --zone ae --classification internal >/dev/null   # v1
run "$mpiexec" --oversubscribe -n 2 "$infer" score --model $m/model.h5 --data enc.h5 \
  --data-version v1 --batch 64 --output enc_set.csv >/dev/null
/usr/bin/python3 - $m/scores.engine.f32 <<'PY' || fail "encoded model"
import csv, sys
import numpy as np
a = list(csv.reader(open("enc_csv.csv", newline="")))
b = list(csv.reader(open("enc_set.csv", newline="")))
assert a[0] == ["id", "p_stay", "p_churn", "p_up,grade", "class"], a[0]
assert b[0] == ["id", "event_time", "p_stay", "p_churn", "p_up,grade", "class"], b[0]
pa = np.array([[float(v) for v in r[1:4]] for r in a[1:]])
pb = np.array([[float(v) for v in r[2:5]] for r in b[1:]])
engine = np.fromfile(sys.argv[1], dtype="<f4").reshape(pa.shape)
assert [r[0] for r in a[1:]] == [r[0] for r in b[1:]]
assert [r[4] for r in a[1:]] == [["stay", "churn", "up,grade"][i] for i in pa.argmax(1)]
assert [r[4] for r in a[1:]] == [r[5] for r in b[1:]]
d_set, d_eng = np.abs(pa - pb).max(), np.abs(pa - engine).max()
print(f"encoded model: CSV vs the ingested version {d_set:.1e}, vs the engine {d_eng:.1e}")
assert d_set <= 1e-6 and d_eng <= 1e-6
PY
# A version where calls is a category: the kinds differ (v2).
run "$fcache" ingest enc.h5 --csv enc.csv --entity id --timestamp event_time \
  --features 'age,colour,spend,plan name,calls,active' --types calls=category,active=bool \
  --classification internal >/dev/null
expect_error 'enc.h5 v2: feature "calls" is a category column, but the model .* as a number (int)' \
  "$infer" score --model $m/model.h5 --data enc.h5 --data-version v2 --output x.csv
expect_error 'the header has no column "plan name" (a feature of the model)' \
  "$infer" score --model $m/model.h5 --csv cut.csv --keep id --output x.csv
echo "PASS: hpcml-infer end to end"
