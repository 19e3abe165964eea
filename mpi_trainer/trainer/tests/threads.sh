#!/usr/bin/env bash
# threads.sh MPIEXEC HPCML_TRAIN: math threads per rank and oversubscription.
#  - one rank alone on this machine uses every core it may run on (or
#    --threads / OMP_NUM_THREADS, cut to that);
#  - a bad OMP_NUM_THREADS is an error naming it;
#  - more ranks than cores: said once, and the bubble is n/a, not a number.
set -euo pipefail
mpiexec=$1 train=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
# The automatic choice is under test: ctest's one-thread setting goes.
unset OMP_NUM_THREADS SLURM_CPUS_PER_TASK
cores=$(nproc)
args=(--synthetic --synthetic-samples 256 --hidden 32,32,32,32 --batch 32 --steps 3)

out=$("$mpiexec" -n 1 --bind-to none "$train" "${args[@]}" 2>&1) || fail "1 rank: $out"
grep -q "cpu: $cores math thread(s) per rank (cores)" <<<"$out" || fail "1 rank, $cores cores: $out"
out=$(OMP_NUM_THREADS=64 "$mpiexec" -x OMP_NUM_THREADS -n 1 --bind-to none "$train" "${args[@]}" 2>&1) ||
  fail "OMP_NUM_THREADS=64: $out"
grep -q "cpu: $cores math thread(s) per rank (OMP_NUM_THREADS, cut to this rank's share" <<<"$out" ||
  fail "OMP_NUM_THREADS=64 was not cut to $cores: $out"
if out=$(OMP_NUM_THREADS=two "$mpiexec" -x OMP_NUM_THREADS -n 1 "$train" "${args[@]}" 2>&1); then
  fail "OMP_NUM_THREADS=two was accepted: $out"
fi
grep -q "OMP_NUM_THREADS=two: expected a positive thread count" <<<"$out" || fail "message: $out"

n=$((2 * cores))
out=$("$mpiexec" -n "$n" --oversubscribe "$train" "${args[@]}" --pp "$n" --microbatches 2 2>&1) ||
  fail "$n ranks: $out"
[[ $(grep -c "ranks outnumber cores" <<<"$out") == 1 ]] || fail "no single oversubscription note: $out"
grep -q "cpu: 1 math thread(s) per rank" <<<"$out" || fail "$n ranks on $cores cores: $out"
grep -q "bubble n/a (ideal" <<<"$out" || fail "the bubble is still reported: $out"
echo "PASS"
