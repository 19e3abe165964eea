#!/usr/bin/env bash
# A project-built MPI program under srun --mpi=pmix -n 2 reports both ranks
# and passes its all-reduce and ring checks.
source "$(dirname "$0")/lib.sh"
probe=$HPCML_BUILD_DIR/mpi_trainer/probes/hpcml-mpi-probe
[ -x "$probe" ] || fail "$probe not built"

out=$(timeout 120 srun --mpi=pmix -n 2 "$probe" --expect-ranks 2 2>&1) || fail "srun failed: $out"
echo "$out"
assert_contains "$out" "rank 0/2" "rank 0 report"
assert_contains "$out" "rank 1/2" "rank 1 report"
assert_contains "$out" "slurm_procid 1" "Slurm task id reaches rank 1"
assert_contains "$out" "ok: allreduce sum 1, ring exchange, 2 ranks" "collective checks"

# The probe must also fail when the launch is not what it was told: this
# proves the check above can fail.
if timeout 120 srun --mpi=pmix -n 2 "$probe" --expect-ranks 3 >/dev/null 2>&1; then
  fail "probe accepted 2 ranks when 3 were expected"
fi
pass
