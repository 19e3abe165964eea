#!/usr/bin/env bash
# fcache_train.sh <mpiexec> <np> <hpcml-train> <make_fcache_fixture>
# End to end with real input: a feature set written by the featurecache library, trained on by
# hpcml-train --data over <np> ranks (dp = np): the loss must go down, and a
# label outside --outputs must stop every rank with one message.
set -eu
mpiexec=$1 np=$2 train=$3 fixture=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset HPCML_ZONE
# 512 rows, 4 features, label = argmax of a fixed linear map (3 classes),
# written with the featurecache library's writer.
"$fixture" "$tmp/set.h5" 512
out=$(timeout 60 "$mpiexec" --oversubscribe -n "$np" "$train" --data "$tmp/set.h5" --dp "$np" \
  --hidden 16,16 --outputs 3 --batch 64 --steps 80 --lr 1e-2 --log-interval 80 \
  --metrics "$tmp/m.jsonl" 2>&1) || { echo "$out"; echo "FAIL: training on $tmp/set.h5"; exit 1; }
echo "$out"
read -r first last < <(/usr/bin/python3 - "$tmp/m.jsonl" <<'PY'
import json, sys
loss = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "step" in r]
print(sum(loss[:8]) / 8, sum(loss[-8:]) / 8)
PY
)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.7 * a) }' \
  || { echo "FAIL: loss did not go down: $first -> $last"; exit 1; }
echo "loss $first -> $last"
# --outputs 2 makes label 2 invalid: one message from rank 0, every rank fails.
if out=$(timeout 60 "$mpiexec" --oversubscribe -n "$np" "$train" --data "$tmp/set.h5" --dp "$np" \
  --outputs 2 --batch 64 --steps 5 2>&1); then
  echo "$out"; echo "FAIL: a label outside --outputs was accepted"; exit 1
fi
n=$(grep -c 'hpcml-train: error: .*not a class in \[0, 2)' <<<"$out" || true)
[ "$n" = 1 ] || { echo "$out"; echo "FAIL: expected one error line, got $n"; exit 1; }
echo "PASS: feature-cache training on $np ranks"
