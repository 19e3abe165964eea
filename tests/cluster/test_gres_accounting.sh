#!/usr/bin/env bash
# A job asking for --gres=gpu:h100:2 is accounted with the typed and the
# untyped GPU TRES, and its Comment is kept (AccountingStoreFlags=job_comment).
source "$(dirname "$0")/lib.sh"
dir=$(job_dir)
id=$(submit --gres=gpu:h100:2 --comment="hpcml-test-comment" --output="$dir/out.txt" --wrap "true")
state=$(wait_job "$id")
assert_eq COMPLETED "$state" "job $id state"
tres=$(sacct_field "$id" AllocTRES)
echo "AllocTRES=$tres"
assert_contains "$tres" "gres/gpu:h100=2" "typed GPU TRES"
assert_contains "$tres" "gres/gpu=2" "untyped GPU TRES"
assert_eq "hpcml-test-comment" "$(sacct_field "$id" Comment)" "job Comment in accounting"

# Asking for more GPUs than the node has is refused at submission.
if sbatch --gres=gpu:h100:5 --wrap true >/dev/null 2>&1; then
  fail "a job asking for 5 of 4 GPUs was accepted"
fi
pass
