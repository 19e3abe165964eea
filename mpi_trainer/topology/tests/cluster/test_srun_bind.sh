#!/usr/bin/env bash
# Under srun (TaskPlugin=task/none: Slurm itself does not bind), hpcml-plan
# --bind gives the ranks of a step disjoint cpusets, and says it bound them.
source "$HPCML_SOURCE_DIR/tests/cluster/lib.sh"
plan=$HPCML_BUILD_DIR/mpi_trainer/topology/hpcml-plan
[ -x "$plan" ] || fail "$plan not built"
ncores=$(nproc)
n=$((ncores < 4 ? ncores : 4))
[ "$n" -ge 2 ] || fail "needs at least 2 cores"
out=$(timeout 120 srun --mpi=pmix -n "$n" "$plan" --bind --widths 64,64,8 2>&1) || fail "srun failed: $out"
echo "$out"
lines=$(grep -c "bound to cores" <<<"$out" || true)
assert_eq "$n" "$lines" "ranks that bound themselves"
# Expand each rank's core list and check no core appears twice.
all=$(sed -n 's/.* cores \([0-9,-]*\): bound.*/\1/p' <<<"$out" | tr ',' '\n' |
  awk -F- '{ if (NF == 2) { for (i = $1; i <= $2; i++) print i } else print $1 }')
assert_eq "$n" "$(sort -u <<<"$all" | wc -l)" "distinct cores over $n ranks"
assert_eq "$(wc -l <<<"$all")" "$(sort -u <<<"$all" | wc -l)" "cores used by more than one rank"
pass
