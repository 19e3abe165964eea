#!/usr/bin/env bash
# Routing at submission (issue 15, finding 7): with the cluster's
# job_submit/lua script (examples/guard/job_submit.lua), a job whose datasets
# (or --data-zone) are in zone eu runs on the eu node and one in zone ae on
# an ae node, with no --constraint from the user; a job whose datasets span
# zones is refused by sbatch, and no job is created; one whose constraint
# contradicts its data's zone fails at sbatch.
source "$(dirname "$0")/guard_lib.sh"
unset SLURM_CONSTRAINT SBATCH_CONSTRAINT  # the routing's to choose
write_policy
guard_install
grep -q '^JobSubmitPlugins=lua' "$SLURM_CONF" || fail "the cluster runs without job_submit/lua"

# routed <name> <sbatch args...>: runs `hostname` as alice; prints the node.
routed() {
  local name=$1 id state
  shift
  id=$(as $ALICE sbatch --parsable --ml-role=ml-engineer --output="$JOB_DIR/$name.out" "$@" \
    --wrap hostname) || fail "$name: sbatch refused the job"
  echo "$id" >>"$TEST_JOBS"
  state=$(wait_job "$id")
  [ "$state" = COMPLETED ] || fail "$name: job $id ended $state: $(cat "$JOB_DIR/$name.out")"
  cat "$JOB_DIR/$name.out"
}
assert_eq node3 "$(routed eu-dataset --dataset="$DATA/eu/b.h5")" "the node of a job with eu data"
assert_eq node3 "$(routed eu-zone --data-zone=eu)" "the node of a --data-zone=eu job"
node=$(routed ae-dataset --dataset="$DATA/ae/public/a.h5")
[[ $node == node1 || $node == node2 ]] || fail "a job with ae data ran on $node"

# next_job_id: a held job's id, cancelled (a refused submission takes none).
next_job_id() {
  local id
  id=$(as $ALICE sbatch --parsable --hold --output=/dev/null --wrap true) || fail "sbatch --hold failed"
  scancel "$id"
  echo "$id"
}
first=$(next_job_id)
run_as $ALICE sbatch --ml-role=ml-engineer --dataset="$DATA/ae/public/a.h5,$DATA/eu/b.h5" \
  --output=/dev/null --wrap true
[ "$RC" -ne 0 ] || fail "a job whose datasets span zones was accepted: $OUT"
assert_contains "$OUT" "zones ae,eu" "the refusal names the zones"
# Slurm may spend a job id on a refused submission, but creates no job.
last=$(next_job_id)
for ((id = first + 1; id < last; id++)); do
  [ -z "$(sacct -n -X -P -j "$id" -o JobID)" ] || fail "a refused submission created job $id"
done
# A constraint of the user's that contradicts the data's zone is refused by
# the script, saying why (issue 32), not with Slurm's generic "Requested node
# configuration is not available"; one that agrees is kept.
run_as $ALICE sbatch --ml-role=ml-engineer --constraint=zone-ae --dataset="$DATA/eu/b.h5" \
  --output=/dev/null --wrap true
[ "$RC" -ne 0 ] || fail "a job asking for ae nodes with eu data was accepted: $OUT"
assert_contains "$OUT" "the job's datasets are in zone eu, but its --constraint asks for zone-ae" \
  "the refusal of a contradicting constraint"
assert_eq node3 "$(routed eu-constraint --constraint=zone-eu --dataset="$DATA/eu/b.h5")" \
  "the node of a job whose constraint agrees with its data"
assert_node_idle "after the routed jobs"
pass
