#!/usr/bin/python3
"""A GBDT model's ONNX export in ONNX Runtime against XGBoost's own predictions.

  gbdt_onnx_check.py --model g.h5 --onnx g.onnx --csv rows.csv --runner ort_score.mjs
      --node node --ort-dir DIR [--tolerance 1e-5] [--work DIR] [--infer hpcml-infer]

The rows go to ONNX Runtime as the CSV has them: numbers as floats (empty:
NaN), category columns as their raw strings ("" where empty, values the
model never saw included). XGBoost (python3-xgboost, the same library
hpcml trains with) predicts from the booster stored in the model file, on
the rows encoded as the model's lineage says (a category's index in its
vocabulary; anything else missing; numbers standardised first where the
training version was). Probabilities (or predictions) must
agree to --tolerance; with --infer, hpcml-infer's scores of the same CSV
too (its own GBDT engine). Prints the largest differences; exits 1 on a
mismatch.
"""
import argparse
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pandas as pd
import xgboost as xgb

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--onnx", required=True)
ap.add_argument("--csv", required=True)
ap.add_argument("--runner", required=True)
ap.add_argument("--node", default="node")
ap.add_argument("--ort-dir", required=True)
ap.add_argument("--tolerance", type=float, default=1e-5)
ap.add_argument("--work", default=".")
ap.add_argument("--infer", help="hpcml-infer: also score the CSV with it and compare")
a = ap.parse_args()

with h5py.File(a.model, "r") as f:
    booster_bytes = bytearray(f["booster"][()].tobytes())
    lineage = json.loads(f.attrs["lineage"])
    objective = f.attrs["objective"]
    objective = objective.decode() if isinstance(objective, bytes) else objective
    outputs = int(f.attrs["outputs"])
columns = lineage["input"]["encoding"]["columns"]
raw = pd.read_csv(a.csv, dtype=str, keep_default_na=False)
n = len(raw)

# XGBoost's input: numbers as they are, categories by vocabulary index.
x = np.empty((n, len(columns)), dtype=np.float32)
types = []
for j, c in enumerate(columns):
    cells = raw[c["name"]]
    if c["kind"] == "category":
        index = {v: i for i, v in enumerate(c["vocabulary"])}
        x[:, j] = [index.get(v, np.nan) for v in cells]
        types.append("c")
    else:
        x[:, j] = [float(v) if v.strip() not in ("", "NA") else np.nan for v in cells]
        types.append("q")
# A model trained on a derive's standardised version takes raw numbers
# standardised first: float32 cell, (x - mean) / scale in double, to float32.
raw_x = x.copy()
inp = lineage["input"]
for j, on in enumerate(inp.get("standardized") or []):
    if on:
        x[:, j] = ((x[:, j].astype(np.float64) - inp["mean"][j]) / inp["scale"][j]).astype(np.float32)
booster = xgb.Booster(model_file=booster_bytes)
want = booster.predict(xgb.DMatrix(x, feature_names=[c["name"] for c in columns], feature_types=types,
                                   enable_categorical=True))
if objective == "binary:logistic":
    want = np.stack([1 - want, want], axis=1)
want = want.reshape(n, -1)

# ONNX Runtime's input: the CSV's cells.
numbers = [j for j, c in enumerate(columns) if c["kind"] != "category"]
inputs = json.loads(subprocess.run(
    [a.node, "-e", "const o=require('" + os.path.join(a.ort_dir, "node_modules", "onnxruntime-node")
     + "');o.InferenceSession.create(process.argv[1]).then(s=>console.log(JSON.stringify(s.inputNames)))",
     a.onnx], capture_output=True, text=True, check=True).stdout)
strings = {}
for name, j in zip([i for i in inputs if i != "numbers"], [j for j, c in enumerate(columns) if c["kind"] == "category"]):
    strings[name] = list(raw[columns[j]["name"]])
num_path, str_path, out_path = (os.path.join(a.work, p) for p in ("onnx_numbers.f32", "onnx_strings.json", "onnx_out.f32"))
raw_x[:, numbers].astype("<f4").tofile(num_path)
with open(str_path, "w") as fh:
    json.dump(strings, fh)
cmd = [a.node, a.runner, "score", "--model", a.onnx, "--output", out_path, "--strings", str_path,
       "--ort-dir", a.ort_dir]
if numbers:
    cmd += ["--input", num_path]
p = subprocess.run(cmd, capture_output=True, text=True)
if p.returncode != 0:
    sys.exit(f"gbdt_onnx_check: ONNX Runtime failed:\n{p.stdout}\n{p.stderr}")
got = np.fromfile(out_path, dtype="<f4").reshape(n, -1)
if got.shape != want.shape:
    sys.exit(f"gbdt_onnx_check: ONNX Runtime gave {got.shape}, XGBoost {want.shape}")
diff = float(np.max(np.abs(got - want)))
print(f"{objective}, {n} rows, {outputs} outputs: largest |ONNX Runtime - XGBoost| = {diff:.3g}")
if not diff <= a.tolerance:
    worst = int(np.argmax(np.max(np.abs(got - want), axis=1)))
    sys.exit(f"gbdt_onnx_check: row {worst}: ONNX Runtime {got[worst]}, XGBoost {want[worst]} "
             f"(tolerance {a.tolerance})")

if a.infer:
    scored = os.path.join(a.work, "infer_scores.csv")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run([a.infer, "score", "--model", a.model, "--csv", a.csv, "--output", scored],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"gbdt_onnx_check: hpcml-infer score failed:\n{p.stdout}\n{p.stderr}")
    out = pd.read_csv(scored)
    mine = out[[c for c in out.columns if c != "class"]].to_numpy(dtype=np.float64)[:, :want.shape[1]]
    d2 = float(np.max(np.abs(mine - want)))
    print(f"{objective}: largest |hpcml-infer - XGBoost| = {d2:.3g}")
    if not d2 <= a.tolerance:
        sys.exit(f"gbdt_onnx_check: hpcml-infer differs from XGBoost by {d2}")
