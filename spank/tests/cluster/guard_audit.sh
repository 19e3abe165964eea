#!/usr/bin/env bash
# Every node decision is one hash-chained JSON line (once per step per node,
# not per task); the log verifies, and edited, removed or reordered copies
# do not.
source "$(dirname "$0")/guard_lib.sh"
write_policy
guard_install

run_as $ALICE timeout 60 srun -n3 --ml-role=ml-engineer --dataset="$DATA/ae/public/a.h5" true
expect_allowed "allowed 3-task step"
run_as $BOB timeout 60 srun -n1 true
expect_denied "unbound user"
id=$(as $ALICE sbatch --parsable -n2 --output=/dev/null --wrap 'srun -n2 true')
assert_eq COMPLETED "$(wait_job "$id")" "batch job $id"

"$AUDIT_BIN" verify "$AUDIT" || fail "hpcml-audit verify failed on the live log"
rows=$(grep -c "\"job_id\":\"$id\"" "$AUDIT")
assert_eq 2 "$rows" "audit lines of job $id (batch step + one srun step of 2 tasks)"
last=$(grep "\"user\":\"$BOB\"" "$AUDIT" | tail -n1)
for field in time cluster node job_id step_id uid user role zone datasets decision reason prev seq; do
  assert_contains "$last" "\"$field\":" "audit field $field"
done
assert_contains "$last" '"decision":"deny"' "bob's decision"
assert_contains "$last" '"context":"node"' "bob's context"
[ "$(stat -c %U:%a "$AUDIT")" = root:640 ] || fail "audit log is $(stat -c %U:%a "$AUDIT"), expected root:640"

n=$(wc -l <"$AUDIT")
[ "$n" -ge 3 ] || fail "only $n audit lines"
tamper() {  # tamper <name> <sed-or-awk program...>: a modified copy; verify must fail naming a line
  local copy=$JOB_DIR/$1.jsonl out rc
  shift
  "$@" "$AUDIT" >"$copy"
  set +e
  out=$("$AUDIT_BIN" verify "$copy" 2>&1)
  rc=$?
  set -e
  [ "$rc" -eq 1 ] || fail "verify of the $copy copy exited $rc: $out"
  assert_contains "$out" "$copy:" "verify names the file and line"
  echo "$out"
}
out=$(tamper edited sed '2s/"decision":"[a-z]*"/"decision":"allow"/; 2s/"reason":"/"reason":"x/')
assert_contains "$out" "edited.jsonl:2:" "edited line named"
out=$(tamper removed sed '2d')
assert_contains "$out" "removed.jsonl:2:" "removed line named"
out=$(tamper reordered awk 'NR==2{keep=$0; next} NR==3{print; print keep; next} {print}')
assert_contains "$out" "reordered.jsonl:2:" "reordered line named"
pass
