#!/usr/bin/env bash
# hpcml-infer's engine against ONNX Runtime running the exported model, same
# machine, same run, same threads (1 thread pinned to one core, and all
# cores), batch 1, 64 and 4096, for a small (32 -> 64 x 2 -> 2) and a wide
# (256 -> 4096 x 3 -> 16) model; the machine's GEMM peak measured in the same
# run (oneDNN, dnnl_sgemm, OpenBLAS); single-row latency p50/p99.
#
#   bench/inference/run.sh build/default
#
# ONNX Runtime runs through onnxruntime-node (installed by
# scripts/install-deps.sh). Its figures are given twice: wall time per
# session.run as node sees it, and ORT's own time per run from its profiler
# ("model_run" events), which leaves out the JS/N-API call. The ratios use the
# latter, the stricter baseline. Each engine runs twice per line, alternating,
# and its better run counts. Then int8 against float32 in the engine. Takes
# about 6 minutes on 2 cores.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: run.sh <build dir>}" && pwd)
bench=$build/bench/inference/infer_bench
infer=$build/mpi_trainer/inference/hpcml-infer
runner=$top/mpi_trainer/inference/ort/ort_score.mjs
for f in "$bench" "$infer"; do [ -x "$f" ] || { echo "run.sh: $f not built" >&2; exit 1; }; done
export HPCML_ORT_DIR=${HPCML_ORT_DIR:-$top/build/ort}
all=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bench" models "$tmp" >/dev/null
for m in small wide; do "$infer" export-onnx "$tmp/$m.h5" -o "$tmp/$m.onnx" 2>/dev/null; done

# field <key> <line>: the value of key=value in a line of infer_bench.
field() { sed -n "s/.*[ ^]$1=\([^ ]*\).*/\1/p" <<<" $2"; }
# pin <threads> <cmd...>: one thread runs on core 0 only.
pin() { if [ "$1" = 1 ]; then taskset -c 0 "${@:2}"; else "${@:2}"; fi; }
# ort <model> <batch> <threads> <iters>: one JSON line from the runner.
ort() {
  pin "$3" node "$runner" bench --model "$tmp/$1.onnx" --batch "$2" --threads "$3" \
    --iters "$4" --warmup 2 --profile --json
}
js() { /usr/bin/python3 -c "import json,sys; j=json.loads(sys.argv[1]); print($2)" "$1"; }

declare -A peak
for t in 1 $all; do
  line=$(pin $t "$bench" peak --threads $t)
  peak[$t]=$(field peak_gflops "$line")
  echo "peak, $t thread(s): ${peak[$t]} GFLOP/s (${line#*where=})"
done

# Model FLOPs per row: 2 x the weights.
declare -A flops=([small]=$((2 * (32 * 64 + 64 * 64 + 64 * 2)))
  [wide]=$((2 * (256 * 4096 + 4096 * 4096 * 2 + 4096 * 16))))
declare -A dims=([small]="32-64-64-2" [wide]="256-4096x3-16")
worst=1e9
printf '\n%-6s %-14s %5s %7s | %14s %14s %14s | %7s\n' model dims batch threads "hpcml rows/s" \
  "ORT rows/s" "ORT (in ORT)" ratio
for m in small wide; do
  for t in 1 $all; do
    for b in 1 64 4096; do
      # About a second per engine: fewer calls for the wide model's big batches.
      if [ $m = small ]; then iters=2000; else iters=40; fi
      [ $b -lt 4096 ] || { [ $m = small ] && iters=200 || iters=2; }
      # Twice each, alternating, the better run of each counted: the memory
      # bandwidth here varies by up to 40% between minutes (ORT's one-row
      # time on the wide model, 2 threads: 1.6 and 2.6 ms in one session).
      h=$(pin $t "$bench" run "$tmp/$m.h5" --batch $b --threads $t --seconds 1)
      o=$(ort $m $b $t $iters)
      h2=$(pin $t "$bench" run "$tmp/$m.h5" --batch $b --threads $t --seconds 1)
      o2=$(ort $m $b $t $iters)
      [ "$(/usr/bin/python3 -c "print($(field rows_per_s "$h2") > $(field rows_per_s "$h"))")" = False ] || h=$h2
      [ "$(js "$o2" "j['ort']['mean_ms'] < $(js "$o" "j['ort']['mean_ms']")")" = False ] || o=$o2
      hr=$(field rows_per_s "$h")
      owall=$(js "$o" "j['rows_per_s']")
      oin=$(js "$o" "$b / (j['ort']['mean_ms'] * 1e-3)")
      ratio=$(/usr/bin/python3 -c "print(f'{$hr / $oin:.2f}')")
      worst=$(/usr/bin/python3 -c "print(min($worst, $ratio))")
      printf '%-6s %-14s %5d %7d | %14.4g %14.4g %14.4g | %7s' $m "${dims[$m]}" $b $t "$hr" \
        "$owall" "$oin" "$ratio"
      if [ $b = 4096 ]; then
        /usr/bin/python3 -c "g = $hr * ${flops[$m]} / 1e9; print(f'   model {g:.1f} GFLOP/s = {g / ${peak[$t]}:.2f} of peak')"
      else
        echo
      fi
      [ $b != 1 ] || lat+=("$m $t $(field p50_us "$h") $(field p99_us "$h") $(js "$o" "j['ort']['p50_ms'] * 1e3") $(js "$o" "j['ort']['p99_ms'] * 1e3") $(js "$o" "j['wall']['p50_ms'] * 1e3") $(js "$o" "j['wall']['p99_ms'] * 1e3")")
    done
  done
done
echo "lowest ratio hpcml / ORT (inside ORT): $worst (goal >= 1.0 at every batch)"

printf '\nsingle-row latency (us)   %13s | %13s | %13s\n' "hpcml p50/p99" "ORT in-ORT" "ORT wall"
for l in "${lat[@]}"; do
  read -r m t hp50 hp99 op50 op99 wp50 wp99 <<<"$l"
  printf '%-6s %2d thread(s)         %6.3g %6.3g | %6.3g %6.3g | %6.3g %6.3g\n' $m $t $hp50 $hp99 \
    $op50 $op99 $wp50 $wp99
done

# int8 (weights per output channel, activations per call; int32 accumulation,
# AVX-512 VNNI here) against float32, same engine, same run: rows/s and how far
# the probabilities move (4096 random rows).
printf '\nint8 against float32 (hpcml engine)\n'
for m in small wide; do
  err=$("$bench" int8-error "$tmp/$m.h5")
  echo "$m ${dims[$m]}: max |p - p_fp32| $(field max_abs "$err"), mean $(field mean_abs "$err"), same class $(field same_class "$err")"
  for t in 1 $all; do
    for b in 1 64 4096; do
      f=$(pin $t "$bench" run "$tmp/$m.h5" --batch $b --threads $t --seconds 1)
      q=$(pin $t "$bench" run "$tmp/$m.h5" --batch $b --threads $t --seconds 1 --precision int8)
      printf '  batch %4d, %d thread(s): fp32 %10.4g rows/s, int8 %10.4g rows/s, ratio %s\n' $b $t \
        "$(field rows_per_s "$f")" "$(field rows_per_s "$q")" \
        "$(/usr/bin/python3 -c "print(f'{$(field rows_per_s "$q") / $(field rows_per_s "$f"):.2f}')")"
    done
  done
done
