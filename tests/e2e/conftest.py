"""Shared helpers of the end-to-end tests: they run real PyTorch scripts
through `traceml run` (or the venv's plain python) and read the artifacts
they leave.

TraceML is tested as a user has it: installed with `pip install .` into
the virtual environment .venv/ (scripts/venv --test), with torch 2.13;
`traceml` is the entry point pip wrote there. Run from the repository root:
    scripts/venv --test && .venv/bin/python -m pytest tests/e2e

To test a build tree without installing it: TRACEML_BUILD=DIR runs
DIR/bin/traceml, with TRACEML_PYTHON (an interpreter that has torch and
traceml_ai) as the training's Python.
"""
import json
import os
import re
import random
import signal
import socket
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("TRACEML_BUILD", os.path.join(REPO, "build"))
VENV = os.environ.get("TRACEML_VENV", os.path.join(REPO, ".venv"))
PYTHON = os.environ.get("TRACEML_PYTHON") or os.path.join(VENV, "bin", "python")
if "TRACEML_BUILD" in os.environ:
    TRACEML = os.path.join(BUILD, "bin", "traceml")
else:
    TRACEML = os.path.join(VENV, "bin", "traceml")
EXAMPLES = os.path.join(REPO, "examples")
DIAG = os.path.join(EXAMPLES, "diagnosis")
TIMEOUT = 240
# tests/fakes/torch, first on PYTHONPATH: the quick tier's torch (glue
# tests that need no real PyTorch; tests/README.md)
FAKES = os.path.join(REPO, "tests", "fakes")
FAKE_TORCH = {"PYTHONPATH": FAKES}


# The modules whose tests take longest start first, so that pytest's
# workers do not wait for one of them at the end (tests/run).
SLOW_FIRST = ("test_integrations_rfdetr", "test_integrations_ray", "test_integrations_hf",
              "test_live", "test_distributed", "test_demos_050", "test_integrations_deepspeed",
              "test_unchanged", "test_comm", "test_install", "test_integrations_lightning",
              "test_compare", "test_multinode_live", "test_tune")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "quick: needs no real torch (the fake one or none): the quick tier, "
        "scripts/test --quick")
    config.addinivalue_line(
        "markers", "solo: measures a latency or a rate against the wall clock: runs after the "
        "tests on pytest workers, one at a time, so the suite's own load does not stretch it "
        "(tests/run)")
    config.addinivalue_line(
        "markers", "xdist_group(name): tests that share a module's expensive fixture run "
        "on one pytest worker (tests/run: --dist loadgroup)")


def pytest_collection_modifyitems(config, items):
    """A test module sets QUICK = True when every test in it is quick."""
    for item in items:
        if getattr(item.module, "QUICK", False):
            item.add_marker(pytest.mark.quick)
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda it: rank.get(it.module.__name__, len(rank)))


def base_env(**extra):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("TRACEML_") and k not in ("TRACEML_PYTHON",):
            del env[k]
    env["OMP_NUM_THREADS"] = "1"
    env["MKL_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Run(object):
    def __init__(self, proc, run_dir):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.run_dir = run_dir

    def artifact(self, name):
        return os.path.join(self.run_dir, name)

    def summary(self):
        path = self.artifact("final_summary.json")
        assert os.path.exists(path), "no %s\n--- stdout\n%s\n--- stderr\n%s" % (
            path, self.stdout[-3000:], self.stderr[-3000:])
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def manifest(self):
        with open(self.artifact("manifest.json"), encoding="utf-8") as f:
            return json.load(f)

    def explain(self):
        return "rc=%s\n--- stdout\n%s\n--- stderr\n%s" % (
            self.rc, self.stdout[-4000:], self.stderr[-4000:])


@pytest.fixture
def traceml_run(tmp_path):
    """traceml_run(script, *args, run_name=..., env={}, launcher_args=[])
    runs SCRIPT under `traceml run` with a private logs folder."""
    if not os.access(TRACEML, os.X_OK):
        pytest.fail("%s is missing (run scripts/venv --test first)" % TRACEML)

    def run(script, *args, run_name="e2e", env=None, launcher_args=(), timeout=TIMEOUT):
        logs = tmp_path / "logs"
        cmd = [TRACEML, "run", "--logs-dir", str(logs), "--run-name", run_name]
        cmd += list(launcher_args) + [script] + [str(a) for a in args]
        proc = subprocess.run(cmd, cwd=REPO, env=base_env(**(env or {})),
                              capture_output=True, text=True, timeout=timeout)
        return Run(proc, str(logs / run_name))
    return run


@pytest.fixture
def plain_python(tmp_path):
    """plain_python(script_or_code, *args, env={}) runs a script with the
    venv's plain python (no launcher) and TRACEML_LOGS_DIR pointing to a
    private folder. Returns a Run whose run_dir is the only run folder
    created (or None)."""
    if not os.access(PYTHON, os.X_OK):
        pytest.fail("%s is missing (run scripts/venv --test first)" % PYTHON)

    def run(script, *args, env=None, code=None, timeout=TIMEOUT, logs_env=True):
        logs = tmp_path / "plain_logs"
        extra = {}
        if logs_env:
            extra["TRACEML_LOGS_DIR"] = str(logs)
        extra.update(env or {})
        if code is not None:
            path = tmp_path / ("%s.py" % script)
            path.write_text(code)
            script = str(path)
        proc = subprocess.run([PYTHON, script] + [str(a) for a in args], cwd=str(tmp_path),
                              env=base_env(**extra), capture_output=True, text=True,
                              timeout=timeout)
        runs = sorted(os.listdir(logs)) if logs.exists() else []
        r = Run(proc, str(logs / runs[0]) if len(runs) == 1 else None)
        r.all_runs = runs
        r.logs = str(logs)
        return r
    return run


# --------------------------------------------------------------------------
# Reading final_summary.json (schema: docs/summary-json.md)

# A TraceMLWarning as Python's `warnings` prints it (FILE:LINE: TraceMLWarning:
# MESSAGE, then the line's source), or the line _warn() falls back to where a
# filter made it an error (traceml: warning: MESSAGE).
_TRACEML_WARNING = re.compile(r"^(?:.*:\d+: TraceMLWarning|traceml: warning): (.*)$")


def traceml_warnings(stderr):
    """The messages of the package's warnings in a process's stderr."""
    return [m.group(1) for m in map(_TRACEML_WARNING.match, stderr.splitlines()) if m]


def primary(summary):
    return summary["primary_diagnosis"]


def step_diag(summary):
    return summary["step_time"]["diagnosis"]


def step_metric_ms(summary, name):
    """The median rank's window average of a step-time figure, in ms (None
    when missing): name is one of step_time, input_wait, h2d, forward,
    backward, optimizer, compute, residual, untraced, dataloader_fetch_cpu."""
    med = summary["step_time"]["median"]
    assert (name + "_ms") in med, "%s_ms not in step_time.median: %s" % (name, json.dumps(med))
    return med[name + "_ms"]


def step_rows_ms(run_dir, column, rank=0):
    """One column of telemetry.sqlite's steps table ("input_ns", ...), per
    step of one rank, in ms: for a median over the run's steps, which one
    step's scheduling stall on a shared machine does not move as it moves
    a window average."""
    import sqlite3
    db = sqlite3.connect(os.path.join(run_dir, "telemetry.sqlite"))
    try:
        rows = db.execute("SELECT %s FROM steps WHERE rank = ? ORDER BY step" % column,
                          (rank,)).fetchall()
    finally:
        db.close()
    return [r[0] / 1e6 for r in rows if r[0] is not None]


def near(measured, injected_ms, rel=0.15, abs_ms=2.0):
    """Within 15% or 2 ms of a reference, whichever is larger. The
    reference is what the script measured itself (Slept.mean, its own
    timings), never the delay it asked for: a loaded machine overshoots
    that."""
    return measured is not None and abs(measured - injected_ms) <= max(rel * injected_ms, abs_ms)


def covers(measured, reference_ms, rel=0.10, abs_ms=0.5, extra_ms=1.0):
    """TraceML's figure for an interval that holds the script's measured
    work (`reference_ms`, e.g. a loader's sleep) and a little of its own
    around it (the fetch's indexing and collate, up to extra_ms): not below
    the reference, not more than extra_ms above it, within rel / abs_ms."""
    tol = max(rel * reference_ms, abs_ms)
    return measured is not None and reference_ms - tol <= measured <= reference_ms + extra_ms + tol


SLEPT_SITE = os.path.join(REPO, "tests", "e2e", "slept")


class Slept(object):
    """What the training really slept: every time.sleep() of its Python
    processes, timed (tests/e2e/slept/sitecustomize.py)."""

    def __init__(self, folder):
        self.folder = str(folder)
        os.makedirs(self.folder, exist_ok=True)

    def env(self, **extra):
        """The training's environment for it (PYTHONPATH joined with extra's)."""
        e = dict(extra)
        e["TRACEML_TEST_SLEPT"] = self.folder
        e["PYTHONPATH"] = os.pathsep.join(p for p in (SLEPT_SITE, extra.get("PYTHONPATH")) if p)
        return e

    def env_c(self, prog, **extra):
        """The same for a C training (tests/fakes/slept.c, preloaded): only
        the program named prog records."""
        e = dict(extra, TRACEML_TEST_SLEPT=self.folder, TRACEML_TEST_SLEPT_PROG=prog)
        e["LD_PRELOAD"] = os.path.join(BUILD, "fakes", "libslept.so")
        return e

    def durations(self, asked_ms, rank=None):
        """Each sleep that asked for asked_ms (of that rank's processes, if
        given): how long it took, in ms."""
        out = []
        for name in os.listdir(self.folder):
            if rank is not None and not name.startswith("%d." % rank):
                continue
            with open(os.path.join(self.folder, name)) as f:
                for line in f:
                    asked, took = (float(x) for x in line.split())
                    if abs(asked - asked_ms) < 1e-3:
                        out.append(took)
        return out

    def mean(self, asked_ms, rank=None):
        """The mean of those: the reference for TraceML's window averages
        (step_metric_ms), which a loaded machine's late wake-ups move
        alike."""
        d = self.durations(asked_ms, rank)
        assert d, "no sleep of %s ms was recorded in %s" % (asked_ms, self.folder)
        return sum(d) / len(d)


@pytest.fixture
def slept(tmp_path):
    return Slept(tmp_path / "slept")


def shell_signals():
    """In a child (preexec_fn): the signal state a shell gives a job,
    whatever this pytest worker inherited or was left with by a library
    that ran in it before. An ignored SIGINT survives exec (a suite started
    in the background by a non-interactive shell ignores it), and so does a
    blocked one: the training would never see the Ctrl-C."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
              signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(s, signal.SIG_DFL)


class BusyLoops:
    """Busy loops beside a scenario (tests/README.md: a shared machine),
    bounded by `timeout` and each in a process group of its own, so that
    stop() ends the loop itself, not only its `timeout` (a SIGKILL to
    `timeout` leaves its `sh` spinning for good)."""

    def __init__(self, n=None, limit_s=600):
        self.procs = [subprocess.Popen(["timeout", str(limit_s), "sh", "-c", "while :; do :; done"],
                                       start_new_session=True)
                      for _ in range(n or os.cpu_count() or 2)]

    def stop(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        self.procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


@pytest.fixture
def busy_loops():
    """Two busy loops (one per core) for the whole test."""
    with BusyLoops() as b:
        yield b


def host_saturated(summary):
    """The host CPU was saturated while it ran (HIGH CPU, as TraceML
    recorded it): an INPUT-BOUND Next then does not advise more workers."""
    return "HIGH_CPU" in [i["kind"] for i in summary["system"]["issues"]]


def machine_contended(summary):
    """Other processes took the cores and the training waited for one, as
    TraceML recorded it (summary "contention"; docs/diagnosis.md, "A shared
    machine": others >= 25% of the cores, a wait >= 10% of the time)."""
    c = summary.get("contention") or {}
    other, runq = c.get("other_cpu_percent"), c.get("runq_wait_percent")
    return other is not None and runq is not None and other >= 25 and runq >= 10


def contention_straggler(diag):
    """A STRAGGLER that TraceML found waited for a core on a saturated host
    (evidence.straggler.cpu_contention, docs/diagnosis.md), and says so."""
    st = diag["evidence"]["straggler"] or {}
    if diag["kind"] == "STRAGGLER" and st.get("cpu_contention"):
        assert "(HIGH CPU): it fell behind for want of CPU" in diag["why"], diag
        return True
    return False


def straggler_severity(summary):
    """The severity the default thresholds give the straggler TraceML
    recorded (docs/diagnosis.md: score >= 0.20 over >= 20 window steps is
    CRITICAL, >= 0.10 WARNING). The score is the culprit's excess as a
    share of the step, so on a busy machine, where every rank's step
    stretches, the same injected delay may earn WARNING: tests assert the
    rule that fired for what was recorded, and the excess in ms apart."""
    st, meta = summary["step_time"]["straggler"], summary["meta"]
    if st["score"] >= 0.20 and meta["window_steps"] >= 20:
        return "CRITICAL"
    return "WARNING" if st["score"] >= 0.10 else "OK"


def check_healthy(summary):
    """No WARNING or CRITICAL verdict, but those a saturated host earns
    for real: ranks waiting for a core hold the collectives up, and
    COMMUNICATION-BOUND then says so (its Next names HIGH CPU), or, where
    other processes took the cores, CPU CONTENTION; a CPU
    training's rank that got fewer cores than its peer falls behind, and
    the STRAGGLER then says it waited for a core; a process waiting for a
    core between its phases adds to Residual, and RESIDUAL-HEAVY then says
    so."""
    prim = summary["primary_diagnosis"]
    if prim["kind"] == "CPU_CONTENTION":
        # other processes took the cores (the busy loops of tests/README.md)
        assert machine_contended(summary), summary["contention"]
        assert "Other processes used" in prim["why"], prim
    elif host_saturated(summary) and prim["kind"] == "COMMUNICATION_BOUND":
        assert "HIGH CPU" in prim["next"], prim
    elif host_saturated(summary) and prim["kind"] == "RESIDUAL_HEAVY":
        assert prim["next"].startswith("The host CPU averaged "), prim
    elif host_saturated(summary) and contention_straggler(prim):
        pass
    else:
        assert prim["severity"] not in ("WARNING", "CRITICAL"), prim


def check_input_advice(summary, workers_hint="num_workers"):
    """The INPUT-BOUND Next line follows the host state TraceML recorded:
    more workers on an idle host; on a saturated one, cheaper batches when
    the training's own tree takes the cores, and when other processes take
    them (a shared machine, a CI runner: the other pytest worker counts)
    their share, and a worker count to measure with `traceml tune`."""
    nxt = primary(summary)["next"]
    c = summary.get("contention") or {}
    others = machine_contended(summary) and \
        not (c.get("training_cpu_percent") or 0) > (c.get("other_cpu_percent") or 0)
    if others and (host_saturated(summary) or "other processes used" in nxt):
        assert "other processes used" in nxt and workers_hint in nxt and \
            "traceml tune" in nxt, (nxt, c)
    elif host_saturated(summary):
        assert "host CPU averaged" in nxt and "try num_workers" not in nxt, nxt
    else:
        assert workers_hint in nxt, nxt


# ---------------------------------------------------------------------------
# How a multi-rank run ended (docs/distributed.md, "A rank aborts at exit")

GLOO_EXIT_ABORT = "terminate called without an active exception"
# what the launcher then says of the rank: torchrun's failure report, or
# torch.multiprocessing.spawn's exception in the parent
_LAUNCHER_EXITCODE = re.compile(r"exitcode\s*:\s*(-?\d+)")
_SPAWN_SIGNAL = re.compile(r"process \d+ terminated with signal (SIG\w+)")


def gloo_exit_abort(rc, stderr):
    """True when a non-zero exit is PyTorch's own gloo exit abort and
    nothing else: a rank printed "terminate called without an active
    exception" (a gloo worker thread dropping a Work that holds Python
    state while the interpreter finalizes, docs/distributed.md), with no
    Python traceback before it, and what the launcher said after it is
    only that ranks died of SIGABRT (torchrun: exitcode -6, and -15 for a
    rank it then stopped with SIGTERM while that one was still exiting;
    mp.spawn: "terminated with signal SIGABRT")."""
    if rc in (0, None) or GLOO_EXIT_ABORT not in stderr:
        return False
    before, _, after = stderr.partition(GLOO_EXIT_ABORT)
    if "Traceback (most recent call last)" in before:
        return False
    codes = _LAUNCHER_EXITCODE.findall(after)
    signals = _SPAWN_SIGNAL.findall(after)
    if "Traceback (most recent call last)" in after and "-6" not in codes and not signals:
        return False
    return set(codes) <= {"-6", "-15"} and set(signals) <= {"SIGABRT"}


def _summary_of(where):
    if isinstance(where, dict):
        return where
    path = str(where)
    if os.path.isdir(path):
        path = os.path.join(path, "final_summary.json")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def ranks_finished(p, where, steps=None, ranks=None, missing=()):
    """Checks how a multi-rank run ended, for every test that runs one:
    exit code 0, or PyTorch's gloo exit abort (gloo_exit_abort) after
    every rank ran every step. p is the finished process (a Popen with
    .out/.err or .stdout/.stderr, or a Run); where its final_summary.json,
    run folder or the summary itself (node 0's on several nodes), None
    for a run without TraceML (its test checks the output). Then, either
    way, every rank reported (ranks: how many; else the world size), none
    was lost, none missing but `missing` (rank numbers), and, given steps,
    every rank ran them all (common_steps). Any other failure fails the
    test. When the run's own summary saw the abort (status failed, on
    node 0), its meta.exit_signals names the rank and SIGABRT. Returns the
    summary."""
    rc = p.rc if hasattr(p, "rc") else p.returncode
    err = getattr(p, "err", None)
    err = p.stderr if err is None else err
    out = getattr(p, "out", None)
    out = p.stdout if out is None else out
    why = "rc=%s\n--- stdout\n%s\n--- stderr\n%s" % (rc, (out or "")[-3000:], (err or "")[-4000:])
    assert rc == 0 or gloo_exit_abort(rc, err or ""), why
    if where is None:   # a run without TraceML: the test checks its output
        return None
    s = _summary_of(where)
    m = s["meta"]
    want = ranks if ranks is not None else m["world_size"]
    assert (m["ranks_reported"], m["missing_ranks"], m["lost_ranks"]) == (
        want, list(missing), []), (m, why)
    if steps is not None:
        assert m["common_steps"] == steps, (m["common_steps"], steps, why)
    if rc != 0 and s.get("status") == "failed":
        sigs = {e["signal"] for e in m.get("exit_signals", [])}
        assert sigs == {signal.SIGABRT}, (m, why)
    return s


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(n=1):
    """A port P with P .. P + n - 1 free, drawn at random below the
    kernel's ephemeral range: a port bind(0) picked and let go may be
    taken a moment later by any outgoing connection (gloo's, a browser's)
    and the launcher then fails with EADDRINUSE; below the range only
    another listener can take it, and two suites draw different ports."""
    high = min(_ephemeral_low(), 65536) - n
    rng = random.SystemRandom()
    for _ in range(200):
        p = rng.randrange(10000, high)
        held = []
        try:
            for q in range(p, p + n):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", q))
            return p
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError("no %d free ports in a row" % n)


def free_port_pair():
    """A port P with P and P + 1 free (master port, aggregator port)."""
    return free_port(2)


def old_version_site(tmp_path, dist, version="0.1"):
    """A folder for PYTHONPATH whose sitecustomize makes
    importlib.metadata.version(dist) say `version` (an integration's
    version check then sees a framework too old); returns its path."""
    site = tmp_path / ("old_" + dist)
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(
        "import importlib.metadata as _m\n"
        "_version = _m.version\n"
        "def version(name):\n"
        "    return %r if name.lower() == %r else _version(name)\n"
        "_m.version = version\n" % (version, dist))
    return str(site)


# TraceML 0.5.0, the incumbent on the package registry: its wheel, fetched
# at test time (its demo scripts and its public surface are test cases:
# test_demos_050, test_surface_050). pip's words when it could not reach
# the index, as opposed to reaching it and not finding the version (a
# failure).
DIST_050 = "traceml-ai==0.5.0"
UNREACHABLE = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Max retries exceeded|"
    r"Temporary failure in name resolution|Name or service not known|Network is unreachable|"
    r"Connection refused|ConnectTimeoutError|ReadTimeoutError|timed out|ProxyError|"
    r"Could not fetch URL|connection broken")


def fetch_050(tmp_path_factory, sdist=False):
    """The path of 0.5.0's wheel (sdist: its source archive, with its
    examples and tests), downloaded now (pip's cache makes a second fetch
    cheap); skips, saying why, only when the registry cannot be reached."""
    dl = tmp_path_factory.mktemp("traceml_050")
    p = subprocess.run([PYTHON, "-m", "pip", "download", "--no-deps",
                        "--no-binary" if sdist else "--only-binary", ":all:",
                        "--disable-pip-version-check", "--timeout", "20", "--retries", "1",
                        "-d", str(dl), DIST_050],
                       capture_output=True, text=True, timeout=180, env=base_env())
    if p.returncode != 0:
        out = p.stdout + p.stderr
        if UNREACHABLE.search(out):
            line = next(x for x in out.splitlines() if UNREACHABLE.search(x))
            pytest.skip("the package registry cannot be reached to fetch %s: pip download "
                        "said %s" % (DIST_050, line.strip()[:300]))
        pytest.fail("pip download %s failed:\n%s" % (DIST_050, out[-3000:]))
    wheels = [f for f in os.listdir(str(dl))
              if f.startswith("traceml_ai-0.5.0" + (".tar" if sdist else "-"))]
    assert len(wheels) == 1, os.listdir(str(dl))
    return os.path.join(str(dl), wheels[0])
