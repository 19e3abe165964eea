#!/usr/bin/env bash
# Unknown or malformed plugin arguments are errors: srun/sbatch refuse with a
# message, and on the node every job is denied while the node stays up.
source "$(dirname "$0")/guard_lib.sh"
write_policy
conf=$(bypass_conf)

for args in "policy=$POLICY zone=ae colour=red" "policy=$POLICY" "policy=relative.toml zone=ae" \
  "policy=$POLICY zone=ae zone=eu"; do
  guard_install "$args"
  run_as $ALICE timeout 60 srun -n1 true
  [ "$RC" -ne 0 ] || fail "srun ran with plugin arguments '$args'"
  assert_contains "$OUT" "plugstack.conf arguments of hpcml_guard.so" "srun with '$args'"
  run_as $ALICE env SLURM_CONF="$conf" timeout 60 srun -n1 true
  expect_denied "node with plugin arguments '$args'" "plugstack.conf arguments of hpcml_guard.so"
done
# The audit file cannot be written: every job is denied on the node.
guard_install "policy=$POLICY zone=ae audit=$GUARD_LOG/no-such-dir/audit.jsonl"
run_as $ALICE timeout 60 srun -n1 true
expect_denied "unwritable audit log" "audit log"
pass
