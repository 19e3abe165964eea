#!/usr/bin/python3
"""Example: XGBoost (Debian's python3-xgboost) on an hpcml feature set, with
the model's lineage recorded. One process:

    /usr/bin/python3 examples/python/train_xgboost.py --train-version v1 \
        --val-version v2 --out $HOME/runs/churn.json       # inside a guarded job

examples/python/train-xgboost.sbatch has the sbatch lines. The versions are
read through hpcml (the guard's checks) as pandas DataFrames: category
columns as categoricals, which XGBoost splits on directly; missing cells as
missing. The validation version's categories are mapped by name onto the
training version's (each version has its own dictionary). The model is
XGBoost's JSON, and hpcml-infer inspect reads its lineage. (hpcml-train
--model gbdt trains the same kind of model across nodes, preemptible.)
"""
import argparse
import os

import numpy as np
import pandas as pd
import xgboost as xgb

import hpcml


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--data", default=os.environ.get("HPCML_DATASETS", "").split(",")[0],
                   help="the feature set (default: the first set the guard approved)")
    p.add_argument("--train-version", default="latest")
    p.add_argument("--val-version", help="validation version: its log loss stops training early")
    p.add_argument("--out", required=True, help="the model (XGBoost JSON)")
    p.add_argument("--rounds", type=int, default=500)
    p.add_argument("--max-depth", type=int, default=6)
    p.add_argument("--eta", type=float, default=0.1)
    p.add_argument("--early-stop", type=int, default=50, help="rounds without a better val loss")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int,
                   default=int(os.environ.get("SLURM_CPUS_PER_TASK", os.cpu_count() or 1)))
    a = p.parse_args()
    if not a.data:
        p.error("--data: no feature set (submit with --dataset=SET, or pass --data)")
    return a


def frame(fs, version, like=None):
    """(features, label codes, info) of a version; with `like`, category
    columns take `like`'s categories (values `like` never had: missing)."""
    info = fs.info(version)
    df = fs.to_pandas(info["version"])
    x = df[info["feature_names"]].copy()
    for c in x.columns:
        if isinstance(x[c].dtype, (pd.Int64Dtype, pd.BooleanDtype)):
            x[c] = x[c].astype("float64")  # nullable ints and bools: numbers, missing as NaN
        elif like is not None and isinstance(x[c].dtype, pd.CategoricalDtype):
            x[c] = x[c].cat.set_categories(like[c].cat.categories)
    y = df[info["label"]]
    if not isinstance(y.dtype, pd.CategoricalDtype):
        raise SystemExit(f"{fs.path} {info['version']}: this example trains a classifier")
    return x, y, info


def main():
    a = parse_args()
    fs = hpcml.FeatureSet(a.data)  # inside a guarded job: approved, in the job's zone
    x, y, info = frame(fs, a.train_version)
    classes = list(y.cat.categories)
    binary = len(classes) == 2
    params = {"tree_method": "hist", "max_depth": a.max_depth, "eta": a.eta, "seed": a.seed,
              "nthread": a.threads, "max_cat_to_onehot": 1,
              "objective": "binary:logistic" if binary else "multi:softprob",
              "eval_metric": ["logloss", "auc"] if binary else ["mlogloss"]}
    if not binary:
        params["num_class"] = len(classes)
    dtrain = xgb.DMatrix(x, label=y.cat.codes, enable_categorical=True)
    evals = [(dtrain, "train")]
    if a.val_version:
        vx, vy, vinfo = frame(fs, a.val_version, like=x)
        vy = vy.cat.set_categories(classes)  # class codes by name, as in training
        if vy.isna().any():
            raise SystemExit(f"{a.data} {vinfo['version']}: a class the training version lacks")
        evals.append((xgb.DMatrix(vx, label=vy.cat.codes, enable_categorical=True), "val"))
    history = {}
    booster = xgb.train(params, dtrain, a.rounds, evals=evals, evals_result=history,
                        early_stopping_rounds=a.early_stop if a.val_version else None,
                        verbose_eval=False)
    rounds = booster.best_iteration + 1 if a.val_version else a.rounds
    loss = "logloss" if binary else "mlogloss"
    tmp = a.out + ".tmp.json"
    booster[:rounds].save_model(tmp)  # the best round's trees
    os.replace(tmp, a.out)
    validation = None
    if a.val_version:
        validation = {"version": vinfo["version"],
                      **{m: history["val"][m][rounds - 1] for m in history["val"]}}
    hpcml.record_lineage(a.out, data=a.data, version=info["version"],
                         framework=f"xgboost {xgb.__version__}",
                         settings={**params, "rounds": a.rounds, "early_stop": a.early_stop},
                         steps=rounds, first_loss=history["train"][loss][0],
                         final_loss=history["train"][loss][rounds - 1], validation=validation)
    shown = ", ".join(f"val {m} {v:.4f}" for m, v in (validation or {}).items() if m != "version")
    print(f"{info['rows']} rows of {a.data} {info['version']}, zone "
          f"{os.environ.get('HPCML_ZONE', 'none')}: {rounds} rounds; {shown}; model {a.out}")


if __name__ == "__main__":
    main()
