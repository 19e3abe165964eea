#!/usr/bin/python3
"""Training throughput of hpcml-train --model gbdt against python3-xgboost.

Usage:
  /usr/bin/python3 bench/trees/gbdt_bench.py [--rows 2000000] [--build build/default]
      [--work /tmp/hpcml-gbdt-bench] [--rounds 50] [--threads 1,2]

A synthetic table of --rows rows and 50 columns (40 numbers, 5% of them
missing, and 10 category columns of 3 to 200 values) and a binary label is
written once as CSV and ingested by hpcml-fcache. Then, per thread count:

  hpcml   hpcml-train --model gbdt --rounds R --threads T on the version: the
          rows stream from the feature set into XGBoost's quantile matrix.
          Timed: the process's wall time, and the part after the data is
          in (its metrics file's load_seconds subtracted).
  python  python3-xgboost 1.7.4 given the same rows in memory (read from the
          feature set before the clock starts, categories as pandas
          'category' with the training dictionary): QuantileDMatrix, then
          xgb.train for R rounds with the same parameters. Timed: matrix
          and training.

Printed: seconds per method and the ratio python / hpcml (>= 1: hpcml is
as fast or faster) for the whole run and for the rounds alone; the goal is
>= 0.9. Both models' predictions on the first 10000 rows are compared
(the same library, the same data: they should agree).

With --ranks N (issue 39): hpcml-train on N ranks of one thread each,
started by --launcher (default "mpirun --oversubscribe -n N"; on the test
cluster, as root with its SLURM_CONF: "srun -N2 -n2 --mpi=pmix -C zone-ae"
for two nodes), against one rank of one thread and one rank of N threads
in the same run. On a machine of N cores the N-rank run and the one rank
of N threads use the same cores, so their ratio is the cost of XGBoost's
collective (sketch merge, histogram allreduce per tree level over TCP),
not a speed-up; the one-thread rank is the serial baseline.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import h5py
import numpy as np
import pandas as pd
import xgboost as xgb


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p.add_argument("--build", default=os.path.join(repo, "build/default"))
    p.add_argument("--work", default="/tmp/hpcml-gbdt-bench")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--ranks", type=int, default=0, help="also time N ranks (see above)")
    p.add_argument("--launcher", default="", help="command prefix for --ranks")
    p.add_argument("--reuse", action="store_true",
                   help="keep --work's table from an earlier run of the same --rows")
    return p.parse_args()


def write_table(path, rows):
    rng = np.random.default_rng(11)
    cols = {"id": np.arange(rows), "ts": 1700000000 + np.arange(rows)}
    z = np.zeros(rows)
    for j in range(40):
        x = rng.normal(0, 1, rows).astype(np.float32)
        z += x * (0.3 if j < 8 else 0.02)
        x[rng.random(rows) < 0.05] = np.nan
        cols[f"n{j}"] = x
    for j in range(10):
        k = [3, 5, 8, 12, 20, 30, 50, 80, 120, 200][j]
        codes = rng.integers(0, k, rows)
        effect = rng.normal(0, 0.5, k)
        z += effect[codes]
        cols[f"c{j}"] = pd.Categorical.from_codes(codes, [f"v{i}" for i in range(k)])
    cols["label"] = np.where(z + rng.logistic(0, 1, rows) > 0, "yes", "no")
    pd.DataFrame(cols).to_csv(path, index=False, float_format="%.6g")


def frame(fs, version):
    text = lambda v: v.decode() if isinstance(v, bytes) else v
    with h5py.File(fs, "r") as f:
        g = f["versions/" + version]
        names = [text(n) for n in g.attrs["feature_names"]]
        kinds = [text(k) for k in g.attrs["feature_types"]]
        x = g["features"][()]
        y = g["labels"][()].astype(np.int32)
        flat = [text(c) for c in g["categories"][()]]
        counts = [int(c) for c in g.attrs["category_counts"]]
    cols, at = {}, 0
    for j, (n, k, c) in enumerate(zip(names, kinds, counts)):
        d, at = flat[at:at + c], at + c
        if k == "category":
            codes = np.where(np.isnan(x[:, j]), -1, x[:, j]).astype(np.int32)
            cols[n] = pd.Categorical.from_codes(codes, d)
        else:
            cols[n] = x[:, j]
    return pd.DataFrame(cols), y


def main():
    a = parse_args()
    fcache = os.path.join(a.build, "featurecache/hpcml-fcache")
    train = os.path.join(a.build, "mpi_trainer/trainer/hpcml-train")
    csv, fs = os.path.join(a.work, "table.csv"), os.path.join(a.work, "table.h5")
    if not (a.reuse and os.path.exists(fs)):
        shutil.rmtree(a.work, ignore_errors=True)
        os.makedirs(a.work)
        t0 = time.perf_counter()
        write_table(csv, a.rows)
        print(f"gbdt_bench: {a.rows} rows x 50 columns written in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        subprocess.run([fcache, "ingest", fs, "--csv", csv, "--entity", "id", "--timestamp", "ts",
                        "--label", "label", "--zone", "bench", "--classification", "internal"],
                       check=True, capture_output=True)
        print(f"  ingested in {time.perf_counter() - t0:.1f} s")
    print(f"gbdt_bench: {a.rows} rows; xgboost {xgb.__version__}, {os.cpu_count()} cores, "
          f"{a.rounds} rounds, depth 6, eta 0.3, max_bin 256")
    x, y = frame(fs, "v1")
    probe = x.iloc[:10000]
    print(f"  {'threads':>7} {'hpcml s':>8} {'(rounds)':>8} {'python s':>8} {'(rounds)':>8} "
          f"{'ratio':>6} {'(rounds)':>8} {'max |dp|':>9}")
    for threads in [int(t) for t in a.threads.split(",")]:
        model, metrics = os.path.join(a.work, "g.h5"), os.path.join(a.work, "m.jsonl")
        t0 = time.perf_counter()
        subprocess.run([train, "--model", "gbdt", "--data", fs, "--outputs", "2", "--rounds",
                        str(a.rounds), "--threads", str(threads), "--seed", "1",
                        "--log-interval", "1000", "--metrics", metrics, "--output", model],
                       check=True, capture_output=True)
        h_total = time.perf_counter() - t0
        done = [json.loads(l) for l in open(metrics)][-1]
        h_rounds = h_total - done["load_seconds"]
        t0 = time.perf_counter()
        dm = xgb.QuantileDMatrix(x, y, enable_categorical=True, nthread=threads, max_bin=256)
        t1 = time.perf_counter()
        booster = xgb.train({"tree_method": "hist", "objective": "binary:logistic",
                             "nthread": threads, "seed": 1, "max_bin": 256}, dm, a.rounds)
        p_total, p_rounds = time.perf_counter() - t0, time.perf_counter() - t1
        with h5py.File(model, "r") as f:
            mine = xgb.Booster(model_file=bytearray(f["booster"][()]))
        pd_probe = xgb.DMatrix(probe, enable_categorical=True)
        d = float(np.abs(mine.predict(pd_probe) - booster.predict(pd_probe)).max())
        print(f"  {threads:>7} {h_total:8.2f} {h_rounds:8.2f} {p_total:8.2f} {p_rounds:8.2f} "
              f"{p_total / h_total:6.3f} {p_rounds / h_rounds:8.3f} {d:9.1e}", flush=True)
    if a.ranks > 1:
        ranks(a, train, fs)


def ranks(a, train, fs):
    """One rank of 1 and of N threads against N ranks of 1 thread (see the docstring)."""
    n = a.ranks
    launcher = (a.launcher or f"mpirun --oversubscribe -n {n}").split()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    print(f"gbdt_bench --ranks {n}: launcher {' '.join(launcher)}")
    print(f"  {'run':>22} {'total s':>8} {'rounds s':>8} {'s/round':>8} {'max |dp| vs 1 rank':>18}"
          "  (total: the launch included; rounds: the sum of the per-round times)")
    results = {}
    for name, prefix, threads in [("1 rank x 1 thread", [], 1),
                                  (f"1 rank x {n} threads", [], n),
                                  (f"{n} ranks x 1 thread", launcher, 1)]:
        model, metrics = os.path.join(a.work, f"r{len(results)}.h5"), os.path.join(a.work, "rm.jsonl")
        t0 = time.perf_counter()
        run = subprocess.run(prefix + [train, "--model", "gbdt", "--data", fs, "--outputs", "2",
                                       "--rounds", str(a.rounds), "--threads", str(threads),
                                       "--seed", "1", "--log-interval", "1000", "--metrics",
                                       metrics, "--output", model], env=env, capture_output=True,
                             text=True)
        if run.returncode != 0:
            sys.exit(f"gbdt_bench: {name} failed:\n{run.stderr[-3000:]}")
        total = time.perf_counter() - t0
        # The rounds alone: the sum of the metrics file's per-round seconds
        # (no launcher, start-up, data or model writing).
        lines = [json.loads(l) for l in open(metrics)]
        results[name] = (total, sum(l["seconds"] for l in lines if "round" in l), model)
    x, _ = frame(fs, "v1")
    probe = xgb.DMatrix(x.iloc[:10000], enable_categorical=True)
    preds = {}
    for name, (_, _, model) in results.items():
        with h5py.File(model, "r") as f:
            preds[name] = xgb.Booster(model_file=bytearray(f["booster"][()])).predict(probe)
    first = next(iter(preds.values()))
    for name, (total, rounds, _) in results.items():
        d = float(np.abs(preds[name] - first).max())
        print(f"  {name:>22} {total:8.2f} {rounds:8.2f} {rounds / a.rounds:8.3f} {d:18.1e}")
    one_n = results[f"1 rank x {n} threads"][1]
    n_one = results[f"{n} ranks x 1 thread"][1]
    print(f"  rounds: {n} ranks / 1 rank of {n} threads = {n_one / one_n:.3f} "
          f"(the collective's cost on the same cores); 1 rank x 1 thread / {n} ranks = "
          f"{results['1 rank x 1 thread'][1] / n_one:.3f}")


if __name__ == "__main__":
    sys.exit(main())
