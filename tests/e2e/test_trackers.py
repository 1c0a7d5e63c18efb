"""Results for trackers: traceml.summary() / final_summary() mid-run and at
the end, under `traceml run` and without it, and the W&B / MLflow examples
(examples/trackers/) run against stub libraries (tests/e2e/stubs) that
record what was logged.
"""
import json
import os
import subprocess

import pytest

from conftest import REPO, TRACEML, PYTHON, EXAMPLES, base_env

STUBS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stubs")
TRACKERS = os.path.join(EXAMPLES, "trackers")
STEPS = 120


def run_example(tmp_path, name, launcher):
    log = tmp_path / "calls.jsonl"
    logs = tmp_path / "logs"
    env = base_env(PYTHONPATH=STUBS, STUB_TRACKER_LOG=str(log),
                   TRACKERS_STEPS=str(STEPS))
    script = os.path.join(TRACKERS, name)
    if launcher:
        cmd = [TRACEML, "run", "--logs-dir", str(logs), "--run-name", "trk", script]
    else:
        env["TRACEML_LOGS_DIR"] = str(logs)
        env["TRACEML_RUN_NAME"] = "trk"
        cmd = [PYTHON, script]
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    calls = [json.loads(l) for l in log.read_text().splitlines()] if log.exists() else []
    with open(logs / "trk" / "final_summary.json", encoding="utf-8") as f:
        final = json.load(f)
    return p, calls, final


def check_flat(d):
    assert d["traceml/primary/kind"]
    assert isinstance(d["traceml/step_time/step_time_ms"], (int, float))
    assert "traceml/step_time/input_wait_share_percent" in d
    assert all(k.startswith("traceml/") for k in d)
    assert all(v is not None and not isinstance(v, (dict, list)) for v in d.values())
    assert "traceml/text" not in d


@pytest.mark.parametrize("launcher", [True, False], ids=["traceml-run", "plain-python"])
def test_wandb_example(tmp_path, launcher):
    p, calls, final = run_example(tmp_path, "wandb_example.py", launcher)
    logs = [c for c in calls if c["call"] == "log"]
    mid = [c for c in logs if c["kwargs"].get("step") is not None]
    end = [c for c in logs if c["kwargs"].get("step") is None]
    assert len(mid) == (STEPS - 1) // 50, calls          # steps 50 and 100
    assert len(end) == 1
    for c in logs:
        check_flat(c["args"][0])
    # mid-run: the summary so far, growing; at the end every step is in it
    m0, m1, e = mid[0]["args"][0], mid[1]["args"][0], end[0]["args"][0]
    assert m0["traceml/status"] == "running"
    assert m0["traceml/meta/common_steps"] < m1["traceml/meta/common_steps"] <= STEPS
    assert m0["traceml/meta/common_steps"] >= 40
    assert e["traceml/meta/common_steps"] == STEPS
    # the final artifact was not frozen by the mid-run calls
    assert final["status"] == "completed"
    assert final["meta"]["common_steps"] == STEPS
    assert final["series"] is not None
    assert e["traceml/primary/kind"] == final["primary_diagnosis"]["kind"]
    upd = [c for c in calls if c["call"] == "summary.update"]
    assert upd and upd[0]["args"][0] == e
    assert "TraceML Run Summary" in p.stdout          # print_text=True


@pytest.mark.parametrize("launcher", [True, False], ids=["traceml-run", "plain-python"])
def test_mlflow_example(tmp_path, launcher):
    p, calls, final = run_example(tmp_path, "mlflow_example.py", launcher)
    metrics = [c for c in calls if c["call"] == "log_metrics"]
    params = [c for c in calls if c["call"] == "log_params"]
    dicts = [c for c in calls if c["call"] == "log_dict"]
    assert len(metrics) == (STEPS - 1) // 50 + 1
    assert params and params[0]["args"][0]["traceml/primary/kind"] == final["primary_diagnosis"]["kind"]
    assert metrics[-1]["args"][0]["traceml/meta/common_steps"] == STEPS
    full, name = dicts[0]["args"]
    assert name == "traceml/final_summary.json"
    assert full["meta"]["common_steps"] == STEPS and full["schema_version"] == 1
    assert final["status"] == "completed"


def test_flatten_matches_the_rules(tmp_path, plain_python):
    """The engine's flattening (tml_summary_flatten) on a real summary."""
    code = r'''
import json, sys
import traceml_ai as traceml
from traceml_ai import _traceml as c
doc = json.load(open(sys.argv[1]))
flat = json.loads(c.summary_flatten(json.dumps(doc)))
json.dump(flat, open(sys.argv[2], "w"))
try:
    c.summary_flatten("[1, 2]")
    print("no error")
except ValueError as e:
    print("ValueError", e)
'''
    summary = tmp_path / "s.json"
    summary.write_text(json.dumps({
        "schema_version": 1, "generated_at": "x", "text": "box", "status": "running",
        "duration_s": None,
        "meta": {"run_name": "r", "common_steps": 7, "thresholds": {"a": 1}},
        "primary_diagnosis": {"kind": "INPUT_BOUND", "label": "INPUT-BOUND", "evidence": {}},
        "step_time": {"diagnosis": {"label": "INPUT-BOUND", "kind": "INPUT_BOUND",
                                    "severity": "CRITICAL"},
                      "skew_percent": 0, "average": {"step_time_ms": 12.5, "h2d_ms": None},
                      "shares_percent": {"input_wait": 64.25, "h2d": None},
                      "per_rank": [{"rank": 0}]},
        "system": None}))
    out = tmp_path / "flat.json"
    r = plain_python("flat", str(summary), str(out), code=code)
    assert r.rc == 0, r.explain()
    assert "ValueError" in r.stdout
    assert json.loads(out.read_text()) == {
        "traceml/schema_version": 1, "traceml/status": "running",
        "traceml/meta/run_name": "r", "traceml/meta/common_steps": 7,
        "traceml/primary/kind": "INPUT_BOUND", "traceml/primary/label": "INPUT-BOUND",
        "traceml/step_time/diagnosis": "INPUT-BOUND", "traceml/step_time/kind": "INPUT_BOUND",
        "traceml/step_time/severity": "CRITICAL", "traceml/step_time/skew_percent": 0,
        "traceml/step_time/step_time_ms": 12.5,
        "traceml/step_time/input_wait_share_percent": 64.25,
    }


def test_summary_none_when_disabled_or_not_started(plain_python):
    code = r'''
import traceml_ai as traceml
print("before", traceml.summary(), traceml.final_summary())
traceml.init(mode="manual", disabled=True)
print("disabled", traceml.summary(), traceml.final_summary())
'''
    r = plain_python("none", code=code)
    assert r.rc == 0, r.explain()
    assert "before None None" in r.stdout and "disabled None None" in r.stdout
