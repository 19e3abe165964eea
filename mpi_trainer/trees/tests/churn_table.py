#!/usr/bin/python3
"""A churn-like table for the trees tests, as CSVs: id, ts, the label, age,
income (10% missing), plan (a category), and with --regions a second
category column (5% missing). The label follows
z = 0.04 (age - 45) - 0.8 [plan = pro] + 0.6 [plan = basic] (+ 0.3 for
three of the regions) + noise: "churn" above 1, else "stay" (--labels two),
also "upgrade" below -0.5 (three), or z itself (reg).

  churn_table.py --rows N --seed S --split train:0:2800,val:2800:3400 --dir D
      [--labels two,three,reg] [--label-name y] [--legacy-plan] [--empty-plans]
      [--regions 12] [--discrete]
--discrete: age in whole years and income in steps of 2000 (under 256
distinct values each: XGBoost's cut points are then the values themselves).
Writes D/<split>.csv, or D/<labels>-<split>.csv with more than one label kind.
"""
import argparse

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--rows", type=int, required=True)
ap.add_argument("--seed", type=int, required=True)
ap.add_argument("--split", required=True)
ap.add_argument("--dir", default=".")
ap.add_argument("--labels", default="two")
ap.add_argument("--label-name", default="label")
ap.add_argument("--legacy-plan", action="store_true", help="a fifth plan on 1%% of the rows")
ap.add_argument("--empty-plans", action="store_true", help="5%% of the plans missing")
ap.add_argument("--regions", type=int, default=0)
ap.add_argument("--discrete", action="store_true")
a = ap.parse_args()

rng = np.random.default_rng(a.seed)
n = a.rows
age = rng.uniform(18, 80, n)
income = rng.lognormal(10, 0.5, n)
if a.legacy_plan:
    plan = rng.choice(["basic", "plus", "pro", "family", "legacy"], n, p=[0.4, 0.3, 0.15, 0.14, 0.01])
else:
    plan = rng.choice(["basic", "plus", "pro", "family"], n, p=[0.4, 0.3, 0.2, 0.1])
region = rng.choice([f"r{i}" for i in range(a.regions)], n) if a.regions else None
z = 0.04 * (age - 45) - 0.8 * (plan == "pro") + 0.6 * (plan == "basic")
if a.discrete:
    age = np.floor(age)
    income = np.round(income / 2000) * 2000
if region is not None:
    z = z + 0.3 * np.isin(region, ["r1", "r5", "r7"])
z = z + rng.normal(0, 1, n)
labels = {"two": np.where(z > 1.0, "churn", "stay"),
          "three": np.where(z > 1.0, "churn", np.where(z > -0.5, "stay", "upgrade")),
          "reg": [f"{v:.4f}" for v in z]}
income[rng.random(n) < 0.1] = np.nan
if a.empty_plans:
    plan = np.where(rng.random(n) < 0.05, "", plan)
if region is not None:
    region = np.where(rng.random(n) < 0.05, "", region)
kinds = a.labels.split(",")
for kind in kinds:
    y = labels[kind]
    for part in a.split.split(","):
        name, begin, end = part.split(":")
        path = f"{a.dir}/{name}.csv" if len(kinds) == 1 else f"{a.dir}/{kind}-{name}.csv"
        with open(path, "w") as f:
            f.write(f"id,ts,{a.label_name},age,income,plan" + (",region" if region is not None else "") + "\n")
            for i in range(int(begin), int(end)):
                inc = "" if np.isnan(income[i]) else f"{income[i]:.2f}"
                extra = f",{region[i]}" if region is not None else ""
                f.write(f"{i},{1700000000 + i},{y[i]},{age[i]:.2f},{inc},{plan[i]}{extra}\n")
