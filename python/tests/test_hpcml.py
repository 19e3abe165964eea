"""import hpcml against the files hpcml-fcache writes (HPCML_FCACHE) and
h5py's view of them: typed columns, missing cells, string labels, row and
column selections, the guard's checks, the loader's shards and positions,
and errors carrying hpcml's messages."""
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

import hpcml

FCACHE = os.environ.get("HPCML_FCACHE", "hpcml-fcache")
PLANS = ["basic", "plus", "pro"]


def write_csv(path, n, seed):
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        f.write("id,ts,age,income,plan,active,visits,churn\n")
        for i in range(n):
            income = "" if i % 7 == 3 else f"{rng.lognormal(10, 0.5):.2f}"
            plan = "" if i % 11 == 5 else PLANS[int(rng.integers(0, 3))]
            active = "" if i % 13 == 0 else ("true" if rng.random() < 0.5 else "false")
            visits = "" if i % 17 == 2 else str(int(rng.integers(0, 40_000_000)))  # > 2^24
            churn = "yes" if rng.random() < 0.3 else "no"
            f.write(f"{i},{1700000000 + 60 * i},{int(rng.integers(18, 80))},{income},{plan},"
                    f"{active},{visits},{churn}\n")


def ingest(set_path, csv, zone="test"):
    subprocess.run([FCACHE, "ingest", str(set_path), "--csv", str(csv), "--entity", "id",
                    "--timestamp", "ts", "--label", "churn", "--zone", zone,
                    "--classification", "internal"], check=True, capture_output=True)


@pytest.fixture(scope="module")
def churn(tmp_path_factory):
    d = tmp_path_factory.mktemp("set")
    write_csv(d / "a.csv", 3000, 1)
    write_csv(d / "b.csv", 500, 2)
    ingest(d / "churn.h5", d / "a.csv")
    ingest(d / "churn.h5", d / "b.csv")
    return d


@pytest.fixture(autouse=True)
def no_guard(monkeypatch):
    for v in ["HPCML_ZONE", "HPCML_ROLE", "HPCML_DATASETS", "HPCML_CLASSIFICATIONS"]:
        monkeypatch.delenv(v, raising=False)


def test_version_and_import_starts_nothing():
    code = ("import threading, os; n = len(os.listdir('/proc/self/task')); "
            "import signal; before = signal.getsignal(signal.SIGTERM); import hpcml; "
            "assert len(os.listdir('/proc/self/task')) == n; "
            "assert signal.getsignal(signal.SIGTERM) == before; "
            "assert 'mpi4py' not in __import__('sys').modules; print(hpcml.__version__)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == hpcml.__version__ and hpcml.__version__.count(".") == 2


def test_versions_info_stats_lineage(churn):
    fs = hpcml.FeatureSet(churn / "churn.h5")
    assert fs.versions == ["v1", "v2"] and fs.latest == "v2"
    assert fs.zone == "test" and fs.classification == "internal"
    info = fs.info("v1")
    assert info["rows"] == 3000 and info["label_classes"] == ["no", "yes"]
    assert dict(zip(info["feature_names"], info["feature_types"])) == {
        "age": "int", "income": "float", "plan": "category", "active": "bool", "visits": "int"}
    stats = fs.stats("v1")
    income = [c for c in stats["columns"] if c["name"] == "income"][0]
    assert income["missing"] == sum(1 for i in range(3000) if i % 7 == 3)
    lineage = fs.lineage("latest")
    assert lineage[0]["version"] == "v2" and lineage[0]["operation"] == "ingest"
    assert lineage[0]["sources"][0]["uri"].endswith("b.csv")


def test_read_matches_h5py_and_selects(churn):
    fs = hpcml.FeatureSet(churn / "churn.h5")
    a = fs.read("v1")
    with h5py.File(churn / "churn.h5", "r") as f:
        g = f["versions/v1"]
        np.testing.assert_array_equal(a["features"], g["features"][()])
        np.testing.assert_array_equal(a["labels"], g["labels"][()])
        np.testing.assert_array_equal(a["entity_ids"], g["entity_ids"][()])
    sel = fs.read("v1", columns=["plan", "age"], rows=(100, 250))
    assert sel["features"].shape == (150, 2) and sel["columns"] == ["plan", "age"]
    np.testing.assert_array_equal(sel["features"][:, 0], a["features"][100:250, 2])
    np.testing.assert_array_equal(sel["features"][:, 1], a["features"][100:250, 0])


def test_to_pandas_keeps_kinds_and_missing(churn):
    import pandas as pd
    df = hpcml.FeatureSet(churn / "churn.h5").to_pandas("v1")
    raw = pd.read_csv(churn / "a.csv", keep_default_na=False, dtype=str)
    assert len(df) == 3000 and list(df.columns) == ["id", "ts", "age", "income", "plan", "active",
                                                    "visits", "churn"]
    assert isinstance(df["plan"].dtype, pd.CategoricalDtype)
    assert sorted(df["plan"].cat.categories) == PLANS
    want_plan = raw["plan"].replace("", None)
    assert (df["plan"].isna() == want_plan.isna()).all()
    assert (df["plan"].astype(object)[~want_plan.isna()] == want_plan[~want_plan.isna()]).all()
    assert df["income"].isna().sum() == (raw["income"] == "").sum()
    # int columns exact beyond float32's 2^24, missing as <NA>
    assert str(df["visits"].dtype) == "Int64"
    given = raw["visits"] != ""
    assert (df["visits"][given].astype("int64") == raw["visits"][given].astype("int64")).all()
    assert df["visits"][~given].isna().all()
    assert str(df["active"].dtype) == "boolean" and df["active"].isna().sum() == (raw["active"] == "").sum()
    assert list(df["churn"].astype(str)) == list(raw["churn"])
    assert (df["ts"].astype("int64") // 10**9 == raw["ts"].astype("int64")).all()


def test_errors_carry_hpcml_messages(churn, tmp_path):
    with pytest.raises(hpcml.Error) as e:
        hpcml.FeatureSet(tmp_path / "nope.h5")
    assert "nope.h5" in str(e.value) and e.value.code == "NotFound"
    fs = hpcml.FeatureSet(churn / "churn.h5")
    with pytest.raises(hpcml.Error, match="v9"):
        fs.info("v9")
    with pytest.raises(hpcml.Error, match='no feature column "tenure"'):
        fs.read("v1", columns=["tenure"])
    with pytest.raises(hpcml.Error, match=r"rows=\(10, 5000\): the version has 3000 rows"):
        fs.read("v1", rows=(10, 5000))
    (tmp_path / "junk.h5").write_bytes(b"not hdf5")
    with pytest.raises(hpcml.Error) as e:
        hpcml.FeatureSet(tmp_path / "junk.h5")
    assert "junk.h5" in str(e.value)


def test_guarded_job_checks_zone_and_approval(churn, monkeypatch):
    path = str(churn / "churn.h5")
    monkeypatch.setenv("HPCML_ZONE", "test")
    monkeypatch.setenv("HPCML_ROLE", "ml-engineer")
    monkeypatch.setenv("HPCML_DATASETS", os.path.realpath(churn))
    assert hpcml.FeatureSet(path).versions == ["v1", "v2"]
    monkeypatch.setenv("HPCML_ZONE", "eu")  # a job of another zone
    for attempt in (lambda: hpcml.FeatureSet(path), lambda: hpcml.Loader(path, "v1", rank=0, world=1)):
        with pytest.raises(hpcml.Error) as e:
            attempt()
        assert e.value.code == "PermissionDenied" and "zone" in str(e.value)
    monkeypatch.setenv("HPCML_ZONE", "test")
    monkeypatch.setenv("HPCML_DATASETS", "/nonexistent/approved")  # not approved
    with pytest.raises(hpcml.Error) as e:
        hpcml.FeatureSet(path)
    assert e.value.code == "PermissionDenied"


def test_loader_shards_cover_every_row_once(churn):
    seen = []
    for rank in range(3):
        l = hpcml.Loader(churn / "churn.h5", "v1", rank=rank, world=3, batch_rows=64, seed=4)
        assert l.batches_per_epoch == -(-1000 // 64)
        for x, y in l:
            assert x.shape[1] == 5 and x.dtype == np.float32 and len(y) == len(x)
        l = hpcml.Loader(churn / "churn.h5", "v1", rank=rank, world=3, batch_rows=64, seed=4)
        while not l.done:
            _, _, ids, _, _ = l.next_batch()
            seen += list(ids)
    assert sorted(seen) == list(range(3000))


def test_loader_batches_share_memory_and_match_the_rows(churn):
    a = hpcml.FeatureSet(churn / "churn.h5").read("v1")
    l = hpcml.Loader(churn / "churn.h5", "v1", rank=0, world=1, batch_rows=128, seed=9)
    x, y, ids, epoch, step = l.next_batch()
    assert not x.flags.owndata and x.flags.writeable  # the loader's buffer, no copy
    np.testing.assert_array_equal(x, a["features"][ids.astype(np.int64)])
    np.testing.assert_array_equal(y, a["labels"][ids.astype(np.int64)])
    assert (epoch, step) == (0, 0)
    del l  # the batch outlives its loader
    assert float(np.nansum(x)) == float(np.nansum(a["features"][ids.astype(np.int64)]))


def test_loader_resumes_exactly(churn):
    def loader():
        return hpcml.Loader(churn / "churn.h5", "v1", rank=1, world=2, batch_rows=50, seed=7,
                            epochs=3)
    l = loader()
    whole = []
    while not l.done:
        whole.append(l.next_batch()[2].copy())
    l = loader()
    for _ in range(37):  # into the second epoch
        l.next_batch()
    saved = l.position()
    assert saved.startswith("epoch=1 ")
    l = loader()
    l.restore(saved)
    rest = []
    while not l.done:
        rest.append(l.next_batch()[2].copy())
    assert len(rest) == len(whole) - 37
    for a, b in zip(rest, whole[37:]):
        np.testing.assert_array_equal(a, b)
    other = hpcml.Loader(churn / "churn.h5", "v1", rank=0, world=3, batch_rows=50, seed=7,
                         epochs=3)
    with pytest.raises(hpcml.Error, match="fingerprint|layout"):
        other.restore(saved)
    other.start_epoch(1)  # another number of ranks: from an epoch's start
    assert other.next_batch()[3:] == (1, 0)


def test_virtual_ranks_give_every_world_the_same_steps(churn):
    """virtual_ranks=4: worlds 1, 2 and 4 see the same global batch every step
    (rank batches concatenated in rank order), and a position taken on 4
    ranks mid-epoch restores on 2."""
    def loaders(world):
        return [hpcml.Loader(churn / "churn.h5", "v1", rank=r, world=world, batch_rows=40,
                             seed=11, epochs=2, virtual_ranks=4) for r in range(world)]

    def steps(ls, n=None):
        out = []
        while not ls[0].done and (n is None or len(out) < n):
            parts = [l.next_batch() for l in ls]
            assert len({p[3:] for p in parts}) == 1  # same (epoch, step) on every rank
            out.append(np.concatenate([p[2] for p in parts]))
        return out

    one = steps(loaders(1))
    assert len(one) == 2 * -(-750 // 40) and len(one[0]) == 160
    assert sorted(np.concatenate(one[:len(one) // 2])) == list(range(3000))
    for world in (2, 4):
        got = steps(loaders(world))
        assert len(got) == len(one)
        for a, b in zip(got, one):
            np.testing.assert_array_equal(a, b)
    four = loaders(4)
    steps(four, 13)
    saved = four[0].position()
    assert saved.startswith("epoch=0 step=13 ")
    two = loaders(2)
    for l in two:
        l.restore(saved)
    rest = steps(two)
    assert len(rest) == len(one) - 13
    for a, b in zip(rest, one[13:]):
        np.testing.assert_array_equal(a, b)
    x, y, ids, _, _ = loaders(2)[1].next_batch()
    a = hpcml.FeatureSet(churn / "churn.h5").read("v1")
    np.testing.assert_array_equal(x, a["features"][ids.astype(np.int64)])
    np.testing.assert_array_equal(y, a["labels"][ids.astype(np.int64)])
    with pytest.raises(hpcml.Error, match="virtual_ranks=4 is not a multiple") as e:
        hpcml.Loader(churn / "churn.h5", "v1", rank=0, world=3, virtual_ranks=4)
    assert e.value.code == "InvalidArgument"


def test_rank_and_world_from_the_job(monkeypatch):
    for v in ["OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK",
              "PMIX_SIZE", "SLURM_PROCID", "SLURM_NTASKS"]:
        monkeypatch.delenv(v, raising=False)
    assert hpcml.rank_and_world() == (0, 1)
    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.setenv("SLURM_NTASKS", "4")
    assert hpcml.rank_and_world() == (3, 4)
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert hpcml.rank_and_world() == (1, 2)


def test_ingest_a_dataframe_round_trip(tmp_path):
    import pandas as pd
    n = 400
    rng = np.random.default_rng(5)
    df = pd.DataFrame({
        "customer": np.arange(n) * 10,
        "when": pd.to_datetime(1_700_000_000 + np.arange(n) * 3600, unit="s", utc=True),
        "age": pd.array(rng.integers(18, 80, n), dtype="Int64"),
        "spend": rng.normal(100, 20, n),
        "plan": pd.Categorical(rng.choice(["NA", "basic", "pro"], n)),  # "NA" is a real category
        "active": pd.array(rng.random(n) < 0.5, dtype="boolean"),
        "churn": rng.choice(["yes", "no"], n),
    })
    df.loc[3, "age"] = pd.NA
    df.loc[5, "spend"] = np.nan
    df.loc[7, "plan"] = np.nan
    df.loc[9, "active"] = pd.NA
    rec = hpcml.ingest(tmp_path / "c.h5", df, entity="customer", timestamp="when", label="churn",
                       zone="test", classification="internal")
    assert rec["version"] == "v1" and rec["rows"] == n
    assert rec["sources"][0]["uri"] == "python:pandas.DataFrame"
    assert len(rec["sources"][0]["sha256"]) == 64
    assert not list(tmp_path.glob(".hpcml-frame-*"))  # the rendering is gone
    back = hpcml.FeatureSet(tmp_path / "c.h5").to_pandas("v1")
    assert list(back.columns) == list(df.columns)
    assert (back["customer"] == df["customer"]).all()
    assert (back["when"] == df["when"]).all()
    assert back["age"].isna().sum() == 1 and (back["age"].dropna() == df["age"].dropna()).all()
    np.testing.assert_allclose(back["spend"], df["spend"], rtol=1e-6)  # float32 storage
    assert back["plan"].isna().sum() == 1 and set(back["plan"].cat.categories) == {"NA", "basic", "pro"}
    assert (back["plan"].astype(object)[df["plan"].notna()] == df["plan"].astype(object).dropna()).all()
    assert (back["active"].fillna(False) == df["active"].fillna(False)).all() and back["active"].isna().sum() == 1
    assert list(back["churn"].astype(str)) == list(df["churn"])


def test_ingest_errors_name_the_frame(tmp_path, monkeypatch):
    import pandas as pd
    df = pd.DataFrame({"id": [1, 2, 3], "ts": [1_700_000_000, 1_700_000_001, "soon"], "x": [1.0, 2, 3]})
    with pytest.raises(hpcml.Error, match=r"DataFrame row 2\b"):
        hpcml.ingest(tmp_path / "e.h5", df, entity="id", timestamp="ts", zone="test",
                     classification="internal")
    with pytest.raises(hpcml.Error, match="label='y': no such column"):
        hpcml.ingest(tmp_path / "e.h5", df, entity="id", timestamp="ts", label="y", zone="test",
                     classification="internal")
    assert not (tmp_path / "e.h5").exists() and not list(tmp_path.glob(".hpcml-frame-*"))
    monkeypatch.setenv("HPCML_ZONE", "eu")  # a guarded job of another zone
    monkeypatch.setenv("HPCML_DATASETS", str(tmp_path))
    ok = df.iloc[:2]
    with pytest.raises(hpcml.Error) as e:
        hpcml.ingest(tmp_path / "e.h5", ok, entity="id", timestamp="ts", zone="test",
                     classification="internal")
    assert e.value.code == "PermissionDenied"


def test_asof_from_a_dataframe_never_looks_ahead(tmp_path):
    import pandas as pd
    feats = pd.DataFrame({"id": [1, 1, 1, 2], "ts": [100, 200, 300, 150],
                          "score": [1.0, 2.0, 3.0, 9.0]})
    hpcml.ingest(tmp_path / "f.h5", feats, entity="id", timestamp="ts", zone="test",
                 classification="internal")
    req = pd.DataFrame({"id": [1, 1, 2, 1, 3], "at": [250, 300, 140, 99, 500],
                        "y": ["a", "b", "a", "b", "a"]})
    rec, counts = hpcml.asof(tmp_path / "f.h5", req, entity="id", time="at", label="y")
    assert rec["operation"] == "asof" and rec["parents"][0]["version"] == "v1"
    assert rec["sources"][0]["uri"] == "python:pandas.DataFrame"
    assert counts == {"requests": 5, "matched": 2, "missing": 3, "written": 5}
    out = hpcml.FeatureSet(tmp_path / "f.h5").to_pandas(rec["version"])
    np.testing.assert_array_equal(out["score"].to_numpy(), [2.0, 3.0, np.nan, np.nan, np.nan])
    assert list(out["y"].astype(str)) == ["a", "b", "a", "b", "a"]
    with pytest.raises(hpcml.Error, match="DataFrame row [234]: entity [12] has no feature row at"):
        hpcml.asof(tmp_path / "f.h5", req, entity="id", time="at", version="v1", missing="error")


def test_record_lineage_read_by_hpcml_infer(churn, tmp_path, monkeypatch):
    import json as js
    infer = os.environ.get("HPCML_INFER")
    if not infer:
        pytest.skip("HPCML_INFER not set (ctest sets it)")
    model = tmp_path / "model.pt"
    model.write_bytes(b"weights of a model trained in Python")
    monkeypatch.setenv("SLURM_JOB_ID", "777")
    path = hpcml.record_lineage(model, data=churn / "churn.h5", version="v1", framework="pytorch",
                                settings={"lr": 0.01, "hidden": [64, 64]}, steps=300,
                                first_loss=0.69, final_loss=0.41, validation={"auc": 0.8})
    assert path == str(model) + ".lineage.json"
    out = subprocess.run([infer, "inspect", str(model), "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    j = js.loads(out.stdout)
    v1 = hpcml.FeatureSet(churn / "churn.h5").info("v1")
    d = j["lineage"]["data"]
    assert d["version"] == "v1" and d["data_sha256"] == v1["data_sha256"] and d["rows"] == 3000
    assert j["lineage"]["input"]["features"] == ["age", "income", "plan", "active", "visits"]
    assert j["lineage"]["job_id"] == "777" and j["lineage"]["steps"] == 300
    assert j["framework"] == "pytorch"
    settings = j["lineage"]["settings"]
    assert (js.loads(settings) if isinstance(settings, str) else settings)["lr"] == 0.01
    text = subprocess.run([infer, "inspect", str(model)], capture_output=True, text=True).stdout
    assert "trained on" in text and "churn.h5 v1" in text and "pytorch" in text
    model.write_bytes(b"another model")  # changed after its lineage was recorded
    bad = subprocess.run([infer, "inspect", str(model)], capture_output=True, text=True)
    assert bad.returncode != 0 and "changed after its lineage was recorded" in bad.stderr
