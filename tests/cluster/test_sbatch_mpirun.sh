#!/usr/bin/env bash
# An sbatch job runs the MPI probe twice: with srun --mpi=pmix and with
# Open MPI's mpirun inside the allocation; both see 4 ranks.
source "$(dirname "$0")/lib.sh"
probe=$HPCML_BUILD_DIR/mpi_trainer/probes/hpcml-mpi-probe
dir=$(job_dir)
cat >"$dir/job.sh" <<JOB
#!/bin/bash
#SBATCH --ntasks=4
#SBATCH --output=$dir/out.txt
set -e
srun --mpi=pmix $probe --expect-ranks 4
mpirun --oversubscribe $probe --expect-ranks 4
JOB
id=$(submit "$dir/job.sh")
state=$(wait_job "$id")
out=$(cat "$dir/out.txt")
echo "$out"
assert_eq COMPLETED "$state" "job $id state"
n=$(grep -c "ok: allreduce sum 6, ring exchange, 4 ranks" <<<"$out" || true)
assert_eq 2 "$n" "successful launches (srun and mpirun)"
pass
