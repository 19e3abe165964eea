#!/usr/bin/env bash
# bad_input.sh <mpiexec> <np> <hpcml-train>
# Each bad invocation must end on every rank with the expected exit code (2
# for what the command line alone shows, 1 for what set-up finds:
# common/exit_codes.hpp), and rank 0 alone must print exactly one error line
# naming the problem. `timeout` (and the ctest TIMEOUT around this script)
# turns a hang into a failure.
set -u
mpiexec=$1 np=$2 train=$3
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect_failure <expected exit | cli11> <message fragment> <args...>
# cli11: exit 2 with CLI11's own single message (no "error:" prefix from us).
expect_failure() {
  local want_rc=$1 fragment=$2
  shift 2
  local out rc
  out=$(timeout 30 "$mpiexec" --oversubscribe -n "$np" "$train" "$@" 2>&1)
  rc=$?
  local errors
  errors=$(grep -c 'hpcml-train: error: ' <<<"$out" || true)
  if [ "$want_rc" = cli11 ]; then
    want_rc=2
    errors=$(grep -c -- "$fragment" <<<"$out" || true)
  fi
  if [ $rc -eq 124 ]; then
    echo "FAIL (hang): $*"; failures=$((failures + 1)); return
  fi
  if [ $rc -ne "$want_rc" ]; then
    echo "FAIL (exit $rc, want $want_rc): $*"; echo "$out"; failures=$((failures + 1)); return
  fi
  if [ "$errors" != 1 ] || ! grep -q -- "$fragment" <<<"$out"; then
    echo "FAIL (want one message with '$fragment', got $errors): $*"; echo "$out"
    failures=$((failures + 1)); return
  fi
  echo "ok: $* -> rc $rc: $(grep -m1 -- "$fragment" <<<"$out")"
}

expect_failure 1 "needs $((np + 1)) ranks but the job has $np" --synthetic --dp $((np + 1)) --steps 2
expect_failure 1 "asks for more pipeline stages" --synthetic --pp "$np" --hidden '' --steps 2
expect_failure 2 "--hidden 8,x: 'x' is not a positive layer width" --synthetic --dp "$np" --hidden 8,x
expect_failure 1 "does not divide the width 15" --synthetic --tp "$np" --hidden 15,16 --steps 2
expect_failure 1 "is not divisible by --microbatches 3" --synthetic --dp "$np" --batch 8 --microbatches 3
expect_failure 1 "/nonexistent/features.h5" --data /nonexistent/features.h5 --dp "$np"
expect_failure 2 "exclude each other" --data /nonexistent/features.h5 --synthetic --dp "$np"
expect_failure 2 "no input: give --data" --dp "$np" --steps 2
expect_failure 1 "--metrics $tmp/no/such/dir/m.jsonl" --synthetic --dp "$np" --steps 2 --metrics "$tmp/no/such/dir/m.jsonl"
expect_failure 1 "--output $tmp/no/such/dir/model.h5" --synthetic --dp "$np" --steps 2 --output "$tmp/no/such/dir/model.h5"
expect_failure 2 "--eval-interval 5 needs a validation set" --synthetic --dp "$np" --steps 2 --eval-interval 5
expect_failure 2 "--early-stop-patience 2 needs --eval-interval" --synthetic --dp "$np" --steps 2 --val-samples 10 --early-stop-patience 2
expect_failure 2 "--val-samples 10 is for --synthetic runs" --data /nonexistent/features.h5 --dp "$np" --val-samples 10
expect_failure 2 "--val-data/--val-version need --data" --synthetic --dp "$np" --steps 2 --val-version v2
expect_failure 2 "--best-output $tmp/m.h5 is also --output" --synthetic --dp "$np" --steps 2 --val-samples 10 --output "$tmp/m.h5" --best-output "$tmp/m.h5"
expect_failure 1 "--best-output $tmp/no/such/dir/b.h5" --synthetic --dp "$np" --steps 2 --val-samples 10 --best-output "$tmp/no/such/dir/b.h5"
expect_failure cli11 "early-stop-patience: Value -1 not in range" --synthetic --early-stop-patience -1
expect_failure cli11 "The following argument was not expected: --bogus" --synthetic --bogus
expect_failure cli11 "--activation: sigmoid not in {relu,gelu,tanh}" --synthetic --activation sigmoid
expect_failure cli11 "--schedule: pipedream not in {gpipe,1f1b}" --synthetic --schedule pipedream
expect_failure cli11 "'nan' is not a finite number >= 0 that fits a float" --synthetic --lr nan
expect_failure cli11 "'1e39' is not a finite number >= 0 that fits a float" --synthetic --lr 1e39
expect_failure cli11 "'inf' is not a finite number >= 0 that fits a float" --synthetic --weight-decay inf

[ $failures -eq 0 ] || { echo "$failures bad-input case(s) failed"; exit 1; }
echo "PASS: every bad input failed on all $np ranks with one message"
