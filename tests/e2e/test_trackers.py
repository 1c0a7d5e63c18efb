"""Results for trackers, for real: the W&B and MLflow examples
(examples/trackers/) run with the real packages (wandb in offline mode into
a private WANDB_DIR, MLflow into a private SQLite store), under `traceml
run` and without it; the values are read back from what the tracker wrote
and compared with the run's final_summary.json. Also traceml.summary()'s
flattening and its None cases, and the integrations' never-raise rule.
"""
import glob
import json
import os
import struct
import subprocess

import pytest

from conftest import PYTHON, TIMEOUT, TRACEML, EXAMPLES, base_env, traceml_warnings

TRACKERS = os.path.join(EXAMPLES, "trackers")
STEPS = 120          # logged mid-run at steps 50 and 100, at the end at step 119
DELAY_MS = 15        # the loader's sleep per batch: an INPUT-BOUND run
# the flattened keys that must be the same at the script's end and in the
# final summary (not duration, status or resource averages, which move on)
SAME_AT_END = ("traceml/primary/", "traceml/step_time/", "traceml/meta/common_steps")


def run_example(tmp_path, name, launcher, env):
    logs = tmp_path / "logs"
    env = base_env(TRACKERS_STEPS=STEPS, TRACKERS_DELAY_MS=DELAY_MS, **env)
    script = os.path.join(TRACKERS, name)
    if launcher:
        cmd = [TRACEML, "run", "--logs-dir", str(logs), "--run-name", "trk", script]
    else:
        env["TRACEML_LOGS_DIR"] = str(logs)
        env["TRACEML_RUN_NAME"] = "trk"
        cmd = [PYTHON, script]
    p = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert traceml_warnings(p.stderr) == [], p.stderr[-3000:]
    with open(logs / "trk" / "final_summary.json", encoding="utf-8") as f:
        text = f.read()
    from traceml_ai import _traceml
    return p, json.loads(text), json.loads(_traceml.summary_flatten(text))


def check_final(logged, final, flat):
    """What was logged at the end is the final summary (the keys that do
    not move on after the last step), and the run is the INPUT-BOUND one
    the loader's sleep makes."""
    assert final["status"] == "completed"
    assert final["meta"]["common_steps"] == STEPS
    assert final["primary_diagnosis"]["kind"] == "INPUT_BOUND", final["primary_diagnosis"]
    # the Next lines quote the host's CPU average, which goes on moving
    # until the aggregator stops sampling (and may cross HIGH CPU's 80%)
    same = {k: v for k, v in flat.items() if k.startswith(SAME_AT_END) and
            not k.endswith("/next")}
    assert len(same) > 20, same
    assert {k: logged.get(k) for k in same} == same


def check_mid(m0, m1):
    """Mid-run: the summary so far, growing."""
    assert 40 <= m0 < m1 <= 101, (m0, m1)


# --------------------------------------------------------------------------
# W&B: the offline run's transaction log (run-ID.wandb), read with wandb's
# own protobuf records. The file is a LevelDB-style log: a 7-byte header
# (":W&B", magic, version), then 32 KiB blocks of chunks (crc32c, length,
# type FULL/FIRST/MIDDLE/LAST) that carry one serialized Record each.

def wandb_records(path):
    from wandb.proto import wandb_internal_pb2 as pb
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B", data[:7]
    pos, buf, block = 7, b"", 32 * 1024
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, n, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk = data[pos + 7:pos + 7 + n]
        pos += 7 + n
        if kind == 0:
            pos += left - 7 - n
            continue
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            r = pb.Record()
            r.ParseFromString(buf)
            yield r


def wandb_offline_run(wandb_dir):
    """(history rows by step, final run summary) of the only offline run."""
    files = glob.glob(os.path.join(str(wandb_dir), "wandb", "offline-run-*", "run-*.wandb"))
    assert len(files) == 1, files
    history, summary = {}, {}

    def key(item):
        return item.key or ".".join(item.nested_key)
    for r in wandb_records(files[0]):
        kind = r.WhichOneof("record_type")
        if kind == "history":
            row = {key(i): json.loads(i.value_json) for i in r.history.item}
            history[row.get("_step", r.history.step.num)] = row
        elif kind == "summary":
            for i in r.summary.update:
                summary[key(i)] = json.loads(i.value_json)
            for i in r.summary.remove:
                summary.pop(key(i), None)
    return history, summary


@pytest.mark.parametrize("launcher", [True, False], ids=["traceml-run", "plain-python"])
def test_wandb_example(tmp_path, launcher):
    wdir = tmp_path / "wandb_dir"
    wdir.mkdir()
    p, final, flat = run_example(tmp_path, "wandb_example.py", launcher, dict(
        WANDB_MODE="offline", WANDB_DIR=str(wdir), WANDB_SILENT="true"))
    history, summary = wandb_offline_run(wdir)
    assert len(history) == STEPS                          # the loss, every step
    mid = [s for s, row in history.items() if "traceml/primary/kind" in row]
    assert mid == [50, 100, STEPS - 1], mid
    m0, m1, end = history[50], history[100], history[STEPS - 1]
    assert m0["traceml/status"] == m1["traceml/status"] == "running"
    check_mid(m0["traceml/meta/common_steps"], m1["traceml/meta/common_steps"])
    assert "loss" in m0                                   # merged into the user's step
    check_final(end, final, flat)
    # run.summary (the runs table) holds the final diagnosis
    check_final(summary, final, flat)


def test_mlflow_example(tmp_path):
    from mlflow.tracking import MlflowClient
    uri = "sqlite:///%s" % (tmp_path / "mlflow.db")
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("traceml-e2e",
                                   artifact_location=(tmp_path / "artifacts").as_uri())
    p, final, flat = run_example(tmp_path, "mlflow_example.py", True, dict(
        MLFLOW_TRACKING_URI=uri, MLFLOW_EXPERIMENT_NAME="traceml-e2e"))
    runs = client.search_runs([exp])
    assert len(runs) == 1, runs
    run = runs[0]
    hist = {m.step: m.value for m in
            client.get_metric_history(run.info.run_id, "traceml/meta/common_steps")}
    assert sorted(hist) == [50, 100, STEPS - 1], hist
    check_mid(hist[50], hist[100])
    # every number is a metric whose value at the last step is the final
    # one; every string is a tag (the verdict, severities)
    at_end = {}
    for k, v in flat.items():
        if k.startswith(SAME_AT_END) and isinstance(v, (int, float)):
            h = {m.step: m.value for m in client.get_metric_history(run.info.run_id, k)}
            at_end[k] = h.get(STEPS - 1)
        elif k.startswith(SAME_AT_END):
            at_end[k] = run.data.tags.get(k)
    check_final(at_end, final, flat)
    # what the script logged last said "running"; at the end the run's own
    assert run.data.tags["traceml/status"] == final["status"] == "completed"
    art = tmp_path / "artifacts" / run.info.run_id / "artifacts" / "traceml" / "final_summary.json"
    doc = json.loads(art.read_text())
    assert doc["meta"]["common_steps"] == STEPS and doc["schema_version"] == 1


ENDS = r'''
import sys
import mlflow
import torch
import traceml_ai as traceml
from traceml_ai.integrations.mlflow import log_summary

traceml.init(mode="auto")
model = torch.nn.Linear(4, 1)
mlflow.set_tracking_uri("sqlite:///" + sys.argv[1])
with mlflow.start_run(run_name="ends"):
    for step in range(20):
        with traceml.trace_step(model):
            model(torch.randn(2, 4)).sum().backward()
    print("logged", log_summary(step=step)["traceml/status"])
raise {"failed": RuntimeError, "interrupted": KeyboardInterrupt}[sys.argv[2]]("the end")
'''


@pytest.mark.parametrize("launcher,ending", [(False, "failed"), (False, "interrupted"),
                                             (True, "failed")])
def test_mlflow_status_tag_is_the_runs_end(tmp_path, plain_python, launcher, ending):
    """A run that fails (an uncaught exception) or is interrupted
    (KeyboardInterrupt) after its last log_summary(): MLflow's
    traceml/status tag says so, as final_summary.json does."""
    from mlflow.tracking import MlflowClient
    db = str(tmp_path / "mlflow.db")
    script = tmp_path / "ends.py"
    script.write_text(ENDS)
    if launcher:
        logs = tmp_path / "logs"
        p = subprocess.run([TRACEML, "run", "--logs-dir", str(logs), "--run-name", "ends",
                            str(script), db, ending], cwd=str(tmp_path), env=base_env(),
                           capture_output=True, text=True, timeout=TIMEOUT)
        rc, out, err, run_dir = p.returncode, p.stdout, p.stderr, str(logs / "ends")
    else:
        r = plain_python(str(script), db, ending)
        rc, out, err, run_dir = r.rc, r.stdout, r.stderr, r.run_dir
    assert rc != 0 and "logged running" in out and "the end" in err, out[-2000:] + err[-3000:]
    assert traceml_warnings(err) == [], err[-3000:]
    with open(os.path.join(run_dir, "final_summary.json"), encoding="utf-8") as f:
        final = json.load(f)
    runs = MlflowClient(tracking_uri="sqlite:///" + db).search_runs(["0"])
    assert len(runs) == 1, runs
    assert runs[0].data.tags["traceml/status"] == final["status"] == ending


def test_log_summary_never_raises(plain_python, tmp_path):
    """Nothing to log → None; W&B without a run and MLflow with a store
    that cannot be written → one warning line each, None, and the
    training goes on."""
    code = r'''
import sys
import torch
import traceml_ai as traceml
from traceml_ai.integrations import wandb as tw, mlflow as tm
print("before", tm.log_summary(step=1))
traceml.init(mode="auto")
model = torch.nn.Linear(4, 1)
for _ in range(5):
    with traceml.trace_step(model):
        model(torch.randn(2, 4)).sum().backward()
print("wandb", tw.log_summary())
import mlflow
mlflow.set_tracking_uri("sqlite:///" + sys.argv[1])
print("mlflow", tm.log_summary())
print("done")
'''
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    r = plain_python("never", str(blocker / "mlflow.db"), code=code)
    assert r.rc == 0, r.explain()
    for line in ("before None", "wandb None", "mlflow None", "done"):
        assert line in r.stdout, r.explain()
    warns = traceml_warnings(r.stderr)
    assert len(warns) == 2, r.stderr[-3000:]
    assert "no W&B run" in warns[0] and "MLflow" in warns[1], warns


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
        # TraceML 0.5.0's keys: the label as status, severities crit/warn/info
        "traceml/primary/status": "INPUT-BOUND", "traceml/step_time/status": "INPUT-BOUND",
        "traceml/step_time/severity": "crit", "traceml/step_time/skew_percent": 0,
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
