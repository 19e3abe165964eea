#!/usr/bin/env bash
# Datasets are checked at their canonical path as the user sees it: a symlink
# or '..' from an allowed directory to a forbidden dataset is denied, and a
# directory the user cannot search does not resolve (even though root can).
source "$(dirname "$0")/guard_lib.sh"
write_policy
guard_install
conf=$(bypass_conf)
opt=_SLURM_SPANK_OPTION_hpcml_guard
link=$DATA/ae/scratch/alice-link.h5
rm -f "$link" "$DATA/ae/scratch/alice-eu"
as $ALICE ln -s "$DATA/ae/restricted/secret.h5" "$link"
as $ALICE ln -s "$DATA/eu" "$DATA/ae/scratch/alice-eu"

run_as $ALICE timeout 60 srun -n1 --ml-role=ml-engineer --dataset="$link" true
expect_denied "symlink to a restricted dataset (submit side)" "'$DATA/ae/restricted/secret.h5' is classified 'restricted'"
run_as $ALICE env SLURM_CONF="$conf" ${opt}_dataset="$link" ${opt}_ml_role=ml-engineer timeout 60 srun -n1 true
expect_denied "symlink to a restricted dataset (node)" "'$DATA/ae/restricted/secret.h5' is classified 'restricted'"
run_as $ALICE env SLURM_CONF="$conf" ${opt}_dataset="$DATA/ae/scratch/alice-eu/b.h5" timeout 60 srun -n1 true
expect_denied "symlinked directory into another zone (node)" "'$DATA/ae/scratch/alice-eu/b.h5' cannot be resolved"
run_as $ALICE env SLURM_CONF="$conf" ${opt}_dataset="$DATA/ae/public/../../eu/b.h5" timeout 60 srun -n1 true
expect_denied "'..' out of the zone (node)" "'$DATA/ae/public/../../eu/b.h5' cannot be resolved"

# HPCML_DATASETS is a comma list with no blanks: a dataset whose canonical
# path ends in a blank (here a tab, through a symlink to a directory so named)
# would reach the feature cache trimmed, as a path that was never decided.
tabdir=$DATA/ae/scratch/alice-tab$'\t'
rm -rf "$tabdir" "$DATA/ae/scratch/alice-tablink"
as $ALICE mkdir "$tabdir"
as $ALICE ln -s "$tabdir" "$DATA/ae/scratch/alice-tablink"
run_as $ALICE env SLURM_CONF="$conf" ${opt}_dataset="$DATA/ae/scratch/alice-tablink" timeout 60 srun -n1 true
expect_denied "a dataset whose canonical path ends in a blank (node)" "ends in a blank"
rm -rf "$tabdir" "$DATA/ae/scratch/alice-tablink"

# ae/private is root-only (0700): listed in the policy, but alice cannot see it.
run_as $ALICE env SLURM_CONF="$conf" ${opt}_dataset="$DATA/ae/private/p.h5" timeout 60 srun -n1 true
expect_denied "a path the user cannot search (node)" "Permission denied"

# The link is checked where it points now: retarget it to an allowed file.
ln -sfn "$DATA/ae/public/a.h5" "$link"
run_as $ALICE timeout 60 srun -n1 --ml-role=ml-engineer --dataset="$link" printenv HPCML_DATASETS
expect_allowed "symlink to an allowed dataset"
assert_contains "$OUT" "$DATA/ae/public/a.h5" "canonical path in HPCML_DATASETS"
pass
