#!/usr/bin/env bash
# The cluster has a default 'batch' partition and a higher-priority 'urgent'
# partition that preempts it by requeue after a GraceTime.
source "$(dirname "$0")/lib.sh"
conf=$(scontrol show config)
assert_contains "$conf" "preempt/partition_prio" "PreemptType"
batch=$(scontrol show partition batch)
urgent=$(scontrol show partition urgent)
assert_contains "$batch" "PriorityTier=1 " "batch tier"
assert_contains "$batch" "PreemptMode=REQUEUE" "batch preempt mode"
assert_contains "$batch" "GraceTime=20" "batch grace time"
assert_contains "$urgent" "PriorityTier=10 " "urgent tier"
wait_nodes_idle  # a job of the test before may still be ending
node=$(sinfo -h -N -o '%t %G' -p batch | head -n1)
assert_eq "idle gpu:h100:4" "$node" "node state and GPUs"
pass
