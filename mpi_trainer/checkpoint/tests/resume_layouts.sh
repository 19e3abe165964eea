#!/usr/bin/env bash
# Exact resume in any layout, on MPI without Slurm:
#  - a run saved every 5 steps as dp x pp x tp = 2x2x1 on 4 ranks, cut back to
#    its step-10 checkpoint, resumes to the same final loss bit for bit;
#  - the same checkpoint resumed as 1x1x2 on 2 ranks ends within 1e-5 relative;
#  - with the step-10 set damaged, the run falls back to step 5 (with a warning)
#    and still ends with the same loss.
#   resume_layouts.sh <hpcml-train>
set -euo pipefail
train=${1:?path to hpcml-train}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
dir=$(mktemp -d /tmp/hpcml-resume.XXXXXX)
trap 'rm -rf "$dir"' EXIT
args="--synthetic --input-dim 16 --hidden 32,32,32 --outputs 4 --batch 32 --microbatches 2 --lr 3e-3 --steps 20 --log-interval 100"
fail() { echo "FAIL: resume_layouts: $*" >&2; exit 1; }
loss20() { /usr/bin/python3 -c 'import json,sys
print(repr([json.loads(l) for l in open(sys.argv[1]) if "\"step\": 20" in l or "\"step\":20" in l][-1]["loss"]))' "$1"; }
cut_back_to() {  # cut_back_to <ckpt dir> <step>: remove the sets after <step>
  for s in "$1"/step-*; do [ "$((10#${s##*step-}))" -gt "$2" ] && rm -rf "$s"; done; return 0
}

mpirun --oversubscribe -n 4 "$train" --dp 2 --pp 2 --tp 1 $args --checkpoint-dir "$dir/full" \
  --checkpoint-every 5 --checkpoint-keep 10 --metrics "$dir/full.jsonl" >/dev/null || fail "full run"
[ "$(ls "$dir/full" | wc -l)" = 4 ] || fail "expected 4 checkpoint sets, got: $(ls "$dir/full")"
reference=$(loss20 "$dir/full.jsonl")

for case in same reshard fallback; do
  cp -r "$dir/full" "$dir/$case"
  cut_back_to "$dir/$case" 10
  case $case in
    same) launch=(-n 4 "$train" --dp 2 --pp 2 --tp 1) ;;
    reshard) launch=(-n 2 "$train" --dp 1 --pp 1 --tp 2) ;;
    fallback)
      launch=(-n 4 "$train" --dp 2 --pp 2 --tp 1)
      # Damage a stored value: the checksum no longer matches.
      /usr/bin/python3 - "$dir/$case/step-000000000010/shard-00000.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    name = next(n for n in f.keys() if n.endswith(".weight"))
    f[name][0, 0] = f[name][0, 0] + 1.0
PY
      ;;
  esac
  out=$(mpirun --oversubscribe "${launch[@]}" $args --checkpoint-dir "$dir/$case" \
    --metrics "$dir/$case.jsonl" 2>&1) || fail "$case run: $out"
  got=$(loss20 "$dir/$case.jsonl")
  case $case in
    same | fallback)
      want_step=$([ $case = same ] && echo 10 || echo 5)
      grep -q "resumed from checkpoint step $want_step " <<<"$out" || fail "$case: did not resume from step $want_step: $out"
      [ "$got" = "$reference" ] || fail "$case: final loss $got, uninterrupted $reference (must be bitwise equal)"
      ;;
    reshard)
      grep -q "resumed from checkpoint step 10 " <<<"$out" || fail "reshard: did not resume: $out"
      /usr/bin/python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if abs(a-b)<=1e-5*abs(a) else 1)" \
        "$reference" "$got" || fail "reshard: final loss $got vs $reference beyond 1e-5 relative"
      ;;
  esac
  [ $case = fallback ] && { grep -q "checksum mismatch" <<<"$out" || fail "fallback: no warning about the damaged shard: $out"; }
  echo "resume_layouts: $case: final loss $got (uninterrupted $reference)"
done
echo "PASS: resume_layouts"
