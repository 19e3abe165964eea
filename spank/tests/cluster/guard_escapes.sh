#!/usr/bin/env bash
# The ways around the view of issue 31, tried as an ordinary user on the
# multi-zone cluster, each followed by a check that every node is idle:
# 1. --get-user-env (and --export=NONE, an --export list, SLURM_GET_USER_ENV
#    by hand) would make slurmd run the user's login shell on the node before
#    any SPANK callback: job_submit/lua refuses the job, no job is created;
# 2. /proc/<pid>/root of the user's own processes outside the step (here
#    their srun, on the submit host, which mounts every zone's data) reaches
#    no data from inside a task (Landlock), while MPI steps of 2 and 4 ranks
#    still exchange 1 MiB messages with process_vm_readv forced;
# 3. a hard link from zone eu's data into ae scratch fails because each
#    zone's data is its own file system, mounted only on its zone's nodes; a
#    node that mounts another zone's data file system, or data on the file
#    system of /tmp, denies every step, naming both;
# 4. a step cannot add a dataset its job was not submitted with, even with
#    its own SLURM_CONF and forged option variables, also on a node where it
#    is the job's first step (PrologFlags=Alloc); it may narrow them;
# 5. a denied step runs no program of the user's (srun --task-epilog), even
#    when it is denied before the policy is read.
source "$(dirname "$0")/guard_lib.sh"
write_policy
guard_install
conf=$(bypass_conf)
opt=_SLURM_SPANK_OPTION_hpcml_guard
echo EU-SECRET >"$DATA/eu/marker"
chmod 0644 "$DATA/eu/marker"
rm -rf "$DATA/ae/scratch/alice-"*

# --- 1. --get-user-env ------------------------------------------------------
before=$(squeue -h -u $ALICE -o %i | wc -l)
for how in "--get-user-env" "--export=NONE" "--export=ALL,TRAIN_DIR=/tmp"; do
  run_as $ALICE sbatch -w node1 "$how" --output=/dev/null --wrap true
  [ "$RC" -ne 0 ] || fail "sbatch $how was accepted: $OUT"
  assert_contains "$OUT" "hpcml-guard: --get-user-env, --export=NONE, --export=<list>" \
    "the refusal of $how"
done
run_as $ALICE env SLURM_GET_USER_ENV=1 sbatch -w node1 --output=/dev/null --wrap true
[ "$RC" -ne 0 ] || fail "a job with SLURM_GET_USER_ENV=1 in its environment was accepted: $OUT"
assert_eq "$before" "$(squeue -h -u $ALICE -o %i | wc -l)" "jobs of $ALICE after the refusals"
assert_node_idle "after the --get-user-env refusals"

# --- 2. /proc/<pid>/root of the user's other processes ----------------------
# Every process of alice that the task can see, through its root link.
scan='for p in $(pgrep -u '$ALICE'); do cat "/proc/$p/root'$DATA'/eu/marker" 2>/dev/null; done; echo scanned'
run_as $ALICE timeout 60 srun -w node1 -n1 --dataset="$DATA/ae/public/a.h5" bash -c "$scan"
expect_allowed "the scan of alice's processes"
assert_contains "$OUT" scanned "the scan ran"
[[ $OUT != *EU-SECRET* ]] || fail "a task read zone eu's data through /proc/<pid>/root: $OUT"
# Unconfined (confine=none, for kernels without Landlock) it does read it:
# the test can fail.
guard_install "policy=$POLICY zone=@ZONE@ audit=$AUDIT cluster=hpcml job_cache=$GUARD_CACHE confine=none"
run_as $ALICE timeout 60 srun -w node1 -n1 --dataset="$DATA/ae/public/a.h5" bash -c "$scan"
assert_contains "$OUT" EU-SECRET "confine=none: the scan through srun's root"
guard_install
# Ranks of one step share the step's domain: single-copy shared memory works.
probe=$HPCML_BUILD_DIR/mpi_trainer/probes/hpcml-mpi-probe
for n in 2 4; do
  run_as $ALICE env OMPI_MCA_btl_vader_single_copy_mechanism=cma \
    timeout 120 srun -w node1 --mpi=pmix -n $n --dataset="$DATA/ae/public/a.h5" "$probe" --expect-ranks $n
  expect_allowed "MPI probe, $n ranks on one node, confined"
  assert_contains "$OUT" "ok: allreduce sum $((n * (n - 1) / 2)), ring exchange, $n ranks" \
    "MPI probe, $n ranks"
done
assert_node_idle "after the confined steps"

# --- 3. Hard links and each zone's own storage ------------------------------
install -o $ALICE -m 0644 /dev/null "$DATA/eu/alice-own.h5"
echo EU-OWN >"$DATA/eu/alice-own.h5"
run_as $ALICE ln "$DATA/eu/alice-own.h5" "$DATA/ae/scratch/alice-hl.h5"
[ "$RC" -ne 0 ] || fail "alice hard-linked zone eu's data into ae scratch"
assert_contains "$OUT" "cross-device" "the hard link fails because the zones' data are two file systems"
run_as $ALICE timeout 60 srun -w node1 -n1 --dataset="$DATA/ae/scratch" \
  cat "$DATA/ae/scratch/alice-hl.h5"
[[ $OUT != *EU-OWN* ]] || fail "an ae task read zone eu's data through a hard link: $OUT"

# in_node1 <cmd>: runs <cmd> (sh) as root in node1's mount namespace, which
# its slurmd's new steps inherit.
in_node1() {
  # --root: the target's root, also when the cluster runs in a chroot (CI).
  nsenter --target "$(cat "$HPCML_CLUSTER_DIR/run/slurmd-node1.pid")" --mount --root sh -c "$1"
}
# Zone eu's storage mounted on an ae node (a site mounting every zone's data
# everywhere, as this cluster did before).
in_node1 "mount -t tmpfs -o size=1m hpcml-fake-eu '$DATA/eu' && echo eu >'$DATA/eu/.hpcml-zone'"
run_as $ALICE timeout 60 srun -w node1 -n1 --dataset="$DATA/ae/public/a.h5" true
in_node1 "umount '$DATA/eu'"
expect_denied "zone eu's file system on node1" "zone eu's data file system (mounted at $DATA/eu"
assert_contains "$OUT" "this node of zone ae" "the denial names the node's zone"
# Zone ae's data on the file system of /tmp, where any user can make links.
fake=$(mktemp -d /tmp/hpcml-fake-ae.XXXXXX)
echo ae >"$fake/.hpcml-zone"
echo data >"$fake/a.h5"
chmod 0755 "$fake"
chmod 0644 "$fake/.hpcml-zone" "$fake/a.h5"
in_node1 "mount --bind '$fake' '$DATA/ae/public'"
run_as $ALICE timeout 60 srun -w node1 -n1 --dataset="$DATA/ae/public/a.h5" true
in_node1 "umount '$DATA/ae/public'"
rm -rf "$fake"
expect_denied "ae data on /tmp's file system" "is also the file system of /tmp"
run_as $ALICE timeout 60 srun -w node1 -n1 --dataset="$DATA/ae/public/a.h5" cat "$DATA/ae/public/a.h5"
expect_allowed "node1 as set up again"

# --- 4. A step adds a dataset its job never declared ------------------------
echo SCRATCH >"$DATA/ae/scratch/alice-x.txt"
chmod 0644 "$DATA/ae/scratch/alice-x.txt"
# The batch script runs on node1; "forged" is the job's first step on node2,
# its SPANK environment forged too.
forged_env="SLURM_CONF=$conf ${opt}_dataset=$DATA/ae/scratch SLURM_SPANK_${opt}_dataset=$DATA/ae/scratch"
cat >"$JOB_DIR/steps.sh" <<EOS
#!/bin/bash
echo "forged: \$($forged_env srun -N1 -n1 -w node2 cat $DATA/ae/scratch/alice-x.txt 2>&1)"
echo "narrow: \$(srun -N1 -n1 -w node1 --dataset=$DATA/ae/public/a.h5 cat $DATA/ae/public/a.h5 2>&1)"
echo "added: \$(srun -N1 -n1 -w node1 --dataset=$DATA/ae/scratch cat $DATA/ae/scratch/alice-x.txt 2>&1)"
EOS
chmod 0755 "$JOB_DIR/steps.sh"
id=$(as $ALICE sbatch --parsable -N2 -w node1,node2 --ml-role=ml-engineer --dataset="$DATA/ae/public" \
  --output="$JOB_DIR/steps.out" "$JOB_DIR/steps.sh")
echo "$id" >>"$TEST_JOBS"
assert_eq COMPLETED "$(wait_job "$id")" "state of job $id"
out=$(cat "$JOB_DIR/steps.out")
assert_contains "$(grep '^narrow:' <<<"$out")" "data" "a step narrowing the job's datasets"
for step in added forged; do
  line=$(grep -A3 "^$step:" <<<"$out")
  [[ $line != *SCRATCH* ]] || fail "$step: a step read a dataset its job was not submitted with: $out"
  assert_contains "$line" "not among the job's datasets (submitted with: $DATA/ae/public)" \
    "$step: the denial"
done
assert_node_idle "after the steps of job $id"

# --- 5. A denied step runs nothing of the user's ----------------------------
# Denied before the policy is even read (a malformed option value).
rm -f "$JOB_DIR/epilog-ran"
printf '#!/bin/sh\ntouch %s/epilog-ran\n' "$JOB_DIR" >"$JOB_DIR/epilog.sh"
chmod 0755 "$JOB_DIR/epilog.sh"
run_as $ALICE env SLURM_CONF="$conf" ${opt}_dataset=relative \
  timeout 60 srun -w node1 -n1 --task-epilog="$JOB_DIR/epilog.sh" true
expect_denied "a malformed option value" "not an absolute path"
sleep 1
[ ! -e "$JOB_DIR/epilog-ran" ] || fail "a denied step ran the user's --task-epilog"
run_as $ALICE timeout 60 srun -w node1 -n1 --task-epilog="$JOB_DIR/epilog.sh" true
expect_allowed "an allowed step with a task epilog"
[ -e "$JOB_DIR/epilog-ran" ] || fail "an allowed step did not run its --task-epilog: the test is blind"
pass
