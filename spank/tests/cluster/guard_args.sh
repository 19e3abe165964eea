#!/usr/bin/env bash
# Unknown or malformed plugin arguments are errors: srun/sbatch refuse with a
# message, and on the node every job is denied while the node stays up.
source "$(dirname "$0")/guard_lib.sh"
write_policy
conf=$(bypass_conf)

# (zone= may be left out: the node's zone then comes from the policy or its
# Slurm feature, guard_zones.)
for args in "policy=$POLICY zone=ae colour=red" "zone=ae" "policy=relative.toml zone=ae" \
  "policy=$POLICY zone=ae zone=eu" "policy=$POLICY zone=ae enforce=none"; do
  guard_install "$args"
  run_as $ALICE timeout 60 srun -n1 true
  [ "$RC" -ne 0 ] || fail "srun ran with plugin arguments '$args'"
  assert_contains "$OUT" "plugstack.conf arguments of hpcml_guard.so" "srun with '$args'"
  run_as $ALICE env SLURM_CONF="$conf" timeout 60 srun -n1 true
  expect_denied "node with plugin arguments '$args'" "plugstack.conf arguments of hpcml_guard.so"
done
# A bad option value fails sbatch and srun with no job created.
guard_install
for bad in "" $'a\nb' "$(head -c 5000 /dev/zero | tr '\0' a)"; do
  run_as $ALICE sbatch --parsable --dataset="$bad" --output=/dev/null --wrap true
  [ "$RC" -ne 0 ] || fail "sbatch with --dataset='${bad:0:20}' was accepted: $OUT"
  grep -qE '^[0-9]+(;|$)' <<<"$OUT" && fail "sbatch with a bad --dataset created job $OUT"
  assert_contains "$OUT" "hpcml-guard: --dataset" "sbatch with a bad --dataset"
  run_as $ALICE timeout 60 srun -n1 --dataset="$bad" true
  [ "$RC" -ne 0 ] || fail "srun with --dataset='${bad:0:20}' ran"
  [[ $OUT != *"queued and waiting"* && $OUT != *"has been allocated"* ]] ||
    fail "srun with a bad --dataset created a job: $OUT"
done
# The audit file cannot be written: every job is denied on the node.
guard_install "policy=$POLICY zone=ae audit=$GUARD_LOG/no-such-dir/audit.jsonl"
run_as $ALICE timeout 60 srun -n1 true
expect_denied "unwritable audit log" "audit log"
pass
