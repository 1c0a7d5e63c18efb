"""`traceml export --chrome-trace` on a real run: the Trace Event Format
structure Chrome and Perfetto read (one track per rank, every step a slice
with its phases nested inside, the input wait before the bracket)."""
import json
import os
import subprocess

import pytest

from conftest import REPO, TRACEML, EXAMPLES, base_env

# its tests share one fixture's runs: all on one pytest worker (tests/run), and the
# fixture session-scoped there, so the worker's other tests in between do not
# make it again
pytestmark = pytest.mark.xdist_group("export")

STEPS = 40


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory):
    logs = tmp_path_factory.mktemp("export") / "logs"
    p = subprocess.run([TRACEML, "run", "--logs-dir", str(logs), "--run-name", "exp",
                        os.path.join(EXAMPLES, "quickstart.py")], cwd=REPO,
                       env=base_env(QUICKSTART_STEPS=str(STEPS)), capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    return logs / "exp"


def export(args, cwd):
    return subprocess.run([TRACEML, "export"] + args, cwd=str(cwd), capture_output=True,
                          text=True, timeout=60)


def test_chrome_trace_structure(run_dir, tmp_path):
    out = tmp_path / "trace.json"
    p = export(["--chrome-trace", str(run_dir), "-o", str(out)], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "%d steps" % STEPS in p.stderr
    doc = json.loads(out.read_text())
    assert doc["otherData"]["run_name"] == "exp"
    ev = doc["traceEvents"]
    meta = [e for e in ev if e["ph"] == "M"]
    slices = [e for e in ev if e["ph"] == "X"]
    assert {e["ph"] for e in ev} == {"M", "X"}
    names = {(e["name"], e.get("tid")) for e in meta}
    assert ("thread_name", 0) in names and ("process_name", None) in names
    assert [e["args"]["name"] for e in meta if e["name"] == "thread_name"] == ["R0/N0"]
    for e in slices:
        assert set(e) >= {"ph", "pid", "tid", "name", "ts", "dur", "cat"}
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        assert e["pid"] == 0 and e["tid"] == 0
    steps = [e for e in slices if e["cat"] == "step"]
    assert [e["args"]["step"] for e in steps] == list(range(STEPS))
    # phases nest inside their step; the input wait ends where the bracket starts
    by_step = sorted(steps, key=lambda e: e["ts"])
    for a, b in zip(by_step, by_step[1:]):
        assert a["ts"] + a["dur"] <= b["ts"] + 1e-3        # steps do not overlap
    children = [e for e in slices if e["cat"] in ("input", "phase")]
    assert {e["name"] for e in children} >= {"Input Wait", "Forward", "Backward", "Optimizer"}
    for c in children:
        parent = [s for s in steps if s["ts"] - 1e-3 <= c["ts"] and
                  c["ts"] + c["dur"] <= s["ts"] + s["dur"] + 1e-3]
        assert len(parent) == 1, c
    first = by_step[3]
    inp = [c for c in children if c["name"] == "Input Wait" and c["ts"] == first["ts"]]
    assert inp and first["args"]["input_wait_ms"] == pytest.approx(inp[0]["dur"] / 1000, abs=1e-3)
    assert first["args"]["step_time_ms"] == pytest.approx(first["dur"] / 1000, abs=1e-3)
    # the quickstart sleeps 10 ms per batch: the input waits show it
    waits = sorted(c["dur"] for c in children if c["name"] == "Input Wait")
    assert waits[len(waits) // 2] > 9000


def test_default_output_and_sqlite_path(run_dir, tmp_path):
    p = export(["--chrome-trace", str(run_dir / "telemetry.sqlite")], tmp_path)
    assert p.returncode == 0, p.stderr
    assert (run_dir / "chrome_trace.json").exists()
    json.loads((run_dir / "chrome_trace.json").read_text())


def test_bad_input(tmp_path):
    (tmp_path / "notdb").mkdir()
    (tmp_path / "junk.sqlite").write_text("not a database")
    for args in (["--chrome-trace"], [str(tmp_path / "notdb")], ["--chrome-trace", "missing"],
                 ["--chrome-trace", str(tmp_path / "notdb")],
                 ["--chrome-trace", str(tmp_path / "junk.sqlite")], ["--bogus"]):
        p = export(args, tmp_path)
        assert p.returncode == 2, (args, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("traceml: error: "), p.stderr


V5_ADDED = ("samples", "tokens", "flops", "peak_flops", "flops_how")   # throughput
V1_DROPPED = ("comm_exposed_ns", "gpu_comm_exposed_ns", "comm_ns", "comm_bytes", "comm_count",
              "incarnation") + V5_ADDED
V2_DROPPED = ("incarnation",) + V5_ADDED


def copy_run(run_dir, folder):
    """run_dir's telemetry.sqlite copied into a new folder: a connection to the copy."""
    import sqlite3
    folder.mkdir()
    db = str(folder / "telemetry.sqlite")
    src = sqlite3.connect(str(run_dir / "telemetry.sqlite"))
    src.backup(sqlite3.connect(db))
    src.close()
    return sqlite3.connect(db)


def older_file(run_dir, tmp_path, dropped, version):
    """A copy of the run's telemetry.sqlite as an older schema wrote it."""
    old = tmp_path / ("v%d" % version)
    con = copy_run(run_dir, old)
    db = old / "telemetry.sqlite"
    cols = [r[1] for r in con.execute("PRAGMA table_info(steps)") if r[1] not in dropped]
    con.executescript(
        "CREATE TABLE old AS SELECT %s FROM steps; DROP TABLE steps; ALTER TABLE old RENAME TO "
        "steps; UPDATE run SET schema_version = %d;" % (", ".join(cols), version))
    con.close()
    return old, db


def test_version_2_file_still_exports(run_dir, tmp_path):
    """A run folder written before incarnations (schema version 2: no
    steps.incarnation) exports the same steps, and is left as it was."""
    old, db = older_file(run_dir, tmp_path, V2_DROPPED, 2)
    before = db.read_bytes()
    p = export(["--chrome-trace", str(old), "-o", str(tmp_path / "t.json")], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "%d steps" % STEPS in p.stderr, p.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    assert len([e for e in doc["traceEvents"] if e.get("cat") == "step"]) == STEPS
    assert db.read_bytes() == before


def test_version_1_file_still_exports(run_dir, tmp_path):
    """A run folder written before communication was measured (schema
    version 1: the steps table without its five comm_* columns) exports
    the same steps, and the file is left as it was."""
    old, db = older_file(run_dir, tmp_path, V1_DROPPED, 1)
    before = db.read_bytes()
    p = export(["--chrome-trace", str(old), "-o", str(tmp_path / "t.json")], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "%d steps" % STEPS in p.stderr, p.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    steps = [e for e in doc["traceEvents"] if e.get("cat") == "step"]
    assert len(steps) == STEPS
    assert not any(e["name"] == "Communication" for e in doc["traceEvents"])
    assert db.read_bytes() == before


def three_ranks(run_dir, tmp_path):
    """A copy of the run as three ranks: rank 1 the same steps, rank 2 the
    same steps from two processes (the second a restart, incarnation 1,
    whose steps the run numbers on after the first's)."""
    folder = tmp_path / "ranks3"
    con = copy_run(run_dir, folder)
    cols = [r[1] for r in con.execute("PRAGMA table_info(steps)")]
    rest = [c for c in cols if c not in ("rank", "incarnation")]
    for rank, inc in ((1, 0), (2, 0), (2, 1)):
        con.execute("INSERT INTO steps (rank, incarnation, %s) SELECT %d, %d, %s FROM steps "
                    "WHERE rank = 0" % (", ".join(rest), rank, inc, ", ".join(rest)))
    con.commit()
    con.close()
    return folder


def step_slices(out):
    doc = json.loads(out.read_text())
    tracks = [e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"]
    return tracks, {(e["tid"], e["args"]["step"]): e["ts"]
                    for e in doc["traceEvents"] if e.get("cat") == "step"}


def test_steps_and_ranks_chosen(run_dir, tmp_path):
    """--steps A:B and --ranks LIST: only those steps of those ranks, at
    the times the whole run's trace gives them; a restarted rank's steps
    numbered as the summary numbers them."""
    folder = three_ranks(run_dir, tmp_path)
    full, part, late = tmp_path / "full.json", tmp_path / "part.json", tmp_path / "late.json"
    p = export(["--chrome-trace", str(folder), "-o", str(full)], tmp_path)
    assert p.returncode == 0 and "3 ranks, %d steps" % (4 * STEPS) in p.stderr, p.stderr
    tracks, everything = step_slices(full)
    assert tracks == ["R0/N0", "R1/N0", "R2/N0"], tracks
    assert sorted(s for t, s in everything if t == 2) == list(range(2 * STEPS))
    p = export(["--chrome-trace", str(folder), "-o", str(part), "--steps", "5:10",
                "--ranks", "1-2"], tmp_path)
    assert p.returncode == 0 and "2 ranks, 10 steps" in p.stderr, p.stderr
    tracks, chosen = step_slices(part)
    assert tracks == ["R1/N0", "R2/N0"], tracks
    assert sorted(chosen) == [(t, s) for t in (1, 2) for s in range(5, 10)]
    assert all(everything[k] == ts for k, ts in chosen.items())
    p = export(["--chrome-trace", str(folder), "-o", str(late), "--steps",
                "%d:" % (2 * STEPS - 2), "--ranks", "0,2"], tmp_path)
    assert p.returncode == 0 and "1 rank, 2 steps" in p.stderr, p.stderr
    assert sorted(step_slices(late)[1]) == [(2, 2 * STEPS - 2), (2, 2 * STEPS - 1)]


@pytest.mark.parametrize("opt,value", [("--steps", "5"), ("--steps", "9:3"), ("--steps", "a:b"),
                                       ("--ranks", "x"), ("--ranks", "3-1"), ("--ranks", ",")])
def test_bad_choice(run_dir, tmp_path, opt, value):
    out = tmp_path / "t.json"
    out.write_text("the user's")
    p = export(["--chrome-trace", str(run_dir), "-o", str(out), opt, value], tmp_path)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("traceml: error: --"), p.stderr
    assert out.read_text() == "the user's"
