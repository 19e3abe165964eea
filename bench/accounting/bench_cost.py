#!/usr/bin/env python3
"""hpcml-cost streaming benchmark.

Generates N lines of `sacct -P -D` output (allocation rows, step rows,
requeued attempts, typed and untyped GPUs, usage-record Comments), then times
`hpcml-cost --input` over them against `awk` summing one field (ElapsedRaw)
of the same file, in the same run. Prints both times, the ratio, and the peak
RSS of hpcml-cost at N and at N/10: streaming keeps memory flat.

usage: bench_cost.py <hpcml-cost> <prices.toml> [lines] [workdir]
Only the standard library is used.
"""
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

HEADER = "JobID|User|Account|Partition|State|Start|End|ElapsedRaw|AllocTRES|Comment\n"
BASE = 1772323200  # 2026-03-01T00:00:00Z


def stamp(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))


def generate(path, lines, seed=7):
    rng = random.Random(seed)
    users = [f"user{i:02d}" for i in range(50)]
    accounts = [f"team-{c}" for c in "abcdefgh"]
    written = 0
    job = 1000
    with open(path, "w") as f:
        f.write(HEADER)
        written += 1
        while written < lines:
            job += 1
            user = rng.choice(users)
            acct = accounts[hash(user) % len(accounts)]
            part = "batch" if rng.random() < 0.7 else "urgent"
            gpus = rng.choice([1, 2, 4, 8])
            kind = rng.random()
            if kind < 0.6:
                tres = f"billing={gpus * 4},cpu={gpus * 4},gres/gpu:h100={gpus},gres/gpu={gpus},mem={gpus * 64}G,node=1"
            elif kind < 0.9:
                tres = f"billing={gpus * 4},cpu={gpus * 4},gres/gpu:a100={gpus},gres/gpu={gpus},mem={gpus * 32000}M,node=1"
            else:
                tres = f"cpu={gpus * 2},gres/gpu={gpus},mem=8G,node=1"
            start = BASE + rng.randrange(30 * 86400)
            attempts = 2 if rng.random() < 0.05 else 1
            for attempt in range(attempts):
                elapsed = rng.randrange(60, 12 * 3600)
                end = start + elapsed
                state = "REQUEUED" if attempt + 1 < attempts else rng.choice(
                    ["COMPLETED"] * 8 + ["FAILED", "CANCELLED by 0"])
                comment = ""
                if rng.random() < 0.2:
                    comment = (f"hpcml/1,j={job},a={attempt},t={end - 5},gt=h100,gn={gpus},"
                               f"gs={elapsed * gpus},st=1000,sm=32000,sl={rng.randrange(0, 100)},"
                               f"ck=12.5,gu={rng.randrange(20, 100)}")
                f.write(f"{job}|{user}|{acct}|{part}|{state}|{stamp(start)}|{stamp(end)}|{elapsed}|{tres}|{comment}\n")
                f.write(f"{job}.batch|||||{state.split()[0]}|{stamp(start)}|{stamp(end)}|{elapsed}|cpu={gpus * 4},mem=0,node=1|\n")
                written += 2
                start = end + rng.randrange(10, 300)


GNU_TIME = "/usr/bin/time"


def run(argv, capture=False):
    """Runs argv; returns (seconds, peak RSS in MiB, stdout text).

    The peak RSS comes from GNU time (%M) when installed: a child forked from
    this Python process would report Python's own RSS as its peak (the kernel
    keeps the larger of the pre-exec and post-exec peaks). Without GNU time,
    VmHWM is polled from /proc every millisecond (peak since exec).
    """
    env = {**os.environ, "TZ": "UTC"}
    out_path = None
    if os.access(GNU_TIME, os.X_OK):
        fd, out_path = tempfile.mkstemp(prefix="acct-bench-time-")
        os.close(fd)
        argv = [GNU_TIME, "-f", "%M", "-o", out_path] + argv
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env)
    hwm_kb = 0
    if out_path is None:
        while p.poll() is None:
            try:
                with open(f"/proc/{p.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            hwm_kb = max(hwm_kb, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.001)
    out, err = p.communicate()
    seconds = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(argv)} exited {p.returncode}: {err.decode()}")
    if out_path is not None:
        with open(out_path) as f:
            hwm_kb = int(f.read().split()[-1])
        os.unlink(out_path)
    return seconds, hwm_kb / 1024.0, (out or b"").decode()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cost, prices = sys.argv[1], sys.argv[2]
    lines = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
    workdir = sys.argv[4] if len(sys.argv) > 4 else tempfile.gettempdir()
    big = os.path.join(workdir, f"acct-bench-{lines}.sacct")
    small = os.path.join(workdir, f"acct-bench-{max(lines // 10, 2)}.sacct")
    t0 = time.perf_counter()
    generate(big, lines)
    generate(small, max(lines // 10, 2))
    print(f"generated {lines} lines ({os.path.getsize(big) / 2**20:.1f} MiB) in {time.perf_counter() - t0:.1f} s")
    try:
        # Warm the page cache so both tools read from memory.
        run(["cat", big])
        awk_s, awk_rss, awk_out = run(["awk", "-F|", "NR > 1 { s += $8 } END { printf \"%d\\n\", s }", big], capture=True)
        cost_s, cost_rss, _ = run([cost, "--prices", prices, "--input", big, "--format", "csv"])
        _, small_rss, _ = run([cost, "--prices", prices, "--input", small, "--format", "csv"])
        # The full report by job keeps a row per job: memory grows, shown for contrast.
        byjob_s, byjob_rss, _ = run([cost, "--prices", prices, "--input", big, "--format", "csv",
                                     "--by", "job,account"])
    finally:
        os.unlink(big)
        os.unlink(small)
    print(f"awk (sum of ElapsedRaw = {awk_out.strip()}): {awk_s:.2f} s, peak RSS {awk_rss:.1f} MiB")
    print(f"hpcml-cost --input, {lines} lines: {cost_s:.2f} s, peak RSS {cost_rss:.1f} MiB "
          f"({lines / cost_s / 1e6:.2f} M lines/s)")
    print(f"hpcml-cost --input, {max(lines // 10, 2)} lines: peak RSS {small_rss:.1f} MiB "
          f"(memory ratio 10x lines: {cost_rss / small_rss:.2f})")
    print(f"hpcml-cost --by job,account, {lines} lines: {byjob_s:.2f} s, peak RSS {byjob_rss:.1f} MiB")
    print(f"ratio hpcml-cost / awk: {cost_s / awk_s:.2f}")


if __name__ == "__main__":
    main()
