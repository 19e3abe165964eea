#!/usr/bin/env bash
# gpu-check.sh: the CUDA backend's checks on a GPU machine, in one command,
# from the unpacked GPU bundle (scripts/gpu-bundle.sh packs this script as
# hpcml-gpu/gpu-check.sh). Runs the steps in order, each under its own time
# limit, and prints one table (also $OUT/summary.md, each step's output in
# $OUT/<step>.log):
#   probe     hpcml-gpu-probe --require-gpu
#   backend   trainer_cuda_backend_test (every CUDA backend test)
#   memcheck  one of them (training steps against the CPU backend) under
#             compute-sanitizer --tool memcheck
#   agree     hpcml-train on the same small MLP with --backend cpu and cuda:
#             each step's loss within the documented bf16 tolerance (2e-2
#             relative, docs/trainer.md)
#   resume    hpcml-train --backend cuda saved every 5 steps from GPU memory,
#             cut back to step 10 and resumed: the step-20 loss bitwise equal
#             to the uninterrupted run's
#   bench     trainer_bench cuda: 1024 -> 4 x 8192 -> 1024, batch 8192:
#             samples/s and MFU against the dense bf16 peak from the GPU's
#             own SM count and clock
#   pytorch   the same model, batch and optimiser in the machine's PyTorch
#             (bf16 autocast, fused AdamW, clip 1): the baseline
# and, only when named (a diagnostic outside the 7 minutes; its limit holds
# for each of its three programs):
#   timeline  where the step goes on the device, for trainer_bench cuda and
#             for PyTorch's step: every kernel and copy of 10 steps recorded
#             by lib/libhpcml_cuda_timeline.so (CUPTI, injected with
#             CUDA_INJECTION64_PATH; PyTorch's also by torch.profiler),
#             summarised by timeline_summary.py: busy, idle, the gaps
#             between kernels and the kernels on either side, the top kernels
#
#   gpu-check.sh [STEP...]     the steps named (default: all but timeline, in this order)
#   OUT=DIR                    where the table and logs go (default ./gpu-check)
#   PYTHON=python3             the Python that holds PyTorch
# A step's result: pass, FAIL, TIMEOUT, "no GPU" (the program's own "no GPU
# on this machine" exit: how every step ends on a machine without one) or
# n/a (a tool this machine lacks: compute-sanitizer, PyTorch). Exits 0 when
# no step failed or timed out. The limits add up to under 7 minutes; a rerun
# of failed steps by name takes at most their limits.
set -uo pipefail
here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
bin=${HPCML_GPU_BIN:-$here/bin}
# The bundle's environment once, not in every wrapper.
if [[ -z ${HPCML_GPU_BIN-} && -f $here/env.sh ]]; then
  HPCML_GPU_HOME=$here
  # shellcheck disable=SC1091
  . "$here/env.sh"
fi
out=${OUT:-$PWD/gpu-check}
python=${PYTHON:-python3}
steps=(probe backend memcheck agree resume bench pytorch)
declare -A limit=([probe]=20 [backend]=90 [memcheck]=90 [agree]=40 [resume]=60 [bench]=60
  [pytorch]=50 [timeline]=60)
if (($#)); then
  for s in "$@"; do
    [[ -n ${limit[$s]-} ]] || { echo "gpu-check: unknown step '$s' (steps: ${steps[*]} timeline)" >&2; exit 2; }
  done
  steps=("$@")
fi
mkdir -p "$out" || exit 1
work=$out/work
rm -rf "$work" && mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
nogpu='no (CUDA device|GPU) on this machine|no GPU visible'

# A step sets `result` and `figure` (one line for the table).
result= figure=
# run <step> cmd...: the command under the step's limit, output to its log;
# sets rc (124: over the limit).
run() {
  local step=$1
  shift
  timeout --kill-after=5 "${limit[$step]}" "$@" >>"$out/$step.log" 2>&1
  rc=$?
  ((rc == 137)) && rc=124
}
# judge <step>: result from rc and the log, unless a step already decided.
judge() {
  if ((rc == 124)); then
    result=TIMEOUT
  elif ((rc == 77)) || grep -Eq "$nogpu" "$out/$1.log"; then
    result="no GPU"
  elif ((rc == 0)); then
    result=pass
  else
    result=FAIL
  fi
}

step_probe() {
  run probe "$bin/hpcml-gpu-probe" --require-gpu
  judge probe
  figure=$(grep -m1 -E 'GPU 0|device 0' "$out/probe.log" || tail -n1 "$out/probe.log")
}

step_backend() {
  run backend "$bin/trainer_cuda_backend_test"
  judge backend
  figure=$(grep -E '^\[  PASSED  \]|^\[  FAILED  \]|largest' "$out/backend.log" | tr '\n' ' ')
  [[ -n $figure ]] || figure=$(tail -n1 "$out/backend.log")
}

step_memcheck() {
  local cs
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n1)
  local filter=--gtest_filter=CudaBackendTest.TrainingTracksTheCpuRunAndRepeatsBitwise
  if [[ -z $cs ]]; then
    # No sanitizer: the test alone still shows whether there is a GPU.
    run memcheck "$bin/trainer_cuda_backend_test" "$filter"
    judge memcheck
    [[ $result == "no GPU" ]] || result=n/a
    figure="compute-sanitizer not found"
    return
  fi
  # The wrapper starts the program on the bundle's loader: follow it.
  run memcheck "$cs" --tool memcheck --target-processes all --error-exitcode 9 \
    "$bin/trainer_cuda_backend_test" "$filter"
  judge memcheck
  figure=$(grep -m1 -E 'ERROR SUMMARY' "$out/memcheck.log" || echo "no summary")
}

# The small MLP of the agree and resume steps.
small=(--synthetic --input-dim 64 --hidden 256,256 --outputs 8 --batch 256 --steps 20
  --lr 1e-3 --seed 7 --data-seed 7 --log-interval 1)

step_agree() {
  run agree "$bin/hpcml-train" --backend cpu "${small[@]}" --metrics "$work/agree-cpu.jsonl"
  if ((rc != 0)); then
    judge agree && [[ $result == pass ]] && result=FAIL
    figure="the cpu run failed"
    return
  fi
  run agree "$bin/hpcml-train" --backend cuda "${small[@]}" --metrics "$work/agree-cuda.jsonl"
  judge agree
  [[ $result == pass ]] || { figure="the cuda run: $result"; return; }
  figure=$("$python" - "$work/agree-cpu.jsonl" "$work/agree-cuda.jsonl" 2>&1 <<'PY'
import json, sys
def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path)) if "loss" in r and "step" in r}
cpu, gpu = losses(sys.argv[1]), losses(sys.argv[2])
steps = sorted(set(cpu) & set(gpu))
worst = max(abs(gpu[s] - cpu[s]) / max(abs(cpu[s]), 1e-12) for s in steps)
print(f"{len(steps)} steps, largest relative loss difference {worst:.2e} (tolerance 2e-2)")
sys.exit(0 if len(steps) == 20 and worst <= 2e-2 else 1)
PY
)
  (($? == 0)) || result=FAIL
}

step_resume() {
  local ck=(--checkpoint-every 5 --checkpoint-keep 10 --checkpoint-sync)
  run resume "$bin/hpcml-train" --backend cuda "${small[@]}" "${ck[@]}" \
    --checkpoint-dir "$work/full" --metrics "$work/full.jsonl"
  judge resume
  [[ $result == pass ]] || { figure="the uninterrupted run: $result"; return; }
  cp -r "$work/full" "$work/cut"
  local set
  for set in "$work"/cut/step-*; do
    ((10#${set##*step-} > 10)) && rm -rf "$set"
  done
  run resume "$bin/hpcml-train" --backend cuda "${small[@]}" "${ck[@]}" \
    --checkpoint-dir "$work/cut" --metrics "$work/cut.jsonl"
  judge resume
  [[ $result == pass ]] || { figure="the resumed run: $result"; return; }
  local a b
  a=$(grep '"step": *20[,}]' "$work/full.jsonl" | tail -n1 | grep -o '"loss": *[^,}]*')
  b=$(grep '"step": *20[,}]' "$work/cut.jsonl" | tail -n1 | grep -o '"loss": *[^,}]*')
  if ! grep -q 'resumed from checkpoint step 10 ' "$out/resume.log"; then
    result=FAIL figure="the second run did not resume from step 10"
  elif [[ -z $a || $a != "$b" ]]; then
    result=FAIL figure="step 20: uninterrupted ${a:-none}, resumed ${b:-none}"
  else
    figure="resumed from step 10; step 20 ${a#*:} in both (bitwise)"
  fi
}

step_bench() {
  run bench "$bin/trainer_bench" cuda
  judge bench
  figure=$(grep -m1 '^cuda: MLP' "$out/bench.log" | sed 's/^cuda: //' | cut -c1-220)
  [[ -n $figure ]] || figure=$(tail -n1 "$out/bench.log")
}

step_pytorch() {
  if ! "$python" -c 'import torch' >/dev/null 2>&1; then
    result=n/a figure="no PyTorch for $python"
    echo "$figure" >>"$out/pytorch.log"
    return
  fi
  # The peak trainer_bench used, when it ran: the same MFU denominator.
  local peak
  peak=$(grep -o 'peak [0-9.]* TFLOP/s (SMs x clock' "$out/bench.log" 2>/dev/null | grep -o '[0-9.]*' | head -n1)
  run pytorch "$python" "$here/pytorch_cuda_peer.py" ${peak:+--peak-tflops "$peak"}
  judge pytorch
  figure=$(grep -m1 '^pytorch' "$out/pytorch.log" | cut -c1-220)
  [[ -n $figure ]] || figure=$(tail -n1 "$out/pytorch.log")
}

# Each program's device timeline over 10 timed steps, and its summary
# (timeline-<program>.txt). A step of trainer_bench that fails or finds no
# GPU ends the step there.
step_timeline() {
  local lib=$here/lib/libhpcml_cuda_timeline.so summary=$here/timeline_summary.py
  if [[ ! -f $lib || ! -f $summary ]]; then
    result=n/a figure="no timeline library in this bundle (built without CUPTI)"
    echo "$figure" >>"$out/timeline.log"
    return
  fi
  local n=10
  run timeline env CUDA_INJECTION64_PATH="$lib" HPCML_TIMELINE="$out/timeline-hpcml.tsv" \
    "$bin/trainer_bench" cuda --steps $n
  judge timeline
  [[ $result == pass ]] || { figure="trainer_bench: $result"; return; }
  local files=("$out/timeline-hpcml.tsv") notes=
  if ! "$python" -c 'import torch' >/dev/null 2>&1; then
    notes="no PyTorch for $python"
  elif ! "$python" -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$lib" >>"$out/timeline.log" 2>&1; then
    notes="the library does not load into $python (see timeline.log)"
  else
    run timeline env CUDA_INJECTION64_PATH="$lib" HPCML_TIMELINE="$out/timeline-pytorch.tsv" \
      "$python" "$here/pytorch_cuda_peer.py" --steps $n
    # (A CUPTI that PyTorch loaded first may decline: the log says why.)
    if ((rc != 0)); then
      notes="pytorch: exit $rc; "
    elif [[ ! -s $out/timeline-pytorch.tsv ]]; then
      notes="pytorch: not traced (see timeline.log); "
    else
      files+=("$out/timeline-pytorch.tsv")
    fi
  fi
  if [[ -z $notes || $notes == pytorch:* ]]; then
    run timeline "$python" "$here/pytorch_cuda_peer.py" --steps $n \
      --chrome-trace "$out/timeline-pytorch-kineto.json"
    if ((rc == 0)); then files+=("$out/timeline-pytorch-kineto.json"); else notes+="kineto: exit $rc"; fi
  fi
  "$python" "$summary" --steps $n "${files[@]}" >"$out/timeline.txt" 2>>"$out/timeline.log"
  (($? == 0)) || result=FAIL
  cat "$out/timeline.txt" >>"$out/timeline.log"
  figure=$(grep -E 'window .* ms; compute busy' "$out/timeline.txt" | sed -E 's/: per step over [0-9]+ steps:/:/; s/^timeline-//; s/compute //; s/$/;/' | tr '\n' ' ' | cut -c1-400)
  [[ -n $figure ]] || figure="no summary (see timeline.log)"
  [[ -z $notes ]] || figure="$figure ($notes)"
}

printf '| step | result | seconds | limit | figure |\n| --- | --- | --- | --- | --- |\n' >"$out/summary.md"
failed=0
for s in "${steps[@]}"; do
  : >"$out/$s.log"
  result= figure= rc=0
  t0=$SECONDS
  "step_$s"
  row="| $s | $result | $((SECONDS - t0)) | ${limit[$s]} | ${figure//|//} |"
  echo "$row" >>"$out/summary.md"
  echo "gpu-check: $row" >&2
  [[ $result == FAIL || $result == TIMEOUT ]] && failed=1
done
echo
cat "$out/summary.md"
echo "(logs: $out)"
exit $failed
