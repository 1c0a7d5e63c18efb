"""The PyTorch Ignite integration on the real pytorch-ignite package
(examples/integrations/ignite_train.py): TraceMLHandler attached to a plain
Engine (a hand-written process function, the model found from the
optimizer) or to create_supervised_trainer's, one TraceML step per
optimizer update, Input Wait from the engine's GET_BATCH events, and a
too-old pytorch-ignite left untraced with one warning.

Every run injects a known cause with exact sleeps (the collate_fn's
--delay-ms); the model's forward waits 10 ms (--device-ms). Input Wait is
the median over the run's steps (telemetry.sqlite), against what the
collate_fn really slept (tests/e2e/slept).
"""
import json
import os
import statistics

from conftest import (EXAMPLES, check_healthy, covers, old_version_site, primary, step_diag,
                      step_metric_ms, step_rows_ms)
from conftest import traceml_warnings

SCRIPT = os.path.join(EXAMPLES, "integrations", "ignite_train.py")


def optimizer_steps(stdout):
    for line in stdout.splitlines():
        if line.startswith("optimizer steps: "):
            return int(line.split(": ")[1])
    return None


def check_run(r, steps):
    assert r.rc == 0, r.explain()
    assert traceml_warnings(r.stderr) == [], r.explain()
    assert optimizer_steps(r.stdout) == steps, r.explain()
    s = r.summary()
    assert s["meta"]["common_steps"] == steps, s["meta"]
    assert s["meta"]["step_detection"] == "marked", s["meta"]
    return s


def check_input_wait(r, s, reference_ms):
    p = primary(s)
    assert (p["label"], p["severity"]) == ("INPUT-BOUND", "CRITICAL"), json.dumps(p)
    wait = statistics.median(step_rows_ms(r.run_dir, "input_ns"))
    assert covers(wait, reference_ms, rel=0.10, abs_ms=2.0, extra_ms=2.0), \
        "median Input Wait %.2f ms, the collate_fn slept %.3f ms" % (wait, reference_ms)
    for phase in ("forward", "backward", "optimizer"):
        v = step_metric_ms(s, phase)
        assert v is not None and v > 0, (phase, json.dumps(s["step_time"]["median"]))


def test_engine_input_bound_iterable_two_epochs(traceml_run, slept):
    """An Engine on a hand-written process function, fed an iterable
    without len() for 2 epochs (each ends in a fetch that raises
    StopIteration), a 20 ms collate_fn: INPUT-BOUND, every step's Input
    Wait the collate's sleep (within 10%) in both epochs, and the model the
    handler was not given found from the optimizer (Forward timed)."""
    r = traceml_run(SCRIPT, "--steps", 30, "--epochs", 2, "--iterable", "--delay-ms", 20,
                    env=slept.env())
    s = check_run(r, 30)
    check_input_wait(r, s, slept.mean(20))
    waits = step_rows_ms(r.run_dir, "input_ns")
    assert len(waits) == 30 and min(waits[1:]) > 0.9 * slept.mean(20), waits
    fwd = step_metric_ms(s, "forward")
    assert covers(fwd, slept.mean(10), rel=0.15, abs_ms=2.0), (fwd, s["step_time"]["median"])


def test_supervised_trainer_accumulation_plain_python(plain_python, slept):
    """create_supervised_trainer(gradient_accumulation_steps=2) under plain
    python (summary at exit): one TraceML step per optimizer update (20
    steps, 40 iterations), its Input Wait both iterations' fetches."""
    r = plain_python(SCRIPT, "--steps", 20, "--loop", "supervised", "--accum", 2,
                     "--delay-ms", 20, env=slept.env())
    assert r.run_dir is not None, (r.all_runs, r.explain())
    s = check_run(r, 20)
    check_input_wait(r, s, 2 * slept.mean(20))


def test_healthy_no_false_alarm(traceml_run):
    """No injected cause, a forward of 20 ms: no WARNING or CRITICAL verdict."""
    r = traceml_run(SCRIPT, "--steps", 40, "--device-ms", 20)
    s = check_run(r, 40)
    check_healthy(s)
    assert step_diag(s)["severity"] not in ("WARNING", "CRITICAL"), json.dumps(step_diag(s))


def test_too_old_ignite_warns_once(plain_python, tmp_path):
    """pytorch-ignite reported as 0.1: one warning naming pytorch-ignite >=
    0.4.11, and the training runs to its end untraced (no run folder)."""
    r = plain_python(SCRIPT, "--steps", 5,
                     env={"PYTHONPATH": old_version_site(tmp_path, "pytorch-ignite")})
    assert r.rc == 0, r.explain()
    assert optimizer_steps(r.stdout) == 5, r.explain()
    lines = traceml_warnings(r.stderr)
    assert lines == ["the PyTorch Ignite integration needs pytorch-ignite "
                     ">= 0.4.11 (found 0.1); training continues untraced"], r.explain()
    assert r.all_runs == [], r.all_runs
    assert "TraceML Run Summary" not in r.stdout
