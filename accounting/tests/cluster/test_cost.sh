#!/usr/bin/env bash
# hpcml-cost against the live slurmdbd of the local cluster: three jobs with
# typed fake GPUs (one plain, one requeued with `scontrol requeue`, one that
# writes a usage record into its Comment with `hpcml-cost record`), then a
# report whose GPU-hours, cost, preemption loss and idle cost must match what
# this script derives from sacct's own ElapsedRaw and AllocTRES and the price
# table below.
source "$HPCML_SOURCE_DIR/tests/cluster/lib.sh"
: "${HPCML_COST:?HPCML_COST must name the hpcml-cost binary}"
dir=$(job_dir)

# Prices: batch is spot, urgent on demand.
cat >"$dir/prices.toml" <<'TOML'
currency = "EUR"
[tiers]
batch = "spot"
[[rate]]
resource = "gpu"
gpu_type = "h100"
on_demand = 3.60
spot = 1.44
[[rate]]
resource = "cpu"
on_demand = 0.04
spot = 0.016
TOML
gpu_rate() { [ "$1" = batch ] && echo 1.44 || echo 3.60; }
cpu_rate() { [ "$1" = batch ] && echo 0.016 || echo 0.04; }

period_start=$(date -d '-5 seconds' +%Y-%m-%dT%H:%M:%S)

# A: 2 GPUs, 2 CPUs, on demand.
a=$(submit -p urgent --gres=gpu:h100:2 -c 2 --output="$dir/a.out" --wrap "sleep 3")
# B: requeued once; its second attempt is short.
b=$(submit -p batch --gres=gpu:h100:1 --output="$dir/b.out" \
  --wrap "touch '$dir/b.started.'\${SLURM_RESTART_COUNT:-0}; if [ \${SLURM_RESTART_COUNT:-0} -ge 1 ]; then sleep 2; else sleep 300; fi")
# C: writes its usage record (JSON + Comment) as the trainer will.
c=$(submit -p urgent --gres=gpu:h100:1 --output="$dir/c.out" --wrap \
  "sleep 3; '$HPCML_COST' record --dir '$dir' --gpu-type h100 --gpu-count 1 --gpu-seconds 2 \
   --steps 20 --samples 640 --steps-lost 0 --checkpoint-seconds 0.5 --gpu-util 40")

job_state() { scontrol show job "$1" -o 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
wait_state() {  # wait_state <job> <state> <timeout>
  local deadline=$((SECONDS + $3))
  until [ "$(job_state "$1")" = "$2" ]; do
    [ $SECONDS -lt $deadline ] || fail "job $1 not $2 after $3 s (is $(job_state "$1"))"
    sleep 0.5
  done
}
wait_for_file() {  # wait_for_file <path> <timeout>
  local deadline=$((SECONDS + $2))
  until [ -e "$1" ]; do
    [ $SECONDS -lt $deadline ] || fail "$1 not created after $2 s"
    sleep 0.5
  done
}
diagnose() {  # what Slurm says about a job, for a failure message
  scontrol show job "$1" >&2 || true
  sacct -P -D -j "$1" -o JobID,State,ExitCode,Start,End,Reason >&2 || true
  grep -h "JobId=$1 \|job $1\|JobId=$1$" "$HPCML_CLUSTER_DIR"/log/slurmctld.log "$HPCML_CLUSTER_DIR"/log/slurmd.log 2>/dev/null | tail -n 40 >&2 || true
}
# Requeue only once the batch script runs (not while it is being launched).
wait_for_file "$dir/b.started.0" 60
sleep 2
scontrol requeue "$b" || fail "scontrol requeue $b failed"
wait_state "$b" PENDING 60
# ...and restart it only once slurmd is done with the first attempt: started
# while the old batch step is still being killed, the new one fails at once
# (exit 1:0 within milliseconds; seen here).
deadline=$((SECONDS + 60))
while job_on_nodes "$b"; do
  [ $SECONDS -lt $deadline ] || { diagnose "$b"; fail "job $b: first attempt still on the node"; }
  sleep 0.5
done
until sacct -n -P -D -X -j "$b" -o State,End | grep -q '^REQUEUED|[0-9]'; do
  [ $SECONDS -lt $deadline ] || { diagnose "$b"; fail "job $b: no REQUEUED attempt recorded"; }
  sleep 0.5
done
sleep 1
# A requeued job waits about two minutes before it may start again: start it now.
scontrol update JobId="$b" StartTime=now || fail "scontrol update StartTime=now failed"

for j in "$a" "$b" "$c"; do
  state=$(wait_job "$j" 150)
  [ "$state" = COMPLETED ] || { diagnose "$j"; fail "job $j final state: expected COMPLETED, got $state"; }
done
[ -e "$dir/b.started.1" ] || fail "job $b: the second attempt never ran its script"
period_end=$(date -d '+2 seconds' +%Y-%m-%dT%H:%M:%S)

# What sacct says, and the expectation derived from it. slurmdbd may list a
# requeued job's new attempt for a moment without its partition (seen here:
# "178||COMPLETED|2|..."; hpcml-cost's own query a moment later had it),
# which would price it on demand: wait until every row has one.
deadline=$((SECONDS + 30))
while :; do
  rows=$(sacct -n -P -D -X -j "$a,$b,$c" -o JobID,Partition,State,ElapsedRaw,AllocTRES,Comment)
  awk -F'|' '$2 == "" { exit 1 }' <<<"$rows" && break
  [ $SECONDS -lt $deadline ] || { echo "$rows" >&2; fail "sacct: a row without its partition after 30 s"; }
  sleep 1
done
echo "sacct rows:"
echo "$rows"
[ "$(grep -c "^$b|" <<<"$rows")" = 2 ] || fail "job $b: expected 2 attempts in sacct -D"
grep -q "^$b|batch|REQUEUED|" <<<"$rows" || fail "job $b: no REQUEUED attempt"
comment_c=$(grep "^$c|" <<<"$rows" | cut -d'|' -f6)
assert_contains "$comment_c" "hpcml/1,j=$c,a=0," "usage summary in job $c's Comment"
assert_contains "$comment_c" ",gu=40" "measured utilisation in the summary"
[ -f "$dir/usage-$c-r0.json" ] || fail "usage record JSON $dir/usage-$c-r0.json missing"

expect=$(awk -F'|' -v B="$b" -v C="$c" '
  function tres(s, key,   n, i, kv) { n = split(s, kv, ","); for (i = 1; i <= n; i++) { split(kv[i], p, "="); if (p[1] == key) return p[2] } return 0 }
  {
    spot = ($2 == "batch"); g = spot ? 1.44 : 3.60; cr = spot ? 0.016 : 0.04
    h = $4 / 3600; gpus = tres($5, "gres/gpu:h100"); cpus = tres($5, "cpu")
    gc = h * gpus * g; cost = gc + h * cpus * cr
    total += cost; gh += h * gpus
    if ($3 == "REQUEUED") loss += cost
    if ($1 == C) idle = gc * (1 - (2 * 0.40) / ($4 * gpus))
  }
  END { printf "%.6f %.6f %.6f %.6f\n", total, gh, loss, idle }' <<<"$rows")
read -r want_cost want_gh want_loss want_idle <<<"$expect"
echo "expected: cost $want_cost EUR, $want_gh GPU-hours, preemption loss $want_loss, idle $want_idle"

# hpcml-cost runs sacct itself for the period and these jobs.
"$HPCML_COST" --prices "$dir/prices.toml" -S "$period_start" -E "$period_end" -j "$a,$b,$c" \
  --by job,account,gpu_type -f json -o "$dir/report.json" || fail "hpcml-cost failed"
"$HPCML_COST" --prices "$dir/prices.toml" -S "$period_start" -E "$period_end" -j "$a,$b,$c" \
  --by job,account,user,partition,gpu_type || fail "hpcml-cost (table) failed"
got=$(/usr/bin/python3 - "$dir/report.json" "$b" "$c" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["total"]
jobs = {row["key"]: row for row in r["groups"]["job"]}
b, c = jobs[sys.argv[2]], jobs[sys.argv[3]]
print(f'{t["cost"]:.6f} {t["gpu_hours"]:.6f} {t["preemption_loss"]:.6f} {t["idle_gpu_cost"]:.6f} '
      f'{b["attempts"]} {b["interrupted_attempts"]} {c["attempts_with_usage_record"]} '
      f'{r["reconciliation"]["reconciled"]} {t["attempts"]}')
PY
) || fail "report.json unreadable"
read -r cost gh loss idle b_attempts b_requeued c_usage reconciled attempts <<<"$got"
echo "hpcml-cost: cost $cost, $gh GPU-hours, loss $loss, idle $idle"
near() {  # near <a> <b> <what>: equal within rounding of micro-units
  awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.00001) }' ||
    fail "$3: expected $2, got $1"
}
near "$cost" "$want_cost" "total cost"
near "$gh" "$want_gh" "GPU-hours"
near "$loss" "$want_loss" "preemption loss (the REQUEUED attempt, no usage record)"
near "$idle" "$want_idle" "idle GPU cost of job $c (from its Comment)"
assert_eq 4 "$attempts" "attempts priced"
assert_eq 2 "$b_attempts" "job $b attempts"
assert_eq 1 "$b_requeued" "job $b interrupted attempts"
assert_eq 1 "$c_usage" "job $c attempts with a usage record"
assert_eq True "$reconciled" "reconciliation"
awk -v x="$want_cost" 'BEGIN { exit !(x > 0) }' || fail "expected a non-zero cost"

# The JSON usage records (--usage-dir) give the same idle cost as the Comment.
idle_json=$("$HPCML_COST" --prices "$dir/prices.toml" -S "$period_start" -E "$period_end" \
  -j "$a,$b,$c" --usage-dir "$dir" -f csv | awk -F, '$1 == "total" { print $11 }') ||
  fail "hpcml-cost --usage-dir failed"
near "$idle_json" "$want_idle" "idle GPU cost of job $c (from usage-$c-r0.json)"
pass "cost $cost EUR over $gh GPU-hours matches sacct"
