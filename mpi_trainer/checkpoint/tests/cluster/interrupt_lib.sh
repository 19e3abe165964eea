# Shared by the cluster tests that interrupt a checkpointed training job
# (bash; source it after tests/cluster/lib.sh).

# final_loss <metrics file>: the loss of the last step, exactly as written.
final_loss() {
  /usr/bin/python3 -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1])]
print(repr([r for r in rows if "loss" in r and "step" in r][-1]["loss"]))' "$1"
}

# wait_steps <job> <metrics file> <steps> <poll s>: until the metrics file
# has that many steps (fails after 120 s with the job's output).
wait_steps() {
  local id=$1 metrics=$2 steps=$3 poll=$4 deadline=$((SECONDS + 120))
  until [ -f "$metrics" ] && [ "$(grep -c '"step"' "$metrics")" -ge "$steps" ]; do
    [ $SECONDS -lt $deadline ] || fail "job $id did not reach step $steps: $(cat "$(dirname "$metrics")"/job-*.out)"
    sleep "$poll"
  done
}

# wait_requeued <job>: waits until the job is pending again and no step
# daemon of its first attempt is left on any node. Slurm gives a requeued
# job a begin time about two minutes out: finish_resumed starts it now, so
# the old steps must be gone first (the new attempt's steps reuse their ids
# and PMIx directory names).
wait_requeued() {
  local id=$1 deadline=$((SECONDS + 120))
  until [ "$(squeue -h -j "$id" -o %T)" = PENDING ] && ! job_on_nodes "$id"; do
    [ $SECONDS -lt $deadline ] || fail "job $id was not requeued: $(squeue -j "$id")
$(sacct -j "$id" -o JobID,State,ExitCode 2>&1)
$(cat "${JOB_DIR:-/nonexistent}"/job-*.out 2>/dev/null | tail -n 30)"
    sleep 0.5
  done
}

# finish_resumed <job> <dir>: lets the requeued job start now, waits for it
# to complete, prints its output (set in OUT) and checks that it resumed.
finish_resumed() {
  local id=$1 dir=$2 state
  scontrol update JobId="$id" StartTime=now || fail "could not release job $id"
  state=$(wait_job "$id" 300)
  OUT=$(cat "$dir"/job-*.out)
  echo "$OUT"
  assert_eq COMPLETED "$state" "final state of job $id"
  assert_contains "$OUT" "resumed from checkpoint step" "the second attempt resumed"
}

# preempt_by_urgent <job> <checkpoint glob> <count>: once the job has saved
# <count> files matching the glob, a job in the urgent partition takes both
# zone-ae nodes (the job is preempted and requeued); then lets the requeued
# job start now, waits for it to complete, checks that sacct shows the
# preempted attempt and sets OUT to the job's output ($JOB_DIR/job-*.out).
preempt_by_urgent() {
  local id=$1 pattern=$2 count=$3 deadline=$((SECONDS + 120)) urgent state states
  until [ "$(compgen -G "$pattern" | wc -l)" -ge "$count" ]; do
    [ $SECONDS -lt $deadline ] ||
      fail "job $id saved no checkpoint ($pattern): $(cat "$JOB_DIR"/job-*.out 2>/dev/null)"
    sleep 0.2
  done
  urgent=$(sbatch --parsable -p urgent -N2 --exclusive -C zone-ae --output=/dev/null \
    --wrap "sleep 2") || fail "urgent job not submitted"
  echo "$urgent" >>"$TEST_JOBS"
  wait_requeued "$id"
  wait_job "$urgent" >/dev/null
  scontrol update JobId="$id" StartTime=now || fail "could not release job $id"
  state=$(wait_job "$id" 300)
  OUT=$(cat "$JOB_DIR"/job-*.out)
  assert_eq COMPLETED "$state" "final state of job $id ($OUT)"
  states=$(sacct -n -X -D -P -j "$id" -o State | sort -u | tr '\n' ' ')
  [[ $states == *PREEMPTED* || $states == *REQUEUED* ]] || fail "sacct shows no preempted attempt: $states"
}

# costs_two_attempts <job> <usage dir>: hpcml-cost prices the job's two
# attempts (one requeued) from their usage records, both of which are there.
costs_two_attempts() {
  local id=$1 dir=$2 report
  report=$("$HPCML_BUILD_DIR/accounting/hpcml-cost" \
    --prices "$HPCML_SOURCE_DIR/examples/accounting/prices.toml" -j "$id" --by job \
    --usage-dir "$dir" 2>&1) || fail "hpcml-cost: $report"
  echo "$report"
  grep -Eq "^$id +2 +1 " <<<"$report" || fail "the cost report's row of job $id: 2 attempts, 1 requeued"
  ls "$dir/usage-$id-r0.json" "$dir/usage-$id-r1.json" >/dev/null ||
    fail "usage records of both attempts: $(ls "$dir")"
}
