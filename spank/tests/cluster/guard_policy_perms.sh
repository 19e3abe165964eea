#!/usr/bin/env bash
# A policy that is missing, group- or other-writable, not root's, or broken
# denies every job, on the submit side and on the node, naming the cause.
source "$(dirname "$0")/guard_lib.sh"
write_policy
guard_install
conf=$(bypass_conf)

check_all_denied() {  # check_all_denied <what> <needle>
  run_as $ALICE timeout 60 srun -n1 true
  expect_denied "$1, srun" "$2"
  run_as $ALICE env SLURM_CONF="$conf" timeout 60 srun -n1 true
  expect_denied "$1, node" "$2"
}

run_as $ALICE timeout 60 srun -n1 true
expect_allowed "baseline: a safe policy allows"

chmod 0664 "$POLICY"
check_all_denied "group-writable policy" "writable by group or others (mode 664)"
chmod 0646 "$POLICY"
check_all_denied "other-writable policy" "writable by group or others"
chmod 0644 "$POLICY"
chown $ALICE "$POLICY"
check_all_denied "policy owned by a user" "must be owned by root"
chown root "$POLICY"
chmod 0777 "$GUARD_ETC"
check_all_denied "policy in a world-writable directory" "directory $GUARD_ETC"
chmod 0755 "$GUARD_ETC"
mv "$POLICY" "$POLICY.away"
check_all_denied "missing policy" "No such file or directory"
mv "$POLICY.away" "$POLICY"
sed -i 's/^max_gpus = 4$/max_gpus = "four"/' "$POLICY"
check_all_denied "broken policy" "policy.toml:"
assert_contains "$OUT" "key 'max_gpus'" "policy error names the key"
write_policy

run_as $ALICE timeout 60 srun -n1 true
expect_allowed "a safe policy allows again"
pass
