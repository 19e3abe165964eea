#!/usr/bin/env bash
# nonfinite.sh <mpiexec> <np> <hpcml-train> <make_fcache_fixture>
# Non-finite math never makes a model. In each layout over <np> ranks (data,
# pipeline and tensor parallel), with checkpoints and validation:
#  - a NaN label: refused at the start, naming how many cells in which
#    column and what to do; a NaN feature cell is a missing value, imputed
#    by the input encoding: the run trains to a finite model;
#  - an infinite feature cell: the run stops at the step that reads it,
#    naming the step, version, row and column;
#  - a learning rate that diverges (after a good start): the run stops at the
#    first step with a non-finite loss or gradient norm, the parameters not
#    updated;
# each time every rank exits non-zero (one error line, no hang), no --output
# model is written, every HDF5 file left behind (best model, checkpoint
# shards) holds only finite numbers, and after the divergence the newest
# checkpoint is a good one: resuming from it with a sane learning rate
# finishes with a finite model.
# numpy and h5py come from Debian: /usr/bin/python3.
set -u
mpiexec=$1 np=$2 train=$3 fixture=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset HPCML_ZONE
py=/usr/bin/python3
fail() {
  echo "FAIL: $*"
  exit 1
}

"$fixture" "$tmp/set.h5" 1024 2 5                     # v1: good
"$fixture" "$tmp/set.h5" 300 2 6                      # v2: validation
"$fixture" "$tmp/set.h5" 1024 2 5 a,b,c,d nan@700     # v3
"$fixture" "$tmp/set.h5" 1024 2 5 a,b,c,d inf@700     # v4
"$fixture" "$tmp/set.h5" 1024 2 5 a,b,c,d label@700   # v5

# Every float dataset in every .h5 file under $1 is finite.
all_finite() {
  $py - "$1" <<'PY'
import glob, sys
import h5py
import numpy as np
bad, seen = [], 0
def visit(name, obj):
    global seen
    if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f":
        seen += 1
        if not np.isfinite(obj[()]).all():
            bad.append(name)
for path in glob.glob(sys.argv[1] + "/**/*.h5", recursive=True):
    with h5py.File(path, "r") as f:
        f.visititems(visit)
    if bad:
        sys.exit(f"{path}: non-finite values in {bad}")
print(f"{seen} float datasets, all finite")
PY
}

train() {  # train <run dir> <args...>
  local run=$1
  shift
  timeout 90 "$mpiexec" --oversubscribe -n "$np" "$train" --data "$tmp/set.h5" --outputs 2 \
    --hidden 16,16 --batch 64 --log-interval 1000 --val-version v2 --eval-interval 2 \
    --checkpoint-dir "$run/ckpt" --checkpoint-every 2 --checkpoint-sync \
    --output "$run/model.h5" --best-output "$run/best.h5" "$@" 2>&1
}

# expect_stop <layout> <name> <fragment> <train args...>
expect_stop() {
  local layout=$1 name=$2 fragment=$3
  shift 3
  local run=$tmp/$name-${layout// /}
  mkdir -p "$run"
  local out rc
  # shellcheck disable=SC2086  # the layout is several options
  out=$(train "$run" $layout "$@")
  rc=$?
  [ $rc -ne 124 ] || fail "$name ($layout): hang"
  [ $rc -ne 0 ] || { echo "$out"; fail "$name ($layout): exit 0"; }
  [ "$(grep -c 'hpcml-train: error: ' <<<"$out")" = 1 ] || {
    echo "$out"
    fail "$name ($layout): want one error line"
  }
  grep -qF -- "$fragment" <<<"$out" || { echo "$out"; fail "$name ($layout): no '$fragment'"; }
  [ ! -e "$run/model.h5" ] || fail "$name ($layout): --output was written"
  ! grep -q "model written to $run/model.h5" <<<"$out" || fail "$name ($layout): says --output was written"
  all_finite "$run" >/dev/null || fail "$name ($layout): a file with non-finite values"
  echo "ok: $name ($layout): $(grep 'hpcml-train: error: ' <<<"$out")"
}

half=$((np / 2))
for layout in "--dp $np" "--dp $half --pp 2 --microbatches 2" "--dp $half --tp 2"; do
  run=$tmp/nan-${layout// /}
  mkdir -p "$run"
  # shellcheck disable=SC2086
  out=$(train "$run" $layout --data-version v3 --steps 10) || { echo "$out"; fail "nan ($layout): a missing cell"; }
  [ -f "$run/model.h5" ] && all_finite "$run" >/dev/null || fail "nan ($layout): the model"
  echo "ok: nan ($layout): the missing cell imputed, a finite model"
  expect_stop "$layout" label "missing (NaN) cells: 1 (label 1)" --data-version v5 --steps 40
  expect_stop "$layout" inf "row 700, column 3 (\"c\") is inf" --data-version v4 --steps 40
  # shellcheck disable=SC2086
  grep -Eq "error: (rank [0-9]+: )?step [0-9]+: .* v4: row 700" <<<"$(train "$tmp/again" $layout \
    --data-version v4 --steps 40)" || fail "inf ($layout): the step is not named"
  rm -rf "$tmp/again"

  # Divergence: 10 good steps, then, resumed from their checkpoint, a
  # learning rate no model survives; the good checkpoint stays the newest.
  run=$tmp/diverge-${layout// /}
  mkdir -p "$run"
  # shellcheck disable=SC2086
  out=$(train "$run" $layout --data-version v1 --steps 10 --lr 1e-2) || {
    echo "$out"
    fail "diverge ($layout): the good start"
  }
  rm "$run/model.h5"
  expect_stop "$layout" diverge "non-finite math" --data-version v1 --steps 40 --lr 1e20
  newest=$(ls "$run/ckpt" | grep '^step-' | sort | tail -n1)
  [ "$newest" = step-000000000010 ] || fail "diverge ($layout): newest checkpoint $newest, want step 10"
  # shellcheck disable=SC2086
  out=$(train "$run" $layout --data-version v1 --steps 20 --lr 1e-2) || {
    echo "$out"
    fail "diverge ($layout): resuming from the good checkpoint"
  }
  grep -q "resumed from checkpoint step 10" <<<"$out" || { echo "$out"; fail "diverge ($layout): no resume"; }
  [ -f "$run/model.h5" ] && all_finite "$run" >/dev/null || fail "diverge ($layout): the resumed model"
  echo "ok: diverge ($layout): stopped; resumed from step 10 at a sane rate to a finite model"
done
echo "nonfinite: all layouts ok"
