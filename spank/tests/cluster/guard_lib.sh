# Shared by the guard_* cluster tests (bash). Source it from a test script:
#   source "$(dirname "$0")/guard_lib.sh"
# It installs hpcml_guard.so in every host's plugstack.conf (re-read by every
# srun, sbatch and slurmstepd), each node with its own zone, and restores the
# files when the test exits.
source "$HPCML_SOURCE_DIR/tests/cluster/lib.sh"
TEST_NAME=$(basename "$0" .sh)

: "${HPCML_BUILD_DIR:?HPCML_BUILD_DIR is set by ctest}"
GUARD_SO=$HPCML_BUILD_DIR/spank/hpcml_guard.so
AUDIT_BIN=$HPCML_BUILD_DIR/spank/hpcml-audit
[ -f "$GUARD_SO" ] || fail "$GUARD_SO not built"
if readelf -d "$GUARD_SO" | grep -q 'libasan\|libubsan'; then
  # A sanitizer build of the plugin cannot be loaded into Debian's srun,
  # sbatch and slurmstepd (the sanitizer runtime must come first).
  echo "SKIP: $TEST_NAME: $GUARD_SO is a sanitizer build; run the cluster tests with the default preset"
  exit 77
fi
GUARD_ETC=$HPCML_CLUSTER_DIR/guard-etc  # root 0755: the policy's directory
GUARD_LOG=$HPCML_CLUSTER_DIR/guard-log
POLICY=$GUARD_ETC/policy.toml
AUDIT=$GUARD_LOG/audit.jsonl
GUARD_CACHE=$HPCML_CLUSTER_DIR/guard-cache  # the job facts cache (root 0700, made by the guard)
GUARD_POLICY_CACHE=$HPCML_CLUSTER_DIR/policy-cache  # the compiled policy (root 0755, made by the guard)
# Each zone's data file system (hpcml-cluster up): $DATA/ae is mounted on
# the ae nodes only, $DATA/eu on the eu node only; this host has both.
DATA=$HPCML_CLUSTER_DIR/data
# The tests' datasets are mostly zone ae's: their jobs run on the ae nodes
# unless a test asks for another zone's (guard_zones).
export SLURM_CONSTRAINT=zone-ae SBATCH_CONSTRAINT=zone-ae
ALICE=hpcml-alice
BOB=hpcml-bob

install -d -m 0755 -o root -g root "$GUARD_ETC" "$GUARD_LOG"
for z in ae eu; do
  mountpoint -q "$DATA/$z" ||
    fail "$DATA/$z is not zone $z's data file system: restart the cluster (tests/cluster/hpcml-cluster up)"
done

# The datasets, on the zones' file systems: ae/public (internal),
# ae/restricted, eu (its whole file system); ae/scratch is writable by
# everyone (users make symlinks there); ae/private is root-only.
make_data() {
  install -d -m 0755 "$DATA/ae/public" "$DATA/ae/restricted" "$DATA/eu"
  install -d -m 1777 "$DATA/ae/scratch"
  install -d -m 0700 "$DATA/ae/private"
  local f
  for f in ae/public/a.h5 ae/public/b.h5 ae/restricted/secret.h5 eu/b.h5 ae/private/p.h5; do
    echo data >"$DATA/$f"
    chmod 0644 "$DATA/$f"
  done
}
make_data

# write_policy [ae_nodes] [eu_nodes]: a root-owned 0644 policy over $DATA;
# the zones name their nodes when given (TOML arrays' insides: '"node[1-2]"').
write_policy() {
  cat >"$POLICY.tmp" <<EOP
[zones.ae]
description = "UAE"
${1:+nodes = [$1]}
[zones.eu]
description = "EU"
${2:+nodes = [$2]}

[[datasets]]
path = "$DATA/ae/public"
zone = "ae"
classification = "internal"

[[datasets]]
path = "$DATA/ae/scratch"
zone = "ae"
classification = "internal"

[[datasets]]
path = "$DATA/ae/private"
zone = "ae"
classification = "internal"

[[datasets]]
path = "$DATA/ae/restricted"
zone = "ae"
classification = "restricted"

[[datasets]]
path = "$DATA/eu"
zone = "eu"
classification = "internal"

[[roles]]
name = "ml-engineer"
zones = ["ae", "eu"]
classifications = ["internal"]
max_gpus = 4
partitions = ["batch"]

[[roles]]
name = "reader"
zones = ["ae"]
classifications = ["internal"]
max_gpus = 0

[[roles]]
name = "team-reader"
zones = ["ae"]
classifications = ["internal"]
max_gpus = 0

[[bindings]]
user = "$ALICE"
roles = ["ml-engineer", "reader"]

[[bindings]]
account = "hpcml-ml"
roles = ["reader"]

# Through a group: $BOB's primary group (the node looks group names up only
# when a binding names a group).
[[bindings]]
group = "$(id -gn $BOB)"
roles = ["team-reader"]

[defaults]
role = "reader"
unknown_datasets = "deny"
EOP
  chown root:root "$POLICY.tmp"
  chmod 0644 "$POLICY.tmp"
  mv -f "$POLICY.tmp" "$POLICY"
}

# guard_install [plugin args...]: the guard line in every host's
# plugstack.conf (default arguments, with each host's zone, if none; @ZONE@
# in given arguments is the host's zone), restored on exit.
guard_install() {
  if [ -z "${GUARD_SAVED:-}" ]; then
    save_plugstack
    GUARD_SAVED=1
    trap restore_plugstack EXIT
    trap 'exit 143' TERM INT  # a ctest timeout still restores the files
  fi
  local args="policy=$POLICY zone=@ZONE@ audit=$AUDIT cluster=hpcml job_cache=$GUARD_CACHE policy_cache=$GUARD_POLICY_CACHE"
  [ $# -gt 0 ] && args="$*"
  set_plugstack "required $GUARD_SO $args"
  if [ -z "${GUARD_PROLOG:-}" ]; then
    # slurmd runs the guard's job prolog, which records each job's declared
    # datasets (no record, no step with datasets), only if the plugin was in
    # plugstack.conf when slurmd started.
    "$HPCML_SOURCE_DIR/tests/cluster/hpcml-cluster" restart-slurmd >/dev/null
    GUARD_PROLOG=1
  fi
}

# A slurm.conf a user could write: the same cluster without plugstack.conf,
# so srun/sbatch skip the submit-side check and the node alone decides.
bypass_conf() {
  local d=$GUARD_ETC/bypass
  install -d -m 0755 "$d"
  echo "# no plugins" >"$d/plugstack.conf"
  sed "s|^PlugStackConfig=.*|PlugStackConfig=$d/plugstack.conf|" "$SLURM_CONF" >"$d/slurm.conf"
  chmod 0644 "$d/slurm.conf" "$d/plugstack.conf"
  echo "$d/slurm.conf"
}

# as <user> <cmd...>: run as a test user from a directory they can write.
as() {
  local user=$1
  shift
  (cd "$JOB_DIR" && runuser -u "$user" -- "$@")
}

# run_as <user> <cmd...>: sets OUT (stdout+stderr) and RC.
run_as() {
  set +e
  OUT=$(as "$@" 2>&1)
  RC=$?
  set -e
}

expect_denied() {  # expect_denied <what> <needle>: after run_as
  [ "$RC" -ne 0 ] || fail "$1: expected a denial, got exit 0: $OUT"
  assert_contains "$OUT" "hpcml-guard: denied" "$1"
  [ -z "${2:-}" ] || assert_contains "$OUT" "$2" "$1"
  assert_node_idle "$1"
}
expect_allowed() {  # expect_allowed <what>: after run_as
  [ "$RC" -eq 0 ] || fail "$1: expected success, got exit $RC: $OUT"
}

# Every node must come back idle (never drained) after a denial.
assert_node_idle() {
  local states deadline=$((SECONDS + 30))
  while :; do
    states=$(sinfo -h -N -p batch -o '%N %t %E' | sort)
    if grep -E '^[^ ]+ [^ ]*(drain|drng|down|fail)' <<<"$states"; then
      fail "$1: a node is drained or down: $states"
    fi
    grep -qv '^[^ ]* idle ' <<<"$states" || return 0
    [ $SECONDS -lt $deadline ] || fail "$1: nodes not idle after 30 s: $states"
    sleep 0.5
  done
}

JOB_DIR=$(job_dir)
