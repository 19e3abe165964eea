#!/usr/bin/env bash
# Forbidden requests fail with the reason visible to the user, early in
# srun/sbatch where that is possible and on the node otherwise; the node is
# idle after every denial.
source "$(dirname "$0")/guard_lib.sh"
write_policy
guard_install

# Submit side: a restricted dataset, a foreign zone, an unbound role.
run_as $ALICE timeout 60 srun -n1 --ml-role=ml-engineer --dataset="$DATA/ae/restricted/secret.h5" true
expect_denied "srun with a restricted dataset" "classified 'restricted'"
run_as $ALICE timeout 60 sbatch --ml-role=ml-engineer --dataset="$DATA/ae/restricted/secret.h5" --wrap true
expect_denied "sbatch with a restricted dataset" "classified 'restricted'"
[ -z "$(squeue -h -u $ALICE)" ] || fail "a denied sbatch created a job: $(squeue -u $ALICE)"
run_as $ALICE timeout 60 srun -n1 --ml-role=ml-engineer --dataset="$DATA/eu/b.h5" --data-zone=ae true
expect_denied "srun with another zone's dataset" "is in zone 'eu'"
run_as $ALICE timeout 60 srun -n1 --ml-role=admin true
expect_denied "srun with an undefined role" "role 'admin' is not defined"
run_as $ALICE timeout 60 srun -n1 --ml-role='bad role' true
[ "$RC" -ne 0 ] || fail "a malformed --ml-role was accepted"
assert_contains "$OUT" "--ml-role" "malformed option message"

# Node side: what only the job record knows (GPUs, partition, account).
run_as $ALICE timeout 60 srun -n1 --gres=gpu:h100:2 true
expect_denied "2 GPUs with the default role (max 0)" "the job has 2 GPUs; role 'reader' allows at most 0"
run_as $ALICE timeout 60 srun -n1 -p urgent --ml-role=ml-engineer true
expect_denied "partition not allowed for the role" "partition 'urgent' is not allowed"
# (job_submit/lua would add zone-eu to the job's zone-ae constraint, which no
# node has: the node's own decision is tried without the submit side.)
run_as $ALICE env SLURM_CONF="$(bypass_conf)" _SLURM_SPANK_OPTION_hpcml_guard_ml_role=ml-engineer \
  _SLURM_SPANK_OPTION_hpcml_guard_data_zone=eu timeout 60 srun -n1 true
expect_denied "requested zone is not the node's" "requested zone 'eu' is not this node's zone 'ae'"

# A role bound to a group the user is not in.
run_as $ALICE timeout 60 srun -n1 --ml-role=team-reader true
expect_denied "role bound to another group" "is not bound to role 'team-reader'"

# A user bound to no role: account hpcml-finance has no binding.
run_as $BOB timeout 60 srun -n1 true
expect_denied "unbound user, srun" "user '$BOB'"
assert_contains "$OUT" "is not bound to role 'reader'" "unbound user reason"
id=$(as $BOB sbatch --parsable --output="$JOB_DIR/bob.out" --wrap 'echo ran')
assert_eq FAILED "$(wait_job "$id")" "state of the unbound user's batch job $id"
assert_eq "1:0" "$(sacct_field "$id" ExitCode)" "exit code of job $id"
out=$(cat "$JOB_DIR/bob.out")
assert_contains "$out" "hpcml-guard: denied: user '$BOB'" "reason in the job's output"
[[ $out != *ran* ]] || fail "the denied batch script ran"
assert_node_idle "after the unbound user's batch job"

# unknown_datasets = "allow" lets a path outside every entry through, not a
# directory above entries: "/" holds every dataset of the policy (eu and
# restricted ones among them), checked on the node as the submit side is
# bypassed (a user's own slurm.conf).
sed -i 's/^unknown_datasets = "deny"$/unknown_datasets = "allow"/' "$POLICY"
grep -q '^unknown_datasets = "allow"$' "$POLICY" || fail "policy not switched to allow"
conf=$(bypass_conf)
opt=_SLURM_SPANK_OPTION_hpcml_guard
for above in / "$DATA" "$DATA/ae"; do
  run_as $ALICE env SLURM_CONF="$conf" ${opt}_ml_role=ml-engineer ${opt}_dataset="$above" \
    timeout 60 srun -n1 true
  expect_denied "--dataset=$above with unknown_datasets = allow" "contains"
done
run_as $ALICE timeout 60 srun -n1 --ml-role=ml-engineer --dataset=/ true
expect_denied "--dataset=/ with unknown_datasets = allow, srun's check" "contains"
run_as $ALICE timeout 60 srun -n1 --ml-role=ml-engineer --dataset=/usr/share printenv HPCML_DATASETS
expect_allowed "a path outside every entry with unknown_datasets = allow"
write_policy

# Issue 32: one node of a multi-node step denies (here node2, whose zone
# data file system something covered: the dataset is not there), the other
# runs its tasks: srun's stderr still carries node2's reason, every time.
# slurmstepd writes it before the task's exit is reported, and srun waits
# for every node's output before it exits.
on_node2() { nsenter --target "$(cat "$HPCML_CLUSTER_DIR/run/slurmd-node2.pid")" --mount --root sh -c "$1"; }
on_node2 "mount -t tmpfs hpcml-cover $DATA/ae/public"
trap 'on_node2 "umount $DATA/ae/public" || true; restore_plugstack' EXIT
alloc=$(as $ALICE salloc --no-shell -N2 -n4 -w node1,node2 --ml-role=ml-engineer \
  --dataset="$DATA/ae/public/a.h5" 2>&1 | grep -o 'Granted job allocation [0-9]*' | tr -dc 0-9)
[ -n "$alloc" ] || fail "no allocation on node1 and node2"
for i in 1 2 3 4 5; do
  run_as $ALICE timeout 60 srun --jobid="$alloc" -N2 -n4 --ml-role=ml-engineer \
    --dataset="$DATA/ae/public/a.h5" true
  [ "$RC" -ne 0 ] || fail "a step denied on node2 exited 0: $OUT"
  assert_contains "$OUT" "slurmstepd-node2: error: hpcml-guard: denied: dataset '$DATA/ae/public/a.h5'" \
    "node2's reason on srun's stderr ($i of 5)"
done
scancel "$alloc"
assert_node_idle "after the steps denied on node2"
on_node2 "umount $DATA/ae/public"
trap restore_plugstack EXIT
pass
