#!/usr/bin/env bash
# hpcml-cost over jobs that ran on several nodes with different GPU types:
# job D spans node1 (ae, h100) and node3 (eu, a100) with 2 GPUs on each, job E
# runs on the eu node alone. Each GPU type is priced at its own rate, every
# node's GPUs are counted once (D has 4 GPUs, not 8), and the report
# reconciles with sacct's own ElapsedRaw and AllocTRES.
source "$HPCML_SOURCE_DIR/tests/cluster/lib.sh"
: "${HPCML_COST:?HPCML_COST must name the hpcml-cost binary}"
dir=$(job_dir)
cat >"$dir/prices.toml" <<'TOML'
currency = "EUR"
default_tier = "on_demand"
[[rate]]
resource = "gpu"
gpu_type = "h100"
on_demand = 3.60
[[rate]]
resource = "gpu"
gpu_type = "a100"
on_demand = 2.20
[[rate]]
resource = "cpu"
on_demand = 0.04
TOML

period_start=$(date -d '-5 seconds' +%Y-%m-%dT%H:%M:%S)
d=$(submit -p urgent -N2 -w node1,node3 --gres=gpu:2 --output="$dir/d.out" \
  --wrap 'srun -N2 sh -c "echo \$(hostname) \$SLURM_JOB_GPUS"; sleep 3')
e=$(submit -p urgent --constraint=zone-eu --gres=gpu:a100:1 --output="$dir/e.out" --wrap 'hostname; sleep 2')
for j in "$d" "$e"; do
  assert_eq COMPLETED "$(wait_job "$j" 120)" "state of job $j"
done
assert_eq "node1 node3" "$(awk '{print $1}' "$dir/d.out" | sort | paste -sd' ')" "nodes of job $d"
assert_eq node3 "$(cat "$dir/e.out")" "node of job $e"
period_end=$(date -d '+2 seconds' +%Y-%m-%dT%H:%M:%S)

rows=$(sacct -n -P -D -X -j "$d,$e" -o JobID,ElapsedRaw,AllocTRES)
echo "$rows"
tres_d=$(grep "^$d|" <<<"$rows" | cut -d'|' -f3)
assert_contains "$tres_d" "gres/gpu:h100=2" "job $d typed h100 TRES"
assert_contains "$tres_d" "gres/gpu:a100=2" "job $d typed a100 TRES"
assert_contains "$tres_d" "gres/gpu=4" "job $d untyped GPU TRES"

# Expected per type, from sacct alone.
read -r want_h100 want_a100 want_cost <<<"$(awk -F'|' '
  function tres(s, key,   n, i, kv, p) { n = split(s, kv, ","); for (i = 1; i <= n; i++) { split(kv[i], p, "="); if (p[1] == key) return p[2] } return 0 }
  { h = $2 / 3600; gh100 += h * tres($3, "gres/gpu:h100"); ga100 += h * tres($3, "gres/gpu:a100")
    cpu += h * tres($3, "cpu") }
  END { printf "%.6f %.6f %.6f\n", gh100, ga100, gh100 * 3.60 + ga100 * 2.20 + cpu * 0.04 }' <<<"$rows")"
echo "expected: h100 $want_h100 GPU-hours, a100 $want_a100 GPU-hours, cost $want_cost EUR"

"$HPCML_COST" --prices "$dir/prices.toml" -S "$period_start" -E "$period_end" -j "$d,$e" \
  --by gpu_type,job -f json -o "$dir/report.json" || fail "hpcml-cost failed"
"$HPCML_COST" --prices "$dir/prices.toml" -S "$period_start" -E "$period_end" -j "$d,$e" \
  --by gpu_type || fail "hpcml-cost (table) failed"
read -r got_h100 got_a100 cost_h100 cost_a100 total_gh total_cost reconciled <<<"$(/usr/bin/python3 - "$dir/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
g = {row["key"]: row for row in r["groups"]["gpu_type"]}
t = r["total"]
print(f'{g["h100"]["gpu_hours"]:.6f} {g["a100"]["gpu_hours"]:.6f} {g["h100"]["gpu_cost"]:.6f} '
      f'{g["a100"]["gpu_cost"]:.6f} {t["gpu_hours"]:.6f} {t["cost"]:.6f} {r["reconciliation"]["reconciled"]}')
PY
)" || fail "report.json unreadable"
near() {  # near <got> <want> <what>
  awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.00001) }' ||
    fail "$3: expected $2, got $1"
}
near "$got_h100" "$want_h100" "h100 GPU-hours"
near "$got_a100" "$want_a100" "a100 GPU-hours"
near "$cost_h100" "$(awk -v h="$want_h100" 'BEGIN { printf "%.6f", h * 3.60 }')" "h100 GPU cost at 3.60"
near "$cost_a100" "$(awk -v h="$want_a100" 'BEGIN { printf "%.6f", h * 2.20 }')" "a100 GPU cost at 2.20"
near "$total_gh" "$(awk -v a="$want_h100" -v b="$want_a100" 'BEGIN { printf "%.6f", a + b }')" \
  "total GPU-hours (each node's GPUs once)"
near "$total_cost" "$want_cost" "total cost"
assert_eq True "$reconciled" "reconciliation"
pass "h100 $got_h100 and a100 $got_a100 GPU-hours, $total_cost EUR"
