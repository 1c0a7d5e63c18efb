"""Zero-edit tracing (docs/zero-edit.md): `traceml run` on plain PyTorch
scripts with no TraceML in them (examples/unmodified/) finds their steps
(one per optimizer.step()), times the models the optimizers own, and says
the steps were detected; a script that imports traceml_ai is left to
instrument itself; --no-auto-trace turns it off and the summary then says
no steps were detected, and how to get them."""
import json
import os

import pytest

from conftest import (DIAG, EXAMPLES, FAKE_TORCH, PYTHON, covers, primary, ranks_finished,
                      step_metric_ms)

UNMODIFIED = os.path.join(EXAMPLES, "unmodified")


def test_unmodified_script_is_traced(traceml_run, slept):
    # 120 steps, a 10 ms sleep per batch, an evaluation under no_grad
    # every 40 steps (not a step)
    r = traceml_run(os.path.join(UNMODIFIED, "train.py"), "--steps", 120, "--delay-ms", 10,
                    "--eval-every", 40, env=slept.env())
    assert r.rc == 0, r.explain()
    s = r.summary()
    assert s["meta"]["step_detection"] == "automatic"
    assert s["meta"]["common_steps"] == 120, s["meta"]
    p = primary(s)
    assert (p["label"], p["severity"]) == ("INPUT-BOUND", "CRITICAL"), json.dumps(p)
    # the loader's own work comes on top of what it slept: 32 samples
    # indexed and collated one by one, 0.9-1.2 ms on a quiet 2-core VM
    wait, ref = step_metric_ms(s, "input_wait"), slept.mean(10)
    assert covers(wait, ref, extra_ms=2.5), "Input Wait %s ms, slept %.3f ms" % (wait, ref)
    # the model was found from the optimizer: its forward is timed
    assert step_metric_ms(s, "forward") > 0
    assert step_metric_ms(s, "backward") > 0 and step_metric_ms(s, "optimizer") > 0
    # the evaluations ran outside the steps, not inside one
    assert step_metric_ms(s, "untraced") < 2.0
    assert "Steps: found automatically" in r.stdout, r.explain()
    assert "accuracy" in r.stdout                     # the script's own output


def test_two_optimizers_make_one_step(traceml_run):
    # a GAN: D's optimizer, then G's, per iteration; the first two rounds
    # count each optimizer's step while the order is learnt
    r = traceml_run(os.path.join(UNMODIFIED, "gan.py"), "--steps", 100)
    assert r.rc == 0, r.explain()
    s = r.summary()
    assert s["meta"]["step_detection"] == "automatic"
    assert 100 <= s["meta"]["common_steps"] <= 102, s["meta"]
    assert step_metric_ms(s, "forward") > 0
    assert step_metric_ms(s, "untraced") < 1.0


@pytest.mark.quick
def test_instrumented_script_keeps_its_own_steps(traceml_run):
    r = traceml_run(os.path.join(DIAG, "input_bound.py"), "--steps", 60, "--delay-ms", 4,
                    env=FAKE_TORCH)
    assert r.rc == 0, r.explain()
    s = r.summary()
    assert s["meta"]["step_detection"] == "marked"
    assert "found automatically" not in r.stdout


@pytest.mark.quick
def test_no_auto_trace_says_no_steps_were_detected(traceml_run):
    r = traceml_run(os.path.join(UNMODIFIED, "train.py"), "--steps", 30, "--delay-ms", 1,
                    launcher_args=["--no-auto-trace"], env=FAKE_TORCH)
    assert r.rc == 0, r.explain()
    s = r.summary()
    assert s["meta"]["step_detection"] is None
    p = primary(s)
    assert p["label"] == "INSUFFICIENT STEP-TIME DATA", json.dumps(p)
    assert "No training steps were detected" in p["why"], json.dumps(p)
    assert "--no-auto-trace" in p["next"], json.dumps(p)
    assert not os.path.exists(os.path.join(r.run_dir, "zero-edit"))
    # no rank reported, yet the launcher's aggregator sampled the host
    assert s["system"]["average"]["cpu_percent"] is not None, json.dumps(s["system"])[:600]
    assert "No system metrics were sampled" not in r.stdout


def test_ddp_unmodified_every_rank_traced(traceml_run, slept):
    # 2 ranks through torchrun; each process whose argv[0] is the script
    # starts TraceML, torchrun itself does not; the DDP wrapper's forward
    # is the one timed
    r = traceml_run(os.path.join(UNMODIFIED, "ddp.py"), "--steps", 40, "--delay-ms", 5,
                    launcher_args=["--nproc-per-node", "2"], env=slept.env())
    s = ranks_finished(r, r.run_dir, ranks=2, steps=40)
    assert s["meta"]["step_detection"] == "automatic"
    # both ranks wait for their loaders: INPUT-BOUND; on a busy machine one
    # rank's sleeps may overshoot more than its peer's, and TraceML then
    # rightly names it (INPUT STRAGGLER): each rank's Input Wait is what
    # that rank really slept
    assert primary(s)["label"] in ("INPUT-BOUND", "INPUT STRAGGLER"), json.dumps(primary(s))
    for row in s["step_time"]["per_rank"]:
        wait, ref = row["input_wait_ms"], slept.mean(5, rank=row["rank"])
        assert covers(wait, ref, extra_ms=2.0), "R%d's Input Wait %s ms, slept %.3f ms" % (
            row["rank"], wait, ref)
    assert step_metric_ms(s, "forward") > 0


def test_hogwild_children_are_the_ranks(traceml_run, slept):
    """pytorch/examples mnist_hogwild's shape: two spawned
    multiprocessing.Process children train one shared model with no
    process group; the parent only starts them. Each child is a rank (R0,
    R1 in start order), every step of each is there, no CONFLICT, and each
    rank's figures are its own: the Input Wait what its loader slept, the
    step plus the time between steps what the child itself timed."""
    r = traceml_run(os.path.join(UNMODIFIED, "hogwild.py"), "--processes", 2, "--steps", 60,
                    "--delay-ms", 10, env=slept.env())
    s = ranks_finished(r, r.run_dir, ranks=2, steps=60)
    assert s["meta"]["step_detection"] == "automatic"
    assert s["meta"]["rank_conflicts"] == [] and "CONFLICT" not in r.stdout, r.explain()
    assert primary(s)["label"] in ("INPUT-BOUND", "INPUT STRAGGLER"), json.dumps(primary(s))
    own = {}
    for line in r.stdout.splitlines():
        if line.startswith("process "):
            k, rest = line[len("process "):].split(":", 1)
            own[int(k)] = float(rest.split(",")[1].split()[0])
    assert sorted(own) == [0, 1], r.stdout
    ref = slept.mean(10)
    for row in s["step_time"]["per_rank"]:
        assert covers(row["input_wait_ms"], ref, extra_ms=2.0), (row, ref)
        # the child's own ms/step counts its first (slow) step, which the
        # window leaves out as warm-up
        total = row["step_time_ms"] + row["untraced_ms"]
        assert 0.85 * own[row["rank"]] <= total <= 1.05 * own[row["rank"]], (row, own)
    assert "test accuracy" in r.stdout                     # the parent's own output


def test_closure_optimizer_counts_each_phase_once(traceml_run):
    # LBFGS runs forward and backward inside optimizer.step(closure): the
    # optimizer keeps only its own time, so the tree adds up to the step
    r = traceml_run(os.path.join(UNMODIFIED, "closure.py"), "--steps", 40, "--delay-ms", 2)
    assert r.rc == 0, r.explain()
    s = r.summary()
    assert s["meta"]["common_steps"] == 40, s["meta"]
    parts = [step_metric_ms(s, k) for k in ("input_wait", "h2d", "forward", "backward",
                                            "optimizer", "residual")]
    step = step_metric_ms(s, "step_time")
    assert all(p is not None and p >= 0 for p in parts), parts
    assert parts[2] > 0 and parts[3] > 0 and parts[4] > 0, parts
    assert abs(sum(parts) - step) <= 0.02 * step + 0.1, (parts, step)


def test_gradient_accumulation_and_hand_written_update(traceml_run, slept):
    # 4 batches per optimizer step: 30 steps of 120 batches, each waiting
    # for 4 fetches (3 inside the step, 1 before it)
    r = traceml_run(os.path.join(UNMODIFIED, "train.py"), "--steps", 120, "--delay-ms", 5,
                    "--eval-every", 0, "--accum", 4, env=slept.env())
    assert r.rc == 0, r.explain()
    s = r.summary()
    assert s["meta"]["common_steps"] == 30, s["meta"]
    wait, ref = step_metric_ms(s, "input_wait"), 4 * slept.mean(5)
    assert covers(wait, ref, extra_ms=4 * 1.5), "Input Wait %s ms, slept %.3f ms" % (wait, ref)
    # no optimizer made: a forward after a backward starts the next step
    # (the model is found at its second call, timed from its third; the
    # last step never ends), and the missing Optimizer is a caveat
    r = traceml_run(os.path.join(UNMODIFIED, "train.py"), "--steps", 60, "--delay-ms", 5,
                    "--eval-every", 0, "--manual-update", run_name="manual")
    assert r.rc == 0, r.explain()
    s = r.summary()
    assert s["meta"]["step_detection"] == "automatic"
    assert 58 <= s["meta"]["common_steps"] <= 59, s["meta"]
    p = primary(s)
    assert p["label"] == "INPUT-BOUND" and "Caveat: Optimizer" in p["why"], json.dumps(p)


@pytest.mark.quick
def test_no_rank_says_why_by_how_it_was_run(traceml_run, tmp_path):
    # nothing blames an option the user did not pass: a script that never
    # trains (zero-edit on), and a command run as given (`--`)
    script = tmp_path / "no_torch.py"
    script.write_text("print('no training here')\n")
    r = traceml_run(str(script), env=FAKE_TORCH)     # the launcher checks torch imports
    assert r.rc == 0, r.explain()
    p = primary(r.summary())
    assert "zero-edit tracing starts it when the script imports torch" in p["why"], p
    assert "--no-auto-trace" not in p["why"] + p["next"], p
    r = traceml_run(PYTHON, str(script), run_name="cmd", launcher_args=["--"])
    assert r.rc == 0, r.explain()
    p = primary(r.summary())
    assert "`traceml run -- COMMAND` runs the command as given" in p["why"], p
    assert "--no-auto-trace" not in p["why"] + p["next"], p
