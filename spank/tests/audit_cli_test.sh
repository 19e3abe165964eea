#!/usr/bin/env bash
# hpcml-audit report and metrics end to end on a log written by the guard's
# own writer: "who read /data/ae/... last week", CSV, JSON, exit codes, and
# messages naming the option or file.
# Usage: audit_cli_test.sh <hpcml-audit> <guard_make_audit_log>
set -euo pipefail
audit=$1 make_log=$2
tmp=$(mktemp -d /tmp/guard-audit-cli.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
log=$tmp/audit.jsonl
"$make_log" "$log"
mv "$log" "$log.1"  # rotated: the chain goes on in a new file
"$make_log" "$log"

# Who read anything under /data/ae/customers in the last week: bob, denied
# twice in each file; files in any order.
out=$("$audit" report --dataset /data/ae/customers --since 7d "$tmp"/audit.jsonl*) || fail "report: $out"
[ "$(grep -c ' deny ' <<<"$out")" = 4 ] || fail "expected 4 denials: $out"
grep -q "4 decision line(s) shown: 0 allowed, 4 denied; 12 lines read" <<<"$out" || fail "summary: $out"
grep -q "chain $log: intact, 12 lines" <<<"$out" || fail "chain line: $out"
# Nothing before the log was written.
out=$("$audit" report --until 2020-01-01 "$log.1" "$log")
grep -q "^0 decision line(s) shown" <<<"$out" || fail "--until 2020: $out"
# CSV: a header and one line per decision; JSON parses.
out=$("$audit" report --csv --user alice "$log.1" "$log")
[ "$(wc -l <<<"$out")" = 5 ] || fail "CSV lines: $out"
head -1 <<<"$out" | grep -q '^time,decision,count,user,' || fail "CSV header: $out"
# Repeated options add up and do not swallow the files after them.
out=$("$audit" report --csv --user alice --user carol --zone ae "$log.1" "$log")
[ "$(wc -l <<<"$out")" = 7 ] || fail "--user alice --user carol: $out"
"$audit" report --json --zone ae "$log.1" "$log" >"$tmp/r.json"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["intact"] and len(r["decisions"]) == 12, r' "$tmp/r.json" ||
  fail "JSON"
# Metrics: 2 files, 4 classification denials.
"$audit" metrics -o "$tmp/guard.prom" "$log.1" "$log"
grep -q '^hpcml_guard_decisions_total{decision="deny",reason="dataset_classification",zone="ae",context="node"} 4$' "$tmp/guard.prom" ||
  fail "metrics: $(cat "$tmp/guard.prom")"

# A tampered line: flagged, exit 3 (a check that failed), the report still written.
sed -i '2s/"decision":"deny"/"decision":"allow"/' "$log.1"
set +e
out=$("$audit" report "$log.1" "$log" 2>"$tmp/err"); rc=$?
set -e
[ "$rc" = 3 ] || fail "tampered: exit $rc"
grep -q "$log.1:2: its SHA-256 does not match" "$tmp/err" || fail "tampered message: $(cat "$tmp/err")"
grep -q ' bad ' <<<"$out" || fail "no bad row: $out"
grep -q '^hpcml_guard_audit_chain_intact{log="'"$log"'"} 0$' <("$audit" metrics "$log.1" "$log") ||
  fail "metrics chain state"

# Usage errors exit 2, files that cannot be read 1, naming the option or file.
for args in "report --since yesterday $log" "report --decision maybe $log" "report --csv --json $log"; do
  set +e
  out=$("$audit" $args 2>&1); rc=$?
  set -e
  [ "$rc" = 2 ] || fail "'$args': exit $rc: $out"
done
for args in "report $tmp/missing.jsonl" "report $log.2.gz"; do
  set +e
  out=$("$audit" $args 2>&1); rc=$?
  set -e
  [ "$rc" = 1 ] || fail "'$args': exit $rc: $out"
done
out=$("$audit" report --since yesterday "$log" 2>&1 || true)
grep -q "report: --since 'yesterday': expected an ISO 8601 date or time" <<<"$out" || fail "message: $out"
out=$("$audit" report "$log.2.gz" 2>&1 || true)
grep -q "$log.2.gz: compressed" <<<"$out" || fail "message: $out"
echo PASS
