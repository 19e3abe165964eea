#!/usr/bin/env bash
# A job near its time limit saves and stops by itself: with
# --stop-before-end 55 in a 1-minute job, hpcml-train sees (through libslurm)
# fewer than 55 s left at its second check, 30 s in, saves, and exits 85,
# which RequeueExit=85 turns into a requeue.
source "$HPCML_SOURCE_DIR/tests/cluster/lib.sh"
train=$HPCML_BUILD_DIR/mpi_trainer/trainer/hpcml-train
[ -x "$train" ] || fail "$train not built"
dir=$(job_dir)
id=$(submit --ntasks=2 --time=1 --requeue --output="$dir/job.out" --wrap \
  "srun --mpi=pmix $train --dp 2 --synthetic --input-dim 64 --hidden 256,256 --outputs 8 --batch 256 \
   --steps 10000000 --log-interval 1000000 --checkpoint-dir $dir/ckpt --stop-before-end 55")
deadline=$((SECONDS + 120))
until grep -q "stopping at step" "$dir/job.out" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "job $id did not stop before its time limit: $(cat "$dir/job.out")"
  sleep 1
done
out=$(cat "$dir/job.out")
echo "$out"
scancel "$id" 2>/dev/null || true
assert_contains "$out" "(time limit (" "stop reason"
assert_contains "$out" "checkpoint: step" "a checkpoint was saved"
ls "$dir"/ckpt/step-*/manifest.json >/dev/null 2>&1 || fail "no complete checkpoint set in $dir/ckpt"
pass
