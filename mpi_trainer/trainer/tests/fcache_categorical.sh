#!/usr/bin/env bash
# fcache_categorical.sh <mpiexec> <hpcml-fcache> <hpcml-train> <house_votes84.csv>
# A real table with only category features and missing cells (R's mlbench
# HouseVotes84: 16 y/n votes, NA where a member did not vote, a string
# class), ingested as it is and trained on 2 ranks:
#  - split by id (every fifth row validates), both splits ingested unedited;
#  - two pipeline stages with validation, balanced class weights and
#    checkpoints: the best model is format hpcml-mlp-3 with the encoding
#    (16 embedding tables of the values y and n, the unknown row shared by
#    NA), the class names, the rows per class and the digests in its lineage;
#  - an independent float64 numpy forward pass of that model over the
#    validation version (its own dictionaries mapped by value) gives the
#    log loss hpcml-train reported, to 1e-4, and the AUC is above 0.95;
#  - resumed from its step-20 checkpoint as two tensor-parallel ranks, the run
#    ends within 1e-5 (relative) of the uninterrupted final loss;
#  - an --embed-dim naming no category feature and --class-weight with the
#    wrong count are refused naming the option and the cause.
set -eu
mpiexec=$1 fcache=$2 train=$3 csv=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset HPCML_ZONE
export OMPI_MCA_btl_vader_single_copy_mechanism=none
py=/usr/bin/python3
fail() {
  echo "FAIL: fcache_categorical: $*"
  exit 1
}

# Column 2 is the id; the header goes to both splits.
awk -F, -v out="$tmp" 'NR == 1 { print > out "/train.csv"; print > out "/val.csv"; next }
  { print > (out ($2 % 5 == 0 ? "/val.csv" : "/train.csv")) }' "$csv"
for part in train val; do
  "$fcache" ingest "$tmp/set.h5" --csv "$tmp/$part.csv" --entity id --timestamp ts \
    --label Class --zone test --classification internal >/dev/null || fail "ingest $part"
done

args=(--data "$tmp/set.h5" --data-version v1 --val-version v2 --outputs 2 --hidden 16,16
  --batch 32 --lr 1e-2 --steps 40 --eval-interval 10 --log-interval 1000)
run() {  # run <ranks> <layout and other args...>
  local n=$1
  shift
  timeout 120 "$mpiexec" --oversubscribe -n "$n" "$train" "${args[@]}" "$@" 2>&1
}
out=$(run 2 --pp 2 --microbatches 2 --class-weight balanced --checkpoint-dir "$tmp/ck" --checkpoint-every 10 \
  --checkpoint-keep 10 --metrics "$tmp/full.jsonl" --output "$tmp/model.h5") ||
  { echo "$out"; fail "training on the table"; }
echo "$out" | grep -E 'best validation|done:'

$py - "$tmp/model.best.h5" "$tmp/set.h5" "$tmp/full.jsonl" <<'PY'
import json, sys
import h5py
import numpy as np
model, fs, metrics = sys.argv[1:]
with h5py.File(model, "r") as f:
    fmt = f.attrs["format"]
    assert (fmt.decode() if isinstance(fmt, bytes) else fmt) == "hpcml-mlp-3", fmt
    lin = json.loads(f.attrs["lineage"])
    n = len(f.attrs["dims"]) - 1
    W = [f["layer%d/weight" % i][()].astype(np.float64) for i in range(n)]
    b = [f["layer%d/bias" % i][()].astype(np.float64) for i in range(n)]
    E = [f["embed%d/weight" % j][()].astype(np.float64) for j in range(16)]
inp = lin["input"]
enc = inp["encoding"]["columns"]
assert inp["label_classes"] == ["democrat", "republican"], inp["label_classes"]
assert sum(lin["data"]["class_rows"]) == lin["data"]["rows"], lin["data"]
assert len(enc) == 16 and all(c["kind"] == "category" for c in enc), enc
for c, e in zip(enc, E):
    assert sorted(c["vocabulary"]) == ["n", "y"] and len(c["vocabulary_sha256"]) == 64, c
    assert e.shape == (3, c["embed_dim"]), (e.shape, c)
weights = json.loads(json.dumps(lin["settings"]))["class_weights"]
rows = lin["data"]["class_rows"]
assert abs(weights[0] - sum(rows) / (2 * rows[0])) < 1e-5, (weights, rows)

with h5py.File(fs, "r") as f:
    g = f["versions/v2"]
    x = g["features"][()].astype(np.float64)
    y = g["labels"][()].astype(np.int64)
    flat = [v.decode() for v in g["categories"][()]]
    counts = [int(k) for k in g.attrs["category_counts"]]
# Each feature's dictionary (the version's own codes), then the encoded row:
# its code mapped by value to the model's (the unknown code when not kept;
# NaN is missing, also unknown), replaced by that row of its table.
parts, at = [], 0
for j, (c, k) in enumerate(zip(enc, counts)):
    d, at = flat[at:at + k], at + k
    vocab = c["vocabulary"]
    unknown = len(vocab)
    to_model = [vocab.index(v) if v in vocab else unknown for v in d]
    codes = np.array([unknown if np.isnan(v) else to_model[int(v)] for v in x[:, j]])
    parts.append(E[j][codes])
assert any(np.isnan(x).ravel()), "the validation split has missing votes"
h = np.concatenate(parts, axis=1)
for i in range(n):
    h = h @ W[i].T + b[i]
    if i < n - 1:
        h = np.maximum(h, 0.0)
zmax = h.max(axis=1, keepdims=True)
lse = zmax[:, 0] + np.log(np.exp(h - zmax).sum(axis=1))
log_loss = float(np.mean(lse - h[np.arange(len(y)), y]))
v = lin["validation"]
ev = {e["step"]: e for e in map(json.loads, open(metrics)) if e.get("event") == "eval"}
want = ev[v["step"]]
assert abs(log_loss - want["log_loss"]) < 1e-4, ("numpy", log_loss, want["log_loss"])
assert want["auc"] > 0.95, want
print("best model (step %d): log_loss hpcml-train %.6f, numpy %.6f; auc %.4f" %
      (v["step"], want["log_loss"], log_loss, want["auc"]))
PY
[ $? = 0 ] || fail "the best model against numpy"

# Resume from step 20 in another layout: two tensor-parallel ranks.
loss40() { $py -c 'import json,sys
print(repr([json.loads(l) for l in open(sys.argv[1]) if json.loads(l).get("step") == 40 and "loss" in json.loads(l)][-1]["loss"]))' "$1"; }
cp -r "$tmp/ck" "$tmp/ck2"
for d in "$tmp"/ck2/step-*; do [ "$((10#${d##*step-}))" -gt 20 ] && rm -rf "$d"; done
out=$(run 2 --tp 2 --class-weight balanced --checkpoint-dir "$tmp/ck2" --metrics "$tmp/resumed.jsonl") ||
  { echo "$out"; fail "resuming as --tp 2"; }
grep -q "resumed from checkpoint step 20 " <<<"$out" || { echo "$out"; fail "did not resume from step 20"; }
a=$(loss40 "$tmp/full.jsonl") b=$(loss40 "$tmp/resumed.jsonl")
$py -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if abs(a-b)<=1e-5*abs(a) else 1)" \
  "$a" "$b" || fail "final loss $b after resuming as --tp 2, uninterrupted $a"
echo "resumed as --tp 2 from step 20: final loss $b (uninterrupted $a)"

# Options that do not fit the data.
out=$(run 1 --embed-dim V99=3) && fail "--embed-dim V99=3 accepted"
grep -q -- '--embed-dim V99=3: "V99" is not a category feature' <<<"$out" || { echo "$out"; fail "--embed-dim message"; }
out=$(run 1 --class-weight 1,2,3) && fail "three class weights accepted"
grep -q -- '--class-weight gives 3 weights for 2 classes' <<<"$out" || { echo "$out"; fail "--class-weight message"; }
echo "fcache_categorical: ok"
