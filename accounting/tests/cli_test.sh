#!/usr/bin/env bash
# hpcml-cost end to end on recorded sacct output: formats, exit codes and
# messages for bad input. Usage: cli_test.sh <hpcml-cost> <data dir> <example prices>
set -euo pipefail
cost=$1 data=$2 example=$3
export TZ=UTC
tmp=$(mktemp -d /tmp/acct-cli-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0 passed=0
check() {  # check <name> <command...>: the command must succeed
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); else echo "FAIL: $name" >&2; failures=$((failures + 1)); fi
}
contains() { [[ $1 == *"$2"* ]] || { echo "  '$2' not in: $1" >&2; return 1; }; }

prices=$data/prices_untyped.toml
# Table: reconciles; the expected total is derived in report_test.cpp (27.658125).
out=$("$cost" --prices "$prices" --input "$data/typed_untyped.sacct" --now 2026-03-10 2>&1)
check "table total" contains "$out" "reconciled: the rows of every grouping sum exactly to the total (cost 27.66 USD"
# stdin, CSV: the total line carries the exact sum.
out=$("$cost" --prices "$prices" --input - --format csv --now 2026-03-10 <"$data/typed_untyped.sacct")
check "csv total" contains "$out" "total,,4,0,0,6.500000,"
check "csv exact" contains "$out" ",27.658125,"
# JSON to a file, SVG beside it.
"$cost" --prices "$prices" -i "$data/typed_untyped.sacct" -f json -o "$tmp/r.json" --svg "$tmp/r.svg" --by job,account --now 2026-03-10
check "json file" contains "$(cat "$tmp/r.json")" '"reconciled": true'
check "json by job" contains "$(cat "$tmp/r.json")" '"job": ['
check "svg file" contains "$(head -c 200 "$tmp/r.svg")" "<svg xmlns="
# Period clipping from the command line: 2 h of job 300 + 1 h of running job 301 at 4.1.
out=$("$cost" --prices "$data/prices.toml" -i "$data/period.sacct" -S 2026-03-04 -E 2026-03-05 --now 2026-03-05T01:00:00 -f csv)
check "period" contains "$out" "total,,2,0,0,3.000000,3.000000,12.300000,"

# Invalid UTF-8 and control bytes in sacct's text fields (a job name, a comment,
# an account, a malformed line's value): every format completes, JSON is
# valid with U+FFFD in place of each bad byte, SVG stays well-formed XML.
bad=$data/bad_bytes.sacct
fffd=$'\xef\xbf\xbd'
for f in table csv json svg; do
  rc=0
  "$cost" --prices "$prices" -i "$bad" -f "$f" --by account,user --now 2026-03-10 \
    >"$tmp/bad.$f" 2>"$tmp/bad.$f.err" || rc=$?
  check "bad bytes $f rc" test "$rc" = 0
done
check "bad bytes json" python3 -c 'import json, sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$tmp/bad.json"
check "bad bytes json account" contains "$(cat "$tmp/bad.json")" "\"key\": \"ml$fffd\""
check "bad bytes json user" contains "$(cat "$tmp/bad.json")" "\"key\": \"b${fffd}ob\""
check "bad bytes json error" contains "$(cat "$tmp/bad.json")" "ElapsedRaw '36$fffd'"
check "bad bytes svg" python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$tmp/bad.svg"
check "bad bytes svg account" contains "$(cat "$tmp/bad.svg")" ">ml$fffd</text>"
check "bad bytes csv" contains "$(cat "$tmp/bad.csv")" "total,,3,"

# Malformed lines: skipped with a count and a warning (exit 0), or fatal with --strict.
out=$("$cost" --prices "$data/prices.toml" -i "$data/malformed.sacct" 2>&1)
check "skip count" contains "$out" "skipped 4 malformed lines (first: $data/malformed.sacct:3:"
check "skip in report" contains "$out" "4 malformed lines skipped"
set +e
out=$("$cost" --prices "$data/prices.toml" -i "$data/malformed.sacct" --strict 2>&1); rc=$?
check "strict rc" test "$rc" = 1
check "strict line" contains "$out" "malformed.sacct:3:"
# Unknown GPU type: the known ones are listed.
out=$("$cost" --prices "$data/prices.toml" -i "$data/unknown_gpu.sacct" 2>&1); rc=$?
check "unknown gpu rc" test "$rc" = 1
check "unknown gpu msg" contains "$out" "unknown type: the GPU types priced in $data/prices.toml: a100, h100"
# Missing price (untyped GPUs with no "*" rate).
out=$("$cost" --prices "$data/prices.toml" -i "$data/typed_untyped.sacct" 2>&1); rc=$?
check "missing price rc" test "$rc" = 1
check "missing price msg" contains "$out" "no price for GPU type '(untyped)' in partition 'urgent'"
# Price table errors name file, line and key.
printf 'currency = "EUR"\n[[rate]]\nresource = "gpu"\non_demand = 1\nspot_price = 2\n' >"$tmp/bad.toml"
out=$("$cost" --prices "$tmp/bad.toml" -i "$data/period.sacct" 2>&1); rc=$?
check "bad toml rc" test "$rc" = 1
check "bad toml msg" contains "$out" "$tmp/bad.toml:5: rate.spot_price: unknown key"
# Missing --prices, bad option values, usage errors.
out=$(env -u HPCML_PRICES "$cost" -i "$data/period.sacct" 2>&1); rc=$?
check "no prices rc" test "$rc" = 2
check "no prices msg" contains "$out" "--prices is required"
out=$("$cost" --prices "$prices" -i "$data/period.sacct" --by qos 2>&1); rc=$?
check "bad by" test "$rc" = 2
out=$("$cost" --prices "$prices" -i "$data/typed_untyped.sacct" --by " user, ,account," --now 2026-03-10 -f csv 2>&1); rc=$?
check "by list rc" test "$rc" = 0
check "by list user" contains "$out" "user,alice,"
check "by list account" contains "$out" "account,ml,"
out=$("$cost" --prices "$prices" -i "$data/period.sacct" -S yesterday 2>&1); rc=$?
check "bad start" contains "$out" "--start 'yesterday'"
check "bad start rc" test "$rc" = 2
out=$("$cost" --prices "$prices" --no-such-flag 2>&1); rc=$?
check "usage rc" test "$rc" = 2
out=$("$cost" --prices "$prices" -i /nonexistent.sacct 2>&1); rc=$?
check "missing input" contains "$out" "/nonexistent.sacct"
check "missing input rc" test "$rc" = 1
# sacct that cannot be run, or fails.
out=$("$cost" --prices "$prices" --sacct /nonexistent/sacct 2>&1); rc=$?
check "no sacct rc" test "$rc" = 1
check "no sacct msg" contains "$out" "/nonexistent/sacct: could not be run"
set -e
# The example price table in examples/ loads and prices the fixture.
out=$("$cost" --prices "$example" -i "$data/typed_untyped.sacct" -f csv --now 2026-03-10)
check "example prices" contains "$out" "total,,4,"

# record: JSON written atomically, Comment summary via the given scontrol.
printf '#!/bin/sh\necho "$@" > %s/args\n' "$tmp" >"$tmp/scontrol"
chmod +x "$tmp/scontrol"
path=$("$cost" record --dir "$tmp" --job-id 77 --restart 2 --gpu-type h100 --gpu-count 2 \
  --gpu-seconds 7200 --steps 100 --samples 3200 --steps-lost 10 --checkpoint-seconds 4.5 \
  --written-at 1772413190 --scontrol "$tmp/scontrol")
check "record path" test "$path" = "$tmp/usage-77-r2.json"
check "record json" contains "$(cat "$path")" '"steps_lost_to_preemption": 10'
check "record no util" bash -c "! grep -q gpu_utilization_pct '$path'"
check "record comment" contains "$(cat "$tmp/args")" \
  "update JobId=77 Comment=hpcml/1,j=77,a=2,t=1772413190,gt=h100,gn=2,gs=7200,st=100,sm=3200,sl=10,ck=4.5"
set +e
out=$(env -u SLURM_JOB_ID "$cost" record --dir "$tmp" --gpu-seconds 1 2>&1); rc=$?
check "record no job" test "$rc" = 2
check "record no job msg" contains "$out" "SLURM_JOB_ID"
set -e

echo "$passed passed, $failures failed"
[ "$failures" -eq 0 ]
