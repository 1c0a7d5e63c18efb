"""The MONAI integration on the real monai and pytorch-ignite packages
(examples/integrations/monai_train.py): a SupervisedTrainer with
TraceMLHandler() in its train_handlers, one TraceML step per optimizer
update (accumulation_steps folded in), Input Wait from the engine's
fetch, and a too-old MONAI left untraced with one warning.

Every run injects a known cause with exact sleeps (the collate_fn's
--delay-ms); the network's forward waits 10 ms (--device-ms) so that
MONAI's and Ignite's per-iteration Python stays a small share of a step.
Input Wait is the median over the run's steps (telemetry.sqlite), against
what the collate_fn really slept (tests/e2e/slept).
"""
import json
import os
import statistics

from conftest import (EXAMPLES, check_healthy, covers, old_version_site, primary, step_diag,
                      step_metric_ms, step_rows_ms)
from conftest import traceml_warnings

SCRIPT = os.path.join(EXAMPLES, "integrations", "monai_train.py")


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


def test_supervised_trainer_input_bound(traceml_run, slept):
    """A 20 ms collate_fn under `traceml run`: INPUT-BOUND, Input Wait the
    collate's sleep (within 10%), one step per iteration; Forward is the
    network's forward and the loss (FORWARD_COMPLETED .. LOSS_COMPLETED)."""
    r = traceml_run(SCRIPT, "--steps", 30, "--delay-ms", 20, env=slept.env())
    s = check_run(r, 30)
    check_input_wait(r, s, slept.mean(20))
    fwd = step_metric_ms(s, "forward")
    assert covers(fwd, slept.mean(10), rel=0.15, abs_ms=2.0), (fwd, s["step_time"]["median"])


def test_accumulation_over_epochs_plain_python(plain_python, slept):
    """accumulation_steps=2 over 2 epochs, TraceML 0.5.0's init() and plain
    python (the summary written at exit): one TraceML step per optimizer
    update (20, not 40 iterations), its Input Wait both iterations'
    fetches (the second falls inside the open step)."""
    r = plain_python(SCRIPT, "--steps", 20, "--accum", 2, "--epochs", 2, "--delay-ms", 20,
                     "--api", "init+handler", env=slept.env())
    assert r.run_dir is not None, (r.all_runs, r.explain())
    s = check_run(r, 20)
    check_input_wait(r, s, 2 * slept.mean(20))


def test_healthy_no_false_alarm(traceml_run):
    """No injected cause, a forward of 20 ms: no WARNING or CRITICAL verdict,
    and MONAI's own per-iteration work (prepare_batch, zero_grad, the
    decollation of the output) is a small Residual."""
    r = traceml_run(SCRIPT, "--steps", 40, "--device-ms", 20)
    s = check_run(r, 40)
    check_healthy(s)
    assert step_diag(s)["severity"] not in ("WARNING", "CRITICAL"), json.dumps(step_diag(s))


def test_too_old_monai_warns_once(plain_python, tmp_path):
    """monai reported as 0.1: one warning naming monai >= 1.0, and the
    training runs to its end untraced (no run folder)."""
    r = plain_python(SCRIPT, "--steps", 5, "--api", "init+handler",
                     env={"PYTHONPATH": old_version_site(tmp_path, "monai")})
    assert r.rc == 0, r.explain()
    assert optimizer_steps(r.stdout) == 5, r.explain()
    lines = traceml_warnings(r.stderr)
    assert lines == ["the MONAI integration needs monai >= 1.0 "
                     "(found 0.1); training continues untraced"], r.explain()
    assert r.all_runs == [], r.all_runs
    assert "TraceML Run Summary" not in r.stdout
