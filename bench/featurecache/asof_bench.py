#!/usr/bin/python3
"""The point-in-time join against DuckDB and pandas, in the same run.

A synthetic table (E entities, times over 10^7 s, 3 float features) of N
feature rows and N requests, written once as CSV. Then, each on pinned cores
(taskset), each writing its result to a file:
  hpcml   hpcml-fcache ingest --codec none, then asof --codec none (a new
          version: HDF5); time = the two processes, memory = the larger peak
  duckdb  @duckdb/node-api (scripts/install-deps.sh --duckdb): read_csv both,
          ASOF LEFT JOIN, COPY TO uncompressed Parquet; 1 and 2 threads
  pandas  read_csv both, merge_asof (sorted by time, by entity), to_pickle
After one untimed run of each (the CSVs in the page cache for all alike),
time is wall time (median of --repeat runs), memory the peak RSS (/usr/bin/time
%M; DuckDB's includes node's runtime, about 45 MB). Matched counts are
compared: every tool must find the same rows. The goal (issue 38): hpcml >= 1.0x
DuckDB on 1 core and on 2, at no more memory.

"As known at": the same feature rows with an availability column
(recorded_at = event_time + up to 3 days) ingested with --available and
joined with asof --known-at, against the plain join of that version (same
cores); DuckDB's ASOF JOIN takes one inequality, so it has no counterpart.

  /usr/bin/python3 bench/featurecache/asof_bench.py [--sizes 200000,2000000]
      [--entities 100000] [--repeat 3] [--dir /tmp/hpcml-asof-bench] [--build build/default]
"""
import argparse, json, os, statistics, subprocess, sys, time

import numpy as np

top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def timed(cmd, cores):
    """(wall seconds, peak RSS MiB, stdout) of cmd pinned to cores."""
    full = ["/usr/bin/time", "-f", "@@ %e %M", "taskset", "-c", cores] + cmd
    t0 = time.perf_counter()
    p = subprocess.run(full, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"asof_bench: {' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
    line = [l for l in p.stderr.splitlines() if l.startswith("@@ ")][-1]
    return wall, int(line.split()[2]) / 1024, p.stdout


def make_tables(d, n, entities):
    feats, reqs = f"{d}/features-{n}.csv", f"{d}/requests-{n}.csv"
    avail = f"{d}/features-available-{n}.csv"
    if os.path.exists(feats) and os.path.exists(reqs) and os.path.exists(avail):
        return feats, reqs, avail
    rng = np.random.default_rng(1)
    e, t, x = rng.integers(0, entities, n), rng.integers(0, 10**7, n), rng.normal(size=(n, 3))
    with open(feats, "w") as f:
        f.write("entity,event_time,f0,f1,f2\n")
        np.savetxt(f, np.column_stack([e, t, x]), fmt=["%d", "%d", "%.6f", "%.6f", "%.6f"], delimiter=",")
    late = rng.integers(0, 3 * 86400, n)
    with open(avail, "w") as f:
        f.write("entity,event_time,recorded_at,f0,f1,f2\n")
        np.savetxt(f, np.column_stack([e, t, t + late, x]),
                   fmt=["%d", "%d", "%d", "%.6f", "%.6f", "%.6f"], delimiter=",")
    re_, rt, lab = rng.integers(0, entities, n), rng.integers(0, 10**7, n), rng.integers(0, 2, n)
    with open(reqs, "w") as f:
        f.write("entity,as_of,label\n")
        np.savetxt(f, np.column_stack([re_, rt, lab]), fmt="%d", delimiter=",")
    return feats, reqs, avail


def run_hpcml(fcache, d, feats, reqs, cores, available=False, known_at=False):
    """ingest + asof; `available`: the table with recorded_at, ingested with
    --available; `known_at`: joined with --known-at."""
    h5 = f"{d}/set.h5"
    subprocess.run(["rm", "-rf", h5, h5 + ".d"], check=True)
    t1, m1, _ = timed([fcache, "ingest", h5, "--csv", feats, "--entity", "entity", "--timestamp",
                       "event_time", "--codec", "none", "--zone", "bench", "--classification",
                       "internal"] + (["--available", "recorded_at"] if available else []), cores)
    t2, m2, out = timed([fcache, "asof", h5, "--requests", reqs, "--entity", "entity", "--time",
                         "as_of", "--label", "label", "--codec", "none", "--tmpdir", d]
                        + (["--known-at"] if known_at else []), cores)
    matched = int(out.split(" matched")[0].split()[-1])
    return t1 + t2, max(m1, m2), matched, f"ingest {t1:.2f} s + asof {t2:.2f} s"


def run_duckdb(d, feats, reqs, threads, cores):
    t, m, out = timed(["node", f"{top}/bench/featurecache/duckdb/asof.mjs", "--features", feats,
                       "--requests", reqs, "--entity", "entity", "--feature-time", "event_time",
                       "--time", "as_of", "--columns", "f0,f1,f2", "--label", "label",
                       "--out", f"{d}/duck.parquet", "--threads", str(threads),
                       "--duckdb-dir", f"{top}/build/duckdb"], cores)
    j = json.loads(out.strip().splitlines()[-1])
    return t, m, j["matched"], f"query {j['seconds']:.2f} s"


PANDAS = r"""
import sys, pandas as pd
f = pd.read_csv(sys.argv[1]); r = pd.read_csv(sys.argv[2])
f = f.sort_values("event_time", kind="stable"); r = r.sort_values("as_of", kind="stable")
m = pd.merge_asof(r, f, left_on="as_of", right_on="event_time", by="entity")
m.to_pickle(sys.argv[3]); print(int(m["f0"].notna().sum()))
"""


def run_pandas(d, feats, reqs, cores):
    t, m, out = timed(["/usr/bin/python3", "-c", PANDAS, feats, reqs, f"{d}/pandas.pkl"], cores)
    return t, m, int(out.strip().splitlines()[-1]), ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="200000,2000000")
    ap.add_argument("--entities", type=int, default=100000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/hpcml-asof-bench")
    ap.add_argument("--build", default=f"{top}/build/default")
    ap.add_argument("--no-pandas", action="store_true")
    a = ap.parse_args()
    fcache = f"{a.build}/featurecache/hpcml-fcache"
    if not os.path.exists(f"{top}/build/duckdb/node_modules/@duckdb/node-api"):
        sys.exit("asof_bench: DuckDB is not installed: run scripts/install-deps.sh --duckdb")
    os.makedirs(a.dir, exist_ok=True)
    print("| rows x requests | tool | cores | seconds | peak MiB | matched | detail |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in map(int, a.sizes.split(",")):
        feats, reqs, avail = make_tables(a.dir, n, a.entities)
        # The new CSVs on disk before anything is timed: ingest fsyncs its
        # file, which on ext4 also waits for other dirty data.
        subprocess.run(["sync"], check=True)
        runs = [("hpcml", "0", lambda: run_hpcml(fcache, a.dir, feats, reqs, "0")),
                ("duckdb", "0", lambda: run_duckdb(a.dir, feats, reqs, 1, "0")),
                ("hpcml", "0,1", lambda: run_hpcml(fcache, a.dir, feats, reqs, "0,1")),
                ("duckdb", "0,1", lambda: run_duckdb(a.dir, feats, reqs, 2, "0,1"))]
        if not a.no_pandas:
            runs.append(("pandas", "0", lambda: run_pandas(a.dir, feats, reqs, "0")))
        for cores in ("0", "0,1"):
            runs.append(("hpcml plain (recorded_at)", cores,
                         lambda c=cores: run_hpcml(fcache, a.dir, avail, reqs, c, available=True)))
            runs.append(("hpcml --known-at", cores,
                         lambda c=cores: run_hpcml(fcache, a.dir, avail, reqs, c, available=True,
                                                   known_at=True)))
        best = {}
        for name, cores, fn in runs:
            fn()  # warm-up: the CSVs in the page cache for every tool alike
            results = [fn() for _ in range(a.repeat)]
            t = statistics.median(r[0] for r in results)
            m = max(r[1] for r in results)
            matched = {r[2] for r in results}
            best[(name, cores)] = (t, m, matched)
            print(f"| {n:,} x {n:,} | {name} | {cores} | {t:.2f} | {m:.0f} | {','.join(map(str, matched))} "
                  f"| {results[len(results) // 2][3]} |", flush=True)
        counts = {next(iter(v[2])) for k, v in best.items() if k[0] != "hpcml --known-at"}
        if len(counts) != 1:
            sys.exit(f"asof_bench: the tools matched different counts: {best}")
        for cores in ("0", "0,1"):
            h, dd = best[("hpcml", cores)], best[("duckdb", cores)]
            print(f"ratio (DuckDB time / hpcml time), {n:,}, cores {cores}: {dd[0] / h[0]:.2f}; "
                  f"memory hpcml/DuckDB {h[1] / dd[1]:.2f}")
        for cores in ("0", "0,1"):
            plain, known = best[("hpcml plain (recorded_at)", cores)], best[("hpcml --known-at", cores)]
            print(f"known-at overhead (known-at time / plain time), {n:,}, cores {cores}: "
                  f"{known[0] / plain[0]:.2f}; memory {known[1] / plain[1]:.2f}")
        if not a.no_pandas:
            h, p = best[("hpcml", "0")], best[("pandas", "0")]
            print(f"ratio (pandas time / hpcml time), {n:,}, 1 core: {p[0] / h[0]:.2f}")


if __name__ == "__main__":
    main()
