#!/usr/bin/env bash
# enforce=mount: under the policy's dataset entries, each task sees only the
# datasets its step was allowed (others are covered, covers are read-only),
# whatever it does with HPCML_DATASETS; the node's own view is unchanged.
source "$(dirname "$0")/guard_lib.sh"
write_policy
guard_install "policy=$POLICY zone=ae audit=$AUDIT cluster=hpcml job_cache=$GUARD_CACHE enforce=mount"

# Prints "visible F: <content>" or "hidden F" for each file, then whether a
# new file can be written next to the allowed one.
probe='for f in ae/public/a.h5 ae/public/b.h5 ae/restricted/secret.h5 eu/b.h5; do
  if [ -e "$D/$f" ]; then echo "visible $f: $(cat "$D/$f")"; else echo "hidden $f"; fi
done
if touch "$D/ae/public/new.h5" 2>/dev/null; then echo "wrote"; else echo "read-only"; fi'

run_as $ALICE timeout 60 srun -n1 --ml-role=ml-engineer --dataset="$DATA/ae/public/a.h5" \
  env D="$DATA" sh -c "$probe"
expect_allowed "srun with one allowed dataset"
assert_contains "$OUT" "visible ae/public/a.h5: data" "the allowed dataset"
assert_contains "$OUT" "hidden ae/public/b.h5" "a sibling of the allowed dataset"
assert_contains "$OUT" "hidden ae/restricted/secret.h5" "another entry's data"
assert_contains "$OUT" "hidden eu/b.h5" "another zone's data"
assert_contains "$OUT" "read-only" "writing under a cover"

# No datasets asked for: every entry is covered.
run_as $ALICE timeout 60 srun -n1 env D="$DATA" sh -c "$probe"
expect_allowed "srun without datasets"
assert_contains "$OUT" "hidden ae/public/a.h5" "no dataset requested"

# A batch job: its script and the steps inside it see the job's datasets.
# A step cannot name a dataset the job does not see (ask for all of them at
# submission): it does not resolve inside the job's view.
id=$(as $ALICE sbatch --parsable --output="$JOB_DIR/mount.out" --ml-role=ml-engineer \
  --dataset="$DATA/ae/public/a.h5" \
  --wrap "env D=$DATA sh -c '$probe'; echo STEP; srun env D=$DATA sh -c '$probe';
          echo ADD; srun --dataset=$DATA/ae/public/b.h5 true || echo refused")
assert_eq COMPLETED "$(wait_job "$id")" "state of batch job $id"
out=$(cat "$JOB_DIR/mount.out")
batch=${out%%STEP*} step=${out#*STEP} step=${step%%ADD*} add=${out#*ADD}
assert_contains "$batch" "visible ae/public/a.h5: data" "batch step: its dataset"
assert_contains "$batch" "hidden ae/public/b.h5" "batch step: b.h5 not requested"
assert_contains "$step" "visible ae/public/a.h5: data" "inner step: the job's dataset"
assert_contains "$step" "hidden ae/public/b.h5" "inner step: b.h5 not requested"
assert_contains "$add" "cannot be resolved" "inner step adding a dataset the job does not see"
assert_contains "$add" "refused" "inner step adding a dataset the job does not see"

# A feature set is a file and its versions' directory <file>.d: declaring
# the file brings its own .d into the view (decided on like the file), not a
# sibling's, and not one that is a symlink (here into another zone's data).
install -d -m 0755 "$DATA/ae/public/a.h5.d" "$DATA/ae/public/b.h5.d"
echo v1 >"$DATA/ae/public/a.h5.d/v1.h5"
echo v1 >"$DATA/ae/public/b.h5.d/v1.h5"
echo data >"$DATA/ae/public/c.h5"
ln -sfn "$DATA/eu" "$DATA/ae/public/c.h5.d"
chmod 0644 "$DATA/ae/public/a.h5.d/v1.h5" "$DATA/ae/public/b.h5.d/v1.h5" "$DATA/ae/public/c.h5"
probe_sets='for f in ae/public/a.h5.d/v1.h5 ae/public/b.h5.d/v1.h5 eu/b.h5; do
  if [ -e "$D/$f" ]; then echo "visible $f: $(cat "$D/$f")"; else echo "hidden $f"; fi
done; echo "datasets=$HPCML_DATASETS"'
run_as $ALICE timeout 60 srun -n1 --ml-role=ml-engineer \
  --dataset="$DATA/ae/public/a.h5,$DATA/ae/public/c.h5" env D="$DATA" sh -c "$probe_sets"
expect_allowed "srun with a feature set file"
assert_contains "$OUT" "visible ae/public/a.h5.d/v1.h5: v1" "the set's versions"
assert_contains "$OUT" "hidden ae/public/b.h5.d/v1.h5" "another set's versions"
assert_contains "$OUT" "hidden eu/b.h5" "a .d that is a symlink into eu"
assert_contains "$OUT" "$DATA/ae/public/a.h5.d" "the versions in HPCML_DATASETS"
rm -rf "$DATA/ae/public/a.h5.d" "$DATA/ae/public/b.h5.d" "$DATA/ae/public/c.h5" \
  "$DATA/ae/public/c.h5.d"

# The node saw none of it.
[ -e "$DATA/ae/public/b.h5" ] || fail "b.h5 is gone from the node's view"
[ ! -e "$DATA/ae/public/new.h5" ] || fail "a task wrote under a cover"
if grep -q hpcml-guard /proc/mounts; then fail "a task's cover leaked into the node's mounts"; fi
assert_node_idle "after the enforce=mount jobs"
pass
