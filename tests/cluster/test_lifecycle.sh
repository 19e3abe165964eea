#!/usr/bin/env bash
# The cluster script's own lifecycle, on a second cluster beside the shared
# one (own state directory, ports, bridge and address range) in a two-node
# shape: bad shapes refused, up twice in a row, up after a crash (every
# daemon SIGKILLed, stale pid files, namespaces and bridge left behind),
# status, PMIx's step directories on each node's own tmpfs, and down leaving
# nothing of its own behind: no process (not even a job still running), no
# network namespace, veth, bridge or mount, no state directory.
source "$(dirname "$0")/lib.sh"
script=$HPCML_SOURCE_DIR/tests/cluster/hpcml-cluster
export HPCML_CLUSTER_DIR=/tmp/hpcml-lifecycle-test HPCML_PORT_BASE=16890
export SLURM_CONF=$HPCML_CLUSTER_DIR/etc/slurm.conf
trap '"$script" down >/dev/null 2>&1 || true' EXIT
shape=(--nodes 2 --zones ae,eu:l40s)

node_states() { sinfo -h -N -p batch -o '%N %f %G %t' | sort | paste -sd';'; }
want="node1 zone-ae gpu:h100:4 idle;node2 zone-eu gpu:l40s:4 idle"
pids_of_this_cluster() { pgrep -f -- "$HPCML_CLUSTER_DIR" || true; }
network_of_this_cluster() {
  ip netns list | awk '{print $1}' | grep '^hpcml16890-' || true
  ip -o link show | awk -F': ' '{print $2}' | grep -E '^(hpcml16890|hv16890-)' || true
}

"$script" down >/dev/null 2>&1 || true  # a run killed before its trap
for bad in "--nodes 0" "--nodes two" "--nodes 2 --zones ae" "--zones AE" "--zones ae:H100" "--colour red"; do
  # shellcheck disable=SC2086
  if out=$("$script" up $bad 2>&1); then fail "up $bad was accepted"; fi
  assert_contains "$out" "hpcml-cluster: " "message for up $bad"
done
[ ! -e "$HPCML_CLUSTER_DIR" ] || fail "a refused up left $HPCML_CLUSTER_DIR"

"$script" up "${shape[@]}" >/dev/null || fail "first up"
assert_eq "$want" "$(node_states)" "nodes after first up"
"$script" up "${shape[@]}" >/dev/null || fail "second up in a row"
assert_eq "$want" "$(node_states)" "nodes after second up"
status=$("$script" status) || fail "status after second up: $status"
assert_contains "$status" "slurmd-node2   running" "status of node2's slurmd"

# Crash: every daemon of this cluster killed without cleanup.
for d in slurmd-node1 slurmd-node2 slurmctld slurmdbd mysqld; do
  kill -KILL "$(cat "$HPCML_CLUSTER_DIR/run/$d.pid")"
done
sleep 1
if "$script" status >/dev/null 2>&1; then fail "status reported healthy after the crash"; fi
"$script" up "${shape[@]}" >/dev/null || fail "up after a crash"
assert_eq "$want" "$(node_states)" "nodes after up following a crash"
sbatch_id=$(sbatch --parsable --wrap true) || fail "sbatch after recovery"
wait_job "$sbatch_id" >/dev/null

# PMIx keeps its per-step directories on each node's own tmpfs under the
# state directory, not in /tmp where the next cluster's steps of the same
# ids would meet them; the root namespace sees none of them.
appdirs=$(srun --mpi=pmix -N2 sh -c "hostname; ls '$HPCML_CLUSTER_DIR/pmix'") || fail "srun --mpi=pmix"
assert_eq 2 "$(grep -c spmix_appdir_ <<<"$appdirs")" "a PMIx directory on each node: $appdirs"
[ -z "$(ls -A "$HPCML_CLUSTER_DIR/pmix")" ] || fail "the nodes' PMIx directories leaked into the root namespace"

# A job still running at down: its steps must not outlive the cluster.
running=$(sbatch --parsable -N2 --wrap "srun sleep 613") || fail "sbatch of a long job"
deadline=$((SECONDS + 60))
until [ "$(squeue -h -j "$running" -o %T)" = RUNNING ] && [ "$(pgrep -fc "^(/usr/bin/)?sleep 613$")" -ge 2 ]; do
  [ $SECONDS -lt $deadline ] || fail "job $running did not start"
  sleep 0.5
done
"$script" down >/dev/null || fail "down"
[ ! -e "$HPCML_CLUSTER_DIR" ] || fail "down left $HPCML_CLUSTER_DIR behind"
left=$(pids_of_this_cluster)
[ -z "$left" ] || fail "down left processes behind: $(ps -o pid,args -p $left)"
pgrep -f "^(/usr/bin/)?sleep 613$" >/dev/null && fail "down left job $running's tasks running"
left=$(network_of_this_cluster)
[ -z "$left" ] || fail "down left network namespaces or links behind: $left"
grep -q "$HPCML_CLUSTER_DIR" /proc/mounts && fail "down left mounts behind: $(grep "$HPCML_CLUSTER_DIR" /proc/mounts)"
trap - EXIT
pass
