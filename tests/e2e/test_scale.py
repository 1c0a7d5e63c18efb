"""Many ranks against one aggregator: the short version of bench/loadgen's
scale runs (docs/performance.md "Many ranks against one aggregator").

The load generator is the real aggregator (poll server, aggregator object,
SQLite store) fed by simulated ranks; these runs check what must hold at
any scale, not how fast: no record lost, memory within the budget, and a
summary() answer that fits a wire frame. The timings are benchmarks, not
assertions."""
import os
import re
import subprocess

import pytest

from conftest import BUILD

QUICK = True

LOADGEN = os.path.join(BUILD, "bench", "loadgen")
FRAME = 1 << 20          # TML_WIRE_MAX_PAYLOAD: what one SUMMARY frame may carry


def loadgen(*args, timeout=300):
    if not os.path.exists(LOADGEN):
        pytest.skip("bench/loadgen is not built (make)")
    p = subprocess.run([LOADGEN, *args], capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def rows(out):
    """The table rows of a loadgen report, as lists of cells."""
    return [[c.strip() for c in line.strip("|").split("|")]
            for line in out.splitlines() if re.match(r"\| \d", line)]


def test_two_thousand_ranks_in_the_budget():
    # 2,000 ranks x 400 steps: past the budget's full share (~55 ranks),
    # so every rank keeps fewer records; the summary() answer keeps only
    # the ranks it names.
    out = loadgen("--long", "400", "--ranks", "2000", "--repeats", "1")
    (row,) = rows(out)
    steps, records, rss, peak = int(row[0]), int(row[1]), float(row[2]), float(row[3])
    answer_kb = float(row[5])
    assert (steps, records) == (400, 800000)
    assert peak < 160 + 64, out          # TRACEML_MEMORY_MB's default + SQLite and the rest
    assert answer_kb * 1024 < FRAME / 4, out
    # the final summary was written and named the straggler loadgen injects
    assert "(written; INPUT STRAGGLER, R7 named)" in out, out


def test_ranks_stream_without_loss():
    # The live path: 300 simulated ranks speak the wire protocol for 3 s,
    # the last joining a quarter in; rank 0 asks for the summary 4 times
    # meanwhile. loadgen exits 1 when a record is lost or an answer is not.
    out = loadgen("--live-only", "--ranks", "300", "--rate", "10", "--seconds", "3")
    (row,) = rows(out)
    assert int(row[0]) == 300 and row[1] == row[2] and row[3] == "0", out
    assert float(row[10]) >= 0 and row[11].endswith("(4 of 4)"), out
