#!/usr/bin/env bash
# Issue 32: the off-node trail. Each node keeps its own log (as real nodes
# do) and sends every line, as it is written, to the cluster's collector
# (rsyslogd on the controller's side, hpcml-cluster up). `hpcml-audit verify
# --collector` then finds what the node's root rewrote: edited lines, a chain
# rewritten whole from seq 1000 (denials made allows), an emptied or deleted
# log, dropped first lines. An allowed step whose line cannot reach the
# collector does not run, and says why.
source "$(dirname "$0")/guard_lib.sh"
write_policy
COLLECTOR=$(cat "$HPCML_CLUSTER_DIR/etc/collector-address")
COPIES=$HPCML_CLUSTER_DIR/collector
TRAIL=$GUARD_LOG/trail  # $TRAIL/<host>/audit.jsonl: each host's own log
CLUSTER=$HPCML_SOURCE_DIR/tests/cluster/hpcml-cluster

# A fresh start: no logs, and the collector's copies of earlier runs gone
# (rsyslogd holds them open, so it is restarted around their removal).
"$CLUSTER" stop-collector
rm -rf "$TRAIL"
rm -f "$COPIES"/*.jsonl
"$CLUSTER" start-collector
for h in $(awk '!/^#/ {print $1}' "$HPCML_CLUSTER_DIR/etc/nodes") "$(hostname -s)"; do
  install -d -m 0755 "$TRAIL/$h"
done
guard_install "policy=$POLICY zone=@ZONE@ audit=$TRAIL/@HOST@/audit.jsonl cluster=hpcml job_cache=$GUARD_CACHE audit_collector=$COLLECTOR"
LOG1=$TRAIL/node1/audit.jsonl LOG2=$TRAIL/node2/audit.jsonl

# copy_complete <node>: waits until the collector's copy has the node's lines.
copy_complete() {
  local log=$TRAIL/$1/audit.jsonl copy=$COPIES/$1.jsonl deadline=$((SECONDS + 10))
  until [ -f "$copy" ] && [ "$(wc -l <"$copy")" -ge "$(wc -l <"$log")" ]; do
    [ $SECONDS -lt $deadline ] || fail "$1: the collector has $(wc -l <"$copy" 2>/dev/null || echo 0) lines of $(wc -l <"$log")"
    sleep 0.1
  done
}
verify_ok() {  # verify_ok <node>: the node's log matches the collector's copy
  local out
  copy_complete "$1"
  out=$("$AUDIT_BIN" verify --collector "$COPIES/$1.jsonl" "$TRAIL/$1/audit.jsonl" 2>&1) ||
    fail "$1's log against the collector: $out"
  echo "$out"
}
verify_fails() {  # verify_fails <what> <needle>: node1's log against its copy must fail
  local out rc
  set +e
  out=$("$AUDIT_BIN" verify --collector "$COPIES/node1.jsonl" "$LOG1" 2>&1)
  rc=$?
  set -e
  [ "$rc" -eq 3 ] || fail "$1: verify against the collector exited $rc: $out"
  assert_contains "$out" "$2" "$1"
  echo "$1: $(grep -c '^hpcml-audit: /' <<<"$out") problem line(s), e.g. $(grep -m1 "$2" <<<"$out")"
}

# A two-node step and a denial: each node's lines reach the collector.
run_as $ALICE timeout 60 srun -N2 -n2 -w node1,node2 --ml-role=ml-engineer \
  --dataset="$DATA/ae/public/a.h5" true
expect_allowed "a 2-node step"
# Bob's steps, past srun's own check (his own slurm.conf), denied by node1.
opt=_SLURM_SPANK_OPTION_hpcml_guard
for asked in ${opt}_ml_role=ml-engineer ${opt}_ml_role=reader ${opt}_dataset=$DATA/ae/restricted/secret.h5; do
  run_as $BOB env SLURM_CONF="$(bypass_conf)" "$asked" timeout 60 srun -n1 -w node1 true
  expect_denied "bob's step with ${asked#${opt}_}"
done
[ -s "$LOG1" ] && [ -s "$LOG2" ] || fail "no per-node logs in $TRAIL: $(ls -R "$TRAIL")"
out=$(verify_ok node1)
n1=$(wc -l <"$LOG1")
assert_contains "$out" "$n1 of $n1 line(s) at the collector matching" "node1's count"
out=$(verify_ok node2)
assert_contains "$out" "1 of 1 line(s) at the collector matching" "node2's count"
assert_contains "$(cat "$COPIES/node1.jsonl")" '"decision":"deny"' "the denials at the collector"

# As root on node1 (the log is the node's file): each rewrite fails.
saved=$JOB_DIR/node1-saved
cp -p "$LOG1" "$saved.jsonl"
cp -p "$LOG1.head" "$saved.head"
put_back() {
  cp -p "$saved.jsonl" "$LOG1"
  cp -p "$saved.head" "$LOG1.head"
  rm -f "$LOG1.repeat" "$LOG1.flood"
}
# A denial edited into an allow.
sed -i '2s/"decision":"deny"/"decision":"allow"/' "$LOG1"
verify_fails "an edited line" "differs from the collector's copy"
put_back
# The whole chain rewritten from seq 1000, denials made allows, its head
# file to match: on its own it verifies.
/usr/bin/python3 - "$LOG1" <<'EOF'
import hashlib, json, sys
path = sys.argv[1]
prev, out = "0" * 64, []
for i, line in enumerate(open(path, encoding="utf-8").read().splitlines()):
    j = json.loads(line)
    j["seq"], j["prev"] = 1000 + i, prev
    if j.get("decision") == "deny":
        j["decision"], j["reason"] = "allow", "allowed"
        j.pop("reason_code", None)
    text = json.dumps(j, separators=(",", ":"), ensure_ascii=False)
    out.append(text)
    prev = hashlib.sha256(text.encode()).hexdigest()
open(path, "w", encoding="utf-8").write("".join(l + "\n" for l in out))
open(path + ".head", "w").write(f"{1000 + len(out) - 1} {prev}\n")
EOF
"$AUDIT_BIN" verify "$LOG1" >/dev/null || fail "the chain rewritten from seq 1000 does not verify on its own"
verify_fails "a chain rewritten from seq 1000" "seq 1000 never reached the collector"
verify_fails "a chain rewritten from seq 1000" "seq 0 is not in the node's log"
put_back
# Emptied, head file removed.
: >"$LOG1"
rm -f "$LOG1.head"
verify_fails "an emptied log without its head file" "seq 0 is not in the node's log"
put_back
# The first two lines dropped.
sed -i '1,2d' "$LOG1"
verify_fails "dropped first lines" "seq 1 is not in the node's log"
put_back
"$AUDIT_BIN" verify --collector "$COPIES/node1.jsonl" "$LOG1" >/dev/null || fail "node1's log put back"

# Deleted: the next step's line goes on with a gap, which is sent too, and
# the deleted lines stay missing.
rm -f "$LOG1"
run_as $ALICE timeout 60 srun -n1 -w node1 true
expect_allowed "a step after node1's log was deleted"
deadline=$((SECONDS + 10))
until grep -q '"context":"gap"' "$COPIES/node1.jsonl"; do
  [ $SECONDS -lt $deadline ] || fail "the gap line did not reach the collector"
  sleep 0.1
done
verify_fails "a deleted log" "a gap in the trail"
verify_fails "a deleted log" "seq 0 is not in the node's log"
assert_contains "$(tail -n2 "$COPIES/node1.jsonl")" '"context":"gap"' "the gap line at the collector"
# The deleted lines are the ones the collector has: put together, intact.
cat "$saved.jsonl" "$LOG1" >"$JOB_DIR/joined.jsonl"
"$AUDIT_BIN" verify --collector "$COPIES/node1.jsonl" "$JOB_DIR/joined.jsonl" >/dev/null 2>&1 &&
  fail "a log with a gap line verified"
cmp -s <(sort -u "$COPIES/node1.jsonl") <(sort "$JOB_DIR/joined.jsonl") ||
  fail "the collector's copy is not the node's lines: $(diff <(sort -u "$COPIES/node1.jsonl") <(sort "$JOB_DIR/joined.jsonl") | head)"

# An outage: an allowed step whose line cannot be sent is denied with the
# reason; once the collector is back, the lines held back go with the next.
"$CLUSTER" stop-collector
run_as $ALICE timeout 60 srun -n1 -w node2 --ml-role=ml-engineer --dataset="$DATA/ae/public/a.h5" true
expect_denied "a step while the collector is down" "audit collector $COLLECTOR"
assert_contains "$(tail -n1 "$LOG2")" '"reason_code":"audit_collector"' "the outage's reason code"
"$CLUSTER" start-collector
sleep 3  # the guard tries a collector again 3 s after a failed send
run_as $ALICE timeout 60 srun -n1 -w node2 --ml-role=ml-engineer --dataset="$DATA/ae/public/a.h5" true
expect_allowed "a step once the collector is back"
out=$(verify_ok node2)
n2=$(wc -l <"$LOG2")
assert_contains "$out" "$n2 of $n2 line(s) at the collector matching" "node2 after the outage"
echo "PASS: $TEST_NAME"
