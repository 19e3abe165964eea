# Shared helpers for cluster tests (bash). Source it:
#   source "$HPCML_SOURCE_DIR/tests/cluster/lib.sh"
# Contract: the cluster is up (the ctest fixture hpcml_cluster started it) and
# SLURM_CONF points at it. Every check that fails prints why and exits 1.
set -euo pipefail

: "${HPCML_CLUSTER_DIR:=/tmp/hpcml-cluster}"
: "${SLURM_CONF:=$HPCML_CLUSTER_DIR/etc/slurm.conf}"
export SLURM_CONF HPCML_CLUSTER_DIR
[ -f "$SLURM_CONF" ] || { echo "FAIL: no cluster: $SLURM_CONF missing" >&2; exit 1; }
# mpirun inside jobs run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
# Each node claims 8 CPUs on this 2-core machine, so Open MPI under srun does
# not know it is oversubscribed and busy-polls: 4 ranks over 2 nodes took
# 40 ms a step instead of 5 ms. Ranks that yield when idle share the cores.
export OMPI_MCA_mpi_yield_when_idle=1

TEST_NAME=$(basename "${BASH_SOURCE[1]:-$0}" .sh)

# Jobs this test submitted with `submit`: a failing test cancels them, so
# the next test does not meet them on its nodes.
# (created by the first submit; $$ is this script's pid in subshells too).
TEST_JOBS=${TMPDIR:-/tmp}/hpcml-test-jobs.$$
fail() {
  echo "FAIL: $TEST_NAME: $*" >&2
  # shellcheck disable=SC2046
  [ ! -s "$TEST_JOBS" ] || scancel $(cat "$TEST_JOBS") 2>/dev/null || true
  rm -f "$TEST_JOBS"
  exit 1
}
pass() {
  rm -f "$TEST_JOBS"
  echo "PASS: $TEST_NAME${1:+: $1}"
}

assert_eq() {  # assert_eq <expected> <actual> <what>
  [ "$1" = "$2" ] || fail "$3: expected '$1', got '$2'"
}
assert_contains() {  # assert_contains <haystack> <needle> <what>
  [[ $1 == *"$2"* ]] || fail "$3: '$2' not found in: $1"
}

# A fresh directory for this test's job files, writable by test users.
job_dir() {
  local d
  d=$(mktemp -d "$HPCML_CLUSTER_DIR/jobs/$TEST_NAME.XXXXXX")
  chmod 1777 "$d"
  echo "$d"
}

# submit <sbatch args...>: prints the job id.
submit() {
  local out
  out=$(sbatch --parsable "$@") || fail "sbatch $* failed"
  echo "${out%%;*}" >>"$TEST_JOBS"
  echo "${out%%;*}"
}

# wait_job <jobid> [timeout_s]: waits until the job has left the queue and
# slurmdbd has recorded its end; prints its final state.
wait_job() {
  local id=$1 timeout=${2:-120} deadline state
  deadline=$((SECONDS + timeout))
  while squeue -h -j "$id" 2>/dev/null | grep -q .; do
    [ $SECONDS -lt $deadline ] || { scontrol show job "$id" >&2; fail "job $id still queued/running after ${timeout}s"; }
    sleep 1
  done
  while :; do
    state=$(sacct -n -X -P -j "$id" -o State 2>/dev/null | tail -n1)
    case "$state" in
      "" | PENDING | RUNNING | REQUEUED) ;;
      *) echo "$state"; return 0 ;;
    esac
    [ $SECONDS -lt $deadline ] || fail "job $id: slurmdbd has no final state after ${timeout}s (last: '$state')"
    sleep 1
  done
}

# wait_nodes_idle [timeout_s]: waits until no job is queued and every node
# is idle (an earlier test's job may still be ending: state mix or comp).
wait_nodes_idle() {
  local timeout=${1:-60} deadline
  deadline=$((SECONDS + timeout))
  while squeue -h 2>/dev/null | grep -q . || sinfo -h -N -o '%t' | grep -qv '^idle$'; do
    [ $SECONDS -lt $deadline ] || { squeue >&2; sinfo -N >&2; fail "nodes not idle after ${timeout}s"; }
    sleep 1
  done
}

# job_on_nodes <jobid>: true while any step daemon of the job (batch script
# or step) is still on a node. The nodes are this machine's processes;
# `scontrol listpids` would ask only a slurmd of the caller's own host.
job_on_nodes() {
  pgrep -f "^slurmstepd: \[$1\." >/dev/null
}

# sacct_field <jobid> <field>: the allocation row's field.
sacct_field() {
  sacct -n -X -P -j "$1" -o "$2" | tail -n1
}

# Every host's plugstack.conf with the zone of that host, as "<file> <zone>"
# lines: the submit side's (this machine's own namespaces; given the first
# node's zone), then each node's (seen by that node at the submit side's path).
plugstack_files() {
  local n z t a first=1
  while read -r n z t a; do
    [[ $n == \#* ]] && continue
    [ $first = 0 ] || echo "$HPCML_CLUSTER_DIR/etc/host/plugstack.conf $z $(hostname -s)"
    first=0
    echo "$HPCML_CLUSTER_DIR/nodes/$n/plugstack.conf $z $n"
  done <"$HPCML_CLUSTER_DIR/etc/nodes"
}

# set_plugstack <line>: every host's plugstack.conf becomes <line>, with
# @ZONE@ replaced by that host's zone and @HOST@ by its name (for a log of
# its own, as each real host has). SPANK re-reads it at every srun, sbatch
# and step launch.
set_plugstack() {
  local f z h line
  while read -r f z h; do
    line=${1//@ZONE@/$z}
    printf '%s\n' "${line//@HOST@/$h}" >"$f"
  done < <(plugstack_files)
}

# save_plugstack / restore_plugstack: every host's plugstack.conf, kept
# beside it and put back (restore is a no-op without a saved copy).
save_plugstack() {
  local f rest
  while read -r f rest; do
    [ -f "$f.saved" ] || cp -p "$f" "$f.saved"
  done < <(plugstack_files)
}
restore_plugstack() {
  local f rest
  while read -r f rest; do
    [ ! -f "$f.saved" ] || mv -f "$f.saved" "$f"
  done < <(plugstack_files)
}
