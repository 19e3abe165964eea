#!/usr/bin/env bash
# The node decides alone: skipping the submit-side check (a user's own
# SLURM_CONF without plugstack.conf) or setting _SLURM_SPANK_OPTION_* and
# other environment variables cannot turn a deny into an allow.
source "$(dirname "$0")/guard_lib.sh"
write_policy
guard_install
conf=$(bypass_conf)
opt=_SLURM_SPANK_OPTION_hpcml_guard

# No submit-side check at all; the option arrives through the environment.
run_as $ALICE env SLURM_CONF="$conf" ${opt}_dataset="$DATA/ae/restricted/secret.h5" \
  timeout 60 srun -n1 true
expect_denied "srun without the submit-side check" "classified 'restricted'"
id=$(as $ALICE env SLURM_CONF="$conf" ${opt}_dataset="$DATA/ae/restricted/secret.h5" \
  sbatch --parsable --output="$JOB_DIR/batch.out" --wrap 'echo ran')
assert_eq FAILED "$(wait_job "$id")" "state of batch job $id submitted around the check"
assert_contains "$(cat "$JOB_DIR/batch.out")" "classified 'restricted'" "reason in the job output"
assert_node_idle "after the batch job"

# An allowed value in the environment does not replace the forbidden option.
run_as $ALICE env ${opt}_dataset="$DATA/ae/public/a.h5" \
  timeout 60 srun -n1 --dataset="$DATA/ae/restricted/secret.h5" true
expect_denied "forbidden --dataset with an allowed value in the environment" "classified 'restricted'"

# Trusted facts come from slurmctld, not from the job's environment.
run_as $BOB env SLURM_CONF="$conf" SLURM_JOB_ACCOUNT=hpcml-ml \
  SLURM_JOB_PARTITION=batch SLURM_JOB_USER=$ALICE USER=$ALICE HPCML_ROLE=reader HPCML_ZONE=ae \
  ${opt}_ml_role=reader timeout 60 srun -n1 true
expect_denied "unbound user with a forged account in the environment" "account 'hpcml-finance'"
run_as $ALICE env SLURM_CONF="$conf" SLURM_JOB_GPUS= CUDA_VISIBLE_DEVICES= \
  ${opt}_ml_role=reader timeout 60 srun -n1 --gres=gpu:h100:2 true
expect_denied "GPU count from the job record" "the job has 2 GPUs"

# A malformed option value that reaches the node denies, it does not drain.
run_as $ALICE env SLURM_CONF="$conf" ${opt}_dataset="relative/path" timeout 60 srun -n1 true
expect_denied "malformed option through the environment" "not an absolute path"
run_as $ALICE env SLURM_CONF="$conf" ${opt}_ml_role="$(printf 'x\ny')" timeout 60 srun -n1 true
expect_denied "control characters in an option" "--ml-role"

# Preset HPCML_* variables are replaced by the guard's on allow (the guard
# leaves a variable alone only when it holds the decided value exactly: a
# longer value that starts with it, or a prefix of it, is replaced). Without
# the submit-side plugin, whose srun would put its own values (hints) in
# their place: the forged ones reach the node.
run_as $ALICE env SLURM_CONF="$conf" ${opt}_ml_role=ml-engineer HPCML_ROLE=ml-engineer-admin \
  HPCML_DATASETS=/etc/shadow HPCML_ZONE=eu \
  timeout 60 srun -n1 printenv HPCML_ROLE HPCML_DATASETS HPCML_ZONE
expect_allowed "allowed job with forged HPCML_* variables"
assert_eq $'ml-engineer\n\nae' "$(grep -v '^srun:' <<<"$OUT")" "HPCML_* set by the guard"
run_as $ALICE env SLURM_CONF="$conf" ${opt}_ml_role=ml-engineer HPCML_CLASSIFICATIONS=intern \
  HPCML_ZONE=ae timeout 60 srun -n1 printenv HPCML_CLASSIFICATIONS HPCML_ZONE
expect_allowed "allowed job with a forged HPCML_CLASSIFICATIONS"
assert_eq $'internal\nae' "$(grep -v '^srun:' <<<"$OUT")" "HPCML_CLASSIFICATIONS set by the guard"
# With it, the same forged values are replaced in srun already; and srun's
# hint for a step without data (no zone known) is corrected by the node.
run_as $ALICE env HPCML_ROLE=ml-engineer-admin HPCML_DATASETS=/etc/shadow HPCML_ZONE=eu \
  timeout 60 srun -n1 --ml-role=ml-engineer printenv HPCML_ROLE HPCML_DATASETS HPCML_ZONE
expect_allowed "allowed job with forged HPCML_* variables, through srun's plugin"
assert_eq $'ml-engineer\n\nae' "$(grep -v '^srun:' <<<"$OUT")" "HPCML_* through srun's plugin"
pass
