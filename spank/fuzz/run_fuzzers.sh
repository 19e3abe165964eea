#!/usr/bin/env bash
# Builds the guard's libFuzzer targets with clang++ (ASan + UBSan + libFuzzer)
# and fuzzes each for a bounded time from the seed corpus in spank/fuzz/corpus/.
# toml++ is Debian's shared library, as in the plugin: our layer over it is
# instrumented, its parser is not (compiling it header-only with sanitizers
# takes minutes on 2 cores; set HPCML_FUZZ_TOML_HEADER_ONLY=1 to do it anyway).
#   run_fuzzers.sh build <work dir> <source root>              (CMake target guard_fuzzers)
#   run_fuzzers.sh run <work dir> <source root> [seconds each] (ctest guard_fuzz)
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
mkdir -p "$work"
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -include "$src/spank/fuzz/source_location_shim.hpp" -DFMT_SHARED
  -I"$src/spank/include" -I"$src/common/include")
libs=(-lfmt)
if [ "${HPCML_FUZZ_TOML_HEADER_ONLY:-0}" = 1 ]; then
  # toml++ 3.3's debug assertion in parse_key fires on input such as "[.e]]",
  # which its release build reports as a syntax error (see policy_test): keep
  # its assertions off so the fuzzer looks for real faults.
  flags+=(-DTOML_HEADER_ONLY=1 -DTOML_SHARED_LIB=0 "-DTOML_ASSERT(expr)=((void)0)")
else
  flags+=(-DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1)
  libs+=(-ltomlplusplus)
fi
common_srcs=("$src/common/src/status.cpp" "$src/common/src/strings.cpp" "$src/common/src/unique_fd.cpp" "$src/common/src/gpu_tres.cpp")
declare -A target_srcs=(
  [options_fuzzer]="$src/spank/src/options.cpp"
  [policy_fuzzer]="$src/spank/src/options.cpp $src/spank/src/policy.cpp $src/spank/src/decision.cpp"
)

build() {  # build <target>: rebuilt only when a source is newer than the binary
  local target=$1 bin=$work/$1 f
  local srcs=("$src/spank/fuzz/$target.cpp" ${target_srcs[$target]} "${common_srcs[@]}")
  for f in "${srcs[@]}" "$src/spank/fuzz/source_location_shim.hpp" "$src"/spank/include/hpcml/guard/*.hpp "$0"; do
    if [ ! -x "$bin" ] || [ "$f" -nt "$bin" ]; then
      echo "run_fuzzers: building $target with $cxx"
      "$cxx" "${flags[@]}" "${srcs[@]}" "${libs[@]}" -o "$bin.tmp"
      mv -f "$bin.tmp" "$bin"
      return 0
    fi
  done
}

targets=(policy_fuzzer options_fuzzer)
for target in "${targets[@]}"; do
  build "$target"
done
[ "$mode" = build ] && exit 0
rc=0
for target in "${targets[@]}"; do
  corpus=$work/corpus-$target
  mkdir -p "$corpus"
  seeds=$src/spank/fuzz/corpus/${target%_fuzzer}
  echo "run_fuzzers: $target for ${seconds}s (seeds: $seeds)"
  (cd "$work" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "./$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
    "$corpus" "$seeds" 2>&1 | tail -n 15) || rc=1
done
exit $rc
