#!/usr/bin/env bash
# ddp_resume.sh <mpiexec> <hpcml-fcache>
# The example DDP job (examples/python/train_ddp.py: torch.distributed over
# gloo, the hpcml loader with virtual ranks, hpcml.Preemption) on two ranks,
# outside Slurm:
#  - SIGTERM to one rank after a checkpoint: every rank stops at the same
#    step, rank 0 saves, all exit 85; the resume on two ranks ends with the
#    uninterrupted run's weights and final loss, bit for bit;
#  - the same checkpoint resumed on one rank: the same global batches (the
#    virtual ranks' layout), so the final loss is close (not equal: one rank
#    sums the batch's gradient in another order).
set -uo pipefail
mpiexec=$1 fcache=$2
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'pkill -f "train_ddp.py.*$work" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
py=/usr/bin/python3
$py -c "import torch" 2>/dev/null || { echo "SKIP: Debian's python3-torch is not installed"; exit 77; }

$py "$src/mpi_trainer/trees/tests/churn_table.py" --rows 6000 --seed 5 --split train:0:6000 \
  --label-name churn --regions 12 >/dev/null || fail "churn_table.py"
"$fcache" ingest churn.h5 --csv train.csv --entity id --timestamp ts --label churn --zone test \
  --classification internal >/dev/null || fail "ingest"

# 46 steps an epoch (6000 rows / 4 virtual ranks / 32 rows, drop_last), 20 epochs.
settings=(--data churn.h5 --epochs 20 --batch 128 --virtual-ranks 4 --checkpoint-every 100
  --log-every 1000)
run() {  # run <ranks> <dir>
  timeout 300 "$mpiexec" --oversubscribe -n "$1" $py "$src/examples/python/train_ddp.py" \
    "${settings[@]}" --dir "$work/$2"
}
final() { grep -o 'final loss [^;]*; weights [0-9a-f]*' "$1"; }

run 2 reference >reference.log 2>&1 || fail "uninterrupted run: $(tail -5 reference.log)"
want=$(final reference.log) || fail "no final loss: $(cat reference.log)"
echo "uninterrupted, 2 ranks: $want"

run 2 cut >cut.log 2>&1 &
job=$!
deadline=$((SECONDS + 120))
until ls cut/ckpt/step-*.pt >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] && kill -0 $job 2>/dev/null || fail "no checkpoint: $(cat cut.log)"
  sleep 0.05
done
pkill -TERM -n -f "train_ddp.py.*$work/cut" || fail "no rank to signal"
wait $job
rc=$?
[ $rc = 85 ] || fail "the signalled run exited $rc, not 85: $(tail -5 cut.log)"
# Rank 0 reports; the signal reached one rank (the newest process, rank 1
# as a rule): "another rank's stop signal" or "SIGTERM".
saved=$(grep -Eo "(SIGTERM|another rank's stop signal): saved step [0-9]*" cut.log) ||
  fail "no save on SIGTERM: $(cat cut.log)"
echo "$saved, exit 85"
step=${saved##* }
[ "$step" -lt 920 ] || fail "the run ended before the signal (step $step)"
mkdir -p one/ckpt
cp "cut/ckpt/step-$(printf %08d "$step").pt" one/ckpt/ || fail "the stop checkpoint"

run 2 cut >resumed.log 2>&1 || fail "the resume: $(tail -5 resumed.log)"
grep -q "resumed from step-$(printf %08d "$step").pt" resumed.log || fail "$(cat resumed.log)"
got=$(final resumed.log)
echo "resumed on 2 ranks:     $got"
[ "$got" = "$want" ] || fail "the resumed run ended elsewhere than the uninterrupted one"

run 1 one >one.log 2>&1 || fail "the resume on one rank: $(tail -5 one.log)"
grep -q "saved on 2 ranks) on 1 ranks" one.log || fail "$(cat one.log)"
echo "resumed on 1 rank:      $(final one.log)"
$py - "$(final one.log)" "$want" <<'PY' || fail "one rank's resume is not close to the two ranks' run"
import sys
a, b = (float(s.split()[2].rstrip(";")) for s in sys.argv[1:])
assert abs(a - b) <= 0.01 * b, (a, b)
PY
echo "PASS: preempted DDP run resumes to the uninterrupted weights; resumes on another world"
