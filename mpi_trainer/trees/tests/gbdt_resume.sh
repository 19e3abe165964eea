#!/usr/bin/env bash
# gbdt_resume.sh <hpcml-fcache> <hpcml-train>
# Checkpoints of hpcml-train --model gbdt end with the uninterrupted model,
# byte for byte (the booster's SHA-256), on a table with category columns:
#  - a run cut short (fewer --rounds, checkpoints every 25) and resumed with
#    the full count: binary with hpcml's row sampling (--subsample 0.7),
#    three classes sampled, regression sampled, binary with early stopping
#    (the best round and its trees as uninterrupted);
#  - SIGTERM mid-run: a checkpoint, exit 85, then a resume to the end;
#  - a damaged newest checkpoint is skipped for the one before;
#  - a checkpoint of other settings is refused, naming the round;
#  - sampled rounds differ from unsampled ones (the sampler is used).
fcache=$1 train=$2
source "$(dirname "$0")/lib.sh"

$py "$churn_table" --rows 3000 --seed 11 --split train:0:2400,val:2400:3000 \
  --labels two,three,reg --label-name y
for kind in two three reg; do
  for part in train val; do
    "$fcache" ingest $kind.h5 --csv $kind-$part.csv --entity id --timestamp ts --label y \
      --zone test --classification internal >/dev/null || fail "ingest $kind $part"
  done
done

digest() { $py -c 'import h5py,sys; print(h5py.File(sys.argv[1], "r").attrs["booster_sha256"])' "$1"; }
# run <name> <args...>: trains, output <name>.h5, log <name>.log; returns the exit code.
# The learning rate is --eta 0.1 unless the arguments say otherwise.
run() {
  local name=$1
  shift
  local eta=(--eta 0.1)
  [[ " $* " == *" --eta "* ]] && eta=()
  timeout 120 "$train" --model gbdt --data-version v1 --seed 5 --threads 2 --log-interval 100 \
    "${eta[@]}" --output "$name.h5" "$@" >"$name.log" 2>&1
}
# same <what> <rounds> <cut> <args...>: the run of <rounds> uninterrupted, and
# cut after <cut> rounds (checkpoints every 25) then resumed to <rounds>.
same() {
  local what=$1 rounds=$2 cut=$3
  shift 3
  rm -rf ck
  run ref "$@" --rounds "$rounds" || { cat ref.log; fail "$what: the uninterrupted run"; }
  run cut "$@" --rounds "$cut" --checkpoint-dir ck --checkpoint-every 25 ||
    { cat cut.log; fail "$what: the cut run"; }
  run full "$@" --rounds "$rounds" --checkpoint-dir ck --checkpoint-every 25 ||
    { cat full.log; fail "$what: the resumed run"; }
  grep -q "resumed from checkpoint round" full.log || { cat full.log; fail "$what: no resume"; }
  [ "$(digest ref.h5)" = "$(digest full.h5)" ] ||
    fail "$what: the resumed model differs from the uninterrupted one"
  echo "$what: $(grep -o 'resumed from checkpoint round [0-9]*' full.log), model = uninterrupted ($(digest ref.h5 | cut -c1-12))"
}

two=(--data two.h5 --outputs 2 --val-version v2)
same "binary, --subsample 0.7" 200 90 "${two[@]}" --subsample 0.7
cp ref.h5 sampled.h5
same "binary, unsampled" 200 60 "${two[@]}"
[ "$(digest sampled.h5)" != "$(digest ref.h5)" ] || fail "--subsample 0.7 gave the unsampled model"
same "3 classes, --subsample 0.8" 120 55 --data three.h5 --outputs 3 --val-version v2 --subsample 0.8
same "regression, --subsample 0.8" 120 55 --data reg.h5 --loss mse --outputs 1 --val-version v2 \
  --subsample 0.8
# Early stopping: the cut run's last checkpoint is before the best round.
same "binary, early stopping" 600 30 "${two[@]}" --subsample 0.7 --early-stop-patience 10
grep -q "early stop at round" full.log || { cat full.log; fail "early stopping did not stop"; }
$py - <<'PY' || fail "the resumed early-stopped model's rounds"
import h5py
r, f = h5py.File("ref.h5", "r"), h5py.File("full.h5", "r")
assert int(r.attrs["rounds"]) == int(f.attrs["rounds"]) < 400, (r.attrs["rounds"], f.attrs["rounds"])
PY

# SIGTERM mid-run: saved, exit 85; resumed to the end, the uninterrupted model.
long=("${two[@]}" --subsample 0.7 --max-depth 8 --rounds 3000 --checkpoint-every 50)
run sig_ref "${long[@]}" || { cat sig_ref.log; fail "the long uninterrupted run"; }
rm -rf ck
timeout 120 "$train" --model gbdt --data-version v1 --eta 0.1 --seed 5 --threads 2 \
  --log-interval 100 --output sig.h5 "${long[@]}" --checkpoint-dir ck --metrics sig.jsonl >sig.log 2>&1 &
pid=$!
for _ in $(seq 300); do
  ls ck/gbdt-round-*.h5 >/dev/null 2>&1 && break
  sleep 0.05
done
kill -TERM $pid
rc=0
wait $pid || rc=$?
[ "$rc" = 85 ] || { cat sig.log; fail "SIGTERM: exit $rc, want 85 (the run may have ended first)"; }
grep -q "stopping at round [0-9]* (SIGTERM): checkpoint saved" sig.log || { cat sig.log; fail "SIGTERM log"; }
grep -q '"event":"stopped"' sig.jsonl || fail "no stopped event in the metrics file"
[ ! -e sig.h5 ] || fail "a model was written by the interrupted run"
stopped=$(grep -o 'stopping at round [0-9]*' sig.log | grep -o '[0-9]*$')
last=$(ls ck/gbdt-round-*.h5 | tail -n1 | grep -o '[0-9]\{12\}' | sed 's/^0*//')
[ "$last" = "$stopped" ] || fail "the newest checkpoint is round $last, the run stopped at $stopped"
# The newest checkpoint damaged: the one before is used.
n=$(ls ck/gbdt-round-*.h5 | wc -l)
if [ "$n" -ge 2 ]; then
  truncate -s 1000 "$(ls ck/gbdt-round-*.h5 | tail -n1)"
fi
run sig "${long[@]}" --checkpoint-dir ck || { cat sig.log; fail "the resumed long run"; }
[ "$n" -lt 2 ] || grep -q "skipped: " sig.log || { cat sig.log; fail "the damaged checkpoint was not skipped"; }
[ "$(digest sig_ref.h5)" = "$(digest sig.h5)" ] || fail "SIGTERM at round $stopped: the resumed model differs"
echo "SIGTERM at round $stopped: exit 85; $(grep -o 'resumed from checkpoint round [0-9]*' sig.log), model = uninterrupted"

# Another run's checkpoints are refused (here: another learning rate).
if run other "${long[@]}" --eta 0.2 --checkpoint-dir ck; then fail "another run's checkpoint was used"; fi
grep -q "the checkpoint at round [0-9]* is of another run" other.log || { cat other.log; fail "refusal message"; }
echo "gbdt_resume: ok"
