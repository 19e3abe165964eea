#!/usr/bin/env bash
# hpcml-train --plan prints the plan for the live MPI job and exits without
# training; a degree that cannot fit is refused with one clear message.
#   train_plan.sh <hpcml-train>
set -euo pipefail
train=${1:?path to hpcml-train}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "FAIL: train_plan: $*" >&2; exit 1; }
out=$(mpirun --oversubscribe -n 4 "$train" --plan --synthetic --input-dim 16 --hidden 64,64,64 \
  --outputs 4 --batch 64 --microbatches 2 2>&1) || fail "--plan failed: $out"
echo "$out"
grep -q "^plan: dp=[0-9]* pp=[0-9]* tp=[0-9]* on 4 rank(s)" <<<"$out" || fail "no plan line"
grep -q "^why: " <<<"$out" || fail "no explanation"
[ "$(grep -cE '^ +[0-3] +[0-9]+ +[0-9]+ +[0-9]+ ' <<<"$out")" = 4 ] || fail "expected 4 rank rows"
grep -q "step" <<<"$(grep -v '^hpcml-train: step' <<<"$out")" || true
if grep -q "^hpcml-train: step" <<<"$out"; then fail "--plan trained"; fi
if out=$(mpirun --oversubscribe -n 4 "$train" --plan --synthetic --hidden 6,6 --tp 4 2>&1); then
  fail "tp=4 with width 6 was accepted: $out"
fi
grep -q "does not divide hidden width 6" <<<"$out" || fail "unclear refusal: $out"
echo "PASS: train_plan"
