#!/usr/bin/env bash
# The metrics of hpcml-train, hpcml-cost and hpcml-audit through the real
# thing: Debian's prometheus-node-exporter reads them with its textfile
# collector, Debian's prometheus scrapes it, and queries through Prometheus'
# HTTP API return the trainer's loss, the cost per account and the guard's
# denials, compared with the files (and the cost with hpcml-cost's own CSV).
# Before any daemon starts, the dashboard's metric names are checked against
# what the three producers wrote, and each produced name against
# docs/monitoring.md, so neither can drift.
#
# Usage: test_prometheus.sh SOURCE_DIR MPIEXEC HPCML_TRAIN HPCML_COST HPCML_AUDIT MAKE_AUDIT_LOG
# Exit 77 (skipped) only when the Prometheus binaries are not installed.
set -euo pipefail
src=$1 mpiexec=$2 train=$3 cost=$4 audit=$5 make_log=$6
export TZ=UTC
py=/usr/bin/python3  # Debian's, with only the standard library used here
fail() { echo "FAIL: $*" >&2; exit 1; }

prom=$(command -v prometheus || true)
node_exporter=$(command -v prometheus-node-exporter || command -v node_exporter || true)
if [ -z "$prom" ] || [ -z "$node_exporter" ]; then
  fail "prometheus and prometheus-node-exporter are not installed (scripts/install-deps.sh installs them)"
fi

tmp=$(mktemp -d /tmp/hpcml-monitoring.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
textfiles=$tmp/textfile
mkdir -p "$textfiles" "$tmp/audit"

# --- the three producers
# A short real training run, rank 0 writing the textfile every 5 steps, a
# checkpoint every 10; a job id and attempt as Slurm would set them.
SLURM_JOB_ID=4242 SLURM_RESTART_COUNT=1 "$mpiexec" -x SLURM_JOB_ID -x SLURM_RESTART_COUNT \
  -n 1 --bind-to none "$train" --synthetic --synthetic-samples 256 --input-dim 16 --hidden 32 \
  --batch 32 --steps 20 --log-interval 5 --checkpoint-dir "$tmp/ckpt" --checkpoint-every 10 \
  --checkpoint-sync --no-usage-comment --usage-dir "$tmp/usage" \
  --metrics "$tmp/train.jsonl" --metrics-textfile "$textfiles/train.prom" >"$tmp/train.log" 2>&1 ||
  fail "hpcml-train: $(cat "$tmp/train.log")"
# Costs from a recorded sacct fixture.
data=$src/accounting/tests/data
"$cost" --prices "$data/prices_untyped.toml" --input "$data/typed_untyped.sacct" --now 2026-03-10 \
  --format prometheus --output "$textfiles/cost.prom" || fail "hpcml-cost --format prometheus"
"$cost" --prices "$data/prices_untyped.toml" --input "$data/typed_untyped.sacct" --now 2026-03-10 \
  --format csv --by account >"$tmp/cost.csv" || fail "hpcml-cost --format csv"
# A log written by the guard's own writer, counted.
"$make_log" "$tmp/audit/audit.jsonl" || fail "writing the audit log"
"$audit" metrics --output "$textfiles/guard.prom" "$tmp/audit/audit.jsonl" ||
  fail "hpcml-audit metrics"
ls "$textfiles" | grep -v '\.prom$' && fail "a temporary file was left in the textfile directory"

# --- the dashboard uses only produced names; every produced name is documented
"$py" - "$src/examples/monitoring/hpcml-dashboard.json" "$src/docs/monitoring.md" \
  "$textfiles"/*.prom <<'EOF' || fail "dashboard or docs out of step with the producers"
import json, re, sys
dashboard, docs, files = sys.argv[1], sys.argv[2], sys.argv[3:]
produced = set()
for f in files:
    for line in open(f, encoding="utf-8"):
        if line.startswith("# TYPE "):
            produced.add(line.split()[2])
used = set()
def walk(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("expr", "query", "definition") and isinstance(v, str):
                used.update(re.findall(r"\bhpcml_[a-z0-9_]+", v))
            else:
                walk(v)
    elif isinstance(node, list):
        for v in node:
            walk(v)
walk(json.load(open(dashboard, encoding="utf-8")))
ok = True
if not used:
    print("the dashboard has no hpcml_ queries"); ok = False
for name in sorted(used - produced):
    print(f"dashboard uses {name}, which no producer wrote"); ok = False
text = open(docs, encoding="utf-8").read()
for name in sorted(produced):
    if f"`{name}`" not in text:
        print(f"{name} is not documented in docs/monitoring.md"); ok = False
print(f"dashboard: {len(used)} names, all among the {len(produced)} produced" if ok else "")
sys.exit(0 if ok else 1)
EOF

# --- node_exporter and Prometheus on free loopback ports
read -r ne_port prom_port < <("$py" -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
"$node_exporter" --web.listen-address="127.0.0.1:$ne_port" --collector.disable-defaults \
  --collector.textfile --collector.textfile.directory="$textfiles" >"$tmp/node_exporter.log" 2>&1 &
pids+=($!)
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ["127.0.0.1:$ne_port"]
EOF
"$prom" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/prometheus" \
  --web.listen-address="127.0.0.1:$prom_port" >"$tmp/prometheus.log" 2>&1 &
pids+=($!)

# node_exporter read every file without error.
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$ne_port/metrics" >"$tmp/ne.txt" 2>/dev/null &&
    grep -q '^hpcml_train_loss' "$tmp/ne.txt" && break
  sleep 0.2
done
grep -q '^hpcml_train_loss' "$tmp/ne.txt" || fail "node_exporter does not serve the textfiles: $(cat "$tmp/node_exporter.log")"
grep -q '^node_textfile_scrape_error 0$' "$tmp/ne.txt" ||
  fail "node_exporter's textfile collector reports an error: $(grep textfile "$tmp/ne.txt"; cat "$tmp/node_exporter.log")"

# query EXPR: the API's JSON for an instant query.
query() { curl -sf --get "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1"; }
# Wait until Prometheus has scraped the three producers' series.
ready() {
  local q
  for q in hpcml_train_loss hpcml_cost_currency hpcml_guard_decisions_total; do
    query "$q" 2>/dev/null | grep -q '"result":\[{' || return 1
  done
}
for _ in $(seq 150); do ready && break; sleep 0.2; done
ready || fail "Prometheus has not scraped the series in 30 s: $(tail -5 "$tmp/prometheus.log")"
query 'hpcml_train_loss' >"$tmp/q_loss.json" || fail "query hpcml_train_loss: $(cat "$tmp/prometheus.log")"
query 'sum by (account) (hpcml_cost_currency)' >"$tmp/q_cost.json" || fail "query cost"
query 'hpcml_guard_decisions_total{decision="deny"}' >"$tmp/q_deny.json" || fail "query denials"
query 'hpcml_train_seconds_since_checkpoint' >"$tmp/q_ckpt.json" || fail "query checkpoint age"

"$py" - "$tmp" <<'EOF' || fail "Prometheus' answers differ from the files"
import csv, json, math, re, sys
tmp = sys.argv[1]
def samples(path):
    out = {}
    for line in open(path, encoding="utf-8"):
        if line.startswith("#") or not line.strip():
            continue
        series, value = line.rsplit(" ", 1)
        out[series] = float(value)
    return out
def result(name):
    r = json.load(open(f"{tmp}/{name}.json"))
    assert r["status"] == "success", r
    return r["data"]["result"]
ok = True
def check(what, got, want):
    global ok
    good = math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
    print(f"{'ok  ' if good else 'FAIL'} {what}: {got!r}, expected {want!r}")
    ok &= good

train = samples(f"{tmp}/textfile/train.prom")
loss = result("q_loss")
if len(loss) != 1:
    print(f"FAIL hpcml_train_loss: {len(loss)} series"); sys.exit(1)
labels = loss[0]["metric"]
if labels.get("job_id") != "4242":
    print(f"FAIL hpcml_train_loss labels: {labels}"); ok = False
check("Prometheus: hpcml_train_loss{job_id=\"4242\"} against the file", float(loss[0]["value"][1]),
      train['hpcml_train_loss{job_id="4242"}'])
# The loss in the textfile is the last step's, as the JSON-lines log has it.
last_step = [json.loads(l) for l in open(f"{tmp}/train.jsonl") if '"loss"' in l][-1]
check("textfile loss against --metrics", train['hpcml_train_loss{job_id="4242"}'], last_step["loss"])
check("textfile step", train['hpcml_train_step{job_id="4242"}'], 20)
check("textfile attempt", train['hpcml_train_attempt{job_id="4242"}'], 1)
ckpt = result("q_ckpt")
if len(ckpt) != 1 or not 0 <= float(ckpt[0]["value"][1]) < 60:
    print(f"FAIL seconds since checkpoint: {ckpt}"); ok = False

cost = samples(f"{tmp}/textfile/cost.prom")
by_account = {}
for series, v in cost.items():
    m = re.match(r'hpcml_cost_currency\{account="([^"]*)"', series)
    if m:
        by_account[m.group(1)] = by_account.get(m.group(1), 0) + v
csv_rows = {r["key"]: float(r["cost"]) for r in csv.DictReader(open(f"{tmp}/cost.csv"))
            if r["grouping"] == "account"}
got = {r["metric"].get("account", ""): float(r["value"][1]) for r in result("q_cost")}
if set(got) != set(by_account) or not got:
    print(f"FAIL accounts: Prometheus {sorted(got)}, file {sorted(by_account)}"); ok = False
for account in sorted(by_account):
    check(f"Prometheus: cost of account {account!r} against the file", got.get(account, float("nan")), by_account[account])
    check(f"cost of account {account!r} against hpcml-cost --format csv", by_account[account],
          csv_rows[account])

deny = {r["metric"]["reason"]: float(r["value"][1]) for r in result("q_deny")}
check("Prometheus: denials dataset_classification", deny.get("dataset_classification", 0), 2)
check("Prometheus: denials dataset_zone", deny.get("dataset_zone", 0), 1)
sys.exit(0 if ok else 1)
EOF
echo "PASS"
