#!/usr/bin/python3
"""Test ROC AUC of the hpcml MLP against logistic regression and XGBoost.

Usage:
  /usr/bin/python3 bench/quality/quality_bench.py --tables DIR [--splits K]
      [--build build/default] [--work DIR] [--quick] [--datasets a,b]

DIR holds the CSVs of export_tables.R. For each table, K seeded, stratified
70/15/15 train/validation/test splits are written once as three CSVs
(WORK/<table>/split<k>/{train,val,test}.csv, pandas to_csv, missing cells
empty) and every tool reads those files:

  lr   scikit-learn LogisticRegression; numerics: median imputation and
       standard scaling; text columns: one-hot, handle_unknown='ignore'.
  xgb  xgboost.XGBClassifier, text columns as pandas 'category'
       (enable_categorical, tree_method='hist'), early stopping on val.
  mlp  hpcml: hpcml-fcache ingest of each CSV as it is (three versions),
       hpcml-train on the training version with the validation version and
       early stopping (the trainer's input encoding standardises, imputes
       with indicators and embeds the category columns), hpcml-infer score
       of the raw test CSV with the best model; the AUC from its
       probability column of the positive class.
  gbdt hpcml: hpcml-train --model gbdt on the same versions with the xgb
       peer's parameters (1000 rounds, early stopping after 50, 2 threads,
       its seed), hpcml-infer score of the raw test CSV.

Each tool's test AUC is sklearn.metrics.roc_auc_score(test labels, its
probability of the positive class, the second class name in byte order, as
hpcml-fcache orders label classes). The report per table: mean AUC with a 95%
t interval over the splits, mean train time, and the gaps MLP - LR and
MLP - XGB against the goal (MLP >= LR - 0.01 and MLP >= XGB - 0.03).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import scipy.stats
import sklearn
import xgboost
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

# Table name -> label column (as export_tables.R writes them).
TABLES = {"hmda": "deny", "creditcard": "card", "diamonds": "expensive", "pima2": "diabetes"}
ENTITY, TIME = "id", "ts"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tables", required=True, help="directory of export_tables.R's CSVs")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p.add_argument("--build", default=os.path.join(repo, "build/default"),
                   help="hpcml build directory (default: build/default of this checkout)")
    p.add_argument("--work", default="/tmp/hpcml-quality", help="scratch directory (emptied)")
    p.add_argument("--splits", type=int, default=5, help="random splits per table")
    p.add_argument("--seed", type=int, default=1, help="seed of split k is seed + k")
    p.add_argument("--datasets", default=",".join(TABLES), help="comma-separated tables")
    p.add_argument("--quick", action="store_true", help="smoke run: 2 splits, few steps")
    a = p.parse_args()
    if a.quick:
        a.splits = 2
    return a


class Hpcml:
    """Paths of the hpcml tools and the settings a newcomer would pass."""

    def __init__(self, build, quick):
        self.fcache = os.path.join(build, "featurecache/hpcml-fcache")
        self.train = os.path.join(build, "mpi_trainer/trainer/hpcml-train")
        self.infer = os.path.join(build, "mpi_trainer/inference/hpcml-infer")
        for tool in (self.fcache, self.train, self.infer):
            if not os.access(tool, os.X_OK):
                sys.exit(f"quality_bench: {tool} is not an executable; pass --build")
        steps = 200 if quick else 2000
        # docs/trainer.md's recipe for a table: a small MLP (32,32 relu),
        # AdamW at 3e-3 with weight decay 0.1, validation every 20 steps and
        # early stopping after 10 evaluations without a lower log loss.
        self.settings = ["--outputs", "2", "--hidden", "32,32", "--activation", "relu",
                         "--batch", "128", "--lr", "3e-3", "--weight-decay", "0.1",
                         "--steps", str(steps)]
        self.val_settings = ["--eval-interval", "20", "--early-stop-patience", "10"]

    def run(self, argv, ok_fail=False):
        """Runs argv; returns (returncode, output). Exits on failure unless ok_fail."""
        r = subprocess.run(argv, capture_output=True, text=True)
        out = r.stdout + r.stderr
        if r.returncode != 0 and not ok_fail:
            sys.exit(f"quality_bench: failed ({r.returncode}): {' '.join(argv)}\n{out}")
        return r.returncode, out


def write_splits(frame, label, k, seed, outdir):
    """Writes split k (70/15/15, stratified on label) as train/val/test.csv in outdir."""
    os.makedirs(outdir, exist_ok=True)
    train, rest = train_test_split(frame, test_size=0.30, stratify=frame[label],
                                   random_state=seed + k)
    val, test = train_test_split(rest, test_size=0.50, stratify=rest[label],
                                 random_state=seed + k)
    for name, part in (("train", train), ("val", val), ("test", test)):
        part.to_csv(os.path.join(outdir, name + ".csv"), index=False)


def read_split(outdir, label, positive):
    """Returns {part: (X, y)} read back from a split's CSVs; y is 1 for the positive class."""
    parts = {}
    for name in ("train", "val", "test"):
        d = pd.read_csv(os.path.join(outdir, name + ".csv"))
        y = (d[label] == positive).astype(int).to_numpy()
        parts[name] = (d.drop(columns=[ENTITY, TIME, label]), y)
    return parts


def text_columns(x):
    return [c for c in x.columns if x[c].dtype == object]


def run_lr(parts, seed):
    """The newcomer's scikit-learn pipeline. Returns (test probabilities, fit seconds)."""
    xtr, ytr = parts["train"]
    cats = text_columns(xtr)
    nums = [c for c in xtr.columns if c not in cats]
    model = Pipeline([
        ("prep", ColumnTransformer([
            ("num", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), nums),
            ("cat", OneHotEncoder(handle_unknown="ignore"), cats)])),
        ("lr", LogisticRegression(max_iter=1000, random_state=seed))])
    t0 = time.perf_counter()
    model.fit(xtr, ytr)
    seconds = time.perf_counter() - t0
    return model.predict_proba(parts["test"][0])[:, 1], seconds


def run_xgb(parts, seed):
    """XGBoost with native categoricals and early stopping on the validation split."""
    cats = text_columns(parts["train"][0])
    levels = {c: sorted(parts["train"][0][c].dropna().unique()) for c in cats}

    def typed(x):  # text columns as 'category' with the training split's levels
        x = x.copy()
        for c in cats:
            x[c] = pd.Categorical(x[c], categories=levels[c])
        return x

    xtr, ytr = typed(parts["train"][0]), parts["train"][1]
    xva, yva = typed(parts["val"][0]), parts["val"][1]
    model = xgboost.XGBClassifier(tree_method="hist", enable_categorical=True,
                                  n_estimators=1000, early_stopping_rounds=50,
                                  n_jobs=2, random_state=seed)
    t0 = time.perf_counter()
    model.fit(xtr, ytr, eval_set=[(xva, yva)], verbose=False)
    seconds = time.perf_counter() - t0
    return model.predict_proba(typed(parts["test"][0]))[:, 1], seconds


def info(h, fs, version):
    """`hpcml-fcache info --json` of one version, parsed."""
    return json.loads(h.run([h.fcache, "info", fs, version, "--json"])[1])


def latest(h, fs):
    """Name of the newest version of fs (from `ls`: its first line ends 'latest vN')."""
    return h.run([h.fcache, "ls", fs])[1].splitlines()[0].split()[-1]


def run_hpcml(h, split_dir, label, positive, seed, notes):
    """The hpcml path on one split: ingest, train, score the raw test CSV.

    Returns {"mlp": (probability of `positive` per test row, train seconds)}.
    """
    fs = os.path.join(split_dir, "set.h5")
    t0 = time.perf_counter()
    raw = {}
    for part in ("train", "val"):
        h.run([h.fcache, "ingest", fs, "--csv", os.path.join(split_dir, part + ".csv"),
               "--entity", ENTITY, "--timestamp", TIME, "--label", label,
               "--zone", "bench", "--classification", "internal"])
        raw[part] = latest(h, fs)
    meta = info(h, fs, raw["train"])
    notes.setdefault("category", [n for n, k in zip(meta["feature_names"], meta["feature_types"])
                                  if k == "category"])
    notes.setdefault("prep_s", []).append(time.perf_counter() - t0)
    model = os.path.join(split_dir, "mlp.h5")
    argv = [h.train, "--data", fs, "--data-version", raw["train"], *h.settings,
            "--seed", str(seed), "--data-seed", str(seed), "--log-interval", "1000",
            "--output", model, "--metrics", os.path.join(split_dir, "mlp.jsonl"),
            "--val-version", raw["val"], *h.val_settings]
    t0 = time.perf_counter()
    h.run(argv)
    seconds = time.perf_counter() - t0
    scores = os.path.join(split_dir, "mlp-scores.csv")
    h.run([h.infer, "score", "--model", model.replace(".h5", ".best.h5"),
           "--csv", os.path.join(split_dir, "test.csv"), "--keep", ENTITY, "--output", scores])
    scored = pd.read_csv(scores)
    test_ids = pd.read_csv(os.path.join(split_dir, "test.csv"))[ENTITY].to_numpy()
    if not np.array_equal(scored[ENTITY].to_numpy(), test_ids):
        sys.exit(f"quality_bench: {scores}: rows are not test.csv's, in its order")
    column = f"p_{positive}"
    if column not in scored.columns:
        sys.exit(f"quality_bench: {scores} has no column {column}: {list(scored.columns)}")
    results = {"mlp": (scored[column].to_numpy(), seconds)}
    # Trees with the xgb peer's parameters (XGBoost's defaults, 1000 rounds,
    # early stopping after 50, 2 threads, its seed): the same library, so the
    # same AUC is expected.
    gbdt = os.path.join(split_dir, "gbdt.h5")
    t0 = time.perf_counter()
    h.run([h.train, "--model", "gbdt", "--data", fs, "--data-version", raw["train"],
           "--val-version", raw["val"], "--outputs", "2", "--rounds", "1000",
           "--early-stop-patience", "50", "--threads", "2", "--seed", str(seed),
           "--log-interval", "1000", "--output", gbdt])
    seconds = time.perf_counter() - t0
    scores = os.path.join(split_dir, "gbdt-scores.csv")
    h.run([h.infer, "score", "--model", gbdt, "--csv", os.path.join(split_dir, "test.csv"),
           "--keep", ENTITY, "--output", scores])
    results["gbdt"] = (pd.read_csv(scores)[column].to_numpy(), seconds)
    return results


def interval(values):
    """Mean and half-width of the 95% t interval over the splits."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return v.mean(), float("nan")
    return v.mean(), scipy.stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))


def report(table, rows, aucs, times, notes):
    print(f"\n== {table}: {rows} rows; category columns: "
          f"{', '.join(notes['category']) or 'none'}")
    print(f"   {'method':<9} {'test AUC':>8} {'95% CI':>17} {'train s':>8}")
    for m in aucs:
        mean, half = interval(aucs[m])
        print(f"   {m:<9} {mean:8.4f} [{mean - half:.4f}, {mean + half:.4f}] "
              f"{np.mean(times[m]):8.2f}")
    print(f"   hpcml-fcache ingests per split: {np.mean(notes['prep_s']):.2f} s "
          "(not in the MLP's train time)")
    if "gbdt" in aucs:
        d = max(abs(a - b) for a, b in zip(aucs["gbdt"], aucs["xgb"]))
        print(f"   GBDT - XGB: largest per-split AUC difference {d:.1e} (the same library: 0 expected)")
    lr, xgb = np.mean(aucs["lr"]), np.mean(aucs["xgb"])
    a = np.mean(aucs["mlp"])
    ok = a >= lr - 0.01 and a >= xgb - 0.03
    print(f"   MLP - LR {a - lr:+.4f} (goal >= -0.01), MLP - XGB {a - xgb:+.4f} "
          f"(goal >= -0.03): {'met' if ok else 'NOT met'}")


def main():
    a = parse_args()
    h = Hpcml(a.build, a.quick)
    print(f"quality_bench: {a.splits} splits (70/15/15, stratified, seeds {a.seed}.."
          f"{a.seed + a.splits - 1}); scikit-learn {sklearn.__version__}, "
          f"xgboost {xgboost.__version__}, {os.cpu_count()} cores")
    print("  lr : LogisticRegression(max_iter=1000); median impute + StandardScaler; "
          "OneHotEncoder(handle_unknown='ignore')")
    print("  xgb: XGBClassifier(tree_method='hist', enable_categorical=True, "
          "n_estimators=1000, early_stopping_rounds=50, n_jobs=2), other defaults")
    print(f"  mlp: hpcml-train {' '.join(h.settings)} {' '.join(h.val_settings)} "
          "on the raw training version; hpcml-infer score --csv of the raw test split")
    shutil.rmtree(a.work, ignore_errors=True)
    for table in a.datasets.split(","):
        label = TABLES[table]
        path = os.path.join(a.tables, table + ".csv")
        if not os.path.exists(path):
            print(f"\n== {table}: {path} missing (export_tables.R skipped it), not measured")
            continue
        frame = pd.read_csv(path, index_col=0)  # R's row names
        positive = sorted(frame[label].astype(str).unique())[1]
        aucs, times, notes = {}, {}, {}
        for k in range(a.splits):
            split_dir = os.path.join(a.work, table, f"split{k}")
            write_splits(frame, label, k, a.seed, split_dir)
            parts = read_split(split_dir, label, positive)
            y = parts["test"][1]
            found = {"lr": run_lr(parts, a.seed + k), "xgb": run_xgb(parts, a.seed + k)}
            found.update(run_hpcml(h, split_dir, label, positive, a.seed + k, notes))
            for m, (p, t) in found.items():
                aucs.setdefault(m, []).append(roc_auc_score(y, p))
                times.setdefault(m, []).append(t)
            print(f"   {table} split {k}: " +
                  ", ".join(f"{m} {aucs[m][-1]:.4f}" for m in found), flush=True)
        report(table, len(frame), aucs, times, notes)


if __name__ == "__main__":
    main()
