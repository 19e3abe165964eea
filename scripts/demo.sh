#!/usr/bin/env bash
# The main job, end to end on one machine: install dependencies, build, bring
# up the local Slurm cluster, submit examples/hello-mpi.sbatch, wait for it,
# show its output and its accounting record. The cluster is left running for
# exploration; stop it with: tests/cluster/hpcml-cluster down
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/build.sh" default
cd "$top"
tests/cluster/hpcml-cluster up
eval "$(tests/cluster/hpcml-cluster env)"
out_dir=$HPCML_CLUSTER_DIR/jobs/demo
mkdir -p "$out_dir"
job=$(sbatch --parsable --output="$out_dir/%j.out" \
  --export=ALL,HPCML_BUILD_DIR="$top/build/default" examples/hello-mpi.sbatch)
echo "demo: submitted job $job; waiting for it"
source tests/cluster/lib.sh
state=$(wait_job "$job" 300)
echo "demo: job $job finished: $state"
echo "----- job output ($out_dir/$job.out) -----"
cat "$out_dir/$job.out"
echo "----- sacct -j $job -----"
sacct -j "$job" -o JobID,JobName,User,Account,Partition,AllocTRES%60,Elapsed,State,ExitCode
[ "$state" = COMPLETED ] || { echo "demo: job $job did not complete" >&2; exit 1; }
echo "demo: ok. The cluster is still up: eval \"\$(tests/cluster/hpcml-cluster env)\"; stop it with tests/cluster/hpcml-cluster down"
