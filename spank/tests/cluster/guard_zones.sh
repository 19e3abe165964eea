#!/usr/bin/env bash
# Residency across zones on the multi-zone cluster: every node's guard has
# its own zone (node1, node2: ae; node3: eu). A zone's data is processed on
# that zone's nodes only: eu data is allowed on the eu node and denied on an
# ae node, ae data the other way round, a step spanning both zones with ae
# data is denied on the eu node, and each node's audit line names it and its
# zone. Nodes stay up after every denial.
# Then one plugstack.conf line for every host, with no zone=: each node's
# zone comes from the policy's [zones] nodes and from its Slurm feature
# zone-<name>; where the two disagree the node denies.
# With job_submit/lua (examples/guard/job_submit.lua) such jobs are refused
# at submission; the nodes' own decisions are tried here as a user who skips
# the guard's submit side would (a slurm.conf without plugstack.conf, the
# options forged in the environment): the lua has nothing to route by.
source "$(dirname "$0")/guard_lib.sh"
write_policy
guard_install
eu="SLURM_CONSTRAINT=zone-eu"
opt=_SLURM_SPANK_OPTION_hpcml_guard
bypass="SLURM_CONF=$(bypass_conf) ${opt}_ml_role=ml-engineer"
audit_before=0
[ ! -f "$AUDIT" ] || audit_before=$(wc -l <"$AUDIT")

run_as $ALICE env $eu timeout 60 srun -n1 --ml-role=ml-engineer --dataset="$DATA/eu/b.h5" \
  sh -c 'echo "$(hostname) $HPCML_ZONE $HPCML_DATASETS"'
expect_allowed "eu data on the eu node"
assert_contains "$OUT" "node3 eu $DATA/eu/b.h5" "the eu node's zone and dataset"

run_as $ALICE env $eu timeout 60 srun -n1 --ml-role=ml-engineer --dataset="$DATA/ae/public/a.h5" true
[ "$RC" -ne 0 ] || fail "ae data with --constraint=zone-eu was accepted: $OUT"
assert_contains "$OUT" "the job's datasets are in zone ae, but its --constraint asks for zone-eu" \
  "refused at submission, saying why"
run_as $ALICE env $eu $bypass ${opt}_dataset="$DATA/ae/public/a.h5" timeout 60 srun -n1 true
expect_denied "ae data on the eu node" "dataset '$DATA/ae/public/a.h5' cannot be resolved"

run_as $ALICE env $bypass ${opt}_dataset="$DATA/eu/b.h5" timeout 60 srun -n1 true
expect_denied "eu data on an ae node" "dataset '$DATA/eu/b.h5' cannot be resolved"

run_as $ALICE env $eu $bypass ${opt}_data_zone=ae timeout 60 srun -n1 true
expect_denied "--data-zone=ae on the eu node" "requested zone 'ae' is not this node's zone 'eu'"

# One step on an ae node and the eu node with ae data: the eu node denies
# its task, so the step fails although the ae node allowed its own. The
# denial is looked for in the audit log: the eu node's message on srun's
# stderr is lost when srun ends the step at that task's exit before the
# message arrives (KillOnBadExit; seen about once in ten runs).
span_before=$(wc -l <"$AUDIT")
run_as $ALICE env -u SLURM_CONSTRAINT $bypass ${opt}_dataset="$DATA/ae/public/a.h5" \
  timeout 60 srun -N2 -w node1,node3 hostname
[ "$RC" -ne 0 ] || fail "a step spanning ae and eu with ae data ran: $OUT"
[[ $OUT != *"hpcml-guard: denied"* ]] || assert_contains "$OUT" "dataset '$DATA/ae/public/a.h5' cannot be resolved" "the eu node's message"
span_lines=$(tail -n +$((span_before + 1)) "$AUDIT")
grep '"node":"node3"' <<<"$span_lines" | grep '"decision":"deny"' | grep -qF "dataset '$DATA/ae/public/a.h5' cannot be resolved" ||
  fail "no denial by the eu node in the audit log for the spanning step: $span_lines"
assert_node_idle "a step spanning ae and eu with ae data"

# Audit: each node's decision names it and its zone. The ae node's line is
# looked for among all of this test's lines: the scheduler may put the single-node
# ae step on node1 or node2, and in the spanning step node3's denial may end
# the step before node1's guard has decided.
"$AUDIT_BIN" verify "$AUDIT" || fail "hpcml-audit verify failed on the live log"
lines=$(tail -n +$((audit_before + 1)) "$AUDIT" | grep '"context":"node"')
assert_contains "$lines" '"node":"node3","job_id"' "an audit line from the eu node"
node_zones=$(sed -n 's/.*"node":"\(node[0-9]\)",.*"zone":"\([a-z]*\)".*/\1 \2/p' <<<"$lines" | sort -u)
grep -qx 'node3 eu' <<<"$node_zones" || fail "node3's audit lines do not say zone eu: $lines"
grep -Eqx 'node[12] ae' <<<"$node_zones" || fail "no ae node's audit line says zone ae: $lines"
if grep -Ev '^(node3 eu|node[12] ae)$' <<<"$node_zones"; then
  fail "an audit line gives a node another zone: $lines"
fi

# One line for all hosts, as a shared plugstack.conf would have it.
set_plugstack "required $GUARD_SO policy=$POLICY audit=$AUDIT cluster=hpcml job_cache=$GUARD_CACHE"
for shape in features-only nodes-and-features; do
  if [ $shape = features-only ]; then write_policy; else write_policy '"node[1-2]"' '"node3"'; fi
  run_as $ALICE env $eu timeout 60 srun -n1 --ml-role=ml-engineer --dataset="$DATA/eu/b.h5" \
    sh -c 'echo "$(hostname) $HPCML_ZONE"'
  expect_allowed "$shape: eu data on the eu node"
  assert_contains "$OUT" "node3 eu" "$shape: the eu node's zone"
  run_as $ALICE env $bypass ${opt}_dataset="$DATA/eu/b.h5" timeout 60 srun -n1 true
  expect_denied "$shape: eu data on an ae node" "dataset '$DATA/eu/b.h5' cannot be resolved"
done
write_policy '"node[1-3]"' ''  # node3 in ae by the policy, zone-eu by its feature
run_as $ALICE env $eu timeout 60 srun -n1 --ml-role=ml-engineer true
expect_denied "the policy and the node's feature disagree" "node node3: the zones disagree"
pass
