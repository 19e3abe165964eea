#!/usr/bin/env bash
# The job facts a node decides on are those of the job's current attempt
# (issue 15, finding 5): a job requeued, moved to another partition and given
# a GPU while it was held, is decided on its new facts, even when the cache
# still holds its first attempt's entry (as after a node crash, where no
# epilog ran). The cache is per cluster.
source "$(dirname "$0")/guard_lib.sh"
write_policy
guard_install
# slurmd runs a plugin's prolog and epilog only if it was in plugstack.conf
# when slurmd started.
"$HPCML_SOURCE_DIR/tests/cluster/hpcml-cluster" restart-slurmd >/dev/null

# batch_decisions <job>: the node's batch-step audit lines of the job.
batch_decisions() { grep "\"job_id\":\"$1\",\"step_id\":\"batch\"" "$AUDIT" || true; }
wait_decisions() {  # wait_decisions <job> <count>
  local deadline=$((SECONDS + 180))  # a loaded 2-core CI machine took over 90 s once
  until [ "$(batch_decisions "$1" | wc -l)" -ge "$2" ]; do
    [ $SECONDS -lt $deadline ] || fail "job $1: fewer than $2 batch decisions after 180 s"
    sleep 0.3
  done
}

saved=$JOB_DIR/saved-cache
mkdir -p "$saved"
# ml-engineer may use partition batch only; reader may have no GPU.
for change in "Partition=urgent" "TresPerNode=gres:gpu:1"; do
  role=ml-engineer
  [ "$change" = "Partition=urgent" ] || role=reader
  id=$(as $ALICE sbatch --parsable --requeue -p batch --ml-role=$role --output=/dev/null \
    --wrap "sleep 300")
  echo "$id" >>"$TEST_JOBS"
  wait_decisions "$id" 1
  assert_contains "$(batch_decisions "$id")" '"decision":"allow"' "job $id, first attempt"
  compgen -G "$GUARD_CACHE/job-hpcml-$id@*.attempt" >/dev/null ||
    fail "job $id: the prolog wrote no attempt marker"
  compgen -G "$GUARD_CACHE/job-hpcml-$id@*.json" >/dev/null || fail "job $id: no cached facts"
  rm -f "$saved"/*
  cp -p "$GUARD_CACHE"/*"$id"* "$saved"/ 2>/dev/null || true
  scontrol requeuehold "$id"
  deadline=$((SECONDS + 60))
  until [ "$(squeue -h -j "$id" -o %T)" = PENDING ] && ! job_on_nodes "$id"; do
    [ $SECONDS -lt $deadline ] || fail "job $id not requeued 60 s after requeuehold"
    sleep 0.3
  done
  # What a crash leaves: the first attempt's entries, epilog or not.
  cp -p "$saved"/* "$GUARD_CACHE"/ 2>/dev/null || true
  scontrol update JobId="$id" $change || fail "scontrol update $id $change"
  scontrol release "$id"
  scontrol update JobId="$id" StartTime=now
  wait_decisions "$id" 2
  last=$(batch_decisions "$id" | tail -n1)
  assert_contains "$last" '"decision":"deny"' "job $id after $change (stale facts?)"
  case $change in
    Partition=*) assert_contains "$last" "partition 'urgent'" "the denial of job $id" ;;
    *) assert_contains "$last" "the job has 1 GPUs" "the denial of job $id" ;;
  esac
  scancel "$id"
  wait_job "$id" >/dev/null
done
assert_node_idle "after the requeued jobs"
pass
