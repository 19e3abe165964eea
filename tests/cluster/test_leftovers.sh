#!/usr/bin/env bash
# A job's leftovers die with it (proctrack/cgroup): a task of hpcml-alice
# that double-forks a process into a session of its own (setsid), out of the
# step's process tree, then exits. When the batch job, a one-node step and a
# two-node step end, no such process is left. Each node has its own freezer
# cgroups: a step over two nodes has one on each, so the node whose part
# ends first kills only its own tasks and the other's part ends normally.
source "$(dirname "$0")/lib.sh"
user=hpcml-alice
grep -qx 'ProctrackType=proctrack/cgroup' "$SLURM_CONF" || {
  echo "SKIP: $TEST_NAME: the cluster runs without proctrack/cgroup (no cgroup v1 freezer to mount; see 'hpcml-cluster up')"
  exit 77
}
dir=$(job_dir)
cd "$dir"
marker=hpcml-leftover-$$-$RANDOM

# The task's command: starts the leftover, named <marker>-<tag>-<node> in
# its argv (the nodes share this machine's process table), waits until it
# runs and prints "leftover <node> <pid> <its freezer cgroup>".
leftover_cmd() {
  local m="$marker-$1-\$(hostname)"
  printf '%s' "m=$m
    setsid sh -c 'bash -c \"exec -a \$0 sleep 600\" & exit' \"\$m\" &
    for i in \$(seq 1 100); do p=\$(pgrep -f \"^\$m\") && break; sleep 0.1; done
    [ -n \"\$p\" ] || { echo \"no leftover started on \$(hostname)\"; exit 1; }
    echo \"leftover \$(hostname) \$p \$(grep freezer /proc/\$p/cgroup)\""
}

# expect_gone <task output> <count> <tag>: the tasks said they started
# <count> leftovers, and none of them is left 30 s after the job or step.
expect_gone() {
  local out=$1 n=$2 tag=$3 deadline=$((SECONDS + 30))
  assert_eq "$n" "$(grep -c "leftover node" <<<"$out")" "leftovers started by the $tag: $out"
  while pgrep -f "^$marker-$tag" >/dev/null; do
    [ $SECONDS -lt $deadline ] ||
      fail "the $tag's leftover outlived it by 30 s: $(pgrep -af "^$marker-$tag"); task said: $out"
    sleep 0.5
  done
}

# A batch job.
id=$(runuser -u "$user" -- sbatch --parsable -N1 --output="$dir/batch.out" --wrap "$(leftover_cmd batch)") ||
  fail "sbatch as $user failed"
echo "$id" >>"$TEST_JOBS"
assert_eq COMPLETED "$(wait_job "$id")" "state of batch job $id"
out=$(cat "$dir/batch.out")
# The leftover was in the batch step's cgroup, under the node's own root.
assert_contains "$out" "freezer:/slurm_node" "the batch job's leftover's freezer cgroup"
assert_contains "$out" "/uid_$(id -u "$user")/job_$id/step_batch" "the batch job's leftover's freezer cgroup"
expect_gone "$out" 1 batch

# A one-node step.
out=$(runuser -u "$user" -- timeout 60 srun -N1 sh -c "$(leftover_cmd step)") || fail "srun -N1 as $user: $out"
expect_gone "$out" 1 step

# A two-node step: a leftover on each node, and the first node's part ends
# 3 s before the second's, which goes on in its own cgroup to the end.
out=$(runuser -u "$user" -- timeout 60 srun -N2 -w node1,node2 -l sh -c "$(leftover_cmd two)
    [ \"\$SLURM_NODEID\" = 0 ] || { sleep 3; echo \"\$(hostname) ended normally\"; }") ||
  fail "srun -N2 as $user: $out"
for n in node1 node2; do
  assert_contains "$out" "leftover $n " "the two-node step's task on $n"
  # Each node's part in its own cgroup, under that node's own root.
  grep -q "leftover $n [0-9]* [0-9]*:freezer:/slurm_$n/uid_$(id -u "$user")/job_[0-9]*/step_0\$" <<<"$out" ||
    fail "the leftover on $n is not in $n's own step cgroup: $out"
done
assert_contains "$out" "1: node2 ended normally" "the two-node step's second node after the first ended"
expect_gone "$out" 2 two
pass
