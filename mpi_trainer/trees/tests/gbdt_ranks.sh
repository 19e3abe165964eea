#!/usr/bin/env bash
# gbdt_ranks.sh <mpiexec> <hpcml-fcache> <hpcml-train> <trainer_make_fcache_fixture>
# hpcml-train --model gbdt on two MPI ranks (XGBoost's collective, its
# tracker started by rank 0), on a table with category columns and missing
# cells:
#  - on discretised features (under max_bin distinct values) two ranks grow
#    the one-rank trees: the same splits, probabilities to 1e-5, with hpcml's
#    row sampling (--subsample 0.8) and validation;
#  - on continuous features the merged quantile sketch gives other cut
#    points: the difference is printed, and both models must be as good;
#  - cut and resumed on two ranks: the uninterrupted two-rank model, byte for byte;
#  - SIGTERM to rank 1 only: every rank saves at the same round and exits 85;
#    the resume ends with the uninterrupted model;
#  - a one-rank checkpoint is refused by a two-rank run (the rows split otherwise);
#  - failures on one rank are every rank's, none left waiting: a bad cell in
#    rank 1's shard only, and a tracker that cannot start on rank 0.
mpiexec=$1 fcache=$2 train=$3 fixture=$4
source "$(dirname "$0")/lib.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpi=(timeout 180 "$mpiexec" --oversubscribe)

for kind in discrete continuous; do
  flag=()
  [ $kind = discrete ] && flag=(--discrete)
  $py "$churn_table" --rows 6000 --seed 7 --split train:0:5000,val:5000:6000 --regions 8 \
    --label-name churn "${flag[@]}"
  for part in train val; do
    "$fcache" ingest $kind.h5 --csv $part.csv --entity id --timestamp ts --label churn \
      --zone test --classification internal >/dev/null || fail "ingest $kind $part"
  done
done

digest() { $py -c 'import h5py,sys; print(h5py.File(sys.argv[1], "r").attrs["booster_sha256"])' "$1"; }
settings=(--model gbdt --data-version v1 --val-version v2 --outputs 2 --max-depth 5
  --eta 0.2 --seed 3 --threads 1 --log-interval 20)
# one <name> <args...> and two <name> <args...>: a run on one rank, or on
# two, with --subsample $SUB (0.8 unless set) and --rounds $ROUNDS (60).
one() {
  local name=$1
  shift
  timeout 120 "$train" "${settings[@]}" --subsample "${SUB:-0.8}" --rounds "${ROUNDS:-60}" --output "$name.h5" "$@" \
    >"$name.log" 2>&1
}
two() {
  local name=$1
  shift
  "${mpi[@]}" -n 2 "$train" "${settings[@]}" --subsample "${SUB:-0.8}" --rounds "${ROUNDS:-60}" --output "$name.h5" "$@" \
    >"$name.log" 2>&1
}

# compare.py <a.h5> <b.h5> <data.h5> <same|close>: the trees' splits and the
# probabilities on the validation rows.
cat >compare.py <<'PY'
import json, sys
import h5py, numpy as np, xgboost as xgb
a, b, data, want = sys.argv[1:5]
def booster(path):
    m = xgb.Booster()
    m.load_model(bytearray(h5py.File(path, "r")["booster"][()].tobytes()))
    return m
def splits(m):
    out = []
    def walk(n):
        if "leaf" in n:
            return
        out.append((n["split"], n.get("split_condition"), tuple(n.get("cats", []))))
        for c in n["children"]:
            walk(c)
    for t in m.get_dump(dump_format="json"):
        walk(json.loads(t))
    return out
ma, mb = booster(a), booster(b)
f = h5py.File(data, "r")
v = f["versions/v2"]
cols = [c.decode() if isinstance(c, bytes) else c for c in v.attrs["feature_names"]]
x = np.asarray(v["features"], dtype=np.float32)
d = xgb.DMatrix(x, feature_names=cols, feature_types=ma.feature_types, enable_categorical=True)
pa, pb = ma.predict(d), mb.predict(d)
diff = float(np.max(np.abs(pa - pb)))
sa, sb = splits(ma), splits(mb)
same = sum(1 for p, q in zip(sa, sb) if p == q)
print(f"{len(sa)} splits, {same} identical; probabilities differ by at most {diff:.2e}")
if want == "same":
    assert sa == sb, "the two-rank trees split otherwise"
    assert diff < 1e-5, diff
PY
two two_discrete --data discrete.h5 || { cat two_discrete.log; fail "two ranks, discrete"; }
grep -q "XGBoost tracker on 127.0.0.1:[0-9]* for 2 ranks" two_discrete.log ||
  { cat two_discrete.log; fail "no tracker line"; }
grep -q "on each of 2 ranks" two_discrete.log || fail "the start line names no ranks"
one one_discrete --data discrete.h5 || { cat one_discrete.log; fail "one rank, discrete"; }
echo -n "discrete, 1 vs 2 ranks: "
$py compare.py one_discrete.h5 two_discrete.h5 discrete.h5 same || fail "discrete: 2 ranks != 1 rank"
# The unsampled run differs from the sampled: the sampler is used across ranks.
SUB=1 two two_unsampled --data discrete.h5 || { cat two_unsampled.log; fail "unsampled"; }
[ "$(digest two_unsampled.h5)" != "$(digest two_discrete.h5)" ] || fail "--subsample had no effect"

two two_cont --data continuous.h5 || { cat two_cont.log; fail "two ranks, continuous"; }
one one_cont --data continuous.h5 || { cat one_cont.log; fail "one rank, continuous"; }
echo -n "continuous, 1 vs 2 ranks: "
$py compare.py one_cont.h5 two_cont.h5 continuous.h5 close || fail "continuous comparison"
$py - <<'PY' || fail "the two-rank continuous model is worse"
import json, h5py
def loss(p):
    return json.loads(h5py.File(p, "r").attrs["lineage"])["validation"]["metrics"]["log_loss"]
a, b = loss("one_cont.h5"), loss("two_cont.h5")
print(f"continuous: validation log loss {a:.4f} on one rank, {b:.4f} on two")
assert abs(a - b) < 0.02, (a, b)
PY

# Cut after 25 rounds (checkpoints every 10), resumed to 60 from round 20:
# the uninterrupted two-rank model.
rm -rf ck
ROUNDS=25 two cut --data discrete.h5 --checkpoint-dir ck --checkpoint-every 10 ||
  { cat cut.log; fail "the cut run"; }
two resumed --data discrete.h5 --checkpoint-dir ck --checkpoint-every 10 ||
  { cat resumed.log; fail "the resumed run"; }
grep -q "resumed from checkpoint round 20" resumed.log || { cat resumed.log; fail "no resume"; }
[ "$(digest resumed.h5)" = "$(digest two_discrete.h5)" ] || fail "resumed on 2 ranks != uninterrupted"
echo "cut at 25, resumed on two ranks from round 20: the uninterrupted model"

# A one-rank checkpoint on two ranks: refused.
rm -rf ck1
ROUNDS=10 one cut1 --data discrete.h5 --checkpoint-dir ck1 --checkpoint-every 10 ||
  { cat cut1.log; fail "one-rank cut run"; }
if two mixed --data discrete.h5 --checkpoint-dir ck1; then fail "a one-rank checkpoint resumed on two ranks"; fi
grep -q "is of another run (other settings, data or ranks)" mixed.log || { cat mixed.log; fail "mixed: message"; }

# SIGTERM to rank 1 only: both save at the same round and exit 85.
rm -rf ck
long=(--model gbdt --data discrete.h5 --data-version v1 --outputs 2 --rounds 1000 --max-depth 8
  --eta 0.05 --subsample 0.8 --seed 3 --threads 1 --log-interval 500 --checkpoint-every 50)
"${mpi[@]}" -n 2 "$train" "${long[@]}" --checkpoint-dir ck --output sig.h5 >sig.log 2>&1 &
pid=$!
rank1=
for _ in $(seq 600); do
  for p in $(pgrep -f "hpcml-train --model gbdt" || true); do
    tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && rank1=$p
  done
  [ -n "$rank1" ] && ls ck/gbdt-round-*.h5 >/dev/null 2>&1 && break
  sleep 0.05
done
[ -n "$rank1" ] || { cat sig.log; fail "rank 1 not found"; }
kill -TERM "$rank1"
rc=0
wait $pid || rc=$?
[ "$rc" = 85 ] || { cat sig.log; fail "SIGTERM to rank 1: exit $rc, want 85"; }
grep -q "stopping at round [0-9]* (another rank's stop signal): checkpoint saved" sig.log ||
  { cat sig.log; fail "rank 0 did not stop for rank 1's signal"; }
[ ! -e sig.h5 ] || fail "the interrupted run wrote a model"
stopped=$(grep -o 'stopping at round [0-9]*' sig.log | head -1 | grep -o '[0-9]*$')
"${mpi[@]}" -n 2 "$train" "${long[@]}" --checkpoint-dir ck --output sig.h5 >sig2.log 2>&1 ||
  { cat sig2.log; fail "the resume after SIGTERM"; }
grep -q "resumed from checkpoint round $stopped" sig2.log || { cat sig2.log; fail "resumed elsewhere"; }
"${mpi[@]}" -n 2 "$train" "${long[@]}" --checkpoint-dir ck_ref --output sig_ref.h5 >sig_ref.log 2>&1 ||
  { cat sig_ref.log; fail "the uninterrupted long run"; }
[ "$(digest sig.h5)" = "$(digest sig_ref.h5)" ] || fail "SIGTERM + resume != uninterrupted"
echo "SIGTERM to rank 1 at round $stopped: both ranks saved and stopped; resumed to the uninterrupted model"

# A bad cell in rank 1's shard only (row 700 of 1024): every rank exits 1,
# rank 0 names rank 1's row and column.
"$fixture" inf.h5 1024 2 5 a,b,c,d inf@700 >/dev/null
t0=$SECONDS
if "${mpi[@]}" -n 2 "$train" --model gbdt --data inf.h5 --outputs 2 --rounds 5 --output inf.h5m \
  >inf.log 2>&1; then fail "an infinite cell was trained on"; fi
grep -qF 'rank 1: ' inf.log && grep -qF 'row 700, column 3 ("c") is inf' inf.log ||
  { cat inf.log; fail "the bad cell's message"; }
[ ! -e inf.h5m ] || fail "a model was written"
echo "a bad cell on rank 1: both ranks stopped in $((SECONDS - t0)) s"

# A tracker that cannot start (an address rank 0 does not have).
if HPCML_XGB_TRACKER_HOST=192.0.2.1 "${mpi[@]}" -n 2 -x HPCML_XGB_TRACKER_HOST "$train" \
  "${settings[@]}" --rounds 5 --data discrete.h5 --output none.h5 >none.log 2>&1; then
  fail "trained without a tracker"
fi
grep -q "XGBoost's tracker .* did not start on 192.0.2.1" none.log || { cat none.log; fail "tracker message"; }
echo "PASS: $TEST_NAME"
