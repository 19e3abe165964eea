#!/usr/bin/env bash
# srun launch latency of a trivial step with the guard against without it,
# measured in the same run, interleaved so both see the same machine load.
# The steps run inside one allocation (salloc --no-shell), so the figure is
# the step launch (srun, slurmstepd, the guard's decision) without the
# scheduler's delay for a new job.
#   bench/spank/srun_latency.sh [rounds] [runs]
#     (defaults 200 and 5: five runs of 200 rounds, about 2.5 min here. A step
#     takes 50-90 ms on the 2-core test machine, spread by Slurm's own work,
#     so one run's ratio wanders by +-0.02; the figure is the median of the
#     runs' ratios, each run's printed too.)
# Needs a running local cluster (tests/cluster/hpcml-cluster up; SLURM_CONF
# and HPCML_CLUSTER_DIR set, e.g. eval "$(tests/cluster/hpcml-cluster env)")
# and a build (HPCML_BUILD_DIR, default build/default). Run as root: it
# switches plugstack.conf between rounds. The steps run as an ordinary user
# (HPCML_BENCH_USER, default the cluster's hpcml-alice), as jobs do: a user's
# srun logs no advisory allow (root's would go to the audit file). Each srun
# is timed inside the user's shell, so switching user is in neither figure. The guard runs with its defaults, so each step's
# slurmstepd enters the dataset view (enforce=mount): here one cover (a
# tmpfs over the policy's data root, [view] roots) and the one requested
# file mounted back read-only. Prints the
# median and mean of each and the ratio guard/baseline (target <= 1.05).
#   HPCML_BENCH_ENTRIES=N     policy dataset entries (default 10; the extra
#                             ones below the data root, as a large site's)
#   HPCML_BENCH_COLLECTOR=off no off-node trail (default: on when the cluster
#                             runs a collector, audit_collector=)
#   HPCML_BENCH_TRAIL_ARM=1   with the trail on, a third step in each round:
#                             the guard without the trail, so each run also
#                             says what the trail itself adds
set -euo pipefail
rounds=${1:-200}
runs=${2:-5}
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${HPCML_BUILD_DIR:-$top/build/default}" && pwd)
: "${HPCML_CLUSTER_DIR:?set HPCML_CLUSTER_DIR (eval \"\$(tests/cluster/hpcml-cluster env)\")}"
: "${SLURM_CONF:=$HPCML_CLUSTER_DIR/etc/slurm.conf}"
export SLURM_CONF
so=$build/spank/hpcml_guard.so
[ -f "$so" ] || { echo "srun_latency: $so not built" >&2; exit 1; }
source "$top/tests/cluster/lib.sh"  # set_plugstack: every host's plugstack.conf
etc=$HPCML_CLUSTER_DIR/guard-bench
# The datasets on zone ae's data file system (hpcml-cluster up), as the
# guard requires of the node's zone.
data=$HPCML_CLUSTER_DIR/data/ae/bench
mountpoint -q "${data%/*}" ||
  { echo "srun_latency: no zone ae data file system at ${data%/*} (hpcml-cluster up makes it)" >&2; exit 1; }
user=${HPCML_BENCH_USER:-hpcml-alice}
id "$user" >/dev/null 2>&1 || { echo "srun_latency: no user $user (hpcml-cluster up makes it)" >&2; exit 1; }
install -d -m 0755 "$etc" "$data" "$data/data" "$data/other"
echo data >"$data/data/x.h5"
chmod 0644 "$data/data/x.h5"
entries=${HPCML_BENCH_ENTRIES:-10}
[ "$entries" -ge 2 ] 2>/dev/null || { echo "srun_latency: HPCML_BENCH_ENTRIES must be at least 2" >&2; exit 1; }
cat >"$etc/policy.toml" <<EOP
[zones.ae]
[view]
roots = ["$data"]
[[datasets]]
path = "$data/data"
zone = "ae"
classification = "internal"
[[datasets]]
path = "$data/other"
zone = "ae"
classification = "internal"
[[roles]]
name = "bench"
zones = ["ae"]
classifications = ["internal"]
max_gpus = 0
[[bindings]]
account = "hpcml-ml"
roles = ["bench"]
[defaults]
role = "bench"
EOP
# The other entries: datasets of other teams under the same root.
seq 3 "$entries" | awk -v d="$data" '{printf "[[datasets]]\npath = \"%s/team%d\"\nzone = \"ae\"\nclassification = \"internal\"\n", d, $1}' >>"$etc/policy.toml"
chmod 0644 "$etc/policy.toml"
save_plugstack
jobid=
cleanup() {
  restore_plugstack
  [ -z "$jobid" ] || scancel "$jobid"
}
trap cleanup EXIT
trail=
if [ "${HPCML_BENCH_COLLECTOR:-on}" != off ] && [ -s "$HPCML_CLUSTER_DIR/etc/collector-address" ]; then
  trail=" audit_collector=$(cat "$HPCML_CLUSTER_DIR/etc/collector-address")"
fi
guard_args="policy=$etc/policy.toml zone=ae audit=$etc/audit.jsonl job_cache=$etc/job-cache policy_cache=$etc/policy-cache"
guard_line="required $so $guard_args$trail${HPCML_BENCH_GUARD_ARGS:+ $HPCML_BENCH_GUARD_ARGS}"
notrail_line="required $so $guard_args${HPCML_BENCH_GUARD_ARGS:+ $HPCML_BENCH_GUARD_ARGS}"
trail_arm=
[ -n "$trail" ] && [ "${HPCML_BENCH_TRAIL_ARM:-0}" = 1 ] && trail_arm=1
# The job facts cache serves a job's steps only after the guard's prolog
# started the job's attempt on the node (job_cache.hpp), and slurmd runs a
# plugin's prolog only if plugstack.conf had it when slurmd started.
set_plugstack "$guard_line"
"$top/tests/cluster/hpcml-cluster" restart-slurmd >/dev/null
as_user() { (cd /tmp && runuser -u "$user" -- env SLURM_CONF="$SLURM_CONF" "$@"); }
# The job declares the dataset (a step may only narrow its job's datasets);
# its steps name it again, as an srun inside a batch job inherits it.
jobid=$(as_user salloc --no-shell -n1 --constraint=zone-ae --dataset="$data/data/x.h5" 2>&1 | sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p' | head -n1)
[ -n "$jobid" ] || { echo "srun_latency: salloc failed" >&2; exit 1; }

# Seconds for one srun of a trivial step, timed in the user's shell.
timed_srun() {
  as_user bash -c 't0=$(date +%s%N); srun "$@" >/dev/null || exit 1; t1=$(date +%s%N)
    echo $(( (t1 - t0) / 1000 ))' timed_srun "$@" |
    awk '{printf "%.6f\n", $1 / 1e6}'
}
one() {  # one <with|notrail|without>
  if [ "$1" = with ] || [ "$1" = notrail ]; then
    if [ "$1" = with ]; then set_plugstack "$guard_line"; else set_plugstack "$notrail_line"; fi
    timed_srun --jobid="$jobid" -n1 --dataset="$data/data/x.h5" cat "$data/data/x.h5"
  else
    set_plugstack "# none"
    timed_srun --jobid="$jobid" -n1 cat "$data/data/x.h5"
  fi
}
as_user srun --jobid="$jobid" -n1 --dataset="$data/data/x.h5" true >/dev/null  # warm up, prolog
ls "$etc/job-cache/job-$jobid@"*.attempt >/dev/null || { echo "srun_latency: no prolog marker" >&2; exit 1; }
stats() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1; s+=$1} END {printf "median %.4f s  mean %.4f s", a[int((NR+1)/2)], s/NR}'; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "srun --jobid=$jobid -n1 cat <dataset>, $runs runs of $rounds rounds each, interleaved; policy of $entries entries, off-node trail${trail:- off}"
ratios=()
for run in $(seq 1 "$runs"); do
  with=() without=() notrail=()
  for i in $(seq 1 "$rounds"); do
    without+=("$(one without)") || { echo "srun_latency: srun failed without the guard" >&2; exit 1; }
    with+=("$(one with)") || { echo "srun_latency: srun failed with the guard" >&2; exit 1; }
    if [ -n "$trail_arm" ]; then
      notrail+=("$(one notrail)") || { echo "srun_latency: srun failed without the trail" >&2; exit 1; }
    fi
  done
  read -r ratio added < <(awk -v w="$(median "${with[@]}")" -v b="$(median "${without[@]}")" \
    'BEGIN {printf "%.3f %.2f\n", w / b, (w - b) * 1000}')
  ratios+=("$ratio")
  # Each round's two steps ran back to back: the median of their
  # differences is less moved by the machine's drift than the difference
  # of the medians.
  paired=$(paste <(printf '%s\n' "${with[@]}") <(printf '%s\n' "${without[@]}") |
    awk '{print ($1 - $2) * 1000}' | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}')
  echo "run $run: without guard $(stats "${without[@]}"); with guard $(stats "${with[@]}"); ratio $ratio ($added ms added; median of the rounds' differences $paired ms)"
  if [ -n "$trail_arm" ]; then
    trail_ms=$(paste <(printf '%s\n' "${with[@]}") <(printf '%s\n' "${notrail[@]}") |
      awk '{print ($1 - $2) * 1000}' | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}')
    echo "run $run: guard without the trail $(stats "${notrail[@]}"); the trail adds $trail_ms ms (median of the rounds' differences)"
  fi
done
awk -v r="$(median "${ratios[@]}")" -v n="$runs" \
  'BEGIN {printf "ratio guard/baseline (median of %d runs'"'"' median ratios): %.3f (target <= 1.05)\n", n, r}'
