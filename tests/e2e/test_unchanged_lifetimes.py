"""TraceML never changes what the training does, round two (docs/zero-edit.md,
"What stays the same"): what the training frees is freed when it frees it,
a module cloned through its __dict__ runs its own forward, a compiled whole
train step compiles the same frames and graphs, and searching the
process's objects for the models warns nothing. Each case runs
tests/e2e/unchanged/lifetimes.py without TraceML and under `traceml run`
(test_unchanged.Pair) and compares what the script saw.
"""
import json
import os
import subprocess

import pytest

from conftest import PYTHON, TIMEOUT, TRACEML, base_env, primary
from test_unchanged import HERE, Pair, normal, training_output

SCRIPT = os.path.join(HERE, "lifetimes.py")
MANUAL = os.path.join(HERE, "lifetimes_manual.py")


def test_freed_tensors_are_freed_when_the_loop_frees_them(tmp_path):
    # model discovery reads the running frames' locals at the first
    # backward and when a new optimizer steps (step 3): nothing it reads
    # may stay behind -- a 20 MB buffer deleted at step 1, step 0's and
    # step 3's outputs are freed at the same point as without TraceML
    r = Pair(tmp_path, SCRIPT, ["--how", "memory"])
    r.assert_same()
    events = r.result("with")["events"]
    assert events.index("freed buf") < events.index("del buf"), events
    assert events.index("freed out3") < events.index("step 5"), events
    s = r.summary()
    assert s["meta"]["step_detection"] == "automatic", s["meta"]
    assert s["step_time"]["median"]["forward_ms"] > 0, s["step_time"]["median"]


def test_freed_tensors_with_trace_step(tmp_path):
    # the same loop through TraceML's own API (init + trace_step naming one
    # model): the other models of a step are searched for when an
    # optimizer not seen before steps; the run without TraceML is the same
    # script with TRACEML_DISABLED=1 (everything a no-op)
    runs = {}
    for how, env in (("without", {"TRACEML_DISABLED": "1"}), ("with", {})):
        out = tmp_path / ("%s.json" % how)
        cmd = [PYTHON, MANUAL, "--out", str(out)]
        if how == "with":
            cmd = [TRACEML, "run", "--logs-dir", str(tmp_path / "logs"), "--run-name", "with",
                   MANUAL, "--out", str(out)]
        p = subprocess.run(cmd, cwd=str(tmp_path), env=base_env(**env), capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert p.returncode == 0, (how, p.stdout[-2000:], p.stderr[-2000:])
        with open(out, encoding="utf-8") as f:
            runs[how] = (p, json.load(f))
    assert runs["with"][1] == runs["without"][1], (runs["without"][1], runs["with"][1])
    assert normal(training_output(runs["with"][0].stdout)) == \
        normal(training_output(runs["without"][0].stdout))
    with open(tmp_path / "logs" / "with" / "final_summary.json", encoding="utf-8") as f:
        s = json.load(f)
    assert s["meta"]["step_detection"] == "marked", s["meta"]


@pytest.mark.parametrize("how", ["clone", "clone_call"])
def test_a_clone_by_dict_runs_its_own_forward(tmp_path, how):
    # new = Cls.__new__(Cls); new.__dict__.update(old.__dict__), new head:
    # the clone computes with its own head, (3, 2), and carries nothing of
    # TraceML's; the original, whose forward is timed, still (3, 1).
    # clone_call: a class with its own __call__ (timed another way)
    r = Pair(tmp_path, SCRIPT, ["--how", how])
    r.assert_same()
    res = r.result("with")
    assert res["clone_shape"] == [3, 2] and res["model_shape"] == [3, 1], res
    s = r.summary()
    assert s["step_time"]["median"]["forward_ms"] > 0, s["step_time"]["median"]


def test_a_compiled_train_step(tmp_path):
    # @torch.compile on forward + backward + optimizer.step(): the same
    # frames, graphs and graph breaks as without TraceML, and the summary
    # has steps (one per call of the compiled function) and a verdict
    r = Pair(tmp_path, SCRIPT, ["--how", "compiled_step", "--steps", "12"])
    r.assert_same()
    res = r.result("with")
    assert res["graph_breaks"] > 0 and res["frames"] > 0, res
    s = r.summary()
    assert s["meta"]["common_steps"] >= 10, (s["meta"], primary(s))
    assert primary(s)["kind"] != "INSUFFICIENT_STEP_TIME_DATA", primary(s)


def test_the_gc_search_warns_nothing(tmp_path):
    # a model no frame holds: the models are searched for among the
    # process's objects (gc), which must not make torch's lazy and
    # deprecated objects warn into the training's stderr
    r = Pair(tmp_path, SCRIPT, ["--how", "gc"], env={"PYTHONWARNINGS": "default"})
    r.assert_same()
    s = r.summary()
    assert s["step_time"]["median"]["forward_ms"] > 0, s["step_time"]["median"]
