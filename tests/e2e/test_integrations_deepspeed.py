"""DeepSpeed, for real: examples/integrations/deepspeed_train.py trains an
MLP with a real DeepSpeedEngine (deepspeed 0.19.8, CPU, gloo) traced by
traceml_ai.integrations.deepspeed.trace_engine, under `traceml run` and
plain python, with ZeRO stages 0, 1 and 2.

Each test injects a known cause (or none) and checks the verdict, the
injected time, and that one TraceML step is one optimizer step.
"""
import os

import pytest

from conftest import (EXAMPLES, check_healthy, covers, old_version_site, primary, ranks_finished,
                      step_metric_ms)
from conftest import traceml_warnings

SCRIPT = os.path.join(EXAMPLES, "integrations", "deepspeed_train.py")

def test_slow_dataset_is_input_bound(traceml_run, slept):
    """ZeRO 0 under `traceml run`: each batch sleeps 20 ms → INPUT-BOUND,
    the median Input Wait within 10% of what it really slept, one step
    per optimizer step."""
    r = traceml_run(SCRIPT, "--steps", 40, "--delay-ms", 20, "--stage", 0, env=slept.env())
    assert r.rc == 0, r.explain()
    s = r.summary()
    assert primary(s)["kind"] == "INPUT_BOUND", primary(s)
    wait, ref = step_metric_ms(s, "input_wait"), slept.mean(20)
    assert covers(wait, ref, abs_ms=2.0), (wait, ref)
    assert s["meta"]["common_steps"] == 40
    for phase in ("forward", "backward", "optimizer"):
        assert step_metric_ms(s, phase) > 0, phase
    assert "Verdict: INPUT-BOUND" in r.stdout, r.explain()


@pytest.mark.parametrize("stage", [1, 2])
def test_accumulation_healthy(plain_python, stage):
    """ZeRO 1 / 2, plain python, 3 micro-batches per optimizer step, fast
    data: 30 optimizer steps are 30 TraceML steps (not 90), the backward
    is not counted twice (the phases fit in the step), and no WARNING or
    CRITICAL verdict but what a saturated host earns (conftest.check_healthy)."""
    r = plain_python(SCRIPT, "--steps", 30, "--stage", stage, "--accum", 3,
                     env={"TRACEML_RUN_NAME": "ds%d" % stage})
    assert r.rc == 0, r.explain()
    assert "30 optimizer steps (3 micro-batches each)" in r.stdout, r.explain()
    s = r.summary()
    assert s["meta"]["common_steps"] == 30, s["meta"]
    check_healthy(s)
    phases = sum(step_metric_ms(s, p) for p in ("input_wait", "forward", "backward",
                                                  "optimizer"))
    assert phases <= step_metric_ms(s, "step_time") * 1.02, s["step_time"]["median"]


def test_too_old_deepspeed_warns_once(plain_python, tmp_path):
    """deepspeed reported as 0.1 (a sitecustomize wraps
    importlib.metadata.version): one warning line naming deepspeed >= 0.10,
    the training finishes, nothing is traced (no run folder)."""
    r = plain_python(SCRIPT, "--steps", 10, env={"PYTHONPATH": old_version_site(tmp_path, "deepspeed")})
    assert r.rc == 0, r.explain()
    assert "10 optimizer steps" in r.stdout, r.explain()
    lines = traceml_warnings(r.stderr)
    assert lines == ["the DeepSpeed integration needs deepspeed >= 0.10 "
                     "(found 0.1); training continues untraced"], r.stderr[-3000:]
    assert r.all_runs == [], r.all_runs


def test_two_ranks_slow_dataset_straggler(traceml_run, slept):
    """Two ranks (`traceml run --nproc-per-node 2`, gloo, ZeRO 2): only
    rank 1's dataset sleeps 20 ms per batch → INPUT STRAGGLER naming R1,
    its Input Wait within 10% of what it slept."""
    r = traceml_run(SCRIPT, "--steps", 40, "--delay-ms", 20, "--slow-rank", 1,
                    "--device-ms", 10, "--stage", 2,
                    launcher_args=["--nproc-per-node", "2"], env=slept.env())
    s = ranks_finished(r, r.run_dir, ranks=2, steps=40)
    p = primary(s)
    assert p["kind"] == "INPUT_STRAGGLER", p
    assert "R1/N0" in p["why"], p["why"]
    assert s["step_time"]["straggler"]["culprit"]["rank"] == 1, s["step_time"]["straggler"]
    slow = [x for x in s["step_time"]["per_rank"] if x["rank"] == 1][0]
    assert covers(slow["input_wait_ms"], slept.mean(20), abs_ms=2.0), slow
    assert s["meta"]["common_steps"] == 40
