#!/usr/bin/python3
"""Scoring a GBDT model: hpcml-infer, XGBoost's own predict, and ONNX Runtime
on the exported graph, in the same run (issue 39).

Usage:
  /usr/bin/python3 bench/trees/gbdt_score_bench.py [--rows 200000] [--rounds 100]
      [--build build/default] [--work /tmp/hpcml-gbdt-score-bench] [--threads 1]

A churn-like table (mpi_trainer/trees/tests/churn_table.py: 2 numbers, 2
category columns of 5 and 12 values, missing cells) is ingested; hpcml-train
fits --rounds trees of depth 6; hpcml-infer export-onnx writes the graph.
Each scorer then scores --rows rows on one core (taskset -c 0, --threads):

  xgboost      python3-xgboost's Booster.predict on a DMatrix of the encoded
               rows, built in memory before the clock starts (the trees only;
               a new DMatrix each time, since XGBoost caches predictions)
  onnxruntime  onnxruntime-node on the exported graph, fed the CSV's raw cells
               (numbers, category strings): mpi_trainer/inference/ort/ort_score.mjs
               score, batches of 4096
  hpcml-infer  hpcml-infer score --csv: parse the CSV, encode, XGBoost's
               predict, write the scores CSV

The two process-based scorers are timed on --rows and on 1,000 rows; rows/s
is (rows - 1000) / the difference, which leaves out process start-up and
the model's loading. Printed: rows/s each and the ratios to XGBoost's.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import h5py
import numpy as np
import pandas as pd
import xgboost as xgb

top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"gbdt_score_bench: {' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
    return p


def timed(cmd, env=None):
    t0 = time.perf_counter()
    run(["taskset", "-c", "0"] + cmd, env=env)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--build", default=f"{top}/build/default")
    ap.add_argument("--work", default="/tmp/hpcml-gbdt-score-bench")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    os.chdir(a.work)
    fcache = f"{a.build}/featurecache/hpcml-fcache"
    train = f"{a.build}/mpi_trainer/trainer/hpcml-train"
    infer = f"{a.build}/mpi_trainer/inference/hpcml-infer"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    n = a.rows
    run(["/usr/bin/python3", f"{top}/mpi_trainer/trees/tests/churn_table.py", "--rows", str(20000 + n),
         "--seed", "4", "--split", f"train:0:20000,score:20000:{20000 + n}", "--regions", "12",
         "--empty-plans"])
    small = pd.read_csv("score.csv", dtype=str, keep_default_na=False).head(1000)
    small.to_csv("score-small.csv", index=False)
    run(["rm", "-rf", "set.h5", "set.h5.d"])
    run([fcache, "ingest", "set.h5", "--csv", "train.csv", "--entity", "id", "--timestamp", "ts",
         "--label", "label", "--zone", "bench", "--classification", "internal"])
    run([train, "--model", "gbdt", "--data", "set.h5", "--outputs", "2", "--rounds", str(a.rounds),
         "--max-depth", "6", "--threads", "2", "--output", "model.h5"], env=env)
    run([infer, "export-onnx", "model.h5", "-o", "model.onnx"], env=env)

    with h5py.File("model.h5", "r") as f:
        booster = xgb.Booster(model_file=bytearray(f["booster"][()].tobytes()))
        columns = json.loads(f.attrs["lineage"])["input"]["encoding"]["columns"]
    booster.set_param({"nthread": a.threads})
    raw = pd.read_csv("score.csv", dtype=str, keep_default_na=False)
    x = np.empty((n, len(columns)), dtype=np.float32)
    for j, c in enumerate(columns):
        cells = raw[c["name"]]
        if c["kind"] == "category":
            index = {v: i for i, v in enumerate(c["vocabulary"])}
            x[:, j] = [index.get(v, np.nan) for v in cells]
        else:
            x[:, j] = [float(v) if v.strip() else np.nan for v in cells]
    # A new DMatrix per prediction: XGBoost caches a matrix's predictions.
    matrices = [xgb.DMatrix(x, feature_names=[c["name"] for c in columns],
                            feature_types=["c" if c["kind"] == "category" else "q" for c in columns],
                            enable_categorical=True) for _ in range(4)]
    os.sched_setaffinity(0, {0})
    booster.predict(matrices[0])  # warm-up
    t0 = time.perf_counter()
    for dm in matrices[1:]:
        want = booster.predict(dm)
    xgb_rate = 3 * n / (time.perf_counter() - t0)

    # ONNX Runtime: raw cells as the graph takes them.
    numbers = [j for j, c in enumerate(columns) if c["kind"] != "category"]
    cats = [c["name"] for c in columns if c["kind"] == "category"]
    inputs = [i["name"] for i in json.loads(run(
        ["node", "-e", "const o=require(process.argv[2]+'/node_modules/onnxruntime-node');"
         "o.InferenceSession.create(process.argv[1]).then(s=>console.log(JSON.stringify(s.inputNames.map(n=>({name:n})))))",
         "model.onnx", f"{top}/build/ort"]).stdout)]
    text_inputs = [i for i in inputs if i != "numbers"]

    def ort_files(tag, frame, xs):
        xs[:, numbers].astype("<f4").tofile(f"{tag}.f32")
        with open(f"{tag}.json", "w") as fh:
            json.dump({name: list(frame[col]) for name, col in zip(text_inputs, cats)}, fh)

    ort_files("big", raw, x)
    ort_files("small", small, x[:1000])
    ort = lambda tag: timed(["node", f"{top}/mpi_trainer/inference/ort/ort_score.mjs", "score",
                             "--model", "model.onnx", "--input", f"{tag}.f32", "--strings", f"{tag}.json",
                             "--output", f"{tag}.out", "--threads", str(a.threads), "--batch", "4096",
                             "--ort-dir", f"{top}/build/ort"])
    ort("small")
    t_big, t_small = min(ort("big") for _ in range(3)), min(ort("small") for _ in range(3))
    ort_rate = (n - 1000) / max(t_big - t_small, 1e-9)
    got = np.fromfile("big.out", dtype="<f4").reshape(n, -1)[:, 1]
    ort_diff = float(np.max(np.abs(got - want)))

    score = lambda csv: timed([infer, "score", "--model", "model.h5", "--csv", csv, "--output",
                               "scores-" + csv, "--threads", str(a.threads)], env=env)
    score("score-small.csv")
    t_big, t_small = min(score("score.csv") for _ in range(3)), min(score("score-small.csv") for _ in range(3))
    hp_rate = (n - 1000) / max(t_big - t_small, 1e-9)
    hp_diff = float(np.max(np.abs(pd.read_csv("scores-score.csv").iloc[:, 1].to_numpy() - want)))

    print(f"{n:,} rows, {a.rounds} trees of depth 6, {a.threads} thread(s), one core")
    print("| scorer | rows/s | / XGBoost | largest difference from XGBoost |")
    print("| --- | --- | --- | --- |")
    print(f"| XGBoost Booster.predict (in memory) | {xgb_rate:,.0f} | 1.00 | 0 |")
    print(f"| ONNX Runtime, exported graph (raw cells) | {ort_rate:,.0f} | {ort_rate / xgb_rate:.2f} | {ort_diff:.2g} |")
    print(f"| hpcml-infer score --csv (end to end) | {hp_rate:,.0f} | {hp_rate / xgb_rate:.2f} | {hp_diff:.2g} |")


if __name__ == "__main__":
    main()
