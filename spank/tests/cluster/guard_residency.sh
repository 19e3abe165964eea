#!/usr/bin/env bash
# Residency of what a job *does*, tried as an ordinary user (issue 15,
# findings 1-3), with the guard's default arguments (no enforce=):
# 1. undeclared reads of policy data fail inside the task; the advisory mode
#    must be chosen explicitly and every audit line records the mode;
# 2. a launch held open (a FIFO as the batch script's stdin) while the user
#    swaps an allowed path for a symlink gets neither another zone's data nor
#    a root-only directory: the view is built from what was resolved;
# 3. stdin/stdout/stderr files are data access: another zone's data cannot be
#    read through --input, nothing is written into a data root through
#    --output, in the default mode (the view) and in the advisory one (a
#    denial, audited).
source "$(dirname "$0")/guard_lib.sh"
write_policy
guard_install
echo EU-SECRET >"$DATA/eu/marker"
install -d -m 0755 "$DATA/ae/private/sub"
echo ROOT-ONLY >"$DATA/ae/private/sub/marker"
chmod 0644 "$DATA/eu/marker" "$DATA/ae/private/sub/marker"
rm -rf "$DATA/ae/scratch/alice-"*

last_audit() { tail -n1 "$AUDIT"; }

# --- 1. Undeclared reads ------------------------------------------------
run_as $ALICE timeout 60 srun -n1 cat "$DATA/eu/marker"
[ "$RC" -ne 0 ] || fail "default mode: an undeclared read of zone eu's data succeeded: $OUT"
[[ $OUT != *EU-SECRET* ]] || fail "default mode: eu data reached the task: $OUT"
assert_contains "$(last_audit)" '"enforce":"mount"' "the audit line of a default-mode step"
run_as $ALICE timeout 60 srun -n1 cat "$DATA/ae/public/a.h5"
[ "$RC" -ne 0 ] || fail "default mode: an undeclared read of an ae dataset succeeded: $OUT"
run_as $ALICE timeout 60 srun -n1 --dataset="$DATA/ae/public/a.h5" cat "$DATA/ae/public/a.h5"
expect_allowed "default mode: a declared read"
assert_contains "$OUT" data "default mode: the declared dataset"
assert_node_idle "after the default-mode reads"

guard_install "policy=$POLICY zone=@ZONE@ audit=$AUDIT cluster=hpcml job_cache=$GUARD_CACHE enforce=advisory"
run_as $ALICE timeout 60 srun -n1 cat "$DATA/ae/public/a.h5"
expect_allowed "advisory mode: an undeclared read"
assert_contains "$(last_audit)" '"enforce":"advisory"' "the audit line of an advisory-mode step"
guard_install "policy=$POLICY zone=@ZONE@ audit=$AUDIT cluster=hpcml job_cache=$GUARD_CACHE enforce=none"
run_as $ALICE timeout 60 srun -n1 true
[ "$RC" -ne 0 ] || fail "enforce=none (no longer a mode) was accepted"
assert_contains "$OUT" "enforce" "the refusal of enforce=none names the argument"
guard_install
assert_node_idle "after the mode checks"

# --- 2. A held launch and a swapped path --------------------------------
# hold_and_swap <target>: alice's allowed scratch directory becomes a symlink
# to <target> while the batch step waits on its stdin FIFO, after the node
# logged its decision. Prints the job's output.
hold_and_swap() {
  local target=$1 ok=$DATA/ae/scratch/alice-ok fifo=$JOB_DIR/hold.fifo id deadline
  rm -rf "$ok" "$ok.real" "$fifo"
  as $ALICE mkdir "$ok"
  as $ALICE sh -c "echo ALICE >'$ok/own'"
  as $ALICE mkfifo "$fifo"
  id=$(as $ALICE sbatch --parsable --input="$fifo" --output="$JOB_DIR/swap.out" \
    --ml-role=ml-engineer --dataset="$ok" \
    --wrap "cat '$ok/marker' '$ok/own'; ls '$ok'")
  echo "$id" >>"$TEST_JOBS"
  deadline=$((SECONDS + 60))
  until grep -q "\"job_id\":\"$id\",\"step_id\":\"batch\"" "$AUDIT"; do
    [ $SECONDS -lt $deadline ] || fail "job $id: no node decision after 60 s"
    sleep 0.2
  done
  sleep 0.5  # the step is now blocked opening the FIFO
  as $ALICE mv "$ok" "$ok.real"
  as $ALICE ln -s "$target" "$ok"
  as $ALICE sh -c "echo >'$fifo'" &
  wait_job "$id" >/dev/null
  wait
  cat "$JOB_DIR/swap.out"
}
out=$(hold_and_swap "$DATA/eu")
[[ $out != *EU-SECRET* ]] || fail "a swapped path exposed zone eu's data to the task: $out"
assert_contains "$out" ALICE "the task sees the directory that was resolved and decided"
out=$(hold_and_swap "$DATA/ae/private/sub")
[[ $out != *ROOT-ONLY* ]] || fail "a swapped path exposed a root-only directory to the task: $out"
assert_contains "$out" ALICE "the task sees the directory that was resolved and decided"
assert_node_idle "after the swaps"

# --- 3. Stdio ------------------------------------------------------------
# stdio_job <sbatch args...>: runs a batch job as alice; prints its state.
stdio_job() {
  local id
  id=$(as $ALICE sbatch --parsable "$@")
  echo "$id" >>"$TEST_JOBS"
  wait_job "$id"
}
out_file=$JOB_DIR/stdio.out
rm -f "$out_file"
state=$(stdio_job --input="$DATA/eu/marker" --output="$out_file" --wrap cat)
[ ! -s "$out_file" ] || [[ $(cat "$out_file") != *EU-SECRET* ]] ||
  fail "--input read zone eu's data (job state $state)"
[ "$state" != COMPLETED ] || fail "--input of another zone's data: the job completed"
written=$DATA/ae/scratch/alice-out.txt
state=$(stdio_job --output="$written" --wrap "echo written")
[ ! -e "$written" ] || fail "--output wrote into a data root (job state $state)"
state=$(stdio_job --dataset="$DATA/ae/scratch" --output="$written" --wrap "echo written")
[ ! -e "$written" ] || fail "--output wrote into a dataset the job reads (job state $state)"
# A denied step runs no task, but slurmstepd still opens its stdio files:
# they too are opened in a view, with no dataset at all.
denied=$DATA/ae/scratch/alice-denied.txt
state=$(stdio_job --dataset="$DATA/eu/marker" --output="$denied" --wrap "echo written")
[ "$state" != COMPLETED ] || fail "a job asking for zone eu's data completed on an ae node"
[ ! -e "$denied" ] || fail "a denied step's --output created a file in a data root"
assert_node_idle "after the stdio jobs"

guard_install "policy=$POLICY zone=@ZONE@ audit=$AUDIT cluster=hpcml job_cache=$GUARD_CACHE enforce=advisory"
rm -f "$out_file"
state=$(stdio_job --input="$DATA/eu/marker" --output="$out_file" --wrap cat)
[[ $(cat "$out_file" 2>/dev/null) != *EU-SECRET* ]] || fail "advisory mode: --input read zone eu's data"
[ "$state" != COMPLETED ] || fail "advisory mode: --input of another zone's data: the job completed"
# Another zone's data is not on this node at all (its own file system); a
# dataset of this zone the job did not declare is, and the advisory mode
# denies reading it as stdin, naming it.
echo AE-RESTRICTED >"$DATA/ae/restricted/marker"
chmod 0644 "$DATA/ae/restricted/marker"
rm -f "$out_file"
state=$(stdio_job --input="$DATA/ae/restricted/marker" --output="$out_file" --wrap cat)
[[ $(cat "$out_file" 2>/dev/null) != *AE-RESTRICTED* ]] ||
  fail "advisory mode: --input read an undeclared dataset"
[ "$state" != COMPLETED ] || fail "advisory mode: --input of an undeclared dataset: the job completed"
assert_contains "$(grep '"decision":"deny"' "$AUDIT" | tail -n1)" "$DATA/ae/restricted/marker" \
  "advisory mode: the audited denial names the stdin file"
state=$(stdio_job --output="$written" --wrap "echo written")
[[ $(cat "$written" 2>/dev/null) != *written* ]] || fail "advisory mode: --output wrote into a data root"
assert_node_idle "after the advisory stdio jobs"
pass
