#!/usr/bin/env bash
# Every node decision is one hash-chained JSON line (once per step per node,
# not per task); the log verifies, and edited, removed or reordered copies
# do not, with every bad line named. The live log's tail (dropped or edited
# last lines, a deleted log) shows against its head file; a rotated log
# keeps the chain; a loop of identical denials adds one line and a count; a
# chain rewritten whole on the node fails against a witness kept off it.
source "$(dirname "$0")/guard_lib.sh"
write_policy
guard_install

run_as $ALICE timeout 60 srun -n3 --ml-role=ml-engineer --dataset="$DATA/ae/public/a.h5" true
expect_allowed "allowed 3-task step"
run_as $BOB timeout 60 srun -n1 true
expect_denied "unbound user"
id=$(as $ALICE sbatch --parsable -n2 --output=/dev/null --wrap 'srun -n2 true')
assert_eq COMPLETED "$(wait_job "$id")" "batch job $id"

"$AUDIT_BIN" verify "$AUDIT" || fail "hpcml-audit verify failed on the live log"
rows=$(grep -c "\"job_id\":\"$id\"" "$AUDIT")
assert_eq 2 "$rows" "audit lines of job $id (batch step + one srun step of 2 tasks)"
last=$(grep "\"user\":\"$BOB\"" "$AUDIT" | tail -n1)
for field in time cluster node job_id step_id uid user role zone datasets decision reason prev seq; do
  assert_contains "$last" "\"$field\":" "audit field $field"
done
assert_contains "$last" '"decision":"deny"' "bob's decision"
assert_contains "$last" '"context":"node"' "bob's context"
[ "$(stat -c %U:%a "$AUDIT")" = root:640 ] || fail "audit log is $(stat -c %U:%a "$AUDIT"), expected root:640"

n=$(wc -l <"$AUDIT")
[ "$n" -ge 3 ] || fail "only $n audit lines"
tamper() {  # tamper <name> <sed-or-awk program...>: a modified copy; verify must fail naming a line
  local copy=$JOB_DIR/$1.jsonl out rc
  shift
  "$@" "$AUDIT" >"$copy"
  set +e
  out=$("$AUDIT_BIN" verify "$copy" 2>&1)
  rc=$?
  set -e
  [ "$rc" -eq 3 ] || fail "verify of the $copy copy exited $rc: $out"
  assert_contains "$out" "$copy:" "verify names the file and line"
  echo "$out"
}
out=$(tamper edited sed '2s/"decision":"[a-z]*"/"decision":"allow"/; 2s/"reason":"/"reason":"x/')
assert_contains "$out" "edited.jsonl:2:" "edited line named"
out=$(tamper removed sed '2d')
assert_contains "$out" "removed.jsonl:2:" "removed line named"
out=$(tamper reordered awk 'NR==2{keep=$0; next} NR==3{print; print keep; next} {print}')
assert_contains "$out" "reordered.jsonl:2:" "reordered line named"
out=$(tamper two-edits sed '1s/"reason":"/"reason":"x/; 3s/"reason":"/"reason":"y/')
assert_contains "$out" "two-edits.jsonl:1:" "the first of two edited lines"
assert_contains "$out" "two-edits.jsonl:3:" "the second of two edited lines"

# The live log, tampered in place (then put back): its head file tells.
saved=$JOB_DIR/saved-audit
cp -p "$AUDIT" "$saved"
live_tamper() {  # live_tamper <what> <needle> <command...>: verify must fail
  local what=$1 needle=$2 out rc
  shift 2
  "$@"
  set +e
  out=$("$AUDIT_BIN" verify "$AUDIT" 2>&1)
  rc=$?
  set -e
  cp -p "$saved" "$AUDIT"
  [ "$rc" -eq 3 ] || fail "$what: verify exited $rc: $out"
  assert_contains "$out" "$needle" "$what"
}
live_tamper "the last line dropped" "lines were removed from the end" sed -i '$d' "$AUDIT"
live_tamper "the last line edited" "the last line was edited" \
  sed -i '$s/"decision":"[a-z]*"/"decision":"allow"/; $s/"reason":"/"reason":"x/' "$AUDIT"
live_tamper "the log deleted" "the log was deleted or emptied" rm -f "$AUDIT"
"$AUDIT_BIN" verify "$AUDIT" >/dev/null || fail "the restored log does not verify"

# A loop of identical denials: one line, then a count. On one node: the
# node is part of what makes two denials the same.
before=$(wc -l <"$AUDIT")
for i in $(seq 1 20); do
  as $BOB timeout 60 srun -n1 -w node1 true >/dev/null 2>&1 && fail "bob's step $i was allowed"
done
assert_eq $((before + 1)) "$(wc -l <"$AUDIT")" "audit lines after 20 identical denials"
run_as $ALICE timeout 60 srun -n1 true
expect_allowed "a step after the denials"
summary=$(tail -n2 "$AUDIT" | head -n1)
assert_contains "$summary" '"context":"repeat"' "the summary of the repeated denials"
assert_contains "$summary" '"count":19' "the count of the repeated denials"
assert_node_idle "after the repeated denials"

# The witness off the node (here the controller's namespace stands in for
# the controller host; the nodes of this cluster share one log): a chain
# rewritten whole on the node, head file and all, verifies on its own but
# not against the heads the collector recorded.
witness=$JOB_DIR/witness
"$AUDIT_BIN" witness --node node1 --head "$AUDIT.head" "$witness" || fail "hpcml-audit witness failed"
"$AUDIT_BIN" verify --witness "$witness" --node node1 "$AUDIT" ||
  fail "the live log does not verify against its witness"
# put_back: the real log and head file, moved aside to $JOB_DIR, back in
# place (the same files, so the head names the log); side counters dropped.
put_back() {
  mv -f "$JOB_DIR/real.jsonl" "$AUDIT"
  mv -f "$JOB_DIR/real.head" "$AUDIT.head"
  rm -f "$AUDIT.repeat" "$AUDIT.flood"
}
mv "$AUDIT" "$JOB_DIR/real.jsonl"
mv "$AUDIT.head" "$JOB_DIR/real.head"
rm -f "$AUDIT.repeat"
for i in 1 2 3; do
  run_as $ALICE timeout 60 srun -n1 true
  expect_allowed "a step writing the forged chain ($i)"
done
"$AUDIT_BIN" verify "$AUDIT" >/dev/null || fail "the forged chain does not verify on its own"
set +e
out=$("$AUDIT_BIN" verify --witness "$witness" --node node1 "$AUDIT" 2>&1)
rc=$?
set -e
put_back
[ "$rc" -eq 3 ] || fail "a chain rewritten on the node verified against the witness: $out"
assert_contains "$out" "witness" "the witness finds the rewritten chain"

# Issue 32, finding 1, as root on the node with the collector's witness in
# hand: an emptied log without its head file, and a chain rewritten from
# seq 1000, fail against the witness.
verify_witness() {  # verify_witness <what> <needle>: must fail
  local out rc
  set +e
  out=$("$AUDIT_BIN" verify --witness "$witness" --node node1 "$AUDIT" 2>&1)
  rc=$?
  set -e
  [ "$rc" -eq 3 ] || fail "$1: verify against the witness exited $rc: $out"
  assert_contains "$out" "$2" "$1"
}
out=$("$AUDIT_BIN" verify --witness "$witness" --node node1 "$AUDIT") ||
  fail "the live log against its witness: $out"
assert_contains "$out" "1 of 1 witnessed head(s) of node1 checked and matching" "verify's count"
# Moved aside, not copied: put back, the log is the file its head names.
mv "$AUDIT" "$JOB_DIR/real.jsonl"
mv "$AUDIT.head" "$JOB_DIR/real.head"
: >"$AUDIT"
verify_witness "an emptied log without its head file" "the log is empty or missing, but the witness"
rm -f "$AUDIT" "$AUDIT.repeat"
echo "999 $(printf 'f%.0s' $(seq 64))" >"$AUDIT.head"
run_as $ALICE timeout 60 srun -n1 true
expect_allowed "a step writing a chain from seq 1000"
"$AUDIT_BIN" verify "$AUDIT" >/dev/null || fail "the chain from seq 1000 does not verify on its own"
verify_witness "a chain rewritten from seq 1000" "before this chain's first line (seq 1000)"
put_back

# Finding 2: a deleted log is not healed by the next line: the writer
# records the gap, and verify reports it after any number of lines.
# The log moved out of its directory is, to the writer, deleted.
mv "$AUDIT" "$JOB_DIR/real.jsonl"
cp -p "$AUDIT.head" "$JOB_DIR/real.head"
for i in 1 2; do
  run_as $ALICE timeout 60 srun -n1 true
  expect_allowed "a step after the log was deleted ($i)"
done
set +e
out=$("$AUDIT_BIN" verify "$AUDIT" 2>&1)
rc=$?
set -e
put_back
[ "$rc" -eq 3 ] || fail "a deleted log healed: verify exited $rc after two more steps: $out"
assert_contains "$out" "a gap in the trail: the log that ended at seq" "the gap"

# Rotation: the new log goes on from the old one's chain.
mv "$AUDIT" "$AUDIT.1"
run_as $ALICE timeout 60 srun -n1 true
expect_allowed "a step after rotation"
"$AUDIT_BIN" verify "$AUDIT.1" "$AUDIT" || fail "the rotated log and the new one do not verify as one chain"
cat "$AUDIT" >>"$AUDIT.1"
mv "$AUDIT.1" "$AUDIT"
"$AUDIT_BIN" verify "$AUDIT" >/dev/null || fail "the log put back together does not verify"

# The auditor's question on this real log: who was allowed which data under
# ae/public in the last week, by which policy.
report=$("$AUDIT_BIN" report --dataset "$DATA/ae/public" --since 7d --decision allow --csv "$AUDIT") ||
  fail "hpcml-audit report on the live log: $report"
assert_contains "$report" "$ALICE" "the report names the user who read ae/public"
assert_contains "$report" "$DATA/ae/public" "the report names the dataset"
assert_contains "$report" "$(sha256sum "$POLICY" | cut -d' ' -f1)" "the report names the policy digest"

# Issue 32: a full disk. node1's log on a small file system of its own (in
# node1's mount namespace), filled up: allowed steps are denied with the
# reason, a flood of denials writes nothing, and no earlier line is lost or
# torn. Freed, the node goes on with the same chain.
full=$GUARD_LOG/full
install -d -m 0755 "$full"
on_node1() { nsenter --target "$(cat "$HPCML_CLUSTER_DIR/run/slurmd-node1.pid")" --mount --root sh -c "$1"; }
on_node1 "mount -t tmpfs -o size=64k hpcml-full $full"
trap 'on_node1 "umount $full" || true; restore_plugstack' EXIT
guard_install "policy=$POLICY zone=@ZONE@ audit=$full/audit.jsonl cluster=hpcml job_cache=$GUARD_CACHE"
for i in 1 2 3; do
  run_as $ALICE timeout 60 srun -n1 -w node1 true
  expect_allowed "a step on node1 before its log's disk is full ($i)"
done
on_node1 "dd if=/dev/zero of=$full/filler bs=1k 2>/dev/null; sync" || true
# The log's last page may still have room for a line or a few.
for i in $(seq 1 10); do
  run_as $ALICE timeout 60 srun -n1 -w node1 true
  [ "$RC" -eq 0 ] || break
done
expect_denied "an allowed step on a full disk" "audit log: write $full/audit.jsonl: No space left on device"
lines=$(on_node1 "wc -l <$full/audit.jsonl")
before=$(on_node1 "sha256sum $full/audit.jsonl")
run_as $ALICE timeout 60 srun -n1 -w node1 true
expect_denied "an allowed step on a full disk, again" "No space left on device"
opt=_SLURM_SPANK_OPTION_hpcml_guard
for i in $(seq 1 12); do
  run_as $BOB env SLURM_CONF="$(bypass_conf)" "${opt}_dataset=$DATA/ae/restricted/s$i.h5" \
    timeout 60 srun -n1 -w node1 true
  expect_denied "a denial on a full disk ($i)"
done
assert_eq "$before" "$(on_node1 "sha256sum $full/audit.jsonl")" "the log on a full disk"
out=$(on_node1 "$AUDIT_BIN verify $full/audit.jsonl") || fail "the log on a full disk: $out"
assert_contains "$out" "intact, $lines lines" "the log on a full disk"
on_node1 "rm -f $full/filler"
run_as $ALICE timeout 60 srun -n1 -w node1 true
expect_allowed "a step once the disk has room"
out=$(on_node1 "$AUDIT_BIN verify $full/audit.jsonl") || fail "the log after the disk had room: $out"
assert_contains "$out" "intact" "the log after the disk had room"
on_node1 "umount $full"
trap restore_plugstack EXIT
pass
