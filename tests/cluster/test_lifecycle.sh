#!/usr/bin/env bash
# The cluster script's own lifecycle, on a second cluster beside the shared
# one (own state directory and ports): up twice in a row, up after a crash
# (daemons SIGKILLed, stale pid files left behind), status, PMIx's step
# directories in the state directory, and down leaving none of its processes
# behind, not even a job that is still running.
source "$(dirname "$0")/lib.sh"
script=$HPCML_SOURCE_DIR/tests/cluster/hpcml-cluster
export HPCML_CLUSTER_DIR=/tmp/hpcml-lifecycle-test HPCML_PORT_BASE=16890
export SLURM_CONF=$HPCML_CLUSTER_DIR/etc/slurm.conf
trap '"$script" down >/dev/null 2>&1 || true' EXIT

node_state() { sinfo -h -N -o '%t %G' | head -n1; }
pids_of_this_cluster() { pgrep -f -- "$HPCML_CLUSTER_DIR" || true; }

"$script" up >/dev/null || fail "first up"
assert_eq "idle gpu:h100:4" "$(node_state)" "node after first up"
"$script" up >/dev/null || fail "second up in a row"
assert_eq "idle gpu:h100:4" "$(node_state)" "node after second up"
"$script" status >/dev/null || fail "status after second up"

# Crash: every daemon of this cluster killed without cleanup.
for d in slurmd slurmctld slurmdbd mysqld; do
  kill -KILL "$(cat "$HPCML_CLUSTER_DIR/run/$d.pid")"
done
sleep 1
if "$script" status >/dev/null 2>&1; then fail "status reported healthy after the crash"; fi
"$script" up >/dev/null || fail "up after a crash"
assert_eq "idle gpu:h100:4" "$(node_state)" "node after up following a crash"
sbatch_id=$(sbatch --parsable --wrap true) || fail "sbatch after recovery"
wait_job "$sbatch_id" >/dev/null

# PMIx keeps its per-step directories in the state directory, not in /tmp
# where the next cluster's steps of the same ids would meet them.
appdirs=$(srun --mpi=pmix -n1 ls "$HPCML_CLUSTER_DIR/pmix") || fail "srun --mpi=pmix"
assert_contains "$appdirs" "spmix_appdir_" "PMIx directory under $HPCML_CLUSTER_DIR/pmix"

# A job still running at down: its steps must not outlive the cluster.
running=$(sbatch --parsable --wrap "srun sleep 613") || fail "sbatch of a long job"
deadline=$((SECONDS + 60))
until [ "$(squeue -h -j "$running" -o %T)" = RUNNING ] && pgrep -f "$HPCML_CLUSTER_DIR/spool/d/job" >/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "job $running did not start"
  sleep 0.5
done
"$script" down >/dev/null || fail "down"
[ ! -e "$HPCML_CLUSTER_DIR" ] || fail "down left $HPCML_CLUSTER_DIR behind"
left=$(pids_of_this_cluster)
[ -z "$left" ] || fail "down left processes behind: $(ps -o pid,args -p $left)"
pgrep -f "^sleep 613$" >/dev/null && fail "down left job $running's task running"
trap - EXIT
pass
