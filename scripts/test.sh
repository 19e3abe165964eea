#!/usr/bin/env bash
# Runs every hpcml test on this machine: installs dependencies, builds the
# 'default' preset (warnings are errors; scripts/demo.sh uses the same build),
# starts the local Slurm cluster through ctest's fixture, runs unit, mpi and
# cluster tests, stops the cluster.
#   sudo scripts/test.sh [ctest args...]     e.g. scripts/test.sh -L unit
# Exit 0 only if every test passed and the only skipped tests are those that
# need a GPU (label gpu) on a machine without one.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
preset=${HPCML_PRESET:-default}
"$top/scripts/build.sh" "$preset"
cd "$top"
bin=build/$preset
junit=$bin/ctest-junit.xml
rc=0
ctest --preset "$preset" -j2 --output-junit "$(pwd)/$junit" "$@" || rc=$?

# The end of each failed test's output, again at the end of the log, where
# a CI summary that keeps only the log's tail still shows why.
failed_list=$bin/Testing/Temporary/LastTestsFailed.log
if [ "$rc" -ne 0 ] && [ -f "$failed_list" ]; then
  for t in $(cut -d: -f2 "$failed_list"); do
    echo "scripts/test.sh: the last lines of failed test '$t':"
    awk -v t="$t" '$0 ~ "^[0-9]+/[0-9]+ Test: " t "$" {on = 1; n = 0; next}
      on && /^<end of output>$/ {on = 0}
      on {buf[n++ % 40] = $0}
      END {for (i = (n > 40 ? n - 40 : 0); i < n; i++) print "  " buf[i % 40]}' \
      "$bin/Testing/Temporary/LastTest.log"
  done
fi

# Skips are allowed only for tests that need hardware this machine lacks.
gpu_tests=$(ctest --test-dir "$bin" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: //p')
skipped=$(grep -o '<testcase name="[^"]*"[^>]*status="notrun"' "$junit" 2>/dev/null |
  sed 's/<testcase name="\([^"]*\)".*/\1/' || true)
for t in $skipped; do
  if ! grep -qx "$t" <<<"$gpu_tests"; then
    echo "scripts/test.sh: test '$t' was skipped but does not need a GPU: treated as a failure" >&2
    rc=1
  fi
done
[ -n "$skipped" ] && echo "scripts/test.sh: skipped (no GPU on this machine): $(echo $skipped)"
exit $rc
