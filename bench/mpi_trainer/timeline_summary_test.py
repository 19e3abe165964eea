"""timeline_summary.py on timelines whose figures are known by hand: the
window from the marks, busy and idle time with overlapping kernels and
copies, gaps and their neighbours, per-step division, a torch.profiler
Chrome trace, and errors that name the file and line."""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timeline_summary as ts  # noqa: E402

US = 1000  # ns

# One step of 1000 us between the marks, its activity in 0-990 us:
#   0-400 GEMM, 400-500 AdamW, idle 500-550, copy HtoD 550-650 (beside
#   Loss from 600), 600-900 Loss, 10 us gap, 910-950 a set beside 920-990
#   Norm, 10 us to the stop mark. A kernel before the start mark and one
#   after the stop mark are outside.
LINES = [
    ("kernel", -300, -100, 7, "before the window"),
    ("mark", 0, 0, 0, "start"),
    ("kernel", 0, 400, 7, "nvjet_sm90_tst_256x128"),
    ("kernel", 400, 500, 7, "void hpcml::AdamW<float>"),
    ("memcpy", 550, 650, 9, "HtoD 33554432"),
    ("kernel", 600, 900, 7, "Loss"),
    ("memset", 910, 950, 7, "4096"),
    ("kernel", 920, 990, 7, "Norm"),
    ("mark", 1000, 1000, 0, "stop"),
    ("kernel", 1200, 1300, 7, "after the window"),
]


def tsv(lines):
    return "".join(f"{k}\t{s * US}\t{e * US}\t0\t{st}\t{n}\n" for k, s, e, st, n in lines)


class TimelineSummaryTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_figures_of_one_step(self):
        recs, marks, dropped = ts.read_tsv(self.write("a.tsv", tsv(LINES)))
        self.assertEqual(dropped, 0)
        f = ts.summarize(recs, marks)
        self.assertEqual(f["wall"], 990 * US)
        self.assertEqual(f["marks"], 1000 * US)
        # Kernels and the set, overlapping ones once: 0-500, 600-900, 910-990.
        self.assertEqual(f["busy"], 880 * US)
        # Nothing at all ran in 500-550 and 900-910.
        self.assertEqual(f["idle"], 60 * US)
        self.assertEqual(f["gemm"], 400 * US)
        self.assertEqual(f["other"], 100 * US + 300 * US + 70 * US)
        self.assertEqual(f["large_gaps"], (100 * US, 1))
        self.assertEqual(f["small_gaps"], (10 * US, 1))
        self.assertEqual(f["gaps"], [(100 * US, "void hpcml::AdamW<float>", "Loss"),
                                     (10 * US, "Loss", "memset 4096")])
        self.assertEqual(f["copies"], {"HtoD": (100 * US, 33554432, 50 * US)})
        self.assertEqual(f["by_name"][0], (400 * US, 1, "nvjet_sm90_tst_256x128"))
        names = [n for _, _, n in f["by_name"]]
        self.assertNotIn("before the window", names)
        self.assertNotIn("after the window", names)

    def test_per_step(self):
        recs, marks, _ = ts.read_tsv(self.write("a.tsv", tsv(LINES)))
        f = ts.summarize(recs, marks, steps=4)
        self.assertEqual(f["wall"], 247.5 * US)
        self.assertEqual(f["marks"], 250 * US)
        self.assertEqual(f["busy"], 220 * US)
        self.assertEqual(f["large_gaps"], (25 * US, 0.25))

    def test_without_marks_the_window_is_everything(self):
        lines = [l for l in LINES if l[0] != "mark"]
        recs, marks, _ = ts.read_tsv(self.write("a.tsv", tsv(lines)))
        f = ts.summarize(recs, marks)
        self.assertEqual(f["wall"], 1600 * US)
        self.assertIsNone(f["marks"])
        self.assertEqual(f["gaps"][0], (210 * US, "Norm", "after the window"))

    def test_chrome_trace(self):
        events = [
            {"ph": "X", "cat": "kernel", "name": "nvjet_a", "ts": 10.0, "dur": 40.0,
             "args": {"stream": 7}},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "ts": 20.0,
             "dur": 10.0, "args": {"stream": 9, "bytes": 4096}},
            {"ph": "X", "cat": "kernel", "name": "relu", "ts": 150.0, "dur": 50.0},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0.0, "dur": 500.0},
        ]
        recs, marks, _ = ts.read_chrome(
            self.write("t.json", json.dumps({"traceEvents": events})))
        f = ts.summarize(recs, marks)
        self.assertEqual(f["wall"], 190 * US)
        self.assertEqual(f["busy"], 90 * US)
        self.assertEqual(f["gemm"], 40 * US)
        self.assertEqual(f["gaps"], [(100 * US, "nvjet_a", "relu")])
        self.assertEqual(f["copies"], {"HtoD": (10 * US, 4096, 10 * US)})

    def test_errors_name_the_file_and_line(self):
        bad = self.write("bad.tsv", tsv(LINES[:2]) + "kernel\t1\t2\t0\n")
        with self.assertRaisesRegex(ValueError, r"bad\.tsv:3: expected 6"):
            ts.read_tsv(bad)
        late = self.write("late.tsv", "kernel\t5\t2\t0\t0\tk\n")
        with self.assertRaisesRegex(ValueError, r"late\.tsv:1: ends before it starts"):
            ts.read_tsv(late)
        empty = self.write("empty.tsv", tsv([("mark", 0, 0, 0, "start"), ("mark", 5, 5, 0, "stop")]))
        err, out = io.StringIO(), io.StringIO()
        with redirect_stderr(err), redirect_stdout(out):
            rc = ts.main([empty, bad])
        self.assertEqual(rc, 1)
        self.assertIn("empty.tsv: no device activity in the window", err.getvalue())
        self.assertIn("bad.tsv:3", err.getvalue())

    def test_report_names_the_largest_gap(self):
        path = self.write("hpcml.tsv", tsv(LINES) + "dropped\t0\t0\t0\t0\t3\n")
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(ts.main([path, "--steps", "1"]), 0)
        text = out.getvalue()
        self.assertIn("hpcml: per step over 1 steps: window 0.990 ms; compute busy 0.880 ms", text)
        self.assertIn("hpcml: from cudaProfilerStart to cudaProfilerStop: 1.000 ms", text)
        self.assertIn("gap 100.0 us after void hpcml::AdamW<float> before Loss", text)
        self.assertIn("copies HtoD: 0.100 ms, 32.0 MiB, 0.050 ms of it beside a kernel", text)
        self.assertIn("CUPTI dropped 3 records", text)


if __name__ == "__main__":
    unittest.main()
