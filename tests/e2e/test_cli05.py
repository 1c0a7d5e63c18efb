"""TraceML 0.5.0's commands as its users type them: `traceml watch`
(system and process metrics only), `traceml inspect` (here: a run
folder, telemetry.sqlite, a summary, a manifest), `view --re-render`,
`compare --max-step-time-regression-pct`, and 0.5.0's own
final_summary.json files (tests/fixtures/v05, written by 0.5.0 itself)
in `view`, `compare` and `inspect`. On the fake torch (tests/fakes/torch):
the quick tier."""
import json
import os
import re
import sqlite3
import subprocess

import pytest

from conftest import FAKE_TORCH, PYTHON, REPO, TRACEML, base_env

QUICK = True

V05 = os.path.join(REPO, "tests", "fixtures", "v05")

SCRIPT = r'''
import os, sys, json, time
import torch
from torch import nn
import traceml_ai as traceml
print("ARGS " + json.dumps(sys.argv[1:]))
traceml.init(mode="auto")
model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(int(os.environ.get("STEPS", "30"))):
    with traceml.trace_step(model):
        time.sleep(0.01)
        loss = model(torch.randn(4, 8)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
sys.exit(int(os.environ.get("EXIT", "0")))
'''

PLAIN = r'''
import sys, time
t = time.time()
x = 0
while time.time() - t < 0.6:
    x += 1
sys.exit(3)
'''


def traceml(args, cwd, env=None, timeout=240):
    return subprocess.run([TRACEML] + args, cwd=str(cwd), capture_output=True, text=True,
                          timeout=timeout,
                          env=base_env(**{**FAKE_TORCH, "TRACEML_PYTHON": PYTHON,
                                          "COLUMNS": "120", **(env or {})}))


def load(path):
    with open(str(path), encoding="utf-8") as f:
        return json.load(f)


def one_error(p):
    """A bad input: exit 2, one line on stderr, nothing on stdout."""
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("traceml: error: "), p.stderr
    assert p.stdout == "", p.stdout
    return lines[0]


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """One `traceml run` of SCRIPT: its folder (logs/r), this TraceML's files."""
    d = tmp_path_factory.mktemp("traced")
    (d / "train.py").write_text(SCRIPT)
    p = traceml(["run", "--logs-dir", "logs", "--run-name", "r", "--interval", "0.05",
                 "train.py"], d)
    assert p.returncode == 0, p.stderr
    return d / "logs" / "r"


# ---- traceml watch ---------------------------------------------------------

def test_watch_records_system_and_process_only(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    p = traceml(["watch", "--logs-dir", "logs", "--run-name", "w", "--interval", "0.05",
                 "train.py", "--lr", "1"], tmp_path, env={"EXIT": "5"})
    assert p.returncode == 5, p.stderr            # the training's exit code
    out = p.stdout
    assert "TraceML Watch Summary" in out, out
    assert "SYSTEM METRICS" in out and "PROCESS METRICS" in out
    assert "Watch: system and process metrics only" in out
    for absent in ("Verdict:", "STEP TIMING", "NO DATA", "common step"):
        assert absent not in out, (absent, out)
    assert 'ARGS ["--lr", "1"]' in out
    run = tmp_path / "logs" / "w"
    s = load(run / "final_summary.json")
    assert s["meta"]["profile"] == "watch"
    assert s["meta"]["window_steps"] == 0 and s["meta"]["common_steps"] == 0
    assert s["primary_diagnosis"]["kind"] == "INSUFFICIENT_STEP_TIME_DATA"
    assert "watch run" in s["primary_diagnosis"]["why"]
    procs = s["process"]["per_rank"]
    assert len(procs) == 1 and procs[0]["samples"] > 0 and procs[0]["rss_bytes"] > 0, procs
    assert s["system"]["window"]["samples"] > 0
    assert load(run / "manifest.json")["profile"] == "watch"
    db = sqlite3.connect("file:%s?mode=ro" % (run / "telemetry.sqlite"), uri=True)
    assert db.execute("SELECT COUNT(*) FROM steps").fetchone()[0] == 0   # none kept
    assert db.execute("SELECT value FROM meta WHERE key='profile'").fetchone()[0] == "watch"
    db.close()


def test_watch_a_plain_script(tmp_path):
    """No torch, no traceml_ai in it: the process is still reported."""
    (tmp_path / "busy.py").write_text(PLAIN)
    p = traceml(["watch", "--logs-dir", "logs", "--run-name", "b", "--interval", "0.05",
                 "busy.py"], tmp_path)
    assert p.returncode == 3, p.stderr
    s = load(tmp_path / "logs" / "b" / "final_summary.json")
    assert s["meta"]["ranks_reported"] == 1
    assert s["process"]["per_rank"][0]["cpu_percent"] is not None


def test_watch_takes_the_run_options(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    p = traceml(["watch", "--logs-dir", "logs", "--session-id", "s", "--trace-max-steps", "5",
                 "--no-history", "--enable-logging", "train.py", "--args", "--x 'a b'"],
                tmp_path, env={"STEPS": "3"})
    assert p.returncode == 0, p.stderr
    notes = [l.split()[2] for l in p.stderr.splitlines() if l.startswith("traceml: note: --")]
    assert notes == ["--trace-max-steps", "--no-history", "--enable-logging"], p.stderr
    assert 'ARGS ["--x", "a b"]' in p.stdout
    assert (tmp_path / "logs" / "s" / "final_summary.json").exists()
    h = traceml(["watch", "--help"], tmp_path)
    assert h.returncode == 0 and "usage: traceml watch" in h.stdout
    line = one_error(traceml(["watch", "--bogus", "train.py"], tmp_path))
    assert "'--bogus' for 'traceml watch'" in line
    h = traceml(["help"], tmp_path)
    assert "  watch " in h.stdout and "  inspect " in h.stdout


def test_run_takes_disable_traceml_with_an_underscore(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    p = traceml(["run", "--disable_traceml", "--logs-dir", "logs", "train.py"], tmp_path,
                env={"STEPS": "2"})
    assert p.returncode == 0, p.stderr
    assert "TraceML Run Summary" not in p.stdout
    assert not (tmp_path / "logs").exists()


# ---- traceml inspect -------------------------------------------------------

def test_inspect_a_run_folder(traced):
    p = traceml(["inspect", str(traced)], traced)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "manifest.json: TraceML run manifest, schema 1" in out, out
    assert "final_summary.json: TraceML run summary, schema 1" in out
    assert "telemetry.sqlite: TraceML telemetry (SQLite), schema 5" in out
    assert "r (id " in out and "completed, exit code 0" in out
    assert "30 common" in out and "R0/N0" in out and "steps 30" in out, out
    assert "verdict" in out
    for f in ("manifest.json", "final_summary.json", "telemetry.sqlite"):
        q = traceml(["inspect", str(traced / f)], traced)
        assert q.returncode == 0 and q.stdout.startswith(str(traced / f) + ": "), q.stderr
    # read-only: nothing appears beside the database
    assert not os.path.exists(str(traced / "telemetry.sqlite-shm"))


def test_inspect_05_files():
    p = traceml(["inspect", os.path.join(V05, "ddp2_straggler.json")], V05)
    assert p.returncode == 0, p.stderr
    assert "TraceML 0.5.0 run summary, schema 1.9" in p.stdout
    assert "STRAGGLER (CRITICAL)" in p.stdout and "2/2 reported" in p.stdout
    assert "lacks" in p.stdout
    p = traceml(["inspect", os.path.join(V05, "manifest.json")], V05)
    assert p.returncode == 0 and "TraceML 0.5.0 run manifest" in p.stdout, p.stderr


def test_inspect_bad_inputs(tmp_path):
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "junk.txt").write_text("hello\n")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "other.json").write_text('{"a": 1}')
    (tmp_path / "cut.json").write_text('{"schema_version": 1, "primary_diagnosis": {')
    (tmp_path / "log.msgpack").write_bytes(b"\x00\x00\x00\x01\x90")
    # a 0.5.0 log is told by its records (4-byte big-endian length, one
    # MessagePack map or array), not by its name
    (tmp_path / "log.bin").write_bytes(b"\x00\x00\x00\x04\x81\xa1a\x01\x00\x00\x00\x01\x90")
    (tmp_path / "plain.msgpack").write_bytes(b"\x81\xa1a\x01")      # MessagePack, no records
    (tmp_path / "text.msgpack").write_text("hello\n")
    (tmp_path / "tail.msgpack").write_bytes(b"\x00\x00\x00\x01\x90junk")
    (tmp_path / "empty_dir").mkdir()
    db = sqlite3.connect(str(tmp_path / "other.sqlite"))
    db.execute("CREATE TABLE x (a)")
    db.commit()
    db.close()
    cases = {"missing.json": "cannot read", "empty.json": "empty", "junk.txt": "not a TraceML",
             "list.json": "no TraceML file", "other.json": "no TraceML file",
             "cut.json": "truncated", "log.msgpack": "0.5.0 binary log",
             "log.bin": "0.5.0 binary log", "plain.msgpack": "is not a TraceML file",
             "text.msgpack": "is not a TraceML file", "tail.msgpack": "is not a TraceML file",
             "other.sqlite": "not a TraceML telemetry.sqlite", "empty_dir": "not a TraceML run"}
    for name, why in cases.items():
        line = one_error(traceml(["inspect", str(tmp_path / name)], tmp_path))
        assert why in line, (name, line)
    one_error(traceml(["inspect"], tmp_path))
    one_error(traceml(["inspect", "a", "b"], tmp_path))


# ---- traceml view ----------------------------------------------------------

def test_view_re_render_is_the_stored_box(traced):
    home = traced.parent.parent                # where `traceml run` ran
    path = "logs/r/final_summary.json"         # as its box names it
    stored = load(home / path)["text"]
    p = traceml(["view", "--re-render", path], home)
    assert p.returncode == 0, p.stderr
    # same data, same width: the same box, but for a last digit the JSON's
    # rounding (3 decimals of a ms) may move ("0.00 ms" stored as 0.005,
    # "<1%" of a 0.0004 ms phase stored as 0, a 99.6% share re-read as
    # 100%: a digit more, a space less)
    def digits(box):
        return re.sub(r" *\d+", " 0", re.sub(r"<(?=\d)", " ", box))
    assert digits(p.stdout) == digits(stored), p.stdout
    narrow = traceml(["view", path, "--re-render"], home, env={"COLUMNS": "80"})
    assert narrow.returncode == 0
    assert max(len(l) for l in narrow.stdout.splitlines()) < 100   # today's width, stacked


@pytest.mark.parametrize("name,label", [("input_bound", "INPUT-BOUND (CRITICAL)"),
                                        ("ddp2_straggler", "STRAGGLER (CRITICAL)"),
                                        ("watch", None)])
def test_view_05_summaries(tmp_path, name, label):
    path = os.path.join(V05, name + ".json")
    p = traceml(["view", path], tmp_path)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "Source: a TraceML 0.5.0 summary (schema 1.9)" in out, out
    assert "it lacks warm-up exclusion" in out
    if label:
        assert "Verdict: " + label in out
        assert "Untraced: n/a" in out
    else:
        assert "TraceML Watch Summary" in out and "Verdict:" not in out
    assert traceml(["view", "--re-render", path], tmp_path).stdout == out
    h = traceml(["view", path, "--html", str(tmp_path / "v.html")], tmp_path)
    assert h.returncode == 0, h.stderr
    assert "<html" in (tmp_path / "v.html").read_text()


def test_view_bad_05_summary(tmp_path):
    s = load(os.path.join(V05, "input_bound.json"))
    s["schema_version"] = 2.0
    (tmp_path / "two.json").write_text(json.dumps(s))
    assert "unsupported schema_version" in one_error(traceml(["view", "two.json"], tmp_path))
    del s["schema_version"]
    (tmp_path / "none.json").write_text(json.dumps(s))
    assert "no schema_version" in one_error(traceml(["view", "none.json"], tmp_path))


# ---- traceml compare -------------------------------------------------------

def test_compare_05_summaries_and_the_gate(tmp_path):
    a, b = os.path.join(V05, "input_bound.json"), os.path.join(V05, "input_bound_slower.json")
    p = traceml(["compare", a, b, "--output", "c"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "Verdict: REGRESSION" in p.stdout, p.stdout
    assert "TraceML 0.5.0 summary (schema 1.9)" in p.stdout
    js = load(tmp_path / "c.json")
    assert js["verdict"] == "REGRESSION" and "0.5.0" in js["a"]["source"]
    assert traceml(["compare", a, b, "-o", "c", "--fail-on-regression"], tmp_path).returncode == 1
    # 0.5.0's CI check: the step-time gate, and the exit status (+20% measured)
    p = traceml(["compare", a, b, "-o", "c", "--max-step-time-regression-pct", "30"], tmp_path)
    assert p.returncode == 0 and "Verdict: EQUIVALENT" in p.stdout, p.stdout
    p = traceml(["compare", a, b, "-o", "c", "--max-step-time-regression-pct=10"], tmp_path)
    assert p.returncode == 4 and "Verdict: REGRESSION" in p.stdout, p.stdout   # 0.5.0's 4
    # 0.5.0's guard declaration (run_context.declaration): one that differs
    # between the sides makes the gate INCONCLUSIVE, exit 3 as in 0.5.0
    decl = {"schema_version": 1, "workload": {"name": "resnet", "parameters": {"batch": 32}},
            "measurement": {"start_step": 10, "completed_steps": 50}}
    for name, src, d in (("ga.json", a, decl),
                         ("gb.json", b, dict(decl, workload={"name": "resnet",
                                                             "parameters": {"batch": 64}})),
                         ("gc.json", b, decl)):
        doc = load(src)
        doc.setdefault("run_context", {})["declaration"] = d
        (tmp_path / name).write_text(json.dumps(doc))
    p = traceml(["compare", "ga.json", "gb.json", "-o", "c",
                 "--max-step-time-regression-pct", "10"], tmp_path)
    assert p.returncode == 3 and "Verdict: INCONCLUSIVE" in p.stdout, p.stdout
    assert "declared workloads (traceml.yaml guard:) differ" in p.stdout
    assert load(tmp_path / "c.json")["guard_differs"] is True
    p = traceml(["compare", "ga.json", "gc.json", "-o", "c",
                 "--max-step-time-regression-pct", "10"], tmp_path)
    assert p.returncode == 4 and "Verdict: REGRESSION" in p.stdout, p.stdout
    p = traceml(["compare", b, a, "-o", "c", "--max-step-time-regression-pct", "10"], tmp_path)
    assert p.returncode == 0 and "Verdict: IMPROVEMENT" in p.stdout, p.stdout
    for bad in ("-1", "abc", "2000", "", "nan"):
        line = one_error(traceml(["compare", a, b, "-o", "c",
                                  "--max-step-time-regression-pct", bad], tmp_path))
        assert "--max-step-time-regression-pct" in line, line


def test_compare_05_with_this_traceml(tmp_path, traced):
    old = os.path.join(V05, "input_bound.json")
    p = traceml(["compare", old, str(traced), "-o", "c"], tmp_path)
    assert p.returncode == 0, p.stderr
    js = load(tmp_path / "c.json")
    assert js["a"]["source"] and js["b"]["source"] is None
    assert js["verdict"] in ("IMPROVEMENT", "REGRESSION", "EQUIVALENT", "MIXED"), js["verdict"]
    assert js["a"]["run_name"] == "input_bound" and js["b"]["run_name"] == "r"


# ---- every 0.5.0 option ----------------------------------------------------

# Every option of 0.5.0's `run` / `watch` parser (traceml_ai/launcher/cli.py),
# with a value of the type it takes there.
LAUNCH_05 = [("--mode", "summary"), ("--interval", "0.5"), ("--enable-logging", None),
             ("--logs-dir", "logs"), ("--run-name", "x"), ("--session-id", "x"),
             ("--aggregator-port", "29765"), ("--dashboard-port", "8765"),
             ("--no-dashboard-auto-open", None), ("--history-retention", "30m"),
             ("--finalize-timeout-sec", "2.5"), ("--trace-max-steps", "5"),
             ("--nproc-per-node", "1"), ("--nnodes", "1"), ("--node-rank", "0"),
             ("--master-addr", "127.0.0.1"), ("--master-port", "29500"),
             ("--aggregator-host", "127.0.0.1"), ("--aggregator-bind-host", "127.0.0.1"),
             ("--on-missing-aggregator", "warn"), ("--no-history", None),
             ("--html-report", None), ("--save-training-output", None),
             ("--no-save-training-output", None)]
SERVE_05 = [("--mode", "summary"), ("--logs-dir", "logs"), ("--run-name", "s"),
            ("--session-id", "s"), ("--nnodes", "1"), ("--nproc-per-node", "2"),
            ("--interval", "0.5"), ("--enable-logging", None), ("--history-retention", "2h"),
            ("--aggregator-host", "127.0.0.1"), ("--aggregator-bind-host", "127.0.0.1"),
            ("--aggregator-port", "0")]


def flat(opts):
    return [x for k, v in opts for x in ([k] if v is None else [k, v])]


@pytest.mark.parametrize("cmd", ["run", "watch"])
def test_every_05_launch_option(tmp_path, cmd):
    (tmp_path / "train.py").write_text(SCRIPT)
    p = traceml([cmd] + flat(LAUNCH_05) + ["train.py", "--args", "--k v"], tmp_path,
                env={"STEPS": "3"})
    assert p.returncode == 0, p.stderr
    assert "error" not in p.stderr, p.stderr
    assert 'ARGS ["--k", "v"]' in p.stdout
    assert (tmp_path / "logs" / "x" / "final_summary.html").exists()
    for native in (["--disable-traceml"], ["--disable_traceml"]):
        p = traceml([cmd] + native + ["train.py"], tmp_path, env={"STEPS": "1"})
        assert p.returncode == 0 and "Summary" not in p.stdout, p.stderr


def test_every_05_serve_option(tmp_path):
    import signal
    serve = subprocess.Popen([TRACEML, "serve"] + flat(SERVE_05), cwd=str(tmp_path),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=base_env())
    try:
        for _ in range(10):
            line = serve.stdout.readline()
            assert line, serve.stderr.read()
            if line.startswith("export TRACEML_ADDR="):
                break
        serve.send_signal(signal.SIGINT)
        out, err = serve.communicate(timeout=60)
    finally:
        if serve.poll() is None:
            serve.kill()
    assert serve.returncode == 0, err
    assert "error" not in err, err
    assert (tmp_path / "logs" / "s" / "final_summary.json").exists()
