"""What `traceml export --chrome-trace` costs on long runs: its peak RSS
and time, and the trace's size, for runs of 10^4 .. 10^6 steps.

    .venv/bin/python bench/export_memory.py RUN_FOLDER [--steps 10000,100000,1000000]
                     [--traceml build/bin/traceml] [--baseline OTHER/bin/traceml]

RUN_FOLDER is any real run (its telemetry.sqlite: e.g. a quickstart run
under `traceml run`). Its rank 0's steps are repeated, numbered on, into a
run of N steps (a copy in a temporary folder), which each binary exports
in full and with --steps N/2:N/2+1000. Printed: one row per binary, run
length and export (median seconds of --repeats, peak RSS of the process,
output MB). A baseline (an older build) without --steps support gets
only the full export.
"""
import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time


def make_run(src, dst, steps):
    """src's rank 0 repeated into `steps` steps (start times moved on by
    the source's span each round, so the steps stay in order)."""
    os.makedirs(dst)
    db = os.path.join(dst, "telemetry.sqlite")
    a = sqlite3.connect(os.path.join(src, "telemetry.sqlite"))
    b = sqlite3.connect(db)
    a.backup(b)
    a.close()
    cols = [r[1] for r in b.execute("PRAGMA table_info(steps)")]
    n, lo, hi = b.execute("SELECT COUNT(*), MIN(start_ns), MAX(start_ns) FROM steps "
                          "WHERE rank = 0").fetchone()
    span = hi - lo + 1
    rest = [c for c in cols if c not in ("step", "start_ns")]
    b.execute("CREATE TEMP TABLE base AS SELECT * FROM steps WHERE rank = 0")
    b.execute("DELETE FROM steps")
    rounds = (steps + n - 1) // n
    b.execute("WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?) "
              "INSERT INTO steps (step, start_ns, %s) SELECT step + i * ?, start_ns + i * ?, %s "
              "FROM base, k WHERE step + i * ? < ?" % (", ".join(rest), ", ".join(rest)),
              (rounds, n, span, n, steps))
    b.commit()
    b.close()


def export(binary, folder, out, extra):
    t = time.perf_counter()
    p = subprocess.run([binary, "export", "--chrome-trace", folder, "-o", out] + extra,
                       capture_output=True, text=True)
    took = time.perf_counter() - t
    if p.returncode != 0:
        return None
    return took, os.path.getsize(out)


def measure(binary, folder, out, extra, repeats):
    """Median seconds, peak RSS (MB, of a process of its own), output MB."""
    times, size = [], 0
    for _ in range(repeats):
        r = export(binary, folder, out, extra)
        if r is None:
            return None
        times.append(r[0])
        size = r[1]
    # the peak of one more run, alone in a child whose maximum is its own
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.execv(binary, [binary, "export", "--chrome-trace", folder, "-o", out] + extra)
    _, status, ru = os.wait4(pid, 0)
    return statistics.median(times), ru.ru_maxrss / 1024.0, size / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--steps", default="10000,100000,1000000")
    ap.add_argument("--traceml", default=os.path.join("build", "bin", "traceml"))
    ap.add_argument("--baseline")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tml_export_bench")
    binaries = [("this build", a.traceml)] + ([("baseline", a.baseline)] if a.baseline else [])
    print("%-11s %9s %-22s %9s %9s %9s" % ("binary", "steps", "export", "seconds", "RSS MB",
                                           "out MB"))
    try:
        for steps in (int(s) for s in a.steps.split(",")):
            folder = os.path.join(tmp, "run%d" % steps)
            make_run(a.run, folder, steps)
            mid = steps // 2
            for label, binary in binaries:
                for what, extra in (("all", []),
                                    ("--steps %d:%d" % (mid, mid + 1000),
                                     ["--steps", "%d:%d" % (mid, mid + 1000)])):
                    r = measure(binary, folder, os.path.join(tmp, "out.json"), extra, a.repeats)
                    if r is None:
                        print("%-11s %9d %-22s %9s" % (label, steps, what, "(refused)"))
                        continue
                    print("%-11s %9d %-22s %9.2f %9.1f %9.1f" % ((label, steps, what) + r))
            shutil.rmtree(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
