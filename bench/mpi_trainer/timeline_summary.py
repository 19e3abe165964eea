"""Where a GPU program's time goes on the device, from a timeline: which
kernels ran how long, how long the device sat idle, and between which
kernels. Reads the tab-separated records of libhpcml_cuda_timeline.so
(bench/mpi_trainer/cuda_timeline.cpp) or a Chrome trace written by
torch.profiler (its kernel, memcpy and memset events).

    python3 timeline_summary.py FILE [FILE ...] [--steps N] [--top K]

The records looked at are those that start between the program's first
cudaProfilerStart and the next cudaProfilerStop (all of them without the
marks, as in a torch.profiler trace of the timed steps); the window is the
first start to the last end among them, so that timelines with and without
marks compare. Times are per step over --steps (default 1). Per file it
prints: the window's length (and the marks' distance, when there are
marks); "compute busy", the time some kernel or set ran (overlapping ones
counted once); "idle", the time nothing at all ran on the device (copies
included); the sum of the GEMM kernels' times (cuBLAS's) and of the other
kernels' (each kernel's whole time: overlapping kernels make these add up
to more than the busy time); the copies and how much of them ran beside a
kernel; the gaps between kernels by size, and the largest, named by the
kernels on either side; the top kernels by time. Exits 1 on an unreadable
file or an empty window.
"""
import argparse
import json
import re
import sys
from collections import defaultdict

GEMM = re.compile(r"gemm|nvjet|xmma|cutlass|cublas", re.IGNORECASE)
SMALL_GAP_NS = 50_000  # a gap under 50 us: launch latency, not a wait


class Record:
    __slots__ = ("kind", "start", "end", "stream", "name")

    def __init__(self, kind, start, end, stream, name):
        self.kind, self.start, self.end, self.stream, self.name = kind, start, end, stream, name


def read_tsv(path):
    """Records and (start, stop) marks from the injection library's file."""
    recs, marks, dropped = [], [], 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 6:
                raise ValueError(f"{path}:{n}: expected 6 tab-separated fields, got {len(parts)}")
            kind, start, end, _device, stream, name = parts
            try:
                start, end, stream = int(start), int(end), int(stream)
            except ValueError:
                raise ValueError(f"{path}:{n}: start, end and stream must be integers") from None
            if kind == "mark":
                marks.append((start, name))
            elif kind == "dropped":
                dropped += int(name)
            elif kind in ("kernel", "memcpy", "memset"):
                if end < start:
                    raise ValueError(f"{path}:{n}: ends before it starts")
                recs.append(Record(kind, start, end, stream, name))
            else:
                raise ValueError(f"{path}:{n}: unknown record kind '{kind}'")
    return recs, marks, dropped


def read_chrome(path):
    """Device events of a torch.profiler Chrome trace (us -> ns)."""
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    kinds = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
    recs = []
    for e in events:
        kind = kinds.get(e.get("cat"))
        if kind is None or e.get("ph") != "X":
            continue
        start = int(round(float(e["ts"]) * 1000))
        end = start + int(round(float(e.get("dur", 0)) * 1000))
        args = e.get("args") or {}
        name = e.get("name", "?")
        if kind == "memcpy":  # "Memcpy HtoD (Pinned -> Device)" -> "HtoD <bytes>"
            m = re.search(r"Memcpy (\w+)", name)
            name = f"{m.group(1) if m else 'other'} {int(args.get('bytes', 0))}"
        recs.append(Record(kind, start, end, int(args.get("stream", 0)), name))
    return recs, [], 0


def marked(recs, marks):
    """The records that start between the first start mark and the next
    stop mark (all without marks), and the marks' distance (None)."""
    starts = [t for t, what in marks if what == "start"]
    if not starts:
        return recs, None
    m0 = starts[0]
    stops = [t for t, what in marks if what == "stop" and t >= m0]
    m1 = stops[0] if stops else float("inf")
    inside = [r for r in recs if m0 <= r.start < m1]
    return inside, (m1 - m0 if stops else None)


def union(intervals):
    """Merged, sorted (start, end, first name, last name) of the intervals."""
    merged = []
    for s, e, name in sorted(intervals):
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1][1], merged[-1][3] = e, name
        else:
            merged.append([s, e, name, name])
    return merged


def summarize(recs, marks, steps=1):
    """The figures, in ns per step unless named otherwise."""
    inside, marks_ns = marked(recs, marks)
    if not inside:
        raise ValueError("no device activity in the window")
    w0, w1 = min(r.start for r in inside), max(r.end for r in inside)
    clip = [(r.start, r.end, r) for r in inside]
    def label(r):
        return r.name if r.kind == "kernel" else f"{r.kind} {r.name}"

    compute = union((s, e, label(r)) for s, e, r in clip if r.kind != "memcpy")
    everything = union((s, e, label(r)) for s, e, r in clip)
    busy = sum(e - s for s, e, _, _ in compute)
    any_busy = sum(e - s for s, e, _, _ in everything)
    # Gaps between the merged compute intervals (a copy at an edge of the
    # window makes a gap there too).
    gaps = []
    prev_end, prev_name = w0, "(window start)"
    for s, e, first, last in compute:
        if s > prev_end:
            gaps.append((s - prev_end, prev_name, first))
        prev_end, prev_name = e, last
    if w1 > prev_end:
        gaps.append((w1 - prev_end, prev_name, "(window end)"))
    by_name = defaultdict(lambda: [0, 0])
    for s, e, r in clip:
        if r.kind == "kernel":
            by_name[r.name][0] += e - s
            by_name[r.name][1] += 1
    copies = defaultdict(lambda: [0, 0, 0])  # direction: ns, bytes, ns beside a kernel
    for s, e, r in clip:
        if r.kind != "memcpy":
            continue
        direction, _, size = r.name.partition(" ")
        c = copies[direction]
        c[0] += e - s
        c[1] += int(size) if size.isdigit() else 0
        c[2] += overlap(s, e, compute)
    gemm = sum(t for name, (t, _) in by_name.items() if GEMM.search(name))
    kernels = sum(t for t, _ in by_name.values())
    per = float(steps)
    return {
        "wall": (w1 - w0) / per,
        "marks": None if marks_ns is None else marks_ns / per,
        "busy": busy / per,
        "idle": (w1 - w0 - any_busy) / per,
        "kernels": kernels / per,
        "gemm": gemm / per,
        "other": (kernels - gemm) / per,
        "gaps": sorted(gaps, reverse=True),
        "small_gaps": (sum(g for g, _, _ in gaps if g < SMALL_GAP_NS) / per,
                       sum(1 for g, _, _ in gaps if g < SMALL_GAP_NS) / per),
        "large_gaps": (sum(g for g, _, _ in gaps if g >= SMALL_GAP_NS) / per,
                       sum(1 for g, _, _ in gaps if g >= SMALL_GAP_NS) / per),
        "by_name": sorted(((t / per, n / per, name) for name, (t, n) in by_name.items()),
                          reverse=True),
        "copies": {d: (t / per, b / per, o / per) for d, (t, b, o) in copies.items()},
        "steps": steps,
    }


def overlap(s, e, merged):
    """ns of [s, e) inside the merged intervals."""
    total = 0
    for ms, me, _, _ in merged:
        if me <= s:
            continue
        if ms >= e:
            break
        total += min(e, me) - max(s, ms)
    return total


def ms(ns):
    return f"{ns / 1e6:.3f}"


def short(name, width=60):
    return name if len(name) <= width else name[: width - 3] + "..."


def report(label, f, top=12, dropped=0):
    out = [f"{label}: per step over {f['steps']} steps: window {ms(f['wall'])} ms; "
           f"compute busy {ms(f['busy'])} ms (kernel sums: GEMMs {ms(f['gemm'])}, other "
           f"{ms(f['other'])}); idle {ms(f['idle'])} ms"]
    if f["marks"] is not None:
        out.append(f"{label}: from cudaProfilerStart to cudaProfilerStop: {ms(f['marks'])} ms")
    (sg, sn), (lg, ln) = f["small_gaps"], f["large_gaps"]
    out.append(f"{label}: gaps between kernels: {sn:.1f} under 50 us ({ms(sg)} ms), "
               f"{ln:.1f} of 50 us or more ({ms(lg)} ms)")
    for g, before, after in f["gaps"][:5]:
        if g < SMALL_GAP_NS:
            break
        out.append(f"{label}:   gap {g / 1e3:.1f} us after {short(before, 50)} "
                   f"before {short(after, 50)}")
    for d, (t, b, o) in sorted(f["copies"].items()):
        out.append(f"{label}: copies {d}: {ms(t)} ms, {b / 2**20:.1f} MiB, {ms(o)} ms of it "
                   "beside a kernel")
    for t, n, name in f["by_name"][:top]:
        out.append(f"{label}:   {ms(t)} ms  {n:5.1f} x {t / max(n, 1e-9) / 1e3:8.1f} us  "
                   f"{short(name, 90)}")
    if dropped:
        out.append(f"{label}: warning: CUPTI dropped {dropped} records: the figures miss them")
    return "\n".join(out)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--top", type=int, default=12)
    a = p.parse_args(argv)
    if a.steps < 1:
        p.error("--steps must be at least 1")
    rc = 0
    for path in a.files:
        label = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        try:
            if path.endswith(".json"):
                recs, marks, dropped = read_chrome(path)
            else:
                recs, marks, dropped = read_tsv(path)
            print(report(label, summarize(recs, marks, a.steps), a.top, dropped))
        except (OSError, ValueError, KeyError) as e:
            print(f"timeline_summary: {path}: {e}", file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
