#!/usr/bin/env bash
# The default shape: three nodes, each with its own hostname and address,
# two in zone ae with gpu:h100 and one in zone eu with gpu:a100, all idle,
# each with its own zone's data file system only;
# a step over all of them runs one task per node, and an MPI program spans
# nodes (Open MPI over TCP between the nodes' namespaces).
source "$(dirname "$0")/lib.sh"
probe=$HPCML_BUILD_DIR/mpi_trainer/probes/hpcml-mpi-probe
[ -x "$probe" ] || fail "$probe not built"

# A job of the test before may still be ending.
wait_nodes_idle
nodes=$(sinfo -h -N -p batch -o '%N %f %G %t' | sort)
echo "$nodes"
assert_eq $'node1 zone-ae gpu:h100:4 idle\nnode2 zone-ae gpu:h100:4 idle\nnode3 zone-eu gpu:a100:4 idle' \
  "$nodes" "nodes, zones, GPUs and states"
# Without SLURM_CONF, as right after `hpcml-cluster up`: status finds it itself.
status=$(env -u SLURM_CONF "$HPCML_SOURCE_DIR/tests/cluster/hpcml-cluster" status 2>&1) ||
  fail "status: $status"
grep -Eq '^node3 +10\.[0-9.]+ +eu +gpu:a100:4 +idle' <<<"$status" ||
  fail "status does not list node3 with its address, zone, GPUs and state: $status"

hosts=$(timeout 60 srun -N3 hostname | sort | paste -sd' ') || fail "srun -N3 hostname"
assert_eq "node1 node2 node3" "$hosts" "hostnames of a 3-node step"
# Each node has its own network namespace: three distinct addresses.
addrs=$(timeout 60 srun -N3 sh -c 'ip -4 -o addr show eth0 | awk "{print \$4}"' | sort -u | wc -l)
assert_eq 3 "$addrs" "distinct node addresses"
# ... its own PMIx directory (a tmpfs per node) ...
pmix=$(timeout 60 srun -N3 sh -c "stat -f -c %T '$HPCML_CLUSTER_DIR/pmix'" | sort -u)
assert_eq tmpfs "$pmix" "each node's PMIx directory"
# ... and its own /dev/shm, as separate hosts have.
shm=$(timeout 60 srun -N3 stat -c %d /dev/shm | sort -u | wc -l)
assert_eq 3 "$shm" "distinct /dev/shm file systems"
# Of the zones' data file systems a node has its own zone's only (the
# other's mount point is an empty directory there); this host has both.
zones=$(timeout 60 srun -N3 sh -c "echo \$(hostname) \$(cat '$HPCML_CLUSTER_DIR'/data/*/.hpcml-zone)" |
  sort | paste -sd';')
assert_eq "node1 ae;node2 ae;node3 eu" "$zones" "the zone markers each node sees"
assert_eq "ae eu" "$(cat "$HPCML_CLUSTER_DIR"/data/*/.hpcml-zone | paste -sd' ')" "this host's zone markers"

# MPI across nodes: 4 ranks on 2 nodes, 3 ranks on 3 nodes.
out=$(timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=2 "$probe" --expect-ranks 4 2>&1) ||
  fail "srun -N2 mpi probe: $out"
echo "$out"
assert_contains "$out" "ok: allreduce sum" "collective checks over 2 nodes"
# Two distinct nodes, two ranks each (which two is the scheduler's choice: a
# node still completing the previous test's job is passed over).
assert_eq 2 "$(grep -o ' host node[0-9]*' <<<"$out" | sort -u | wc -l)" "distinct hosts of the 4 ranks"
assert_eq "2 2" "$(grep -o ' host node[0-9]*' <<<"$out" | sort | uniq -c | awk '{print $1}' | paste -sd' ')" \
  "ranks per host"
out=$(timeout 120 srun --mpi=pmix -N3 -n3 "$probe" --expect-ranks 3 2>&1) || fail "srun -N3 mpi probe: $out"
assert_contains "$out" "ok: allreduce sum 3, ring exchange, 3 ranks" "collective checks over 3 nodes"
assert_eq 3 "$(grep -o ' host node[0-9]*' <<<"$out" | sort -u | wc -l)" "distinct hosts of 3 ranks"

# A zone constraint keeps a job on that zone's nodes.
assert_eq "node3" "$(timeout 60 srun --constraint=zone-eu hostname)" "a zone-eu step"
assert_eq "node1 node2" "$(timeout 60 srun -N2 --constraint=zone-ae hostname | sort | paste -sd' ')" \
  "a 2-node zone-ae step"
pass
