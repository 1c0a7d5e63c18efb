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
import socket
import subprocess
import sys

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


def near(measured, injected_ms, rel=0.15, abs_ms=2.0):
    """The accuracy rule of the scenarios: within 15% or 2 ms, whichever is
    larger."""
    return measured is not None and abs(measured - injected_ms) <= max(rel * injected_ms, abs_ms)


def free_port_pair():
    """A port P with P and P + 1 free (master port, aggregator port)."""
    for _ in range(50):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p >= 65000:
            continue
        try:
            t = socket.socket()
            t.bind(("127.0.0.1", p + 1))
            t.close()
            return p
        except OSError:
            continue
    raise RuntimeError("no free port pair")


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
