"""PyTorch 2.x loops under `traceml run` (examples/pytorch2/train.py), each
with an injected input wait (20 ms where the verdict must be INPUT-BOUND
however slow a loaded machine makes the compute, 5 ms else) and the
script's own per-step timings to check TraceML's against (the input wait
against what it really slept, tests/e2e/slept):

- a torch.compile'd model (OptimizedModule, inductor): the traced forward
  is the compiled forward, the compilation step is left out as warm-up;
- autocast(bfloat16) with a GradScaler: forward and the optimizer step
  (inside scaler.step) are timed, nothing is missing;
- FSDP on 2 ranks over gloo, both FullyShardedDataParallel and
  fully_shard: every rank reports, every phase is there.

Accuracy rule: the median over the window of TraceML's per-step figure is
within 15% or 0.3 ms of the script's own median (perf_counter around the
same call; the script's figure includes the autocast context and, for the
optimizer, the scaler's unscale/update, so it is an upper bound there).
"""
import json
import statistics

import pytest

from conftest import EXAMPLES, covers, primary, ranks_finished, step_metric_ms, traceml_warnings

SCRIPT = EXAMPLES + "/pytorch2/train.py"


def series(summary, rank=0):
    se = summary["series"]
    assert se["bucket_steps"] == 1, se["bucket_steps"]
    r = [x for x in se["ranks"] if x["rank"] == rank][0]
    first = se["window_first_step"] - se["first_step"]
    return {k: v[first:] for k, v in r.items() if isinstance(v, list)}, first


def medians(summary, own_path, name, rank=0):
    got, first = series(summary, rank)
    with open(own_path) as f:
        own = json.load(f)
    tml = statistics.median(got[name])
    mine = statistics.median(own[name][first:])
    return tml, mine, own


def close(tml, mine, rel=0.15, abs_ms=0.3):
    return abs(tml - mine) <= max(rel * mine, abs_ms)


def run2(traceml_run, tmp_path, *args, launcher_args=(), env=None):
    own = str(tmp_path / "own.json")
    r = traceml_run(SCRIPT, *args, "--own-timings", own, launcher_args=launcher_args,
                    timeout=400, env=env)
    if "--nproc-per-node" in launcher_args:
        s = ranks_finished(r, r.run_dir, ranks=2)
    else:
        assert r.rc == 0, r.explain()
        s = r.summary()
    # (torchrun reports a rank's gloo exit abort with a traceback of its own)
    assert r.rc != 0 or "Traceback" not in r.stderr, r.stderr
    assert traceml_warnings(r.stderr) == [], r.stderr
    return s, own


def test_compiled_model(traceml_run, tmp_path, slept):
    # a 20 ms input wait: INPUT-BOUND however slow the compiled model runs
    # on a loaded machine
    s, own = run2(traceml_run, tmp_path, "--compile", "--steps", "120", "--input-delay-ms", "20",
                  env=slept.env())
    tml, mine, o = medians(s, own, "forward_ms")
    assert o["model_type"] == "OptimizedModule"
    assert close(tml, mine), (tml, mine)
    assert primary(s)["kind"] == "INPUT_BOUND", primary(s)
    assert covers(step_metric_ms(s, "input_wait"), slept.mean(20))
    # the compiling first step (seconds) is left out of the window
    assert s["meta"]["warmup_steps_excluded"] >= 1, s["meta"]
    assert step_metric_ms(s, "forward") < 50, step_metric_ms(s, "forward")


def test_autocast_gradscaler(traceml_run, tmp_path):
    s, own = run2(traceml_run, tmp_path, "--amp", "--steps", "120", "--input-delay-ms", "20")
    tml, mine, _ = medians(s, own, "forward_ms")
    assert close(tml, mine), (tml, mine)
    opt, own_opt, _ = medians(s, own, "optimizer_ms")
    assert 0 < opt <= own_opt + 0.3, (opt, own_opt)
    assert s["step_time"]["per_rank"][0]["missing_phases"] == []
    assert primary(s)["kind"] == "INPUT_BOUND", primary(s)


@pytest.mark.parametrize("fsdp", ["1", "2"])
def test_fsdp_two_ranks(traceml_run, tmp_path, fsdp, slept):
    s, own = run2(traceml_run, tmp_path, "--fsdp", fsdp, "--steps", "80",
                  launcher_args=["--nproc-per-node", "2"], env=slept.env())
    assert s["meta"]["ranks_reported"] == 2 and s["meta"]["common_steps"] == 80, s["meta"]
    for row in s["step_time"]["per_rank"]:
        assert row["missing_phases"] == [], row
        assert row["forward_ms"] > 0 and row["backward_ms"] > 0 and row["optimizer_ms"] > 0
    tml, mine, o = medians(s, own, "forward_ms", rank=0)
    assert o["model_type"] in ("FullyShardedDataParallel", "FSDPSequential"), o["model_type"]
    # FSDP's all-gathers inside the forward are Communication, not Forward
    # (nested phases count once): the script's own forward timing holds both
    comm = s["step_time"]["per_rank"][0]["communication_ms"]
    assert comm is not None and comm > 0, s["step_time"]["per_rank"][0]
    assert tml <= 1.25 * mine and tml + comm >= 0.75 * mine, (tml, comm, mine)
    assert covers(s["step_time"]["per_rank"][0]["input_wait_ms"], slept.mean(5))
