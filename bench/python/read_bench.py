#!/usr/bin/python3
"""Reading a feature-set version from Python: hpcml against h5py, and the
Python loader against the C++ loader (issue 40's goal: >= 0.9x both).

Usage:
  PYTHONPATH=build/default/python /usr/bin/python3 bench/python/read_bench.py
      [--rows 8000000] [--cols 32] [--work /tmp/hpcml-py-bench] [--reuse] [--repeat 3]

The set: --rows rows of --cols float columns and a binary string label,
written once through hpcml.ingest (8M x 32 float32 = 1 GiB of features) and
read once before timing (page cache). Then, best of --repeat:

  read    hpcml.FeatureSet.read(v) -> the features, labels, entity ids
          and timestamps as NumPy, against h5py reading the same four
          datasets into NumPy (f["versions/v1/features"][()], ...).
  loader  one shuffled epoch of hpcml.Loader (batch 4096, one reader
          thread), each batch touched, against the same epoch of the C++
          loader in a C++ loop (`fcache_bench epoch --file SET`, the build's
          bench/featurecache/fcache_bench).

Printed: seconds and GiB/s per reader, and the ratios h5py / hpcml and
C++ / Python for the loader; >= 0.9 meets the goal.
"""
import argparse
import os
import subprocess
import time

import h5py
import numpy as np

import hpcml


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=8_000_000)
    p.add_argument("--cols", type=int, default=32)
    p.add_argument("--work", default="/tmp/hpcml-py-bench")
    p.add_argument("--reuse", action="store_true")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "../../build/default"))
    return p.parse_args()


def make_set(path, rows, cols):
    import pandas as pd
    rng = np.random.default_rng(1)
    df = pd.DataFrame(rng.standard_normal((rows, cols)).astype(np.float32),
                      columns=[f"f{j}" for j in range(cols)])
    df.insert(0, "ts", 1_700_000_000 + np.arange(rows))
    df.insert(0, "id", np.arange(rows))
    df["label"] = np.where(df["f0"] > 0, "yes", "no")
    t0 = time.perf_counter()
    hpcml.ingest(path, df, entity="id", timestamp="ts", label="label", zone="bench",
                 classification="internal")
    print(f"read_bench: {rows} x {cols} written through hpcml.ingest in "
          f"{time.perf_counter() - t0:.1f} s")


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    a = parse_args()
    os.makedirs(a.work, exist_ok=True)
    path = os.path.join(a.work, "set.h5")
    if not (a.reuse and os.path.exists(path)):
        if os.path.exists(path):
            os.unlink(path)
        make_set(path, a.rows, a.cols)
    fs = hpcml.FeatureSet(path)
    info = fs.info("v1")
    gib = info["rows"] * len(info["feature_names"]) * 4 / 2**30
    print(f"read_bench: {info['rows']} rows x {len(info['feature_names'])} columns "
          f"({gib:.2f} GiB of features), codec {info['codec']}, hpcml {hpcml.__version__}, "
          f"h5py {h5py.__version__}")

    names = ["features", "labels", "entity_ids", "timestamps"]

    def with_hpcml():
        r = fs.read("v1")
        return [r[n] for n in names]

    def with_h5py():
        with h5py.File(path, "r") as f:
            g = f["versions/v1"]
            return [g[n][()] for n in names]

    a1, a2 = with_hpcml(), with_h5py()
    assert all(np.array_equal(p, q) for p, q in zip(a1, a2)), "hpcml and h5py read different rows"
    del a1, a2
    def h5py_two():  # features and labels only: less than hpcml.read returns
        with h5py.File(path, "r") as f:
            g = f["versions/v1"]
            return g["features"][()], g["labels"][()]

    t_h = best(with_hpcml, a.repeat)
    t_5 = best(with_h5py, a.repeat)
    t_2 = best(h5py_two, a.repeat)
    print(f"  read   hpcml (4 datasets) {t_h:7.3f} s ({gib / t_h:5.2f} GiB/s)   h5py, the same 4 "
          f"{t_5:7.3f} s   h5py / hpcml = {t_5 / t_h:.3f}")
    print(f"         h5py, features and labels only {t_2:7.3f} s   h5py / hpcml = {t_2 / t_h:.3f} "
          "(hpcml still reads ids and timestamps)")

    def py_epoch():
        total = 0.0
        for x, y in hpcml.Loader(path, "v1", rank=0, world=1, batch_rows=4096, seed=3, epochs=1):
            total += float(x[0, 0])
        return total

    t_py = best(py_epoch, a.repeat)
    run = subprocess.run([os.path.join(a.build, "bench/featurecache/fcache_bench"), "epoch",
                          "--file", path, "--batch", "4096", "--repeat", str(a.repeat)],
                         check=True, capture_output=True, text=True)
    t_c = float(run.stdout.split("epoch_seconds=")[1])
    print(f"  loader Python {t_py:7.3f} s ({gib / t_py:5.2f} GiB/s)   C++ {t_c:7.3f} s "
          f"({gib / t_c:5.2f} GiB/s)   C++ / Python = {t_c / t_py:.3f}")


if __name__ == "__main__":
    main()
