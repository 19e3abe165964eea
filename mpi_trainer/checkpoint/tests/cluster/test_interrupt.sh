#!/usr/bin/env bash
# A two-node training job (one rank on each ae node, the data-parallel
# all-reduce over TCP) interrupted by Slurm resumes from its checkpoint and
# ends with exactly the loss of an uninterrupted run of the same layout.
#   test_interrupt.sh requeue   # scontrol requeue while it trains
#   test_interrupt.sh preempt   # a job in the higher-priority partition preempts it
# The reference run is the same job, uninterrupted, in the same test.
source "$HPCML_SOURCE_DIR/tests/cluster/lib.sh"
source "$(dirname "$0")/interrupt_lib.sh"
mode=${1:?requeue or preempt}
train=$HPCML_BUILD_DIR/mpi_trainer/trainer/hpcml-train
[ -x "$train" ] || fail "$train not built"
dir=$(job_dir)
two_nodes="-N2 --ntasks-per-node=1 --constraint=zone-ae"
args="--dp 2 --synthetic --input-dim 64 --hidden 256,256 --outputs 8 --batch 256 --steps 10000 --lr 2e-3 --log-interval 2500"

# Reference: the same training, uninterrupted.
srun --mpi=pmix $two_nodes "$train" $args --metrics "$dir/reference.jsonl" >"$dir/reference.log" 2>&1 ||
  fail "reference run failed: $(tail -5 "$dir/reference.log")"
reference=$(final_loss "$dir/reference.jsonl")

cat >"$dir/job.sh" <<JOB
#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --constraint=zone-ae
#SBATCH --requeue
#SBATCH --output=$dir/job-%j.out
#SBATCH --open-mode=append
attempt=\${SLURM_RESTART_COUNT:-0}
echo "attempt \$attempt on \$SLURM_JOB_NODELIST"
srun --mpi=pmix "$train" $args --checkpoint-dir "$dir/ckpt" --checkpoint-every 25 \
  --metrics "$dir/metrics-\$attempt.jsonl"
rc=\$?
echo "hpcml-train exited \$rc"
exit \$rc
JOB
id=$(submit "$dir/job.sh")

# Wait until it has trained past the first checkpoints. The job must still
# be training when Slurm interrupts it: at 1.5 ms a step (2-core VM), 2000
# steps ended in 3 s, before the preemption reached it; 10000 leave 15 s.
wait_steps "$id" "$dir/metrics-0.jsonl" 100 0.5

case "$mode" in
  requeue)
    scontrol requeue "$id" || fail "scontrol requeue $id"
    ;;
  preempt)
    # Needs both ae nodes whole: the only way in is to preempt the training job.
    urgent=$(sbatch --parsable -p urgent $two_nodes --exclusive --output="$dir/urgent.out" --wrap "sleep 2") ||
      fail "urgent job not submitted"
    ;;
esac

wait_requeued "$id"
[ "$mode" = preempt ] && wait_job "$urgent" >/dev/null
finish_resumed "$id" "$dir"
out=$OUT
# From rank 0's metrics file, not the job's output: under proctrack/cgroup
# the batch step's srun is signalled with everything else in its cgroup and
# may be gone before it relays the trainer's last line.
assert_contains "$(cat "$dir/metrics-0.jsonl")" '"event":"stopped"' \
  "the interrupted attempt saved and stopped"
assert_eq 2 "$(grep -c '^attempt [01] on node\[1-2\]$' <<<"$out")" "both attempts on node1 and node2"
[ -f "$dir/metrics-1.jsonl" ] || fail "no metrics from the resumed attempt"
resumed=$(final_loss "$dir/metrics-1.jsonl")
echo "reference final loss $reference, interrupted-and-resumed $resumed"
assert_eq "$reference" "$resumed" "final loss (bitwise, same layout on CPU)"
# The interruption is visible in accounting as a requeued (or preempted) attempt.
states=$(sacct -n -X -D -P -j "$id" -o State | sort -u | tr '\n' ' ')
assert_contains "$states" "COMPLETED" "sacct -D attempts"
case "$mode" in
  requeue) assert_contains "$states" "REQUEUED" "sacct -D attempts" ;;
  preempt) [[ $states == *PREEMPTED* || $states == *REQUEUED* ]] || fail "sacct shows no preempted attempt: $states" ;;
esac
pass "$mode: final loss $resumed"
