#!/usr/bin/python3
"""Runs the exported test models in ONNX Runtime and compares with numpy.

Runs inference_onnx_fixture into a temporary folder (see onnx_fixture.cpp for
what it writes), checks each model.onnx with onnx.checker (full check: shape
inference too), scores rows.f32 with ort_score.mjs into scores.ort.f32, and
compares every scores.<source>.f32 of the case with an independent float64
numpy reference of the model's math. Prints the largest absolute difference
per case and source; fails when one exceeds --tolerance (1e-5).

An encoded model (format 3) is scored in ONNX Runtime from its raw inputs
(numbers.f32 with NaN, category values as strings in strings.json) and, with
--infer, by hpcml-infer score from rows.csv (the same rows as text); its
header must name the classes and its class column give the class names.
"infer" is hpcml-infer against numpy, "inf-ort" against ONNX Runtime.

The reference standardises as the training derive does: (raw - mean) / scale
in double, rounded to float32; an encoded model's numbers then as the
encoding does, (x - center) / scale, 0 and the indicator 1 where missing, its
categories by a dict of the vocabulary (any other value, missing included:
the unknown row of the embedding table); then every layer in float64.

Fails, never skips, when node or onnxruntime-node is missing.
"""
import argparse
import glob
import json
import os
import csv
import subprocess
import sys
import tempfile

import numpy as np
import onnx

HINT = "run scripts/install-deps.sh as root"


def fail(msg):
    print(f"onnx_ort_check: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def check_runtime(node, ort_dir):
    if not node or node.endswith("NOTFOUND") or not os.access(node, os.X_OK):
        fail(f"node is not installed (got {node!r}): {HINT}")
    pkg = os.path.join(ort_dir, "node_modules", "onnxruntime-node", "package.json")
    if not os.path.isfile(pkg):
        fail(f"onnxruntime-node is not installed in {ort_dir} (no {pkg}): {HINT}")
    with open(pkg) as f:
        return json.load(f)["version"]


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


ACTIVATIONS = {"relu": lambda x: np.maximum(x, 0.0), "tanh": np.tanh, "gelu": gelu}


def encoded_reference(case_dir, desc):
    """An encoded model's first-layer input from its raw inputs, float64."""
    cols = desc["encoding"]["columns"]
    std = desc["standardized"]
    numbers = [j for j, c in enumerate(cols) if c["kind"] != "category"]
    with open(os.path.join(case_dir, "strings.json")) as f:
        strings = json.load(f)
    input_of = {i["features"][0]: i["name"] for i in desc["inputs"] if i["text"]}
    x = None
    if numbers:
        x = np.fromfile(os.path.join(case_dir, "numbers.f32"), dtype="<f4")
        x = x.reshape(-1, len(numbers))
    values, indicators, embedded = [], [], []
    table = 0
    for j, c in enumerate(cols):
        if c["kind"] == "category":
            codes = {v: i for i, v in enumerate(c["vocabulary"])}
            unknown = len(c["vocabulary"])
            code = np.array([codes.get(v, unknown) for v in strings[input_of[c["name"]]]])
            w = np.fromfile(os.path.join(case_dir, f"embed{table}.weight.f32"), dtype="<f4")
            embedded.append(w.reshape(unknown + 1, c["embed_dim"]).astype(np.float64)[code])
            table += 1
            continue
        v = x[:, numbers.index(j)]
        if std and std[j]:
            v = ((v.astype(np.float64) - desc["mean"][j]) / desc["scale"][j]).astype(np.float32)
        missing = np.isnan(v)
        values.append(np.where(missing, 0.0, (v.astype(np.float64) - c["center"]) / c["scale"]))
        if c["indicator"]:
            indicators.append(missing.astype(np.float64))
    return np.column_stack([*values, *indicators, *embedded])


def reference(case_dir, desc):
    """The model's outputs for rows.f32 (an encoded model: its raw inputs), float64."""
    dims = desc["dims"]
    if "encoding" in desc:
        h = encoded_reference(case_dir, desc)
        assert h.shape[1] == dims[0], (h.shape, dims)
    else:
        x = np.fromfile(os.path.join(case_dir, "rows.f32"), dtype="<f4").reshape(-1, dims[0])
        std = np.array(desc["standardized"], dtype=bool)
        if std.any():
            mean = np.where(std, np.array(desc["mean"]), 0.0)
            scale = np.where(std, np.array(desc["scale"]), 1.0)
            x = ((x.astype(np.float64) - mean) / scale).astype(np.float32)
        h = x.astype(np.float64)
    layers = len(dims) - 1
    for i in range(layers):
        w = np.fromfile(os.path.join(case_dir, f"layer{i}.weight.f32"), dtype="<f4")
        b = np.fromfile(os.path.join(case_dir, f"layer{i}.bias.f32"), dtype="<f4")
        h = h @ w.reshape(dims[i + 1], dims[i]).astype(np.float64).T + b.astype(np.float64)
        if i + 1 < layers:
            h = ACTIVATIONS[desc["activation"]](h)
    if desc["loss"] == "ce":
        e = np.exp(h - h.max(axis=1, keepdims=True))
        h = e / e.sum(axis=1, keepdims=True)
    return h


def check_onnx_file(path):
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    return model


def run_ort(args, case_dir, desc):
    cmd = [args.node, args.runner, "score", "--ort-dir", args.ort_dir,
           "--model", os.path.join(case_dir, "model.onnx"),
           "--output", os.path.join(case_dir, "scores.ort.f32"),
           "--batch", str(args.batch), "--threads", str(args.threads)]
    if "encoding" in desc:  # the raw inputs
        if os.path.exists(os.path.join(case_dir, "numbers.f32")):
            cmd += ["--input", os.path.join(case_dir, "numbers.f32")]
        cmd += ["--strings", os.path.join(case_dir, "strings.json")]
    else:
        cmd += ["--input", os.path.join(case_dir, "rows.f32")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")


def run_infer(args, case_dir, desc):
    """hpcml-infer score on rows.csv: checks the header and the class names,
    writes the probabilities or predictions as scores.infer.f32."""
    name = os.path.basename(case_dir)
    out = os.path.join(case_dir, "scored.csv")
    cmd = [args.infer, "score", "--model", os.path.join(case_dir, "model.h5"),
           "--csv", os.path.join(case_dir, "rows.csv"), "--keep", "id", "--output", out]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}: {r.stdout.strip()} {r.stderr.strip()}")
    with open(out, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    k = desc["dims"][-1]
    classes = desc.get("label_classes") or []
    if desc["loss"] == "ce":
        names = [f"p_{c}" for c in classes] if classes else [f"p_{i}" for i in range(k)]
        want = ["id", *names, "class"]
    else:
        want = ["id", *(["y_pred"] if k == 1 else [f"pred_{i}" for i in range(k)])]
    if header != want:
        fail(f"{name}: hpcml-infer's header is {header}, expected {want}")
    if [int(row[0]) for row in body] != list(range(len(body))):
        fail(f"{name}: hpcml-infer's ids are not the rows in order")
    p = np.array([[float(v) for v in row[1:1 + k]] for row in body], dtype=np.float32)
    if desc["loss"] == "ce":
        best = p.argmax(axis=1)
        want_class = [classes[i] if classes else str(i) for i in best]
        if [row[-1] for row in body] != want_class:
            fail(f"{name}: hpcml-infer's class column is not the most probable class by name")
    p.tofile(os.path.join(case_dir, "scores.infer.f32"))


def check_case(args, case_dir):
    """Returns (name, [(source, max abs diff)]); a failed check exits."""
    name = os.path.basename(case_dir)
    with open(os.path.join(case_dir, "model.json")) as f:
        desc = json.load(f)
    check_onnx_file(os.path.join(case_dir, "model.onnx"))
    run_ort(args, case_dir, desc)
    if args.infer and os.path.exists(os.path.join(case_dir, "rows.csv")):
        run_infer(args, case_dir, desc)
    ref = reference(case_dir, desc)
    if not np.isfinite(ref).all() or ref.std() < 1e-3:
        fail(f"{name}: degenerate reference (non-finite or constant outputs)")
    results = []
    for path in sorted(glob.glob(os.path.join(case_dir, "scores.*.f32"))):
        source = os.path.basename(path)[len("scores."):-len(".f32")]
        got = np.fromfile(path, dtype="<f4")
        if got.size != ref.size:
            fail(f"{name}/{source}: {got.size} values, expected {ref.size}")
        diff = np.abs(got.reshape(ref.shape).astype(np.float64) - ref)
        results.append((source, float(np.nan_to_num(diff, nan=np.inf).max())))
    # hpcml-infer's engine against ONNX Runtime directly, on the same rows.
    engine = os.path.join(case_dir, "scores.engine.f32")
    if os.path.exists(engine):
        a = np.fromfile(engine, dtype="<f4").astype(np.float64)
        b = np.fromfile(os.path.join(case_dir, "scores.ort.f32"), dtype="<f4").astype(np.float64)
        results.append(("eng-ort", float(np.nan_to_num(np.abs(a - b), nan=np.inf).max())))
    # hpcml-infer (from the CSV's text) against ONNX Runtime (from the strings).
    scored = os.path.join(case_dir, "scores.infer.f32")
    if os.path.exists(scored):
        a = np.fromfile(scored, dtype="<f4").astype(np.float64)
        b = np.fromfile(os.path.join(case_dir, "scores.ort.f32"), dtype="<f4").astype(np.float64)
        results.append(("inf-ort", float(np.nan_to_num(np.abs(a - b), nan=np.inf).max())))
    return name, results


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fixture", required=True)
    p.add_argument("--runner", required=True)
    p.add_argument("--node", required=True)
    p.add_argument("--ort-dir", required=True)
    p.add_argument("--infer", help="hpcml-infer: also score each encoded case's rows.csv with it")
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--batch", type=int, default=128)  # 1000 rows: a partial last batch
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--keep", help="write the cases here and keep them")
    args = p.parse_args()
    version = check_runtime(args.node, args.ort_dir)
    print(f"onnxruntime-node {version} from {args.ort_dir}; onnx {onnx.__version__}")
    with tempfile.TemporaryDirectory(prefix="hpcml_onnx_ort_") as tmp:
        out = args.keep or tmp
        subprocess.run([args.fixture, out, str(args.rows)], check=True)
        cases = sorted(d for d in glob.glob(os.path.join(out, "*")) if os.path.isdir(d))
        if not cases:
            fail(f"the fixture wrote no cases into {out}")
        worst = 0.0
        print(f"{'case':<20} {'source':<8} max |diff| vs numpy; eng-ort: engine vs ORT "
              f"({args.rows} rows)")
        for case_dir in cases:
            name, results = check_case(args, case_dir)
            if "ort" not in dict(results) or "eng-ort" not in dict(results):
                fail(f"{name}: no ORT or no engine scores")
            if args.infer and name.startswith("encoded") and "inf-ort" not in dict(results):
                fail(f"{name}: no hpcml-infer scores")
            for source, diff in results:
                ok = diff <= args.tolerance
                print(f"{name:<20} {source:<8} {diff:.3e}{'' if ok else '  > tolerance'}")
                worst = max(worst, diff)
    print(f"largest max |diff|: {worst:.3e} (tolerance {args.tolerance:.0e})")
    if not worst <= args.tolerance:
        fail("a scorer differs from the numpy reference beyond the tolerance")


if __name__ == "__main__":
    main()
