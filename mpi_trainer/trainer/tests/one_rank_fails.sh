#!/usr/bin/env bash
# one_rank_fails.sh <mpiexec> <np> <hpcml-train> <make_fcache_fixture>
# A failure on one rank only, in each set-up phase that leads to a
# collective, as a node's own state makes it (an environment, a missing
# mount, an unwritable directory): Open MPI's MPMD form gives that one rank
# its own environment or arguments. Every rank must exit non-zero (none left
# waiting: `timeout` turns a hang into a failure) and rank 0 must print one
# error line naming the problem, whether the failing rank is 0 or the last.
# (The binding has no collective before its agreement, and a node whose
# hwloc fails fails Open MPI's own start as well: not tested here.)
set -u
mpiexec=$1 np=$2 train=$3 fixture=$4
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset HPCML_ZONE
"$fixture" "$tmp/set.h5" 256 >/dev/null || { echo "FAIL: fixture"; exit 1; }
mkdir -p "$tmp/ckpt"
: >"$tmp/file"  # a file where a directory would be
common=(--dp "$np" --hidden 8 --outputs 3 --batch 32 --steps 3 --log-interval 3)

# run <failing rank: 0 or last> <fragment> <env for it: NAME=VALUE or -> <its args...> -- <args of the others...>
run() {
  local which=$1 fragment=$2 env=$3
  shift 3
  local bad=() good=()
  while (($#)) && [ "$1" != -- ]; do bad+=("$1"); shift; done
  shift
  good=("$@")
  local xbad=()
  [ "$env" = - ] || xbad=(-x "$env")
  local contexts
  if [ "$which" = 0 ]; then
    contexts=(-n 1 "${xbad[@]}" "$train" "${bad[@]}" : -n $((np - 1)) "$train" "${good[@]}")
  else
    contexts=(-n $((np - 1)) "$train" "${good[@]}" : -n 1 "${xbad[@]}" "$train" "${bad[@]}")
  fi
  local out rc
  out=$(timeout 60 "$mpiexec" --oversubscribe "${contexts[@]}" 2>&1)
  rc=$?
  local what="rank $which: $fragment"
  if [ $rc -eq 124 ]; then
    echo "FAIL (hang): $what"; failures=$((failures + 1)); return
  fi
  if [ $rc -eq 0 ]; then
    echo "FAIL (exit 0): $what"; echo "$out"; failures=$((failures + 1)); return
  fi
  local n
  n=$(grep -c 'hpcml-train: error: ' <<<"$out" || true)
  if [ "$n" != 1 ] || ! grep -q -- "$fragment" <<<"$out"; then
    echo "FAIL (want one message with '$fragment', got $n): $what"; echo "$out"
    failures=$((failures + 1)); return
  fi
  echo "ok: $what -> rc $rc"
}

for r in 0 last; do
  # The CPU back end: a node whose OMP_NUM_THREADS is broken.
  run $r "OMP_NUM_THREADS" OMP_NUM_THREADS=x \
    --data "$tmp/set.h5" "${common[@]}" -- --data "$tmp/set.h5" "${common[@]}"
  # The input: a node without the data's mount.
  run $r "$tmp/missing.h5" - \
    --data "$tmp/missing.h5" "${common[@]}" -- --data "$tmp/set.h5" "${common[@]}"
  # The held-out set: the same, for the validation version.
  run $r "$tmp/missing-val.h5" - \
    --data "$tmp/set.h5" --val-data "$tmp/missing-val.h5" --eval-interval 3 "${common[@]}" -- \
    --data "$tmp/set.h5" --val-data "$tmp/set.h5" --eval-interval 3 "${common[@]}"
  # The checkpoints: a node where the checkpoint directory cannot be made.
  run $r "$tmp/file/ckpt" - \
    --data "$tmp/set.h5" --checkpoint-dir "$tmp/file/ckpt" --checkpoint-every 2 "${common[@]}" -- \
    --data "$tmp/set.h5" --checkpoint-dir "$tmp/ckpt" --checkpoint-every 2 "${common[@]}"
done

[ $failures -eq 0 ] || { echo "$failures one-rank failure case(s) failed"; exit 1; }
echo "PASS: a failure on one rank ended all $np ranks with one message, in every phase"
