#!/usr/bin/python3
"""Feature sets written by hpcml-fcache, read back with h5py (Debian's
python3-h5py; run with /usr/bin/python3, the first python3 on PATH here does
not see Debian's packages). Checks the layout documented in
docs/featurecache.md and recomputes every digest from its definition.

usage: h5py_readback_test.py <hpcml-fcache binary> <small.csv>"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

# A missing module fails the test: scripts/install-deps.sh installs both.
try:
    import h5py
    import numpy as np
except ImportError as e:  # pragma: no cover
    sys.exit(f"FAIL: {e} (scripts/install-deps.sh installs python3-h5py and python3-numpy)")


def run(*args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def check(cond, what):
    if not cond:
        sys.exit("FAILED: " + what)


def check_digests(g, name):
    """Every dataset's sha256 and the version's data_sha256, from their definitions."""
    rows = int(g.attrs["rows"])
    digests = {}
    for ds in ("features", "labels", "entity_ids", "entity_keys", "timestamps", "int_values",
               "categories"):
        if ds not in g:
            continue
        raw = np.ascontiguousarray(g[ds][()]).tobytes()
        digests[ds] = hashlib.sha256(raw).hexdigest()
        check(digests[ds] == g[ds].attrs["sha256"], f"{name}/{ds} sha256")
    typed = "typed_columns" in g.attrs
    text = (f"hpcml-featurecache-v{2 if typed else 1}\nrows={rows}\nfeatures={g['features'].shape[1]}\n"
            f"features:{digests['features']}\n")
    if "labels" in digests:
        text += f"labels:{digests['labels']}\n"
    text += f"entity_ids:{digests['entity_ids']}\n"
    if "entity_keys" in digests:
        text += f"entity_keys:{digests['entity_keys']}\n"
    text += f"timestamps:{digests['timestamps']}\n"
    if typed:
        text += "kinds=" + ",".join(g.attrs["feature_types"]) + "\n"
        if "labels" in digests:
            text += "label_classes=" + json.dumps(list(g.attrs["label_classes"]), separators=(",", ":")) + "\n"
        if "int_values" in digests:
            text += f"int_values:{digests['int_values']}\n"
        if "categories" in digests:
            text += f"categories:{digests['categories']}\n"
            text += "category_counts=" + ",".join(str(c) for c in g.attrs["category_counts"]) + "\n"
    check(hashlib.sha256(text.encode()).hexdigest() == g.attrs["data_sha256"], f"{name} data_sha256")


def doc_version_frame():
    """The version_frame function of docs/featurecache.md, run as written there."""
    doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../docs/featurecache.md")
    text = open(doc).read()
    code = text.split("<!-- pandas-begin -->")[1].split("<!-- pandas-end -->")[0]
    code = code.split("```python")[1].split("```")[0]
    scope = {}
    exec(code, scope)
    return scope["version_frame"]


def check_typed(fcache, tmp):
    """A table as R's write.csv writes it (row names, quoted strings and numbers, NA, an empty
    cell, TRUE/FALSE, an integer beyond 2^24, a string label) goes in unedited, and the
    documented pandas reader gives what pandas.read_csv gives from the file itself."""
    import pandas as pd
    csv = os.path.join(tmp, "credit.csv")
    with open(csv, "w") as out:
        out.write('"","id","ts","term","grade","cents","owner","rate","y"\n')
        rows = [("term_36", '"B"', "12345678901", "TRUE", '"0.5"', "good"),
                ("term_60", "NA", "", "FALSE", "1.25", "bad"),
                ("term_36", '"A"', "-7", "NA", "NA", "good"),
                ("term_60", '"B"', "16777217", "TRUE", "", "bad")]
        for i, (term, grade, cents, owner, rate, y) in enumerate(rows):
            out.write(f'"{i + 1}",{i + 1},"2024-01-0{i + 1}","{term}",{grade},{cents},{owner},{rate},"{y}"\n')
    path = os.path.join(tmp, "credit.h5")
    out = run(fcache, "ingest", path, "--csv", csv, "--entity", "id", "--timestamp", "ts",
              "--label", "y", "--zone", "ae", "--classification", "internal")
    check("kinds: 1 float, 1 int, 1 bool, 2 category (term 2, grade 2); label classes (2): bad, good"
          in out, "ingest prints the kinds: " + out)
    with h5py.File(path, "r") as f:
        check_digests(f["versions/v1"], "typed v1")
    got = doc_version_frame()(path)
    want = pd.read_csv(csv, index_col=0)
    check(list(got["term"].astype(str)) == list(want["term"]), "term")
    check(list(got["term"].cat.categories) == ["term_36", "term_60"], "term categories")
    check(got["grade"].isna().tolist() == want["grade"].isna().tolist(), "grade missing")
    check(list(got["grade"].dropna().astype(str)) == list(want["grade"].dropna()), "grade")
    check(str(got["cents"].dtype) == "Int64", "cents dtype")
    check(list(got["cents"].dropna()) == [12345678901, -7, 16777217], "cents exact")
    check(got["cents"].isna().tolist() == want["cents"].isna().tolist(), "cents missing")
    check(got["owner"].isna().tolist() == want["owner"].isna().tolist(), "owner missing")
    check([bool(v) for v in got["owner"].dropna()] == [bool(v) for v in want["owner"].dropna()], "owner")
    check(np.allclose(got["rate"], want["rate"].astype(float), equal_nan=True), "rate")
    check(list(got["y"].astype(str)) == list(want["y"]), "label classes")


def main():
    fcache, csv = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "churn.h5")
        run(fcache, "ingest", path, "--csv", csv, "--entity", "customer", "--timestamp", "event_time",
            "--label", "churned", "--zone", "ae", "--classification", "confidential")
        run(fcache, "derive", path, "--select", "monthly_spend,tenure_months", "--compress", "4")
        # Blosc: h5py decodes it through Debian's filter plugin, no settings needed.
        run(fcache, "derive", path, "--from", "v1", "--codec", "blosc-lz4")
        with h5py.File(path, "r") as f:
            check(f.attrs["hpcml_format"] == "hpcml-featurecache", "format attribute")
            check(int(f.attrs["format_version"]) == 2, "format version")
            check(f.attrs["zone"] == "ae", "zone")
            check(f.attrs["classification"] == "confidential", "classification")
            check(f.attrs["latest"] == "v3", "latest")
            check(sorted(f["versions"].keys()) == ["v1", "v2", "v3"], "versions")
            for name in ("v1", "v2", "v3"):
                g = f["versions"][name]
                rows = int(g.attrs["rows"])
                x = g["features"]
                check(x.dtype == np.dtype("<f4") and x.shape == (rows, len(g.attrs["feature_names"])),
                      f"{name} features shape/type")
                check(g["entity_ids"].dtype == np.dtype("<i8"), "entity dtype")
                check(g["timestamps"].dtype == np.dtype("<i8"), "timestamps dtype")
                check_digests(g, name)
            v1 = f["versions"]["v1"]
            check(list(v1.attrs["feature_names"]) == ["tenure_months", "monthly_spend", "support_calls"], "names")
            check(list(v1.attrs["feature_types"]) == ["int", "float", "int"], "types")
            check(int(v1.attrs["typed_columns"]) == 1, "typed")
            check(v1["int_values"].dtype == np.dtype("<i8") and v1["int_values"].shape == (6, 2),
                  "int_values: the two int features")
            check(v1.attrs["label_name"] == "churned", "label name")
            x = v1["features"][()]
            check(x[2, 1] == np.float32(52.25) and np.isnan(x[5, 1]), "values")
            check(list(v1["entity_ids"][()]) == [101, 102, 101, 103, 102, 104], "entities")
            check(int(v1["timestamps"][0]) == 1704445200 * 1000000, "timestamp in microseconds")
            src_sha = hashlib.sha256(open(csv, "rb").read()).hexdigest()
            check(list(v1.attrs["source_sha256"]) == [src_sha], "source digest")
            v2 = f["versions"]["v2"]
            check(list(v2.attrs["parents"]) == ["v1"], "parents")
            check(list(v2.attrs["parent_sha256"]) == [v1.attrs["data_sha256"]], "parent digest")
            check(v2["features"].compression == "gzip" and v2["features"].shuffle, "compression filters")
            check(np.array_equal(v2["features"][()][:, 1], x[:, 0]), "derived column")
            v3 = f["versions"]["v3"]
            check("32001" in v3["features"]._filters and v3.attrs["codec"] == "blosc-lz4", "blosc filter")
            check(np.array_equal(v3["features"][()], x, equal_nan=True), "blosc values")
            # Each version is a file of its own beside the set, linked from it.
            link = f["versions"].get("v1", getlink=True)
            check(isinstance(link, h5py.ExternalLink) and link.filename == "churn.h5.d/v1.h5"
                  and link.path == "/", "v1 is an external link to churn.h5.d/v1.h5")
        # Format 1 (versions inside the set file) is still read, and a new
        # version is added beside it as a file of its own.
        old = os.path.join(tmp, "old.h5")
        with h5py.File(path, "r") as src, h5py.File(old, "w") as dst:
            for k, v in src.attrs.items():
                dst.attrs[k] = v
            dst.attrs["format_version"] = 1
            dst.attrs["latest"] = "v1"
            v1, g = src["versions/v1"], dst.create_group("versions/v1")
            for k, v in v1.attrs.items():  # (H5Ocopy of a root group crashes HDF5 1.10)
                g.attrs[k] = v
            for k in v1:
                src.copy(v1[k], g, k)
            # As the builds before column kinds wrote it: no typed attributes, no
            # int_values, the v1 digest text.
            for k in ("typed_columns", "category_counts", "label_classes"):
                del g.attrs[k]
            del g["int_values"]
            digests = {ds: g[ds].attrs["sha256"] for ds in ("features", "labels", "entity_ids", "timestamps")}
            text = (f"hpcml-featurecache-v1\nrows={g.attrs['rows']}\nfeatures={g['features'].shape[1]}\n"
                    f"features:{digests['features']}\nlabels:{digests['labels']}\n"
                    f"entity_ids:{digests['entity_ids']}\ntimestamps:{digests['timestamps']}\n")
            g.attrs["data_sha256"] = hashlib.sha256(text.encode()).hexdigest()
        run(fcache, "verify", old)
        info = run(fcache, "info", old, "v1")
        check("tenure_months                    int (as read; float32)" in info, "old kinds shown: " + info)
        run(fcache, "derive", old, "--select", "monthly_spend")
        run(fcache, "verify", old)
        with h5py.File(old, "r") as f:
            check(int(f.attrs["format_version"]) == 2, "format 1 file upgraded when a version is added")
            check(isinstance(f["versions"].get("v1", getlink=True), h5py.HardLink), "v1 stays inside")
            check(isinstance(f["versions"].get("v2", getlink=True), h5py.ExternalLink), "v2 beside")
            check(int(f["versions/v2"].attrs["typed_columns"]) == 1 and
                  list(f["versions/v2"].attrs["feature_types"]) == ["float"], "a derive of an old version is typed, float")
            check(np.array_equal(f["versions/v2/features"][()][:, 0], x[:, 1], equal_nan=True), "v2 data")
        # String entity keys: entity_keys[entity_ids] is each row's key.
        keyed_csv = os.path.join(tmp, "keyed.csv")
        with open(keyed_csv, "w") as out:
            out.write("account,at,v\nDE44-0001,1700000000,1\nc-9,1700000001,2\nDE44-0001,1700000002,3\n")
        keyed = os.path.join(tmp, "keyed.h5")
        run(fcache, "ingest", keyed, "--csv", keyed_csv, "--entity", "account", "--timestamp", "at",
            "--zone", "ae", "--classification", "internal")
        with h5py.File(keyed, "r") as f:
            g = f["versions/v1"]
            check(g.attrs["entity_type"] == "string", "entity type")
            keys = g["entity_keys"][()][g["entity_ids"][()]]
            check([k.decode() for k in keys] == ["DE44-0001", "c-9", "DE44-0001"], "keys[ids]")
            check_digests(g, "keyed v1")
        check_typed(fcache, tmp)
    # h5dump (hdf5-tools) reads it too, when installed.
    print("ok: h5py reads both versions; every digest matches its definition; the documented pandas "
          "reader of a typed version agrees with pandas.read_csv")


if __name__ == "__main__":
    main()
