#!/usr/bin/env bash
# fcache_validation.sh <mpiexec> <np> <hpcml-train> <make_fcache_fixture>
# Validation end to end on a feature set: training on v1, validating on v2
# (another draw of the same two-class rule, 300 rows: short last batches),
# over <np> ranks:
#  - eval events at every --eval-interval and after the last step, over all
#    300 rows, equal (1e-6 relative) between the layouts;
#  - the best model file holds the best evaluation's step and metrics, and
#    an independent numpy (float64) forward pass of that model over v2 gives
#    its log loss, accuracy and AUC (pairwise definition) to 1e-4;
#  - early stopping (lr 0: no evaluation improves on the first): exit 0 at
#    the right step, an early_stop event, the final model written;
#  - the best value and patience survive a resume from a checkpoint;
#  - a validation version with other feature names is refused naming both.
# numpy and h5py come from Debian: /usr/bin/python3 (the python3 first on
# PATH on these machines does not see them).
set -eu
mpiexec=$1 np=$2 train=$3 fixture=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset HPCML_ZONE
py=/usr/bin/python3
"$fixture" "$tmp/set.h5" 1024 2 5          # v1: training
"$fixture" "$tmp/set.h5" 300 2 6           # v2: validation (other rows, same rule)
"$fixture" "$tmp/set.h5" 300 2 7 a,b,c,e   # v3: other feature names

run() {  # [val=vN] run <np> <args...>: hpcml-train under mpiexec, validating on $val (v2)
  local n=$1
  shift
  timeout 120 "$mpiexec" --oversubscribe -n "$n" "$train" --data "$tmp/set.h5" --data-version v1 \
    --val-data "$tmp/set.h5" --val-version "${val:-v2}" --outputs 2 --hidden 16,16 --batch 64 --log-interval 1000 "$@"
}

# 1. Training with evaluations every 10 steps on dp = np/2 replicas (at least
#    1), then the same replicas with two pipeline stages each: the feature
#    cache's batches depend on the number of replicas only, so both train on
#    the same batches and must evaluate alike.
dp=$((np / 2 > 0 ? np / 2 : 1))
out=$(run "$dp" --dp "$dp" --steps 45 --lr 1e-2 --eval-interval 10 --metrics "$tmp/a.jsonl" \
  --output "$tmp/model.h5" 2>&1) || { echo "$out"; echo "FAIL: training with validation"; exit 1; }
echo "$out" | grep -E 'validation on|eval step|best validation'
[ -f "$tmp/model.best.h5" ] || { echo "FAIL: no best model next to --output"; exit 1; }
layouts="a.jsonl"
if [ "$np" -ge 2 ]; then
  out=$(run $((2 * dp)) --dp "$dp" --pp 2 --microbatches 2 --steps 45 --lr 1e-2 \
    --eval-interval 10 --metrics "$tmp/pp.jsonl" 2>&1) || { echo "$out"; echo "FAIL: pipeline run"; exit 1; }
  layouts="a.jsonl pp.jsonl"
fi
(cd "$tmp" && $py - $layouts) <<'PY'
import json, sys
runs = [[r for r in map(json.loads, open(f)) if r.get("event") == "eval"] for f in sys.argv[1:]]
for f, ev in zip(sys.argv[1:], runs):
    assert [e["step"] for e in ev] == [10, 20, 30, 40, 45], (f, [e["step"] for e in ev])
    assert all(e["rows"] == 300 and e["monitor"] == "log_loss" for e in ev), f
    assert all(0.5 < e["auc"] <= 1 and 0 < e["accuracy"] <= 1 for e in ev), f
    best = min(ev, key=lambda e: e["log_loss"])
    assert ev[-1]["best_step"] == best["step"], (f, ev[-1]["best_step"], best["step"])
worst = 0.0
for other in runs[1:]:
    for a, b in zip(runs[0], other):
        for k in ("log_loss", "accuracy", "auc"):
            d = abs(a[k] - b[k]) / max(abs(a[k]), 1e-30)
            worst = max(worst, d)
            assert d < 1e-6, (a["step"], k, a[k], b[k])
print("eval events ok; largest relative difference between layouts: %.3g" % worst)
PY

# 2. The best model against numpy over the validation version.
$py - "$tmp/model.best.h5" "$tmp/set.h5" "$tmp/a.jsonl" "$tmp/model.h5" <<'PY'
import json, sys
import h5py
import numpy as np
best_path, set_path, metrics, final_path = sys.argv[1:]
with h5py.File(best_path, "r") as f:
    lineage = json.loads(f.attrs["lineage"])
    n = len(f.attrs["dims"]) - 1
    W = [f["layer%d/weight" % i][()].astype(np.float64) for i in range(n)]
    b = [f["layer%d/bias" % i][()].astype(np.float64) for i in range(n)]
with h5py.File(set_path, "r") as f:
    x = f["versions/v2/features"][()].astype(np.float64)
    y = f["versions/v2/labels"][()].astype(np.int64)
    digest = f["versions/v2"].attrs["data_sha256"]
    digest = digest.decode() if isinstance(digest, bytes) else digest
# The model's input encoding (encoding.hpp): numbers standardised with the
# training statistics (in double, rounded to float32), missing ones 0 with
# an indicator; this fixture has no category features.
enc = lineage["input"]["encoding"]["columns"]
assert all(c["kind"] != "category" for c in enc), enc
nums = np.stack([((x[:, j] - c["center"]) / c["scale"]).astype(np.float32).astype(np.float64)
                 for j, c in enumerate(enc)], axis=1)
ind = [np.isnan(x[:, j]).astype(np.float64) for j, c in enumerate(enc) if c["indicator"]]
h = np.nan_to_num(np.concatenate([nums] + [i[:, None] for i in ind], axis=1), nan=0.0)
for i in range(n):
    h = h @ W[i].T + b[i]
    if i < n - 1:
        h = np.maximum(h, 0.0)
zmax = h.max(axis=1, keepdims=True)
lse = zmax[:, 0] + np.log(np.exp(h - zmax).sum(axis=1))
log_loss = float(np.mean(lse - h[np.arange(len(y)), y]))
accuracy = float(np.mean(h.argmax(axis=1) == y))
s = h[:, 1] - h[:, 0]
pos, neg = s[y == 1], s[y == 0]
auc = float(((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum())
            / (len(pos) * len(neg)))
v = lineage["validation"]
ev = {e["step"]: e for e in map(json.loads, open(metrics)) if e.get("event") == "eval"}
want = ev[v["step"]]
assert v["selected"] == "best" and v["monitor"] == "log_loss" and v["rows"] == 300, v
assert v["step"] == ev[max(ev)]["best_step"], (v["step"], ev[max(ev)]["best_step"])
assert v["data"]["version"] == "v2" and v["data"]["data_sha256"] == digest, v["data"]
assert lineage["steps"] == v["step"], (lineage["steps"], v["step"])
for k, mine in (("log_loss", log_loss), ("accuracy", accuracy), ("auc", auc)):
    assert abs(v["metrics"][k] - want[k]) < 1e-12, (k, v["metrics"][k], want[k])
    assert abs(mine - want[k]) < 1e-4, ("numpy", k, mine, want[k])
    print("best model (step %d) %s: hpcml-train %.6f, numpy %.6f" % (v["step"], k, want[k], mine))
with h5py.File(final_path, "r") as f:
    final = json.loads(f.attrs["lineage"])["validation"]
assert final["selected"] == "final" and final["step"] == 45, final
PY

# 3. Early stopping: with lr 0 no evaluation improves on the first (step 10),
#    so patience 2 stops after the evaluation at step 30.
out=$(run "$np" --dp "$np" --steps 100 --lr 0 --eval-interval 10 --early-stop-patience 2 \
  --metrics "$tmp/es.jsonl" --output "$tmp/es.h5" 2>&1) \
  || { echo "$out"; echo "FAIL: early stopping did not exit 0"; exit 1; }
echo "$out" | grep -q 'early stop at step 30: 2 evaluations without a lower validation log_loss' \
  || { echo "$out"; echo "FAIL: no early stop line"; exit 1; }
$py - "$tmp/es.jsonl" "$tmp/es.h5" <<'PY'
import json, sys
import h5py
ev = list(map(json.loads, open(sys.argv[1])))
assert [e["step"] for e in ev if e.get("event") == "eval"] == [10, 20, 30]
stop = [e for e in ev if e.get("event") == "early_stop"]
assert len(stop) == 1 and stop[0]["step"] == 30 and stop[0]["best_step"] == 10, stop
done = ev[-1]
assert done["event"] == "done" and done["steps"] == 30 and done["early_stopped"] is True, done
with h5py.File(sys.argv[2], "r") as f:
    assert json.loads(f.attrs["lineage"])["steps"] == 30
with h5py.File(sys.argv[2].replace(".h5", ".best.h5"), "r") as f:
    best = json.loads(f.attrs["lineage"])
    assert best["steps"] == 10 and best["validation"]["step"] == 10, best["validation"]
print("early stop ok: stopped at step 30, best step 10 (es.best.h5)")
PY

# 4. Resume: a first attempt ends at step 20 (evaluations at 10: best, 20: one
#    without improvement), a second one resumes with --steps 100 and must stop
#    at 40 like the uninterrupted run (patience 3), not at 50.
ck="$tmp/ck"
run "$np" --dp "$np" --steps 20 --lr 0 --eval-interval 10 --early-stop-patience 3 \
  --checkpoint-dir "$ck" --checkpoint-every 10 --checkpoint-sync >/dev/null 2>&1 \
  || { echo "FAIL: first attempt"; exit 1; }
out=$(run "$np" --dp "$np" --steps 100 --lr 0 --eval-interval 10 --early-stop-patience 3 \
  --checkpoint-dir "$ck" --checkpoint-every 10 --checkpoint-sync --metrics "$tmp/rs.jsonl" 2>&1) \
  || { echo "$out"; echo "FAIL: resumed attempt"; exit 1; }
echo "$out" | grep -q 'resumed from checkpoint step 20' || { echo "$out"; echo "FAIL: no resume"; exit 1; }
echo "$out" | grep -q 'early stop at step 40' \
  || { echo "$out"; echo "FAIL: the resumed run did not stop at step 40"; exit 1; }
# A third attempt on the stopped run trains no further.
out=$(run "$np" --dp "$np" --steps 100 --lr 0 --eval-interval 10 --early-stop-patience 3 \
  --checkpoint-dir "$ck" --checkpoint-every 10 --checkpoint-sync 2>&1) \
  || { echo "$out"; echo "FAIL: third attempt"; exit 1; }
echo "$out" | grep -q 'already stopped early' || { echo "$out"; echo "FAIL: trained again"; exit 1; }
echo "resume ok: patience carried over the checkpoint (stopped at 40)"

# 5. A validation version with other feature names is refused, naming both.
if out=$(val=v3 run "$np" --dp "$np" --steps 5 2>&1); then
  echo "$out"; echo "FAIL: v3 (other features) accepted"; exit 1
fi
n=$(grep -c 'hpcml-train: error: .*validation version .* v3) has the features \[a, b, c, e\], the training version .* v1) has \[a, b, c, d\]' <<<"$out" || true)
[ "$n" = 1 ] || { echo "$out"; echo "FAIL: expected one error naming both versions, got $n"; exit 1; }
echo "PASS: validation on a feature-cache version over $np ranks"
