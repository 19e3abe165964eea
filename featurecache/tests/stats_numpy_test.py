#!/usr/bin/python3
"""The statistics hpcml-fcache stores with a version, against numpy on the
same rows (an independent computation): count, missing, min, max, mean, std
per feature and the label, with NaN cells; the sample's percentiles against
numpy's within the sample's rank error; and `hpcml-fcache stats --json`.
Then `hpcml-fcache drift`: PSI and KS against numpy's computation of the
same definitions, from the stored samples and (--exact) from the data, and
the exit code a pipeline gates on (3: drift; 0: none).

usage: stats_numpy_test.py <hpcml-fcache binary>"""
import json
import subprocess
import sys
import tempfile

import h5py
import numpy as np


def run(*args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)} ({r.returncode}): {r.stderr}")
    return r.stdout


def run_rc(*args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode not in (0, 3):
        sys.exit(f"FAIL: {' '.join(args)} ({r.returncode}): {r.stderr}")
    return r.returncode, r.stdout


def psi(a, b):
    """Deciles of a as cuts, shares floored at 1e-4 (docs/featurecache.md)."""
    a, b = np.sort(a), np.sort(b)
    cuts = [a[i * len(a) // 10] for i in range(1, 10)]
    ea = [np.searchsorted(a, c, "right") for c in cuts] + [len(a)]
    eb = [np.searchsorted(b, c, "right") for c in cuts] + [len(b)]
    sa = np.maximum(1e-4, np.diff([0] + ea) / len(a))
    sb = np.maximum(1e-4, np.diff([0] + eb) / len(b))
    return float(((sb - sa) * np.log(sb / sa)).sum())


def ks(a, b):
    x = np.union1d(a, b)
    fa = np.searchsorted(np.sort(a), x, "right") / len(a)
    fb = np.searchsorted(np.sort(b), x, "right") / len(b)
    return float(np.abs(fa - fb).max())


def check_drift(fcache, tmp, rng):
    n = 20000
    for v, shift in ((2, 0.0), (3, 0.4)):
        with open(f"{tmp}/d{v}.csv", "w") as f:
            f.write("id,t,y,a,b\n")
            a = rng.normal(1000.0 + 25.0 * shift, 25.0, n)
            b = rng.exponential(3.0, n)
            for i in range(n):
                f.write(f"{i},{1700000000 + i},{i % 3},{a[i]:.6f},{b[i]:.6g}\n")
        run(fcache, "ingest", f"{tmp}/set.h5", "--csv", f"{tmp}/d{v}.csv", "--entity", "id",
            "--timestamp", "t", "--label", "y", "--classification", "internal")
    f = h5py.File(f"{tmp}/set.h5", "r")
    for exact in (False, True):
        rc, out = run_rc(fcache, "drift", f"{tmp}/set.h5", "v2", "v3", "--json",
                         *(["--exact"] if exact else []))
        j = json.loads(out)
        assert rc == 3 and j["drift"] and j["source"] == ("data" if exact else "sample"), (rc, j)
        for c, col in enumerate(j["columns"]):
            xs = []
            for v in ("v2", "v3"):
                g = f["versions"][v]
                if exact:
                    x = g["features"][:, c] if c < 2 else g["labels"][:]
                else:
                    x = g["stats"]["sample"][:, c]
                x = x.astype(np.float32)
                xs.append(x[~np.isnan(x)])
            want_psi, want_ks = psi(*xs), ks(*xs)
            if abs(col["psi"] - want_psi) > 1e-9 or abs(col["ks"] - want_ks) > 1e-9:
                sys.exit(f"FAIL: drift {col['name']} exact={exact}: {col} vs numpy psi "
                         f"{want_psi} ks {want_ks}")
        assert j["columns"][0]["drift"] and not j["columns"][1]["drift"], j
    rc, _ = run_rc(fcache, "drift", f"{tmp}/set.h5", "v2", "v2")
    assert rc == 0, rc
    # ingest --rules: a batch that breaks a rule is not added; validate says why.
    with open(f"{tmp}/rules.toml", "w") as f:
        f.write("[rows]\nmax = 100\n[features.a]\nmin = 0.0\n")
    before = sorted(h5py.File(f"{tmp}/set.h5", "r")["versions"].keys())
    r = subprocess.run([fcache, "ingest", f"{tmp}/set.h5", "--csv", f"{tmp}/d2.csv", "--entity", "id",
                        "--timestamp", "t", "--label", "y", "--classification", "internal",
                        "--rules", f"{tmp}/rules.toml"], capture_output=True, text=True)
    assert r.returncode == 1 and "no version was added" in r.stderr, (r.returncode, r.stderr)
    assert "rows: 20000 rows, the rule expects any to 100" in r.stderr, r.stderr
    assert sorted(h5py.File(f"{tmp}/set.h5", "r")["versions"].keys()) == before
    rc, out = run_rc(fcache, "validate", f"{tmp}/set.h5", "v2", "--rules", f"{tmp}/rules.toml")
    assert rc == 3 and "rows: 20000 rows" in out, (rc, out)
    print("drift: PSI and KS equal numpy's from the samples and the data; exit 3 on drift, 0 without; "
          "ingest --rules added nothing for a breaking batch")


def main():
    fcache = sys.argv[1]
    rng = np.random.default_rng(11)
    n = 50000
    with tempfile.TemporaryDirectory() as tmp:
        csv = f"{tmp}/rows.csv"
        a = rng.normal(1000.0, 25.0, n)
        b = rng.exponential(3.0, n)
        b_holes = rng.random(n) < 0.1
        y = rng.integers(0, 3, n)
        with open(csv, "w") as f:
            f.write("id,t,y,a,b\n")
            for i in range(n):
                bv = "nan" if b_holes[i] else f"{b[i]:.6g}"
                f.write(f"{i},{1700000000 + i},{y[i]},{a[i]:.6f},{bv}\n")
        run(fcache, "ingest", f"{tmp}/set.h5", "--csv", csv, "--entity", "id", "--timestamp", "t",
            "--label", "y", "--zone", "ae", "--classification", "internal")
        v = h5py.File(f"{tmp}/set.h5", "r")["versions/v1"]
        st = v["stats"]
        cols = [c.decode() if isinstance(c, bytes) else c for c in st.attrs["columns"]]
        assert cols == ["a", "b", "y"], cols
        data = np.column_stack([v["features"][:].astype(np.float64), v["labels"][:]])
        worst = 0.0
        for c, name in enumerate(cols):
            x = data[:, c]
            ok = ~np.isnan(x)
            want = {"count": ok.sum(), "missing": (~ok).sum(), "min": x[ok].min(),
                    "max": x[ok].max(), "mean": x[ok].mean(), "std": x[ok].std()}
            for k, w in want.items():
                got = st[k][c]
                tol = 1e-9 * max(1.0, abs(w))
                if not abs(got - w) <= tol:
                    sys.exit(f"FAIL: {name} {k}: stored {got}, numpy {w}")
                worst = max(worst, abs(got - w) / max(1.0, abs(w)))
            # Percentiles of the stored sample: their rank in the full column
            # (an interval, for tied values) within 3/sqrt(k) of the asked one.
            sample = st["sample"][:, c].astype(np.float64)
            sample = sample[~np.isnan(sample)]
            full = np.sort(x[ok])
            tol = 3 / np.sqrt(len(sample))
            for q in (0.01, 0.5, 0.99):
                value = np.quantile(sample, q)
                lo = np.searchsorted(full, value, "left") / len(full)
                hi = np.searchsorted(full, value, "right") / len(full)
                if q < lo - tol or q > hi + tol:
                    sys.exit(f"FAIL: {name} p{q}: the sample's quantile has rank {lo:.4f}-{hi:.4f}")
        out = json.loads(run(fcache, "stats", f"{tmp}/set.h5", "--json"))
        assert out["rows"] == n and out["sample_rows"] == 4096, out
        b_json = out["columns"][1]
        assert b_json["name"] == "b" and b_json["missing"] == int(b_holes.sum()), b_json
        text = run(fcache, "stats", f"{tmp}/set.h5")
        assert "p99" in text and "\nb " in text, text
        print(f"stats match numpy (largest relative difference {worst:.1e}) on {n} rows; "
              f"sample percentiles within their rank error")
        check_drift(fcache, tmp, rng)


if __name__ == "__main__":
    main()
