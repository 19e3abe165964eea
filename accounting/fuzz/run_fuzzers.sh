#!/usr/bin/env bash
# Builds the accounting libFuzzer targets with clang++ (ASan + UBSan +
# libFuzzer) and fuzzes each for a bounded time, as spank/fuzz/run_fuzzers.sh
# does for the guard:
#   sacct_fuzzer   sacct -P text -> SacctReader -> CostAggregator -> every format
#   prices_fuzzer  price table TOML -> PriceTable, then costs looked up in it
# The seeds are the fixtures: accounting/tests/data/*.sacct for the reader,
# its *.toml and examples/accounting/prices.toml for the price table.
# toml++ is Debian's shared library (not instrumented), as for the guard.
#   run_fuzzers.sh build <work dir> <source root>              (CMake target acct_fuzzers)
#   run_fuzzers.sh run <work dir> <source root> [seconds each] (ctest acct_fuzz)
# "run" rebuilds a stale target first. Exit 0 when no target found a crash; a
# crash leaves its input in <work dir>.
set -euo pipefail
usage="usage: run_fuzzers.sh build|run WORKDIR SOURCE_ROOT [SECONDS]"
mode=${1:?$usage}
work=${2:?$usage}
src=${3:?$usage}
seconds=${4:-10}
case "$mode" in build | run) ;; *) echo "$usage" >&2; exit 2 ;; esac
cxx=$(command -v clang++ || command -v clang++-14 || true)
[ -n "$cxx" ] || { echo "run_fuzzers: clang++ not found: run scripts/install-deps.sh" >&2; exit 1; }
mkdir -p "$work/obj"
# The guard's stand-in for std::source_location, which clang 14 lacks with
# libstdc++ 12 (see the file).
shim=$src/spank/fuzz/source_location_shim.hpp
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
  -include "$shim" -DFMT_SHARED -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1
  -I"$src/accounting/include" -I"$src/accounting/src" -I"$src/common/include")
link_flags=(-fsanitize=fuzzer,address,undefined)
libs=(-lfmt -ltomlplusplus)
# The library under test: accounting (less the CLI) and what it uses of common.
lib_srcs=("$src"/accounting/src/{tres,sacct,prices,usage_record,process,report,format}.cpp
  "$src"/common/src/{status,unique_fd,fs,gpu_tres,json,log,strings}.cpp)
headers=("$src"/accounting/include/hpcml/accounting/*.hpp "$src"/accounting/src/*.hpp
  "$src"/common/include/hpcml/common/*.hpp
  "$shim" "$0")

newer() {  # newer <target> <file...>: true when target is missing or older than a file
  local target=$1 f
  shift
  [ -e "$target" ] || return 0
  for f in "$@"; do [ "$f" -nt "$target" ] && return 0; done
  return 1
}

objs=()
for s in "${lib_srcs[@]}"; do
  o=$work/obj/$(basename "$(dirname "$(dirname "$s")")")_$(basename "${s%.cpp}").o
  objs+=("$o")
  if newer "$o" "$s" "${headers[@]}"; then
    echo "run_fuzzers: compiling $s"
    "$cxx" "${flags[@]}" -c "$s" -o "$o.tmp"
    mv -f "$o.tmp" "$o"
  fi
done

targets=(sacct_fuzzer prices_fuzzer)
for target in "${targets[@]}"; do
  bin=$work/$target
  if newer "$bin" "$src/accounting/fuzz/$target.cpp" "${objs[@]}" "${headers[@]}"; then
    echo "run_fuzzers: building $target with $cxx"
    "$cxx" "${flags[@]}" "${link_flags[@]}" "$src/accounting/fuzz/$target.cpp" "${objs[@]}" \
      "${libs[@]}" -o "$bin.tmp"
    mv -f "$bin.tmp" "$bin"
  fi
done
[ "$mode" = build ] && exit 0

# Seeds, gathered afresh from the fixtures each run.
rm -rf "$work/seeds-sacct" "$work/seeds-prices"
mkdir -p "$work/seeds-sacct" "$work/seeds-prices"
cp "$src"/accounting/tests/data/*.sacct "$work/seeds-sacct/"
cp "$src"/accounting/tests/data/*.toml "$work/seeds-prices/"
cp "$src/examples/accounting/prices.toml" "$work/seeds-prices/example_prices.toml"
rc=0
for target in "${targets[@]}"; do
  corpus=$work/corpus-$target
  seeds=$work/seeds-${target%_fuzzer}
  mkdir -p "$corpus"
  echo "run_fuzzers: $target for ${seconds}s (seeds: $seeds)"
  (cd "$work" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "./$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
    "$corpus" "$seeds" 2>&1 | tail -n 15) || rc=1
done
exit $rc
