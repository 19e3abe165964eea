"""hpcml for Python jobs: feature sets, the sharded loader, preemption.

    import hpcml
    fs = hpcml.FeatureSet("/data/ae/churn.h5")
    fs.versions                       # ["v1", "v2", ...]
    df = fs.to_pandas("v2")           # categories as pandas categoricals, missing as missing
    for x, y in hpcml.Loader("/data/ae/churn.h5", "v2", batch_rows=1024, epochs=1):
        ...                           # this rank's shard, NumPy arrays without a copy

Every read goes through hpcml's C++ feature cache: inside a guarded job
(HPCML_ZONE set by the guard) a set must be approved for the job, in its
zone and of a classification the role may read, as for hpcml-fcache and
hpcml-train. That is a guard-rail, not the boundary: the guard's view of the
file system is (docs/python.md).

Importing hpcml starts nothing: no threads, no MPI, no signal handlers.
Errors are hpcml.Error, carrying hpcml's message (file, version, row,
column) and its kind in `.code` ("PermissionDenied", "NotFound", ...).
"""
import json
import os

from ._hpcml import Error, __version__
from . import _hpcml
from .preemption import REQUEUE_EXIT_CODE, Preemption, agree_max, exit_now
from .distributed import init_torch

__all__ = ["Error", "FeatureSet", "Loader", "Preemption", "REQUEUE_EXIT_CODE", "agree_max",
           "asof", "exit_now", "ingest", "init_torch", "rank_and_world", "record_lineage",
           "__version__"]


def _error(message, code="InvalidArgument"):
    """An hpcml.Error raised by the Python side, with its `code` like the C++ side's."""
    err = Error(message)
    err.code = code
    return err


class FeatureSet:
    """A feature set file as it was when opened (a snapshot: versions
    published later need a new FeatureSet)."""

    def __init__(self, path):
        self._fs = _hpcml.FeatureSet(os.fspath(path))

    path = property(lambda self: self._fs.path)
    zone = property(lambda self: self._fs.zone)
    classification = property(lambda self: self._fs.classification)
    versions = property(lambda self: list(self._fs.versions), doc="oldest first")
    latest = property(lambda self: self._fs.latest)

    def __repr__(self):
        return (f"hpcml.FeatureSet({self.path!r}: zone {self.zone}, {self.classification}, "
                f"{len(self.versions)} versions, latest {self.latest})")

    def resolve(self, version="latest"):
        """"latest", "v3" or "3" -> "v3"."""
        return self._fs.resolve(str(version))

    def info(self, version="latest"):
        """The version's record, as `hpcml-fcache info --json` prints it."""
        return json.loads(self._fs.info_json(str(version)))

    def stats(self, version="latest"):
        """The statistics stored with the version (`hpcml-fcache stats --json`)."""
        return json.loads(self._fs.stats_json(str(version)))

    def lineage(self, version="latest"):
        """The version and its ancestors in this file, nearest first: each
        version's record (operation, transform, parents with their digests,
        sources)."""
        out, todo, seen = [], [self.resolve(version)], set()
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.add(name)
            rec = self.info(name)
            out.append(rec)
            todo += [p["version"] for p in rec["parents"] if p["version"] in self._fs.versions]
        return out

    def read(self, version="latest", columns=None, rows=None):
        """The version's arrays: "features" (rows x columns, float32: numbers,
        0/1 for bool, a category's code), "labels" (float32 or None),
        "entity_ids", "timestamps" (int64 microseconds), "ints" (exact int64
        values of int columns, or None) and "columns". `columns` selects
        feature columns by name; `rows` is a (start, stop) range."""
        return self._fs.read(str(version), columns, rows)

    def to_pandas(self, version="latest", columns=None, rows=None, label=True):
        """The version as a pandas DataFrame: the entity and timestamp
        columns, each feature as its kind (float64 numbers, nullable Int64
        for int, nullable boolean for bool, categorical with the version's
        dictionary for category; missing cells missing), and the label (class
        names as a categorical, or numbers) last."""
        import numpy as np
        import pandas as pd

        info = self.info(version)
        arrays = self.read(info["version"], columns, rows)
        kinds = dict(zip(info["feature_names"], info["feature_types"] if info["typed"] else
                         ["float"] * len(info["feature_names"])))
        cats = dict(zip(info["feature_names"], self._fs.categories(info["version"])))
        x, ints = arrays["features"], arrays["ints"]
        data = {}
        if info["entity_type"] == "string":
            keys = np.asarray(self._fs.entity_keys(info["version"]), dtype=object)
            data[info["entity"]] = keys[arrays["entity_ids"]]
        else:
            data[info["entity"]] = arrays["entity_ids"]
        data[info["timestamp"]] = pd.to_datetime(arrays["timestamps"], unit="us", utc=True)
        for c, name in enumerate(arrays["columns"]):
            col, kind = x[:, c], kinds[name]
            missing = np.isnan(col)
            if kind == "category":
                codes = np.where(missing, -1, col).astype(np.int64)
                data[name] = pd.Categorical.from_codes(codes, categories=cats[name])
            elif kind == "int":
                exact = ints[:, c] if ints is not None else col.astype(np.int64)
                data[name] = pd.array(np.where(missing, 0, exact), dtype="Int64")
                data[name][missing] = pd.NA
            elif kind == "bool":
                data[name] = pd.array(np.where(missing, False, col == 1), dtype="boolean")
                data[name][missing] = pd.NA
            else:
                data[name] = col.astype(np.float64)
        if label and arrays["labels"] is not None:
            y = arrays["labels"]
            classes = info["label_classes"]
            data[info["label"]] = (pd.Categorical.from_codes(y.astype(np.int64), categories=classes)
                                   if classes else y.astype(np.float64))
        return pd.DataFrame(data)


def _kind(series):
    """The hpcml kind of a pandas column (format.hpp's kinds)."""
    import pandas as pd
    t = series.dtype
    if isinstance(t, pd.CategoricalDtype) or pd.api.types.is_object_dtype(t) or \
            pd.api.types.is_string_dtype(t):
        return "category"
    if pd.api.types.is_bool_dtype(t):
        return "bool"
    if pd.api.types.is_integer_dtype(t):
        return "int"
    if pd.api.types.is_float_dtype(t):
        return "float"
    raise _error(f"column {series.name!r}: pandas dtype {t} has no hpcml kind "
                 "(numbers, bool, integers, strings or categoricals)")


def _render(df, timestamps, skip_kinds):
    """`df` as the CSV hpcml-fcache reads: datetimes in `timestamps` as ISO
    8601 UTC with microseconds (naive ones taken as UTC), bools as
    true/false, missing cells empty; and each other column's kind."""
    import pandas as pd
    out = pd.DataFrame(index=df.index)
    kinds = {}
    for name in df.columns:
        col = df[name]
        if name in timestamps and pd.api.types.is_datetime64_any_dtype(col.dtype):
            utc = col.dt.tz_convert("UTC") if col.dt.tz is not None else col.dt.tz_localize("UTC")
            out[name] = utc.dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            continue
        if name not in skip_kinds:
            kinds[str(name)] = _kind(col)
        out[name] = col.map({True: "true", False: "false"}) if kinds.get(str(name)) == "bool" else col
    return out, kinds


def _through_csv(target, frame, call):
    """Writes `frame` as CSV to a temporary file beside `target` (inside a
    guarded job it is then under the same approval), runs call(csv) and
    removes the file. hpcml's errors name the frame's rows, not the file's
    lines."""
    import re
    import tempfile
    fd, csv = tempfile.mkstemp(prefix=".hpcml-frame-", suffix=".csv", dir=os.path.dirname(target))
    try:
        with os.fdopen(fd, "w", newline="") as f:
            frame.to_csv(f, index=False, na_rep="")
        return call(csv)
    except Error as e:
        msg = re.sub(re.escape(csv) + r": line (\d+)",
                     lambda m: f"DataFrame row {int(m.group(1)) - 2}", str(e)).replace(csv, "DataFrame")
        raise _error(msg, getattr(e, "code", "")) from None
    finally:
        os.unlink(csv)


def _need_columns(df, **roles):
    for role, col in roles.items():
        if col is not None and col not in df.columns:
            raise _error(f"{role}={col!r}: no such column in the DataFrame "
                         f"(it has {', '.join(map(str, df.columns))})")


def ingest(path, df, *, entity, timestamp, zone, classification, label=None,
           source="python:pandas.DataFrame"):
    """A new version of the feature set at `path` (created if needed) from a
    DataFrame, through hpcml-fcache ingest: the same checks (inside a guarded
    job: the set approved, in the job's zone), lineage (the source is
    `source`, with the SHA-256 of the frame as CSV) and atomic publication.
    Each column keeps its kind (category or string: category; bool; integer,
    nullable Int64 included: int; float); missing cells stay missing.
    Timestamps: datetimes (naive ones are UTC) or epoch seconds. The frame
    is written as CSV to a temporary file beside the set, removed after.
    Returns the new version's record (as FeatureSet.info)."""
    _need_columns(df, entity=entity, timestamp=timestamp, label=label)
    target = os.path.abspath(os.fspath(path))
    frame, kinds = _render(df, {timestamp}, {entity, timestamp})
    if label is not None and kinds.get(str(label)) == "category":
        kinds.pop(str(label))  # string labels become classes
    text = _through_csv(target, frame, lambda csv: _hpcml.ingest(
        target, csv, source, str(entity), str(timestamp), "" if label is None else str(label),
        zone, classification, kinds))
    return json.loads(text)


def asof(path, requests, *, entity, time, label=None, version="latest", max_age=None,
         known_at=False, missing="nan", source="python:pandas.DataFrame"):
    """Point-in-time features for a DataFrame of requests (hpcml-fcache
    asof): for each (entity, time) row, the newest feature row of that
    entity at or before the time, never after. The result is a new version
    of the set (parent: `version`; source: the requests), one row per
    request in request order, with its label when `label` names one.
    `max_age` (a pandas Timedelta or seconds): older matches count as
    missing; `missing`: "nan" (keep the request), "drop" or "error".
    Returns (the new version's record, counts of requests, matched, missing
    and written rows)."""
    import pandas as pd
    _need_columns(requests, entity=entity, time=time, label=label)
    target = os.path.abspath(os.fspath(path))
    frame, _ = _render(requests, {time}, set(requests.columns))
    age = None
    if max_age is not None:
        age = int(pd.Timedelta(max_age).value // 1000) if not isinstance(max_age, (int, float)) \
            else int(max_age * 1_000_000)
    text, counts = _through_csv(target, frame, lambda csv: _hpcml.asof(
        target, csv, source, str(version), str(entity), str(time),
        "" if label is None else str(label), age, known_at, missing))
    return json.loads(text), counts


def record_lineage(model_path, *, data, version="latest", framework="", settings=None, steps=0,
                   first_loss=0.0, final_loss=0.0, validation=None):
    """Records where a model file the job wrote came from, in the JSON
    hpcml-train keeps in its model files, as "<model_path>.lineage.json":
    the training version of the feature set `data` (canonical path, digest,
    zone, classification, rows, rows per class, schema, statistics,
    standardisation; opened with the guard's checks), who and which job,
    `settings` and `validation` (dicts, as JSON), steps and losses, and the
    model file's SHA-256. `hpcml-infer inspect <model_path>` prints it and
    refuses a model that changed since. Returns the record's path."""
    return _hpcml.record_lineage(
        os.fspath(model_path), framework, os.fspath(data), str(version),
        json.dumps(settings or {}, sort_keys=True), int(steps), float(first_loss),
        float(final_loss), json.dumps(validation) if validation else "")


def rank_and_world():
    """This process's rank and the number of ranks: torch.distributed's when
    it is initialised, else MPI's (Open MPI's or PMI's variables), else
    Slurm's task (SLURM_PROCID of SLURM_NTASKS), else (0, 1). Reads only;
    starts nothing."""
    import sys
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    for rank, size in [("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"),
                       ("PMIX_RANK", "PMIX_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")]:
        if rank in os.environ and size in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    return 0, 1


class Loader:
    """This rank's batches of a version: the sharded, shuffled loader
    hpcml-train reads from (docs/featurecache.md has the rule), as NumPy
    arrays that share the loader's buffer (no copy; torch.from_numpy shares
    them too). Deterministic: the batches follow from (seed, epoch, ranks),
    and position()/restore() resume exactly where a checkpoint was taken.

    Iterating yields (x, y) per batch until `epochs` epochs are done
    (endless with epochs=0); next_batch() also gives the rows' ids, epoch
    and step. rank and world default to rank_and_world().

    virtual_ranks=V lays the data out for V ranks whatever the job's world
    (V a multiple of world): rank r reads virtual ranks r*V/world ..
    (r+1)*V/world - 1, batch_rows rows each, and hands them as one batch
    (one copy when V > world). Every step's global batch (batch_rows * V
    rows, in virtual-rank order) is then the same on any world that divides
    V, and a position() taken on one world restores on another: a job
    preempted on 4 ranks resumes mid-epoch on 2 (docs/python.md)."""

    def __init__(self, path, version="latest", *, rank=None, world=None, batch_rows=256,
                 seed=0, shuffle=True, drop_last=False, epochs=1, threads=1, prefetch=8,
                 virtual_ranks=None):
        if rank is None or world is None:
            r, w = rank_and_world()
            rank = r if rank is None else rank
            world = w if world is None else world
        v = world if virtual_ranks is None else int(virtual_ranks)
        if world < 1 or not 0 <= rank < world:
            raise _error(f"loader: rank {rank} is not in a world of {world} ranks")
        if v < world or v % world != 0:
            raise _error(f"loader: virtual_ranks={v} is not a multiple of the world "
                         f"({world} ranks)")
        per = v // world
        self._ls = [_hpcml.Loader(os.fspath(path), str(version), rank * per + i, v, batch_rows,
                                  seed, shuffle, drop_last, epochs, threads, prefetch)
                    for i in range(per)]
        self._l = self._ls[0]
        self.rank, self.world, self.virtual_ranks = rank, world, v

    done = property(lambda self: self._l.done)
    epoch = property(lambda self: self._l.epoch, doc="of the next batch")
    step = property(lambda self: self._l.step, doc="of the next batch within its epoch")
    batches_per_epoch = property(lambda self: self._l.batches_per_epoch)
    rows = property(lambda self: self._l.rows, doc="in the version")
    features = property(lambda self: self._l.features)

    def tensors(self):
        """Iterates like the loader itself, as torch tensors that share the
        batches' memory (torch.from_numpy: no copy): (x, y), y float32 (the
        class code or the target; None without labels)."""
        import torch
        for x, y in self:
            yield torch.from_numpy(x), None if y is None else torch.from_numpy(y)

    def next_batch(self):
        """(x, y, row_ids, epoch, step) of the next batch; y is None for a
        version without labels."""
        if len(self._ls) == 1:
            return self._l.next()
        import numpy as np  # here, not at import: numpy's BLAS starts threads
        parts = [l.next() for l in self._ls]
        y = None if parts[0][1] is None else np.concatenate([p[1] for p in parts])
        return (np.concatenate([p[0] for p in parts]), y,
                np.concatenate([p[2] for p in parts]), parts[0][3], parts[0][4])

    def __iter__(self):
        if len(self._ls) == 1:
            next_xy = self._l.next_xy
            while not self._l.done:
                yield next_xy()
        else:
            while not self._l.done:
                yield self.next_batch()[:2]

    def position(self):
        """Where the loader is (the next batch), as text to save with a checkpoint."""
        return self._l.position()

    def restore(self, position):
        """Continue at a position() text: the batches that follow are those an
        uninterrupted loader would have given from there. A position belongs
        to its layout (data, ranks or virtual_ranks, batch, seed): another is
        refused."""
        for l in self._ls:
            l.restore(position)

    def start_epoch(self, epoch):
        """Continue at the start of `epoch`, in any layout (after a change in
        the number of ranks, say)."""
        self.restore(f"epoch={int(epoch)} step=0 fingerprint=0")
