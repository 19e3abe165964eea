#!/usr/bin/env bash
# Allowed jobs run and see HPCML_ZONE, HPCML_ROLE, HPCML_DATASETS (canonical
# paths) and HPCML_CLASSIFICATIONS (the role's): srun, repeated and relative
# --dataset, the default role, sbatch with steps inside the job inheriting
# its request.
source "$(dirname "$0")/guard_lib.sh"
write_policy
guard_install

run_as $ALICE timeout 60 srun -n1 --data-zone=ae --ml-role=ml-engineer \
  --dataset="$DATA/ae/public/a.h5" printenv HPCML_ZONE HPCML_ROLE HPCML_DATASETS
expect_allowed "srun with an allowed dataset"
assert_contains "$OUT" $'ae\nml-engineer\n'"$DATA/ae/public/a.h5" "task environment"

# The classifications the role may read, for the feature cache (job_env.hpp).
run_as $ALICE timeout 60 srun -n1 --ml-role=ml-engineer printenv HPCML_CLASSIFICATIONS
expect_allowed "srun for the role's classifications"
assert_eq "internal" "$(grep -v '^srun:' <<<"$OUT")" "HPCML_CLASSIFICATIONS"

# Repeated and relative --dataset values, '..' and a symlink inside the zone:
# all forwarded, all canonical.
ln -sfn "$DATA/ae/public/b.h5" "$DATA/ae/scratch/b-link.h5"
set +e
OUT=$(cd "$DATA/ae/public" && runuser -u $ALICE -- timeout 60 srun -n2 --ml-role=ml-engineer \
  --dataset=a.h5,../scratch/b-link.h5 --dataset="$DATA/ae/public/../public/a.h5" \
  printenv HPCML_DATASETS 2>&1)
RC=$?
set -e
expect_allowed "srun with repeated, relative and linked datasets"
assert_eq "$DATA/ae/public/a.h5,$DATA/ae/public/b.h5" "$(grep -m1 '^/' <<<"$OUT")" "HPCML_DATASETS"

# No options at all: the default role, bound through the account.
run_as $ALICE timeout 60 srun -n1 printenv HPCML_ROLE HPCML_DATASETS
expect_allowed "srun without guard options"
assert_contains "$OUT" "reader" "default role"

# A role bound through a group.
run_as $BOB timeout 60 srun -n1 --ml-role=team-reader --dataset="$DATA/ae/public/a.h5" \
  printenv HPCML_ROLE
expect_allowed "srun with a role bound to the user's group"
assert_contains "$OUT" "team-reader" "role through the group"

# GPUs within the role's limit.
run_as $ALICE timeout 60 srun -n1 --gres=gpu:h100:2 --ml-role=ml-engineer printenv HPCML_ROLE
expect_allowed "srun with 2 GPUs as ml-engineer (max 4)"

# sbatch: the batch step and the steps inside it.
id=$(as $ALICE sbatch --parsable --output="$JOB_DIR/batch.out" --ml-role=ml-engineer \
  --dataset="$DATA/ae/public/a.h5" --dataset="$DATA/ae/public/b.h5" \
  --wrap 'echo batch=$HPCML_ROLE:$HPCML_DATASETS; srun printenv HPCML_DATASETS')
assert_eq COMPLETED "$(wait_job "$id")" "state of allowed batch job $id"
out=$(cat "$JOB_DIR/batch.out")
assert_contains "$out" "batch=ml-engineer:$DATA/ae/public/a.h5,$DATA/ae/public/b.h5" "batch step environment"
assert_contains "$out" $'\n'"$DATA/ae/public/a.h5,$DATA/ae/public/b.h5" "inner step inherits the job's datasets"
assert_node_idle "after the allowed jobs"

# The job facts cache: slurmctld's answer for the job is kept in a root-only
# directory for the job's later steps on this node, and the job's epilog
# removes it (the prolog of each attempt starts it afresh: job_cache.hpp).
# slurmd runs a plugin's prolog and epilog only if it loaded the plugin when
# it started.
"$HPCML_SOURCE_DIR/tests/cluster/hpcml-cluster" restart-slurmd
id=$(as $ALICE sbatch --parsable --output="$JOB_DIR/cached.out" \
  --wrap "srun true && touch $JOB_DIR/cached.steps-done && sleep 60")
deadline=$((SECONDS + 60))
until [ -e "$JOB_DIR/cached.steps-done" ]; do
  [ $SECONDS -lt $deadline ] || fail "job $id: its step did not run within 60 s"
  sleep 0.2
done
entry=$(echo "$GUARD_CACHE/job-hpcml-$id@"*.json)  # one node: one entry
[ -f "$entry" ] || fail "job $id is running but $entry does not exist"
assert_eq "700 root" "$(stat -c '%a %U' "$GUARD_CACHE")" "cache directory mode and owner"
assert_contains "$(cat "$entry")" '"account":"hpcml-ml"' "cached job facts"
scancel "$id"
wait_job "$id" >/dev/null
deadline=$((SECONDS + 30))
while [ -e "$entry" ]; do
  [ $SECONDS -lt $deadline ] || fail "job $id ended but the epilog left $entry"
  sleep 0.2
done
pass
