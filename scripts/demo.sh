#!/usr/bin/env bash
# The main job, the whole story on one machine:
#  1. install dependencies, build, bring up the local multi-zone Slurm cluster
#     (node1, node2 in zone ae; node3 in zone eu; slurmdbd; job_submit/lua);
#  2. install the guard: one policy, one plugstack.conf line for every host;
#  3. a data admin ingests a feature set in zone ae (hpcml-fcache), joins
#     labels to it as of each request's time, standardises it and splits it
#     by time into training and validation versions;
#  4. an ordinary user submits a guarded training job that reads it across
#     the two ae nodes with checkpoints, validation and early stopping
#     (examples/guard/train-guarded.sbatch);
#  5. a job in the higher-priority partition preempts it; it resumes from its
#     checkpoint and finishes; its best validation figures against always
#     predicting the base rate (the demo fails if it is no better);
#  6. sacct, the cost report, the feature set's lineage;
#  6b. the user scores the validation rows, unstandardised, with the best
#     model as a guarded CPU job on both ae nodes
#     (examples/inference/score.sbatch; the scores must vary), inspects the
#     model's lineage, exports it to ONNX and gets the same numbers from ONNX
#     Runtime;
#  7. the same user tries to read zone eu's data from an ae node: denied,
#     and audited; hpcml-audit verify checks the audit chain, also against
#     the head a collector off the node recorded.
# The cluster is left running; stop it with: tests/cluster/hpcml-cluster down
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/build.sh" default
cd "$top"
bin=$top/build/default
tests/cluster/hpcml-cluster up
eval "$(tests/cluster/hpcml-cluster env)"
# wait_job, set_plugstack, and the environment jobs on this oversubscribed
# cluster need (Open MPI ranks that yield when idle).
source tests/cluster/lib.sh
source mpi_trainer/checkpoint/tests/cluster/interrupt_lib.sh  # wait_steps, wait_requeued
fail() { echo "demo: $*" >&2; exit 1; }
say() { printf '\n===== %s =====\n' "$*"; }
user=hpcml-alice
as_user() { (cd /tmp && runuser -u "$user" -- "$@"); }

say "2. the guard: one policy and one plugstack.conf line for every host"
guard=$HPCML_CLUSTER_DIR/demo-guard
# The data, on each zone's own file system (hpcml-cluster up): zone ae's is
# mounted on the ae nodes only, zone eu's on the eu node only.
ae_data=$HPCML_CLUSTER_DIR/data/ae/demo eu_data=$HPCML_CLUSTER_DIR/data/eu/demo
install -d -m 0755 "$guard" "$guard/log" "$ae_data" "$eu_data"
cat >"$guard/policy.toml" <<EOP
# Zones: each node's zone is its Slurm feature (zone-ae, zone-eu).
[zones.ae]
description = "UAE customer data stays on UAE nodes"
[zones.eu]
description = "EU data stays on EU nodes"
[view]
roots = ["$ae_data", "$eu_data"]
[[datasets]]
path = "$ae_data"
zone = "ae"
classification = "internal"
[[datasets]]
path = "$eu_data"
zone = "eu"
classification = "internal"
[[roles]]
name = "ml-engineer"
zones = ["ae"]
classifications = ["internal"]
max_gpus = 8
partitions = ["batch", "urgent"]
[[bindings]]
user = "$user"
roles = ["ml-engineer"]
[defaults]
role = "ml-engineer"
EOP
chmod 0644 "$guard/policy.toml"
cat "$guard/policy.toml"
audit=$guard/log/audit.jsonl
set_plugstack "required $bin/spank/hpcml_guard.so policy=$guard/policy.toml audit=$audit cluster=hpcml job_cache=$guard/cache"
cat "$HPCML_CLUSTER_DIR/etc/host/plugstack.conf"
tests/cluster/hpcml-cluster restart-slurmd  # slurmd loads the guard's prolog

say "3. a data admin ingests a feature set in zone ae"
fc=$bin/featurecache/hpcml-fcache
python3 examples/featurecache/make_sample_data.py --rows 20000 --entities 2000 --requests 8000 \
  --out "$guard/raw" >/dev/null
rm -rf "$ae_data/churn.h5" "$ae_data/churn.h5.d"
"$fc" ingest "$ae_data/churn.h5" --csv "$guard/raw/features.csv" --entity customer \
  --timestamp event_time --zone ae --classification internal
"$fc" asof "$ae_data/churn.h5" --requests "$guard/raw/requests.csv" --entity customer \
  --time as_of --label churned_next_month --missing drop  # v2: no NaN rows for training
# v3: every feature standardised; then a time split of it, both still known
# to be standardised with v3's means and deviations: v4 to train, v5 to
# validate. v6: v5's rows unstandardised, as new data to score arrives.
"$fc" derive "$ae_data/churn.h5" --from v2 --standardize
"$fc" derive "$ae_data/churn.h5" --from v3 --until 2024-05-01
"$fc" derive "$ae_data/churn.h5" --from v3 --since 2024-05-01
"$fc" derive "$ae_data/churn.h5" --from v2 --since 2024-05-01
chmod 0644 "$ae_data/churn.h5"
echo "EU-ONLY" >"$eu_data/sales.csv"
chmod 0644 "$eu_data/sales.csv"

say "4. $user submits a guarded training job on it"
run=$HPCML_CLUSTER_DIR/jobs/demo
rm -rf "$run"
install -d -m 1777 "$run"
# The job's variables come from the environment sbatch is run in: a list in
# --export makes slurmd run the user's login shell, which job_submit.lua
# refuses (docs/guard.md).
job=$(as_user env HPCML_TRAIN="$bin/mpi_trainer/trainer/hpcml-train" TRAIN_DIR="$run" GPU_TYPE=h100 \
  DATA_VERSION=v4 VAL_VERSION=v5 \
  sbatch --parsable --dataset="$ae_data/churn.h5" --ml-role=ml-engineer \
  --gres=gpu:h100:2 --time=00:10:00 --output="$run/job-%j.out" \
  "$top/examples/guard/train-guarded.sbatch")
echo "demo: job $job (no --constraint: job_submit/lua routes it to zone ae's nodes)"
wait_steps "$job" "$run/metrics-0.jsonl" 1000 0.5  # past the first evaluations and checkpoint

say "5. a job in the urgent partition preempts it"
urgent=$(as_user sbatch --parsable -p urgent -N2 --exclusive -C zone-ae --output=/dev/null --wrap "sleep 2")
wait_requeued "$job"
wait_job "$urgent" >/dev/null
scontrol update JobId="$job" StartTime=now  # requeued jobs wait ~2 min otherwise
state=$(wait_job "$job" 600)
cat "$run/job-$job.out"
[ "$state" = COMPLETED ] || fail "job $job ended $state"
grep -q "resumed from checkpoint step" "$run/job-$job.out" || fail "job $job did not resume"
# The best evaluation against always predicting the validation set's base rate.
/usr/bin/python3 - "$run"/metrics-*.jsonl <<'PY' || fail "the model is no better than the base rate"
import json, sys
evals = [e for f in sys.argv[1:] for e in map(json.loads, open(f)) if e.get("event") == "eval"]
b = min(evals, key=lambda e: e["log_loss"])
print(f"demo: validation (v5, {b['rows']} rows), best at step {b['step']}: "
      f"log loss {b['log_loss']:.4f}, accuracy {b['accuracy']:.4f}, AUC {b['auc']:.4f}; "
      f"always predicting the base rate ({100 * b['positive_rate']:.1f}% churn): "
      f"log loss {b['base_rate_log_loss']:.4f}, accuracy {b['base_rate_accuracy']:.4f}, AUC 0.5")
sys.exit(0 if b["auc"] > 0.6 and b["log_loss"] < b["base_rate_log_loss"] else 1)
PY

say "6. accounting, cost, lineage"
sacct -D -j "$job" -o JobID,JobName,User,Account,Partition,NodeList,AllocTRES%50,Elapsed,State
"$bin/accounting/hpcml-cost" --prices examples/accounting/prices.toml -j "$job" --by job \
  --usage-dir "$run/ckpt"
"$fc" lineage "$ae_data/churn.h5"

say "6b. $user scores the feature set with the model, then exports it to ONNX"
infer=$bin/mpi_trainer/inference/hpcml-infer
job2=$(as_user env HPCML_INFER="$infer" MODEL="$run/best.h5" DATA_VERSION=v6 OUT="$run/scores.csv" \
  sbatch --parsable --dataset="$ae_data/churn.h5" --ml-role=ml-engineer \
  --output="$run/score-%j.out" "$top/examples/inference/score.sbatch")
state=$(wait_job "$job2" 300)
cat "$run/score-$job2.out"
[ "$state" = COMPLETED ] || fail "scoring job $job2 ended $state"
head -n 4 "$run/scores.csv"
/usr/bin/python3 - "$run/scores.csv" <<'PY' || fail "the scores do not vary: the model is a constant"
import numpy as np, sys
p = np.loadtxt(sys.argv[1], delimiter=",", skiprows=1, usecols=3)
print(f"demo: {len(p)} scores, {len(np.unique(p))} distinct; p(churn) from {p.min():.3f} to "
      f"{p.max():.3f}, quartiles {np.percentile(p, 25):.3f} {np.median(p):.3f} {np.percentile(p, 75):.3f}")
sys.exit(0 if len(np.unique(p)) > len(p) // 2 else 1)
PY
"$infer" inspect "$run/best.h5"
"$infer" export-onnx "$run/best.h5" -o "$run/model.onnx"
# The same rows through ONNX Runtime (onnxruntime-node, installed by
# install-deps), against the job's CSV.
/usr/bin/python3 - "$ae_data/churn.h5" "$run" <<'PY'
import h5py, sys
f = h5py.File(sys.argv[1], "r")
latest = f.attrs["latest"]
latest = latest.decode() if isinstance(latest, bytes) else str(latest)
f["versions"][latest]["features"][:].astype("<f4").tofile(sys.argv[2] + "/rows.f32")  # v6: raw
PY
node "$top/mpi_trainer/inference/ort/ort_score.mjs" score --model "$run/model.onnx" \
  --input "$run/rows.f32" --output "$run/ort.f32" --ort-dir "$top/build/ort"
/usr/bin/python3 - "$run" <<'PY'
import numpy as np, sys
run = sys.argv[1]
hpcml = np.loadtxt(run + "/scores.csv", delimiter=",", skiprows=1, usecols=(2, 3))
ort = np.fromfile(run + "/ort.f32", dtype="<f4").reshape(hpcml.shape)
d = np.abs(hpcml - ort).max()
print(f"demo: {len(ort)} rows, hpcml-infer (the job's CSV) against ONNX Runtime: max |diff| {d:.2e}")
sys.exit(0 if d <= 1e-5 else 1)
PY

say "7. $user tries to read zone eu's data from an ae node"
eu_file=$eu_data/sales.csv
echo "--- sbatch --constraint=zone-ae --dataset=$eu_file: refused at submission"
if out=$(as_user sbatch -C zone-ae --dataset="$eu_file" --output=/dev/null --wrap "cat $eu_file" 2>&1); then
  fail "a job with eu data was accepted for the ae nodes: $out"
fi
echo "$out"
echo "--- the same step through a slurm.conf of the user's own (no guard on the submit host): the node denies it"
own=$guard/users-own-conf
install -d -m 0755 "$own"
echo "# no plugins" >"$own/plugstack.conf"
sed "s|^PlugStackConfig=.*|PlugStackConfig=$own/plugstack.conf|" "$SLURM_CONF" >"$own/slurm.conf"
chmod 0644 "$own/slurm.conf" "$own/plugstack.conf"
out=$(as_user env SLURM_CONF="$own/slurm.conf" _SLURM_SPANK_OPTION_hpcml_guard_dataset="$eu_file" \
  srun -w node1 cat "$eu_file" 2>&1 || true)
echo "$out"
echo "--- a plain read on an ae node, no --dataset: not in the step's view"
out2=$(as_user srun -C zone-ae cat "$eu_file" 2>&1 || true)
echo "$out2"
[[ $out$out2 != *EU-ONLY* ]] || fail "zone eu's data reached an ae node"
echo "--- the denial in the audit log:"
grep '"decision":"deny"' "$audit" | grep -F "$eu_file" | tail -n1 || fail "the denial is not in the audit log"
"$bin/spank/hpcml-audit" verify "$audit"
# A collector off the node (the controller) records the head; an auditor
# checks the node's log against it (docs/guard.md, the witness).
"$bin/spank/hpcml-audit" witness --node node1 --head "$audit.head" "$guard/witness"
"$bin/spank/hpcml-audit" verify --witness "$guard/witness" --node node1 "$audit"
echo
echo "demo: ok. Model: $run/best.h5 (the best validated; the last step's: $run/model.h5; ONNX: $run/model.onnx), scores: $run/scores.csv. Audit log: $audit."
echo "demo: the cluster is still up: eval \"\$(tests/cluster/hpcml-cluster env)\"; stop it with tests/cluster/hpcml-cluster down"
