"""End-to-end tests of the `traceml` binary: version/help, every bad-input
case (exit 2, one line on stderr, nothing created or overwritten), `view`,
`serve`, and `run` driving a fake training that speaks the wire protocol
with `struct` (no torch needed): exit codes, Ctrl-C, a SIGKILLed
aggregator, a training that raises.

Run: .venv/bin/python -m pytest tests/e2e/test_cli.py
The binary is the venv's `traceml` (conftest.TRACEML; override with TRACEML_BIN).
"""
import json
import os
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import FAKE_TORCH, TRACEML, free_port, shell_signals

QUICK = True      # no real torch: the quick tier (conftest.py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("TRACEML_BIN", TRACEML)


def run(args, cwd, timeout=30, **kw):
    # the fake torch: `traceml run SCRIPT` checks that the Python it runs
    # imports torch, and the quick tier's venv has none
    kw.setdefault("env", dict(os.environ, **FAKE_TORCH))
    return subprocess.run([BIN] + args, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, **kw)


def one_error_line(p):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip("\n").split("\n")
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("traceml: error: "), p.stderr
    assert p.stdout == ""
    return lines[0]


# ---- a fake training: speaks the wire protocol of src/wire/wire.c ----

FAKE = r'''
import hashlib, hmac, os, socket, struct, sys, time, signal
MAGIC = 0x314c4d54
def frame(t, payload):
    return struct.pack("<IHHI", MAGIC, 5, t, len(payload)) + payload   # wire version 5
def s16(b):
    return struct.pack("<H", len(b)) + b
def challenge(s):
    """OPEN, then the CHALLENGE's 32-byte nonce (docs/wire.md, Handshake)."""
    s.sendall(frame(11, struct.pack("<I", 0)))
    h = b""
    while len(h) < 44:
        h += s.recv(44 - len(h))
    assert struct.unpack("<IHHI", h[:12])[2] == 12, "no CHALLENGE"
    return h[12:]
def hello(run_id, secret, nonce, rank=0):
    p = s16(run_id.encode())
    p += struct.pack("<7I", rank, 0, 1, 0, 1, os.getpid(), 0x1f) + s16(b"fakehost")
    p += struct.pack("<4I", 0, 0, 0, 0)   # loader unknown, cores unknown
    p += s16(b"")                          # no auto-timed models
    p += struct.pack("<Q", 1)              # process image
    mac = hmac.new(secret.encode(), nonce + p, hashlib.sha256).digest()
    return frame(1, p + mac)
def steps(first, n, input_ms=20.0, fwd_ms=5.0):
    p = struct.pack("<I", n)
    for i in range(first, first + n):
        ph = [int(input_ms * 1e6), 0, int(fwd_ms * 1e6), int(2 * fwd_ms * 1e6), int(1e6), 0]
        traced = sum(ph[1:]) + 100000
        rec = struct.pack("<3Q", i, 1000000000 + i * 50000000, traced)
        rec += struct.pack("<6q", *ph)                    # input .. optimizer, communication
        rec += struct.pack("<7q", *([-1] * 7))            # no GPU clock
        rec += struct.pack("<4q", -1 if i == 0 else 0, -1, -1, -1)
        rec += struct.pack("<II", 0x1f, 0)                # observed: no communication
        rec += b"\0" * (224 - len(rec))                   # communication, samples, FLOPs
        p += rec
    return frame(4, p)
def stats(t, sent):
    return frame(t, struct.pack("<3Qqq", 0, 0, sent, 800, -1))
def connect():
    host, port = os.environ["TRACEML_ADDR"].rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.sendall(hello(os.environ["TRACEML_RUN_ID"], os.environ["TRACEML_SECRET"], challenge(s)))
    h = s.recv(12)
    assert struct.unpack("<IHHI", h)[2] == 2, "no WELCOME"
    s.recv(struct.unpack("<IHHI", h)[3])
    return s
def touch(path, text="x"):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)

mode = sys.argv[1]
ctl = sys.argv[2] if len(sys.argv) > 2 else None
if mode == "env":
    for k in ("TRACEML_ADDR", "TRACEML_RUN_ID", "TRACEML_SECRET", "TRACEML_RUN_NAME",
              "TRACEML_LOGS_DIR", "TRACEML_RUN_DIR", "TRACEML_DISABLED", "PYTHONPATH"):
        print("%s=%s" % (k, os.environ.get(k, "")))
    sys.exit(0)
s = connect()
s.sendall(steps(0, 30))
s.sendall(stats(5, 30))
if mode == "complete":
    s.sendall(stats(6, 30))
    s.close()
    sys.exit(0)
if mode == "raise":
    s.sendall(stats(6, 30))
    s.close()
    raise RuntimeError("boom from the training")
if mode == "sigint":
    count = [0]
    def on_int(sig, frm):
        count[0] += 1
        touch(ctl + ".count", str(count[0]))
    signal.signal(signal.SIGINT, on_int)
    touch(ctl + ".ready")
    deadline = time.time() + 20
    while count[0] == 0 and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)            # a second SIGINT would arrive in here
    s.sendall(stats(6, 30))
    s.close()
    sys.exit(0)
if mode == "hang":
    touch(ctl + ".ready")
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # only --kill-after ends it
    time.sleep(60)
if mode == "aggkill":
    touch(ctl + ".ready")
    deadline = time.time() + 20
    while not os.path.exists(ctl + ".go") and time.time() < deadline:
        time.sleep(0.01)
    try:
        for k in range(5):
            s.sendall(steps(30 + k, 1))
            time.sleep(0.05)
    except OSError:
        pass
    print("training finished on its own")
    sys.exit(5)
'''


@pytest.fixture
def fake(tmp_path):
    p = tmp_path / "fake_train.py"
    p.write_text(FAKE)
    return str(p)


def wait_for(path, timeout=15):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path):
            return True
        time.sleep(0.01)
    return False


def manifest(run_dir):
    with open(os.path.join(run_dir, "manifest.json")) as f:
        return json.load(f)


def box_of(stdout):
    start = stdout.index("+-")
    return stdout[start:]


# ---- version and help ----

def test_version(tmp_path):
    p = run(["--version"], tmp_path)
    assert p.returncode == 0
    assert p.stdout == "traceml 0.1.0\n"


def test_help(tmp_path):
    for args in (["help"], ["--help"], ["-h"]):
        p = run(args, tmp_path)
        assert p.returncode == 0, args
        assert "run" in p.stdout and "view" in p.stdout and "serve" in p.stdout
        assert "__aggregate" not in p.stdout
    # no command: the same help, on stderr, exit 2 (as argparse tools do)
    p = run([], tmp_path)
    assert p.returncode == 2 and p.stdout == "", (p.returncode, p.stdout)
    assert "usage: traceml COMMAND" in p.stderr and "  view " in p.stderr
    p = run(["help", "run"], tmp_path)
    assert p.returncode == 0 and "--run-name" in p.stdout and "--disable-traceml" in p.stdout
    p = run(["run", "--help"], tmp_path)
    assert p.returncode == 0 and "--logs-dir" in p.stdout
    one_error_line(run(["help", "nope"], tmp_path))
    one_error_line(run(["frobnicate"], tmp_path))
    one_error_line(run(["--frobnicate"], tmp_path))


# ---- bad input: one line, exit 2, nothing created ----

BAD_RUN = [
    (["run", "--no-such-flag", "x.py"], "unknown option"),
    (["run", "missing.py"], "not found"),
    (["run"], "missing SCRIPT"),
    (["run", "--python", "/nonexistent/python", "train.py"], "interpreter"),
    (["run", "--python", "./notexec", "train.py"], "interpreter"),
    (["run", "--run-name", "../up", "train.py"], "invalid run name"),
    (["run", "--run-name", "a b", "train.py"], "invalid run name"),
    (["run", "--run-name"], "needs a value"),
    (["run", "--mode", "cli", "--dashboard-port", "0", "train.py"], "--dashboard-port"),
    (["run", "--mode=dashboard", "--dashboard-port=70000", "train.py"], "--dashboard-port"),
    (["run", "--mode", "fancy", "train.py"], "--mode"),
    (["run", "--html-report=1", "train.py"], "takes no value"),
    (["run", "--nnodes", "2", "train.py"], "needs --run-name"),
    (["run", "--nproc-per-node", "two", "train.py"], "--nproc-per-node"),
    (["run", "--nproc-per-node", "0", "train.py"], "--nproc-per-node"),
    (["run", "--nnodes", "1", "--node-rank", "1", "train.py"], "--node-rank"),
    (["run", "--master-port", "70000", "train.py"], "--master-port"),
    (["run", "--interval", "-1", "train.py"], "--interval"),
    (["run", "--interval", "1s", "train.py"], "--interval"),
    (["run", "--disable-traceml=1", "train.py"], "takes no value"),
    (["run", "--"], "missing COMMAND"),
    (["run", "--", "/no/such/binary"], "not found"),
    (["run", "--", "no-such-command-xyz"], "not found"),
    (["run", "--logs-dir", "afile/logs", "train.py"], "not usable"),
    (["run", "--logs-dir", "/proc/tml_no_logs", "train.py"], "/proc/tml_no_logs"),
    (["run", "--logs-dir", "", "train.py"], "logs-dir"),
]


@pytest.mark.parametrize("args,needle", BAD_RUN)
def test_run_bad_input(tmp_path, args, needle):
    (tmp_path / "train.py").write_text("print('should not run')\n")
    (tmp_path / "afile").write_text("a file, not a folder")
    (tmp_path / "notexec").write_text("#!/bin/sh\n")
    os.chmod(tmp_path / "notexec", 0o644)
    before = sorted(os.listdir(tmp_path))
    line = one_error_line(run(args, tmp_path))
    assert needle in line, line
    assert sorted(os.listdir(tmp_path)) == before      # nothing created
    assert not (tmp_path / "logs").exists()


BAD_CONFIG = [
    # the line an editor shows: blank lines count (they were skipped)
    ("traceml.yaml", "mode: cli\n\n\nnot a pair\n", "traceml.yaml:4: expected key : value"),
    # no second option or threshold smuggled in through a key or a value
    ("traceml.yaml", "mode=summary: cli\n", "traceml.yaml:1: 'mode=summary' is not a key"),
    ("traceml.yaml", "thresholds:\n  input_warn: 0.1,input_crit=0.9\n",
     "traceml.yaml:2: threshold input_warn: '0.1,input_crit=0.9' is not"),
    ("pyproject.toml", "[tool.traceml]\n\n\nmode: cli\n", "pyproject.toml:4: expected key = value"),
    ("traceml.yaml", "mode: summary\nlog-dir: x\n", "traceml.yaml:2: unknown key 'log-dir'"),
    ("traceml.yaml", "thresholds:\n  input_warn: 2\n", "traceml.yaml:2: threshold input_warn: '2' is not"),
]


@pytest.mark.parametrize("name,text,needle", BAD_CONFIG)
def test_run_bad_project_file(tmp_path, name, text, needle):
    (tmp_path / "train.py").write_text("print('should not run')\n")
    (tmp_path / name).write_text(text)
    before = sorted(os.listdir(tmp_path))
    line = one_error_line(run(["run", "train.py"], tmp_path))
    assert needle in line, line
    assert sorted(os.listdir(tmp_path)) == before


def test_run_logs_dir_read_only():
    """A --logs-dir under a folder the user cannot write: one error line,
    nothing made, the script not run. Root may write anywhere, so as root
    the command runs as nobody (setpriv, util-linux), in a folder of its
    own under /tmp (pytest's is private to root)."""
    as_user = []
    if os.geteuid() == 0:
        as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        try:
            ok = subprocess.run(as_user + [BIN, "--version"], capture_output=True,
                                timeout=30).returncode == 0
        except OSError:
            ok = False
        if not ok:
            pytest.skip("root, and nobody cannot run %s (a checkout only root can read)" % BIN)
    work = tempfile.mkdtemp(prefix="tml-ro-")
    try:
        os.chmod(work, 0o755)
        with open(os.path.join(work, "train.py"), "w") as f:
            f.write("print('should not run')\n")
        ro = os.path.join(work, "ro")
        os.mkdir(ro, 0o555)
        os.chmod(ro, 0o555)
        p = subprocess.run(as_user + [BIN, "run", "--logs-dir", "ro/logs", "train.py"], cwd=work,
                           capture_output=True, text=True, timeout=30)
        line = one_error_line(p)
        assert "not writable" in line
        assert os.listdir(ro) == []
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_run_existing_folder_untouched(tmp_path):
    (tmp_path / "train.py").write_text("print('should not run')\n")
    run_dir = tmp_path / "logs" / "taken"
    run_dir.mkdir(parents=True)
    (run_dir / "marker").write_text("precious")
    line = one_error_line(run(["run", "--run-name", "taken", "train.py"], tmp_path))
    assert "already exists" in line
    assert os.listdir(run_dir) == ["marker"]
    assert (run_dir / "marker").read_text() == "precious"
    # serve refuses the same way
    line = one_error_line(run(["serve", "--run-name", "taken"], tmp_path))
    assert "already exists" in line
    assert os.listdir(run_dir) == ["marker"]


def test_serve_bad_input(tmp_path):
    one_error_line(run(["serve", "--port", "99999"], tmp_path))
    one_error_line(run(["serve", "--bogus"], tmp_path))
    one_error_line(run(["serve", "--run-name", "no/slash"], tmp_path))
    assert not (tmp_path / "logs").exists()


def test_serve_dashboard_off_loopback_warns(tmp_path):
    """--dashboard-bind beyond loopback: one warning naming the option."""
    port = free_port()
    proc = start_launcher(tmp_path, ["serve", "--run-name", "wide", "--dashboard-bind",
                                     "0.0.0.0", "--dashboard-port", str(port)])
    try:
        for _ in range(5):
            if "Live dashboard" in proc.stdout.readline():
                break
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    warn = [l for l in err.splitlines() if l.startswith("traceml: warning: the dashboard")]
    assert len(warn) == 1 and "0.0.0.0 (every interface), set by --dashboard-bind" in warn[0], err


def test_serve_port_taken(tmp_path):
    # one line that says why, and no run folder left behind
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        p = run(["serve", "--port", str(port), "--run-name", "busy"], tmp_path)
    assert p.returncode == 1, (p.stdout, p.stderr)
    lines = p.stderr.strip().split("\n")
    assert len(lines) == 1 and "cannot listen on 127.0.0.1:%d" % port in lines[0], p.stderr
    assert "in use" in lines[0]
    assert not (tmp_path / "logs" / "busy").exists()


# ---- view ----

def test_view_bad_files(tmp_path):
    cases = {
        "notjson.json": "this is not json\n",
        "truncated.json": '{"schema_version": 1, "text": "+---- box',
        "empty.json": "",
        "noschema.json": '{"text": "box"}',
        "future.json": '{"schema_version": 99, "text": "box"}',
        "notext.json": '{"schema_version": 1}',
        "array.json": '[1, 2, 3]',
        "binary.json": "\x00\x01\x02\xff",
    }
    for name, content in cases.items():
        (tmp_path / name).write_text(content)
        line = one_error_line(run(["view", name], tmp_path))
        assert name in line
    assert "truncated" in one_error_line(run(["view", "truncated.json"], tmp_path))
    assert "not valid JSON" in one_error_line(run(["view", "notjson.json"], tmp_path))
    assert "schema_version" in one_error_line(run(["view", "future.json"], tmp_path))
    assert "No such file" in one_error_line(run(["view", "missing.json"], tmp_path))
    one_error_line(run(["view", str(tmp_path)], tmp_path))       # a directory
    one_error_line(run(["view"], tmp_path))
    one_error_line(run(["view", "a.json", "b.json"], tmp_path))
    (tmp_path / "ok.json").write_text('{"schema_version": 1, "text": "BOX"}')
    assert "needs a file name" in one_error_line(run(["view", "ok.json", "--html="], tmp_path))


def test_view_prints_text(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps({"schema_version": 1, "text": "line 1\nline 2 ◀ cause\n"}))
    p = run(["view", "s.json"], tmp_path)
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout == "line 1\nline 2 ◀ cause\n"


def test_view_empty_text(tmp_path):
    # "" once came back from the JSON reader unterminated (ASan: heap
    # overflow; release build: heap bytes on the terminal)
    (tmp_path / "e.json").write_text('{"schema_version":1,"text":""}')
    p = run(["view", "e.json"], tmp_path)
    assert p.returncode == 0 and p.stdout == "" and p.stderr == ""


def test_view_run_folder(tmp_path):
    # compare, inspect and export took a run folder; view refused it
    run_dir = tmp_path / "logs" / "r1"
    run_dir.mkdir(parents=True)
    good = os.path.join(ROOT, "tests", "fuzz", "corpus", "summary", "ours_straggler")
    shutil.copy(good, run_dir / "final_summary.json")
    stored = json.load(open(good, encoding="utf-8"))["text"]
    for arg in ("logs/r1", "logs/r1/"):
        p = run(["view", arg], tmp_path)
        assert p.returncode == 0 and p.stderr == "", p.stderr
        assert p.stdout == (stored if stored.endswith("\n") else stored + "\n")
    env = dict(os.environ, COLUMNS="120")
    by_file = run(["view", "--re-render", "logs/r1/final_summary.json"], tmp_path, env=env)
    by_dir = run(["view", "--re-render", "logs/r1"], tmp_path, env=env)
    assert by_dir.returncode == 0 and by_dir.stderr == "", by_dir.stderr
    assert "TraceML Run Summary" in by_dir.stdout and by_dir.stdout == by_file.stdout
    p = run(["view", "logs/r1", "--html"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "<html" in (run_dir / "final_summary.html").read_text()
    # a folder without a summary: one line naming the file looked for
    (tmp_path / "empty").mkdir()
    line = one_error_line(run(["view", "empty"], tmp_path))
    assert "empty/final_summary.json" in line, line


def test_view_drops_control_sequences(tmp_path):
    # a hand-edited summary must not drive the terminal
    (tmp_path / "x.json").write_text(json.dumps(
        {"schema_version": 1, "text": "a\x1b]52;c;ZXZpbA==\x07b\x1b[2Jc\u009b31md\tok ◀\n"}))
    p = run(["view", "x.json"], tmp_path)
    assert p.returncode == 0
    assert p.stdout == "a?]52;c;ZXZpbA==?b?[2Jc?31md\tok ◀\n"


# ---- compare ----

def test_compare_out_of_range_figure(tmp_path):
    # a window of 3e19 steps was cast from double to size_t: undefined
    # behaviour (clang UBSan, found by tests/fuzz/fuzz_compare.c); a figure
    # outside its range now refuses the file, naming it and the field
    good = os.path.join(ROOT, "tests", "fuzz", "corpus", "summary", "ours_straggler")
    doc = json.load(open(good, encoding="utf-8"))
    doc["step_time"]["window"]["window_steps"] = "@WS@"
    text = json.dumps(doc, indent=1)
    shutil.copy(good, tmp_path / "a.json")
    for value, shown in (("3e19", "3e+19"), ("1.55556e37", "1.55556e+37"), ("-1", "-1")):
        (tmp_path / "b.json").write_text(text.replace('"@WS@"', value))
        for args in (["a.json", "b.json"], ["b.json", "a.json"]):
            line = one_error_line(run(["compare"] + args + ["-o", "out"], tmp_path))
            assert "'b.json'" in line and "step_time.window.window_steps is " + shown in line, line
    assert not (tmp_path / "out.json").exists()
    p = run(["compare", "a.json", "a.json", "-o", "out"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "out.json").read_text())["verdict"] == "EQUIVALENT"


def test_outputs_replace_links_and_respect_umask(tmp_path):
    # `view --html` and `export --chrome-trace` write through a temporary
    # file and rename(2): a planted symlink is replaced, its target kept
    (tmp_path / "s.json").write_text('{"schema_version": 1, "text": "BOX"}')
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "out.html"
    link.symlink_to(victim)
    p = run(["view", "s.json", "--html", "out.html"], tmp_path,
            preexec_fn=lambda: os.umask(0o027))
    assert p.returncode == 0, p.stderr
    assert victim.read_text() == "precious\n"
    assert not link.is_symlink() and "<html" in link.read_text()
    assert (link.stat().st_mode & 0o777) == 0o640
    assert sorted(f.name for f in tmp_path.iterdir()) == ["out.html", "s.json", "victim.txt"]


def test_compare_replaces_links(tmp_path):
    # `compare` wrote traceml_compare.{txt,json} with fopen(path, "w"),
    # through a symlink planted at either name; now as view and export do
    good = os.path.join(ROOT, "tests", "fuzz", "corpus", "summary", "ours_straggler")
    shutil.copy(good, tmp_path / "a.json")
    victims = []
    for ext in (".txt", ".json"):
        victim = tmp_path / ("victim" + ext)
        victim.write_text("precious\n")
        (tmp_path / ("traceml_compare" + ext)).symlink_to(victim)
        victims.append(victim)
    p = run(["compare", "a.json", "a.json"], tmp_path)
    assert p.returncode == 0, p.stderr
    for victim in victims:
        assert victim.read_text() == "precious\n"
    assert not (tmp_path / "traceml_compare.txt").is_symlink()
    assert json.loads((tmp_path / "traceml_compare.json").read_text())["verdict"] == "EQUIVALENT"


# ---- run ----

def test_run_command_exit_code_and_artifacts(tmp_path):
    p = run(["run", "--run-name", "three", "--", "/bin/sh", "-c", "echo from-training; exit 3"], tmp_path)
    assert p.returncode == 3, p.stderr
    assert p.stdout.startswith("from-training\n")
    assert "INSUFFICIENT STEP-TIME DATA" in p.stdout or "NO DATA" in p.stdout
    run_dir = tmp_path / "logs" / "three"
    m = manifest(run_dir)
    assert m["status"] == "failed" and m["exit_code"] == 3
    assert m["command"] == ["/bin/sh", "-c", "echo from-training; exit 3"]
    assert m["end_time"] is not None
    for f in ("final_summary.json", "final_summary.txt", "telemetry.sqlite", "manifest.json"):
        assert (run_dir / f).exists(), f
        assert f in m["artifacts"]
    assert "secret" not in json.dumps(m).lower()
    txt = (run_dir / "final_summary.txt").read_text()
    assert box_of(p.stdout).rstrip("\n") == txt.rstrip("\n")
    v = run(["view", "logs/three/final_summary.json"], tmp_path)
    assert v.returncode == 0 and v.stdout.rstrip("\n") == txt.rstrip("\n")
    # the generated name comes from the command's stem and is never reused
    p2 = run(["run", "--", "/bin/true"], tmp_path)
    p3 = run(["run", "--", "/bin/true"], tmp_path)
    assert p2.returncode == 0 and p3.returncode == 0
    names = sorted(n for n in os.listdir(tmp_path / "logs") if n.startswith("true_"))
    assert len(names) == 2, names


def test_run_environment(tmp_path, fake):
    p = run(["run", "--run-name", "envrun", fake, "env"], tmp_path)
    assert p.returncode == 0, p.stderr
    env = dict(l.split("=", 1) for l in p.stdout.splitlines() if l.startswith(("TRACEML_", "PYTHONPATH")))
    assert env["TRACEML_ADDR"].startswith("127.0.0.1:")
    assert len(env["TRACEML_SECRET"]) == 48 and len(env["TRACEML_RUN_ID"]) == 32
    assert env["TRACEML_RUN_NAME"] == "envrun"
    assert env["TRACEML_RUN_DIR"] == str(tmp_path / "logs" / "envrun")
    assert env["TRACEML_DISABLED"] == ""
    pkg = os.path.join(os.path.dirname(BIN), "..", "lib", "traceml", "python")
    if os.path.isdir(pkg):
        assert env["PYTHONPATH"].split(":")[0] == pkg
    assert manifest(tmp_path / "logs" / "envrun")["command"][1:] == [fake, "env"]


def test_run_disable_traceml(tmp_path, fake):
    p = run(["run", "--disable-traceml", fake, "env"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "TRACEML_DISABLED=1" in p.stdout and "TRACEML_ADDR=\n" in p.stdout
    assert "TraceML Run Summary" not in p.stdout
    assert not (tmp_path / "logs").exists()
    p = run(["run", "--disable-traceml", "--", "/bin/sh", "-c", "exit 4"], tmp_path)
    assert p.returncode == 4


def test_run_fake_training_completes(tmp_path, fake):
    p = run(["run", "--run-name", "ok", fake, "complete"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "TraceML Run Summary" in p.stdout
    assert "ok" in p.stdout and "30" in p.stdout
    run_dir = tmp_path / "logs" / "ok"
    assert manifest(run_dir)["status"] == "completed"
    db = sqlite3.connect(str(run_dir / "telemetry.sqlite"))
    assert db.execute("SELECT COUNT(*) FROM steps").fetchone()[0] == 30
    assert db.execute("SELECT COUNT(*) FROM steps WHERE gpu_traced_ns IS NULL").fetchone()[0] == 30
    assert db.execute("SELECT ended, host FROM ranks").fetchone() == (1, "fakehost")
    assert dict(db.execute("SELECT key, value FROM meta").fetchall())["status"] == "completed"
    summary = json.loads((run_dir / "final_summary.json").read_text())
    assert summary["text"].rstrip("\n") == box_of(p.stdout).rstrip("\n")
    assert summary["meta"]["partial"] is None and "PARTIAL" not in p.stdout   # no false alarm


def test_run_training_raises(tmp_path, fake):
    p = run(["run", "--run-name", "boom", fake, "raise"], tmp_path)
    assert p.returncode == 1
    assert "Traceback" in p.stderr and "RuntimeError: boom from the training" in p.stderr
    assert "TraceML Run Summary" in p.stdout
    m = manifest(tmp_path / "logs" / "boom")
    assert m["status"] == "failed" and m["exit_code"] == 1
    assert (tmp_path / "logs" / "boom" / "final_summary.json").exists()


def start_launcher(tmp_path, args, env=None):
    return subprocess.Popen([BIN] + args, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=env if env is not None else dict(os.environ, **FAKE_TORCH),
                            preexec_fn=shell_signals)


@pytest.mark.solo
@pytest.mark.parametrize("target", ["group", "launcher"])
def test_ctrl_c(tmp_path, fake, target):
    ctl = str(tmp_path / "ctl")
    proc = start_launcher(tmp_path, ["run", "--run-name", "intr", fake, "sigint", ctl])
    assert wait_for(ctl + ".ready"), proc.communicate(timeout=10)
    t0 = time.time()
    if target == "group":
        os.killpg(proc.pid, signal.SIGINT)     # what a terminal's Ctrl-C does
    else:
        os.kill(proc.pid, signal.SIGINT)       # the launcher alone: it passes it on
    out, err = proc.communicate(timeout=10)
    elapsed = time.time() - t0
    assert proc.returncode == 0, err           # the training handled it and exited 0
    assert elapsed < 2.5, elapsed
    assert "TraceML Run Summary" in out
    with open(ctl + ".count") as f:
        assert f.read() == "1"                 # the training got exactly one SIGINT
    m = manifest(tmp_path / "logs" / "intr")
    assert m["status"] == "interrupted" and m["exit_code"] == 0
    assert (tmp_path / "logs" / "intr" / "final_summary.txt").exists()


@pytest.mark.solo
def test_ctrl_c_training_ignores_it(tmp_path, fake):
    """The launcher never kills on a clock of its own: only the grace
    period the user set (--kill-after) ends a training that ignores the
    signal; the launcher then dies of SIGKILL, as the training did."""
    ctl = str(tmp_path / "ctl")
    proc = start_launcher(tmp_path, ["run", "--run-name", "stubborn", "--kill-after", "0.5",
                                     fake, "hang", ctl])
    assert wait_for(ctl + ".ready")
    t0 = time.time()
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == -signal.SIGKILL, err
    assert time.time() - t0 >= 0.5
    assert "did not end within --kill-after 0.5 s" in err
    assert "TraceML Run Summary" in out
    m = manifest(tmp_path / "logs" / "stubborn")
    assert (m["status"], m["exit_code"]) == ("interrupted", 128 + signal.SIGKILL)


def children(pid):
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
            out += [int(x) for x in f.read().split()]
    return out


def test_aggregator_killed(tmp_path, fake):
    ctl = str(tmp_path / "ctl")
    proc = start_launcher(tmp_path, ["run", "--run-name", "aggdead", fake, "aggkill", ctl])
    assert wait_for(ctl + ".ready")
    time.sleep(0.6)                            # > one store flush interval
    agg = [c for c in children(proc.pid)
           if b"__aggregate" in open("/proc/%d/cmdline" % c, "rb").read()]
    assert len(agg) == 1
    os.kill(agg[0], signal.SIGKILL)
    time.sleep(0.2)
    open(ctl + ".go", "w").close()
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 5, err           # the training's own code
    assert "training finished on its own" in out
    assert "TraceML Run Summary" in out        # rebuilt from telemetry.sqlite
    run_dir = tmp_path / "logs" / "aggdead"
    summary = json.loads((run_dir / "final_summary.json").read_text())
    assert summary["text"].rstrip("\n") == box_of(out).rstrip("\n")
    assert "30 common steps" in out or "30 steps" in out or " 30 " in out
    log = (run_dir / "traceml.log").read_text()
    assert "killed by signal 9" in log and "finalizing from telemetry.sqlite" in log
    assert manifest(run_dir)["status"] == "failed"
    # never a silent partial summary: the box and meta say what happened
    partial = summary["meta"]["partial"]
    assert partial.startswith("the aggregator was killed by signal 9 "), partial
    assert "s into the run; telemetry covers steps 0-29" in partial, partial
    assert "PARTIAL: the aggregator was killed by signal 9" in out


def test_launcher_killed(tmp_path, fake):
    # the aggregator outlives a SIGKILLed launcher: it finalizes what
    # arrived, says PARTIAL, and the manifest does not stay "running"
    ctl = str(tmp_path / "ctl")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env.update(FAKE_TORCH)
    proc = start_launcher(tmp_path, ["run", "--run-name", "lost", fake, "aggkill", ctl], env=env)
    assert wait_for(ctl + ".ready")
    time.sleep(0.3)
    agg = [c for c in children(proc.pid)
           if b"__aggregate" in open("/proc/%d/cmdline" % c, "rb").read()]
    assert len(agg) == 1
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)                      # its pipes stay open in the orphans
    proc.stdout.close()
    proc.stderr.close()
    run_dir = tmp_path / "logs" / "lost"
    open(ctl + ".go", "w").close()             # the orphaned training ends
    deadline = time.time() + 15
    while time.time() < deadline and manifest(run_dir)["status"] == "running":
        time.sleep(0.05)
    m = manifest(run_dir)
    assert m["status"] == "interrupted" and m["exit_code"] is None, m
    assert m["end_unix_ms"] >= m["start_unix_ms"] and m["command"][-2] == "aggkill", m
    assert wait_for(str(run_dir / "final_summary.json"))
    summary = json.loads((run_dir / "final_summary.json").read_text())
    assert summary["meta"]["partial"].startswith("the launcher went away"), summary["meta"]
    assert "PARTIAL: the launcher went away" in summary["text"]
    # no terminal to take the width of: a log's width, as the launcher's own
    assert {len(l) for l in summary["text"].splitlines()} == {120}, summary["text"]


# ---- serve ----

def test_serve_rejects_and_accepts(tmp_path):
    proc = subprocess.Popen([BIN, "serve", "--run-name", "srv", "--logs-dir", str(tmp_path / "logs")],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    env = {}
    end = time.time() + 10
    while time.time() < end:
        line = proc.stdout.readline()
        if line.startswith("export "):
            env = dict(kv.split("=", 1) for kv in line.split()[1:])
            break
    assert "TRACEML_ADDR" in env and "TRACEML_SECRET" in env
    host, port = env["TRACEML_ADDR"].rsplit(":", 1)

    ns = {}
    exec(FAKE.split("mode = sys.argv[1]")[0], ns)
    # wrong secret: REJECT, logged
    s = socket.create_connection((host, int(port)))
    s.sendall(ns["hello"](env["TRACEML_RUN_ID"], "0" * 48, ns["challenge"](s)))
    hdr = s.recv(12)
    assert struct.unpack("<IHHI", hdr)[2] == 3
    s.close()
    # a good session
    os.environ.update({"TRACEML_ADDR": env["TRACEML_ADDR"], "TRACEML_RUN_ID": env["TRACEML_RUN_ID"],
                       "TRACEML_SECRET": env["TRACEML_SECRET"]})
    try:
        s = ns["connect"]()
        s.sendall(ns["steps"](0, 12))
        s.sendall(ns["stats"](6, 12))
        s.close()
    finally:
        for k in ("TRACEML_ADDR", "TRACEML_RUN_ID", "TRACEML_SECRET"):
            os.environ.pop(k, None)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert "TraceML Run Summary" in out
    run_dir = tmp_path / "logs" / "srv"
    assert "bad secret" in (run_dir / "traceml.log").read_text()
    assert manifest(run_dir)["status"] == "completed"
    db = sqlite3.connect(str(run_dir / "telemetry.sqlite"))
    assert db.execute("SELECT COUNT(*) FROM steps").fetchone()[0] == 12
