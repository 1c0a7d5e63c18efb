"""TraceML never changes what the training does (docs/zero-edit.md,
"What stays the same"): each script here runs once as the user runs it
without TraceML and once under `traceml run`, and what the training
produced -- its output, exit code, compiled graphs, parameters,
checkpoint bytes, the errors its frameworks raised -- must be the same.
The scripts (tests/e2e/unchanged/) have no TraceML in them and write what
they saw to a JSON file of their own. What concerns the glue alone (which
optimizer's step ends a step, where zero-edit tracing starts) runs on the
fake torch (tests/fakes/torch, the quick tier), once more on the real one.
"""
import json
import os
import re
import subprocess

import pytest

from conftest import (FAKE_TORCH, FAKES, PYTHON, REPO, TIMEOUT, TRACEML, base_env, covers,
                      free_port_pair, gloo_exit_abort, primary, ranks_finished)

HERE = os.path.join(REPO, "tests", "e2e", "unchanged")


def training_output(text):
    """What the training printed: the launcher's stdout up to the box."""
    cut = text.find("+-----")
    return text if cut < 0 else text[:cut]


def normal(text):
    # torch's own log lines carry a time and a pid (after the rank, on a rank)
    return re.sub(r"^(\[rank\d+\]:)?[WIE]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ", r"\1", text,
                  flags=re.M)


class Pair(object):
    """One script, without TraceML and under `traceml run`."""

    def __init__(self, tmp_path, script, args=(), launcher_args=(), env=None, plain=True):
        self.tmp = tmp_path
        self.runs = {}
        for how in ("without", "with"):
            out = tmp_path / ("%s.json" % how)
            argv = [str(a) for a in args] + ["--out", str(out)]
            if how == "without" and plain:
                cmd = [PYTHON, script] + argv
            else:
                cmd = [TRACEML, "run", "--logs-dir", str(tmp_path / "logs"), "--run-name", how]
                cmd += list(launcher_args) + (["--disable-traceml"] if how == "without" else [])
                cmd += [script] + argv
            p = subprocess.run(cmd, cwd=str(tmp_path), env=base_env(**(env or {})),
                               capture_output=True, text=True, timeout=TIMEOUT)
            res = None
            if out.exists():
                with open(out, encoding="utf-8") as f:
                    res = json.load(f)
            self.runs[how] = (p, res)

    def result(self, how):
        return self.runs[how][1]

    def proc(self, how):
        return self.runs[how][0]

    def summary(self):
        with open(self.tmp / "logs" / "with" / "final_summary.json", encoding="utf-8") as f:
            return json.load(f)

    def explain(self):
        parts = []
        for how, (p, res) in self.runs.items():
            parts.append("--- %s: rc=%s result=%s\nstdout:\n%s\nstderr:\n%s" % (
                how, p.returncode, res, p.stdout[-2500:], p.stderr[-2500:]))
        return "\n".join(parts)

    def exit_code(self, how):
        """The run's exit code, 0 for PyTorch's gloo exit abort after the
        training (either run may meet it, with or without TraceML:
        conftest.ranks_finished), which then also skips the stderr check."""
        p = self.proc(how)
        if gloo_exit_abort(p.returncode, p.stderr):
            if how == "with":
                ranks_finished(p, self.tmp / "logs" / "with")
            return 0
        return p.returncode

    def assert_same(self, stderr=True, result=True):
        a, b = self.proc("without"), self.proc("with")
        assert self.exit_code("without") == self.exit_code("with"), self.explain()
        stderr = stderr and a.returncode == b.returncode
        assert self.result("without") is not None and self.result("with") is not None, \
            self.explain()
        if result:
            assert self.result("with") == self.result("without"), self.explain()
        assert normal(training_output(b.stdout)) == normal(training_output(a.stdout)), \
            self.explain()
        if stderr:
            assert normal(b.stderr) == normal(a.stderr), self.explain()


# --------------------------------------------------------------------------
# torch.compile: the same graphs, no crash, no warning

@pytest.mark.parametrize("how,fullgraph", [
    ("module", True), ("module", False), ("inplace", True), ("function", True),
    ("hooked", True), ("allreduce", True), ("optimizer", False), ("ddp", False)])
def test_compiled_graphs_are_the_same(tmp_path, how, fullgraph):
    args = ["--how", how] + (["--fullgraph"] if fullgraph else [])
    r = Pair(tmp_path, os.path.join(HERE, "compile_train.py"), args)
    r.assert_same()
    assert r.result("with")["graphs"], r.explain()        # something was compiled
    s = r.summary()
    med = s["step_time"]["median"]
    if how == "optimizer":
        # a compiled optimizer step runs no hooks: no step can end, and the
        # summary says why
        assert s["meta"]["common_steps"] == 0, s["meta"]
        assert "torch.compile'd optimizer.step() is not seen" in primary(s)["why"], primary(s)
        return
    assert s["meta"]["step_detection"] == "automatic", s["meta"]
    assert s["meta"]["common_steps"] == 12, s["meta"]
    if how in ("module", "inplace", "ddp"):
        # a compiled module is timed from outside its compiled call (a
        # compiled DDP model too, whose buffer broadcast stays DDP's)
        assert med["forward_ms"] > 0, med
    elif how in ("function", "hooked", "allreduce"):
        # a forward inside a compiled function cannot be seen: the step
        # takes the compiled call in (it is not Untraced), and the box
        # says why Forward is missing
        assert med["forward_ms"] is None, med
        assert med["untraced_ms"] < 0.2 * med["step_time_ms"], med
        assert "torch.compile'd function" in primary(s)["next"], primary(s)


# --------------------------------------------------------------------------
# Checkpoints: byte-identical, and loadable with torch.load's default loader

@pytest.mark.parametrize("model", ["LSTM", "Transformer"])
def test_checkpoints_are_byte_identical(tmp_path, model):
    # pytorch/examples' word_language_model shape: a hand-written update,
    # torch.save(model), torch.load() with weights_only=True at the end
    r = Pair(tmp_path, os.path.join(HERE, "checkpoint.py"),
             ["--model", model, "--save", str(tmp_path / "model.pt")])
    r.assert_same()
    res = r.result("with")
    assert res["jit_script"] is True and res["export"] is True, res
    assert "_compiled_call_impl" not in res["deepcopy_attributes"], res
    s = r.summary()
    assert s["meta"]["step_detection"] == "automatic" and s["meta"]["common_steps"] > 0


# --------------------------------------------------------------------------
# Every optimizer counts, and none is kept alive

@pytest.mark.parametrize("case,steps,torch", [
    pytest.param("lrfinder", 120, "fake", marks=pytest.mark.quick),
    pytest.param("phases", 80, "fake", marks=pytest.mark.quick),
    pytest.param("epochs", 100, "fake", marks=pytest.mark.quick),
    pytest.param("kept", 120, "fake", marks=pytest.mark.quick),
    pytest.param("models", 100, "fake", marks=pytest.mark.quick),
    ("lrfinder", 120, "real")])
def test_every_optimizer_counts(tmp_path, case, steps, torch):
    r = Pair(tmp_path, os.path.join(HERE, "optimizers.py"), ["--case", case],
             env=FAKE_TORCH if torch == "fake" else None)
    r.assert_same()
    res = r.result("with")
    assert res["steps"] == steps and all(res["dropped_freed"]), res
    s = r.summary()
    assert s["meta"]["common_steps"] == steps, s["meta"]
    assert s["step_time"]["median"]["forward_ms"] > 0, s["step_time"]["median"]


# --------------------------------------------------------------------------
# DDP: its own checks and bit-identical gradients

ONCE = ("RuntimeError: register_comm_hook or register_builtin_comm_hook can only be called "
        "once")


def test_ddp_checks_and_gradients(tmp_path):
    # every case of ddp_hooks.py, one DDP model after the other in one run
    # (two ranks with and two without TraceML): DDP's default all-reduce,
    # an fp16 hook, the builtin FP16_COMPRESS and ALLREDUCE hooks, a hook
    # that returns a Tensor (DDP's own error), and a model with buffers
    # (BatchNorm), which DDP's forward broadcasts (timed as communication):
    # the same parameters and buffers, and DDP's own error for a broadcast
    # from a rank that does not exist
    r = Pair(tmp_path, os.path.join(HERE, "ddp_hooks.py"), ["--case", "all"],
             launcher_args=["--nproc-per-node", "2"], plain=False)
    r.assert_same(stderr=False)     # two ranks' stderr interleave differently
    res = r.result("with")
    assert sorted(res) == sorted(["default", "fp16", "builtin_fp16", "builtin", "tensor_hook",
                                  "batchnorm"]), res
    for c, got in res.items():
        if c in ("default", "batchnorm"):   # the first hook registered, after training
            assert got["second_hook"] == "accepted", res
        else:
            assert got["second_hook"].startswith(ONCE), res
        if c == "tensor_hook":
            assert "must return a torch.futures.Future" in got["train"], res
        else:
            assert got["train"] == "ok", res
    assert "invalid root rank" in res["batchnorm"]["bad_broadcast"], res
    s = r.summary()
    # 20 optimizer steps for each case that trains (the Tensor hook's model
    # fails in its first backward)
    assert s["meta"]["common_steps"] == 5 * 20, s["meta"]
    med = s["step_time"]["median"]
    assert med["communication_ms"] > 0 and med["communication_bytes_per_step"], med


# --------------------------------------------------------------------------
# Zero-edit tracing starts wherever a plain script would train

LOOP = r'''
import json, sys, time
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, default_collate
slept = []
def collate(samples):
    t0 = time.perf_counter()
    time.sleep(0.004)
    slept.append(time.perf_counter() - t0)
    return default_collate(samples)
torch.manual_seed(0)
x, y = torch.randn(60 * 16, 32), torch.randint(0, 4, (60 * 16,))
loader = DataLoader(TensorDataset(x, y), batch_size=16, collate_fn=collate)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for inputs, targets in loader:
    loss = nn.functional.cross_entropy(model(inputs), targets)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss %.4f" % loss.item())
with open(sys.argv[sys.argv.index("--out") + 1], "w") as f:
    json.dump({"slept_ms": 1000 * sum(slept) / len(slept)}, f)
'''


def assert_traced(r, steps=60):
    s = r.summary()
    assert s["meta"]["step_detection"] == "automatic", (s["meta"], r.explain())
    assert s["meta"]["common_steps"] == steps, s["meta"]
    return s


@pytest.mark.quick
def test_find_spec_before_import_torch(tmp_path):
    # Hugging Face's run_clm.py and many libraries look for torch before
    # importing it: zero-edit tracing waits for the import itself
    script = tmp_path / "find_spec.py"
    script.write_text("import importlib.util\nassert importlib.util.find_spec('torch')\n" + LOOP)
    r = Pair(tmp_path, str(script), env=FAKE_TORCH)
    r.assert_same(result=False)
    assert_traced(r)


@pytest.mark.quick
def test_a_comment_naming_traceml_is_not_an_import(tmp_path):
    script = tmp_path / "mentions.py"
    script.write_text("# could be traced with traceml_ai (import traceml_ai as traceml)\n"
                      '"""import traceml"""\n' + LOOP)
    r = Pair(tmp_path, str(script), env=FAKE_TORCH)
    r.assert_same(result=False)
    assert_traced(r)


@pytest.mark.quick
def test_user_sitecustomize_that_raises(tmp_path):
    # Python reports a failing sitecustomize and goes on; so does the
    # training under TraceML, reported the same way, and traced
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("raise ValueError('broken site')\n")
    script = tmp_path / "train.py"
    script.write_text(LOOP)
    r = Pair(tmp_path, str(script), env={"PYTHONPATH": str(site) + os.pathsep + FAKES})
    r.assert_same(result=False)
    # the training reports it once, as without TraceML; the `traceml`
    # command, a Python entry point, does not import it (docs/zero-edit.md)
    plain, traced = r.proc("without").stderr, r.proc("with").stderr
    assert plain.count("Error in sitecustomize") == 1, r.explain()
    assert traced == plain, r.explain()
    assert_traced(r)


@pytest.mark.quick
def test_wrap_input_alone(tmp_path):
    # the box's hint, followed literally: only get_batch wrapped, no init()
    script = tmp_path / "get_batch.py"
    script.write_text(r'''
import json, sys, time
import torch
from torch import nn
import traceml_ai as traceml
slept = []
def get_batch():
    t0 = time.perf_counter()
    time.sleep(0.005)
    slept.append(time.perf_counter() - t0)
    return torch.randn(16, 32), torch.randint(0, 4, (16,))
get_batch = traceml.wrap_input(get_batch)
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for i in range(60):
    x, y = get_batch()
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
with open(sys.argv[sys.argv.index("--out") + 1], "w") as f:
    json.dump({"slept_ms": 1000 * sum(slept) / len(slept)}, f)
''')
    r = Pair(tmp_path, str(script), env=FAKE_TORCH)
    a, b = r.proc("without"), r.proc("with")
    assert a.returncode == b.returncode == 0, r.explain()
    s = assert_traced(r)
    wait = s["step_time"]["median"]["input_wait_ms"]
    slept = r.result("with")["slept_ms"]
    # the wrapped call is the sleep plus two small tensors made (a window
    # average against the mean of every call's sleep: within covers' 10%)
    assert covers(wait, slept), (wait, slept)


def test_multiprocessing_spawn_ranks(tmp_path):
    # torch.multiprocessing.spawn: the children are the ranks (no RANK in
    # their environment), the parent that spawned them is not one
    script = os.path.join(REPO, "examples", "unmodified", "spawn_ddp.py")
    logs = tmp_path / "logs"
    p = subprocess.run([TRACEML, "run", "--logs-dir", str(logs), "--run-name", "sp", script,
                        "--steps", "30", "--delay-ms", "20", "--port", str(free_port_pair())],
                       cwd=REPO, env=base_env(), capture_output=True, text=True, timeout=TIMEOUT)
    s = ranks_finished(p, logs / "sp", ranks=2, steps=30)
    assert s["meta"]["step_detection"] == "automatic", s["meta"]
    assert not s["meta"]["rank_conflicts"], s["meta"]
    pd = primary(s)
    assert pd["label"] == "INPUT STRAGGLER" and "R1/N0" in pd["why"], pd
    assert "rank 0: 30 steps" in p.stdout
