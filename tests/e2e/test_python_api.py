"""The Python API (SPEC 2.1): modes, init's idempotence, TRACEML_DISABLED,
lazy torch import, in-process mode (plain python, no launcher), exceptions
in the bracket, several models, and that training results do not change.

The glue's behaviour is tested on the fake torch (tests/fakes/torch, the
quick tier); the front door (plain python, a real training), several
models and unchanged results on the real one."""
import json
import os
import subprocess

import pytest

from conftest import FAKE_TORCH, PYTHON, base_env, step_diag, step_metric_ms

PRELUDE = r'''
import os, sys, time, json
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import traceml_ai as traceml

def make(steps=40, batch=16, seed=0):
    torch.manual_seed(seed)
    x = torch.randn(steps * batch, 32)
    y = torch.randint(0, 4, (steps * batch,))
    loader = DataLoader(TensorDataset(x, y), batch_size=batch)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return loader, model, opt
'''


def py(code, env=None, timeout=120):
    e = base_env(**FAKE_TORCH)
    e.update(env or {})
    return subprocess.run([PYTHON, "-c", code], env=e, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.quick
def test_import_does_not_import_torch():
    r = py("import sys, traceml_ai\n"
           "assert 'torch' not in sys.modules, 'torch imported'\n"
           "assert callable(traceml_ai.trace_step) and callable(traceml_ai.init)\n"
           "print('ok')")
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


@pytest.mark.quick
def test_init_idempotent_conflicting_and_unknown_mode(tmp_path):
    code = PRELUDE + r'''
try:
    traceml.init(mode="turbo")
except ValueError as e:
    assert "turbo" in str(e), e
else:
    raise SystemExit("unknown mode accepted")
traceml.init(mode="auto", logs_dir=LOGS, run_name="idem")
traceml.init(mode="auto", logs_dir=LOGS, run_name="idem")     # same: no-op
for other in (dict(mode="manual", logs_dir=LOGS, run_name="idem"),
              dict(mode="auto", logs_dir=LOGS, run_name="other"),
              dict(mode="selective", patch_h2d=False, logs_dir=LOGS, run_name="idem", disabled=True)):
    try:
        traceml.init(**other)
    except RuntimeError as e:
        assert "different configuration" in str(e), e
    else:
        raise SystemExit("conflicting init accepted: %r" % other)
print("ok")
'''.replace("LOGS", repr(str(tmp_path / "logs")))
    r = py(code)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


@pytest.mark.quick
def test_disabled_is_a_noop(tmp_path):
    code = PRELUDE + r'''
orig_backward = torch.Tensor.backward
traceml.init(mode="auto", logs_dir=LOGS)
assert torch.Tensor.backward is orig_backward, "patched while disabled"
loader, model, opt = make()
for x, y in loader:
    with traceml.trace_step(model):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
assert len(model._forward_pre_hooks) == 0
assert traceml.summary() is None and traceml.final_summary() is None
print("ok")
'''.replace("LOGS", repr(str(tmp_path / "logs")))
    r = py(code, env={"TRACEML_DISABLED": "1"})
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
    assert not (tmp_path / "logs").exists() or not os.listdir(tmp_path / "logs")
    assert "TraceML" not in r.stdout



@pytest.mark.quick
@pytest.mark.parametrize("value,html", [("false", False), ("Off", False), ("1", True)])
def test_html_report_words_without_launcher(tmp_path, value, html):
    """TRACEML_HTML_REPORT reads the one yes/no word set (docs/cli.md,
    "Environment variables"): =false used to write the HTML report."""
    code = PRELUDE + r'''
traceml.init(mode="auto", logs_dir=LOGS, run_name="h")
loader, model, opt = make(steps=3)
for x, y in loader:
    with traceml.trace_step(model):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
assert traceml._env("TRACEML_HTML_REPORT") is WANT
print("ok")
'''.replace("LOGS", repr(str(tmp_path / "logs"))).replace("WANT", repr(html))
    r = py(code, env={"TRACEML_HTML_REPORT": value})
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
    run = tmp_path / "logs" / "h"
    assert (run / "final_summary.json").exists(), r.stdout + r.stderr
    assert (run / "final_summary.html").exists() == html

TRAIN = PRELUDE + r'''
MODE = os.environ.get("MODE", "auto")
kw = json.loads(os.environ.get("KW", "{}"))
traceml.init(mode=MODE, **kw)
loader, model, opt = make(steps=int(os.environ.get("STEPS", "40")))
if MODE == "manual" and os.environ.get("WRAP", "all") == "all":
    loader = traceml.wrap_dataloader_fetch(loader)
    traceml.wrap_forward(model)
    traceml.wrap_optimizer(opt)
for x, y in loader:
    time.sleep(0.001)
    with traceml.trace_step(model):
        if MODE == "manual":
            with traceml.wrap_h2d():
                x = x.to("cpu")
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        if MODE == "manual" and os.environ.get("WRAP", "all") == "all":
            traceml.wrap_backward(loss)
        loss.backward()
        opt.step()
'''


def run_plain(plain_python, mode, kw=None, wrap="all", steps=40, real=False):
    env = {"MODE": mode, "KW": json.dumps(kw or {}), "WRAP": wrap, "STEPS": steps,
           "COLUMNS": ""}
    return plain_python("train", code=TRAIN, env=env if real else dict(env, **FAKE_TORCH))


def test_plain_python_prints_box_and_writes_summary(plain_python):
    r = run_plain(plain_python, "auto", real=True)
    assert r.rc == 0, r.explain()
    assert r.run_dir is not None, "run folders: %r\n%s" % (r.all_runs, r.explain())
    assert "Verdict:" in r.stdout and "TraceML Run Summary" in r.stdout, r.explain()
    s = r.summary()
    assert s["text"].strip() in r.stdout
    # a healthy run: nothing partial, no conflict (no false alarm)
    assert s["meta"]["partial"] is None and s["meta"]["rank_conflicts"] == []
    assert "PARTIAL" not in s["text"] and "CONFLICT" not in s["text"]
    with open(r.artifact("final_summary.txt"), encoding="utf-8") as f:
        assert f.read().strip() == s["text"].strip()
    for phase in ("forward", "backward", "optimizer", "input_wait"):
        assert step_metric_ms(s, phase) is not None, phase
    assert step_metric_ms(s, "forward") > 0 and step_metric_ms(s, "backward") > 0
    assert step_metric_ms(s, "optimizer") > 0


@pytest.mark.quick
def test_manual_mode_with_wrap_helpers(plain_python):
    r = run_plain(plain_python, "manual")
    assert r.rc == 0, r.explain()
    s = r.summary()
    assert step_diag(s)["label"] != "INCOMPLETE DATA", json.dumps(step_diag(s))
    for phase in ("forward", "backward", "optimizer", "input_wait", "h2d"):
        v = step_metric_ms(s, phase)
        assert v is not None and v >= 0, (phase, v)
    assert step_metric_ms(s, "forward") > 0 and step_metric_ms(s, "optimizer") > 0
    # printed into a pipe: a log's width (120), as `traceml run` prints it there
    assert {len(l) for l in s["text"].splitlines()} == {120}, s["text"]


@pytest.mark.quick
def test_manual_mode_without_wrapping_is_incomplete(plain_python):
    r = run_plain(plain_python, "manual", wrap="none")
    assert r.rc == 0, r.explain()
    d = step_diag(r.summary())
    # nothing was timed: INCOMPLETE DATA, or the verdict the other phases
    # support with what is missing as its caveat
    assert "forward" in d["evidence"]["missing_phases"], json.dumps(d)
    assert d["label"] == "INCOMPLETE DATA" or "Caveat:" in d["why"], json.dumps(d)
    assert "trace_step(model)" in d["why"] + d["next"]


@pytest.mark.quick
def test_selective_unpatched_phase_is_missing(plain_python):
    r = run_plain(plain_python, "selective", kw={"patch_forward": False})
    assert r.rc == 0, r.explain()
    s = r.summary()
    assert step_metric_ms(s, "forward") is None
    # observed (the fake's backward computes nothing: a measured zero is zero)
    assert step_metric_ms(s, "backward") is not None
    d = step_diag(s)
    assert d["evidence"]["missing_phases"] == ["forward"], json.dumps(d)
    assert d["label"] == "INCOMPLETE DATA" or "Caveat: Forward" in d["why"], json.dumps(d)


@pytest.mark.quick
def test_exception_in_bracket_propagates_unchanged(plain_python):
    code = PRELUDE + r'''
class Boom(Exception):
    pass
traceml.init(mode="auto")
loader, model, opt = make(steps=30)
err = Boom("boom")
caught = 0
for i, (x, y) in enumerate(loader):
    try:
        with traceml.trace_step(model):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            if i % 10 == 5:
                raise err
    except Boom as e:
        assert e is err and e.__traceback__ is not None
        caught += 1
assert caught == 3
try:
    with traceml.trace_step(model):
        raise KeyError("k")
except KeyError as e:
    assert e.args == ("k",)
print("ok")
'''
    r = plain_python("exc", code=code, env=FAKE_TORCH)
    assert r.rc == 0 and "ok" in r.stdout, r.explain()
    s = r.summary()
    assert step_metric_ms(s, "forward") > 0


def test_two_models_do_not_corrupt_each_other(plain_python):
    code = PRELUDE + r'''
import copy, pickle
traceml.init(mode="auto")
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 32))
D = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
og = torch.optim.Adam(G.parameters(), 1e-3)
od = torch.optim.Adam(D.parameters(), 1e-3)
keys_g = list(G.state_dict().keys())
for i in range(60):
    real = torch.randn(16, 32)
    z = torch.randn(16, 8)
    with traceml.trace_step(D):
        fake = G(z).detach()
        ld = D(real).mean() - D(fake).mean()
        od.zero_grad(); ld.backward(); od.step()
    with traceml.trace_step(G):
        lg = -D(G(z)).mean()
        og.zero_grad(); lg.backward(); og.step()
# one timed call per model, however many steps, and no hooks (the fast
# path of nn.Module.__call__ stays): from the one slot nn.Module.__call__
# reads, answered by the class for these instances alone -- nothing is in
# the instances, which pickles, copies and state_dict() would carry
for m in (G, D):
    assert m._compiled_call_impl is not None
    assert "_compiled_call_impl" not in vars(m) and "forward" not in vars(m)
    assert not m._forward_pre_hooks and not m._forward_hooks
assert nn.Sequential()._compiled_call_impl is None      # another instance: untouched
assert list(G.state_dict().keys()) == keys_g
# the user's model still copies and pickles, exactly as without TraceML
G2 = copy.deepcopy(G)
G3 = pickle.loads(pickle.dumps(G))
z = torch.randn(2, 8)
assert torch.equal(G2(z), G(z)) and torch.equal(G3(z), G(z))
assert b"traceml" not in pickle.dumps(G)        # nothing of TraceML is carried
for c in (G2, G3):
    assert c._compiled_call_impl is None
    assert sorted(vars(c)) == sorted(vars(G))
with torch.no_grad():
    G2[0].weight.add_(1.0)
assert not torch.equal(G2(z), G(z))
print("ok")
'''
    r = plain_python("gan", code=code)
    assert r.rc == 0 and "ok" in r.stdout, r.explain()
    s = r.summary()
    assert s["meta"]["common_steps"] >= 100, s["meta"]
    assert step_metric_ms(s, "forward") > 0 and step_metric_ms(s, "optimizer") > 0


SAME = PRELUDE + r'''
USE = os.environ["USE"] == "1"
if USE:
    traceml.init(mode="auto")
loader, model, opt = make(steps=50)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
losses = []
for x, y in loader:
    ctx = traceml.trace_step(model) if USE else None
    if ctx: ctx.__enter__()
    loss = nn.functional.cross_entropy(model(x.to(torch.float32)), y)
    opt.zero_grad(); loss.backward(); opt.step(); sched.step()
    if ctx: ctx.__exit__(None, None, None)
    losses.append(loss.item())
print("LOSSES", json.dumps(losses), json.dumps([p.sum().item() for p in model.parameters()]),
      sched.get_last_lr())
'''


GAN_ONE_MODEL = PRELUDE + r'''
class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 32))
    def forward(self, z):
        time.sleep(0.005)       # the heavier model
        return self.net(z)

class Wrapper(nn.Module):      # holds D, as DDP does: not another model
    def __init__(self, inner):
        super().__init__()
        self.module = inner
    def forward(self, x):
        return self.module(x)

mode, given = os.environ["MODE"], os.environ["GIVEN"]
kw = {"patch_forward": False} if mode == "selective" else {}
traceml.init(mode=mode, **kw)
torch.manual_seed(0)
G, D = Generator(), nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
W = Wrapper(D)
og = torch.optim.Adam(G.parameters(), 1e-3)
od = torch.optim.Adam(W.parameters(), 1e-3)
if mode == "manual":
    traceml.wrap_forward(D)
    og, od = traceml.wrap_optimizer(og), traceml.wrap_optimizer(od)
models = {"D": (D,), "none": ()}[given]
for i in range(40):
    real, z = torch.randn(16, 32), torch.randn(16, 8)
    with traceml.trace_step(*models):
        fake = G(z)
        ld = W(real).mean() - W(fake.detach()).mean()
        od.zero_grad(); ld.backward(); od.step()
        lg = -W(fake).mean()
        og.zero_grad(); lg.backward(); og.step()
print("ok")
'''


@pytest.mark.quick
@pytest.mark.parametrize("mode,given,found", [
    ("auto", "D", ["Generator"]), ("auto", "none", []), ("selective", "D", []),
    ("manual", "D", [])])
def test_models_the_step_did_not_name(plain_python, mode, given, found):
    """A GAN traced as trace_step(D): in auto mode the generator, whose
    optimizer steps inside the bracket, gets its forward timed and named
    ("also timed: Generator"); the wrapper around D that its optimizer
    holds is D, not another model. Not without a model named
    (trace_step()), not without forward timing (selective,
    patch_forward=False), not in manual mode (what the user wraps)."""
    r = plain_python("gan1", code=GAN_ONE_MODEL, env=dict(FAKE_TORCH, MODE=mode, GIVEN=given))
    assert r.rc == 0 and "ok" in r.stdout, r.explain()
    s = r.summary()
    assert s["meta"]["also_timed_models"] == found, s["meta"]
    assert ("also timed: Generator" in r.stdout) == bool(found), r.explain()
    fwd = step_metric_ms(s, "forward")
    if found:
        assert fwd >= 4.5, fwd           # the generator's 5 ms sleep is Forward
    elif mode == "manual":
        assert fwd < 2.0, fwd            # D only: the generator stays Residual


@pytest.mark.quick
def test_model_class_name_escape_not_in_summary_file(plain_python):
    """A model class named with a terminal escape: the box on the terminal
    and `view` showed '?' for it, final_summary.txt kept the raw escape (a
    `cat` of the file ran it). Now the box is made printable once, so the
    file, the JSON's "text" and the terminal all say '?'."""
    code = GAN_ONE_MODEL.replace(
        "G, D = Generator()",
        "Generator = type('Gen\\x1b[31m\\x9b1m', (Generator,), {})\nG, D = Generator()")
    r = plain_python("esc", code=code, env=dict(FAKE_TORCH, MODE="auto", GIVEN="D"))
    assert r.rc == 0 and "ok" in r.stdout, r.explain()
    s = r.summary()
    assert s["meta"]["also_timed_models"] == ["Gen\x1b[31m\x9b1m"], s["meta"]
    with open(r.artifact("final_summary.txt"), encoding="utf-8") as f:
        text = f.read()
    assert "also timed: Gen?[31m?1m (found" in text, text
    for box in (text, s["text"], r.stdout):
        assert "\x1b" not in box and "\x9b" not in box


def test_results_identical_with_and_without_traceml(plain_python):
    a = plain_python("same", code=SAME, env={"USE": "0"})
    b = plain_python("same", code=SAME, env={"USE": "1"})
    assert a.rc == 0 and b.rc == 0, a.explain() + b.explain()
    la = [l for l in a.stdout.splitlines() if l.startswith("LOSSES")]
    lb = [l for l in b.stdout.splitlines() if l.startswith("LOSSES")]
    assert la and la == lb, (la, lb)


@pytest.mark.quick
def test_init_failure_never_breaks_training(plain_python, tmp_path):
    # An unwritable logs folder: TraceML warns, training finishes with rc 0.
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    code = PRELUDE + r'''
traceml.init(mode="auto", logs_dir=BAD)
loader, model, opt = make(steps=10)
for x, y in loader:
    with traceml.trace_step(model):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
print("trained")
'''.replace("BAD", repr(str(blocker / "logs")))
    r = plain_python("badlogs", code=code, logs_env=False, env=FAKE_TORCH)
    assert r.rc == 0 and "trained" in r.stdout, r.explain()
    assert "traceml" in r.stderr.lower()


@pytest.mark.quick
def test_summary_and_final_summary_after_the_run(plain_python):
    # An atexit handler registered before init() runs after TraceML's own
    # (atexit is last-in first-out), when the run folder is written.
    code = PRELUDE + r'''
import atexit
def after():
    s = traceml.summary()
    fs = traceml.final_summary()
    assert fs is not None and fs["primary_diagnosis"]["label"], fs
    assert s["traceml/primary/label"] == fs["primary_diagnosis"]["label"]
    # (0.5.0's step_time.global.average, its 6 decimals, in the tracker key)
    assert abs(s["traceml/step_time/input_wait_ms"] -
               fs["step_time"]["average"]["input_wait_ms"]) <= 0.0005
    assert "traceml/step_time/diagnosis" in s and "traceml/meta/common_steps" in s
    assert all(k.startswith("traceml/") for k in s) and None not in s.values()
    print("SUMMARY_OK", len(s))
atexit.register(after)
assert traceml.summary() is None            # nothing before the end
traceml.init(mode="auto")
loader, model, opt = make(steps=30)
for x, y in loader:
    with traceml.trace_step(model):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
'''
    r = plain_python("summ", code=code, env=FAKE_TORCH)
    assert r.rc == 0 and "SUMMARY_OK" in r.stdout, r.explain()


SPAWNED = r'''
import multiprocessing as mp, sys, time

def work(i):
    import torch
    from torch import nn
    import traceml_ai as traceml
    traceml.init()                      # no RANK: each child says "rank 0"
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(12 + 4 * i):
        with traceml.trace_step(model):
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
            opt.zero_grad()
            time.sleep(0.002)

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    ps = [ctx.Process(target=work, args=(i,)) for i in range(2)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    sys.exit(max(p.exitcode for p in ps))
'''


@pytest.mark.quick
def test_spawned_children_claiming_rank_0_are_not_merged(tmp_path):
    # multiprocessing children each calling init() under `traceml run` all
    # say rank 0: each keeps its own steps, the summary names the conflict
    from conftest import TRACEML
    script = tmp_path / "spawned.py"
    script.write_text(SPAWNED)
    p = subprocess.run([TRACEML, "run", "--logs-dir", str(tmp_path / "logs"), "--run-name", "sp",
                        str(script)], cwd=str(tmp_path), env=base_env(**FAKE_TORCH), capture_output=True,
                       text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    with open(tmp_path / "logs" / "sp" / "final_summary.json", encoding="utf-8") as f:
        s = json.load(f)
    conflicts = s["meta"]["rank_conflicts"]
    assert len(conflicts) == 1 and conflicts[0]["claimed_rank"] == 0, s["meta"]
    assert conflicts[0]["reported_as"] == 1 and conflicts[0]["pid"] != conflicts[0]["first_pid"]
    assert s["meta"]["ranks_reported"] == 2
    assert "CONFLICT: rank 0 was claimed by pid" in p.stdout
    import sqlite3
    db = sqlite3.connect(str(tmp_path / "logs" / "sp" / "telemetry.sqlite"))
    counts = sorted(n for _, n in db.execute("SELECT rank, COUNT(*) FROM steps GROUP BY rank"))
    db.close()
    assert counts == [12, 16]                 # each process's own steps, none merged


REEXEC = r'''
import os, sys
import torch
import traceml_ai as traceml

gen = int(os.environ.get("REEXEC_GEN", "0"))
traceml.init()
model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5 + 2 * gen):
    with traceml.trace_step(model):
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
        opt.zero_grad()
print("gen %d pid %d" % (gen, os.getpid()), flush=True)
if gen == 0:
    traceml.summary()       # the steps so far reach the aggregator before the exec
    os.environ["REEXEC_GEN"] = "1"
    os.execv(sys.executable, [sys.executable] + sys.argv)
'''


def test_reexec_same_pid_is_a_new_incarnation(tmp_path, traceml_run):
    # a script that os.execv's itself keeps its pid and starts its step ids
    # again: both processes' steps count (5 + 7), telemetry.sqlite keeps
    # both (no row replaced), and the summary names the restart
    script = tmp_path / "reexec.py"
    script.write_text(REEXEC)
    r = traceml_run(str(script), run_name="reexec")
    assert r.rc == 0, r.explain()
    pids = {line.split()[-1] for line in r.stdout.splitlines() if line.startswith("gen ")}
    assert len(pids) == 1, r.stdout                       # the same pid, exec'd
    s = r.summary()
    assert s["meta"]["common_steps"] == 12, s["meta"]
    assert s["meta"]["ranks_reported"] == 1
    conflicts = s["meta"]["rank_conflicts"]
    assert len(conflicts) == 1, conflicts
    c = conflicts[0]
    assert (c["kind"], c["claimed_rank"], c["reported_as"], c["incarnation"], c["first_step"]) == \
        ("restarted", 0, 0, 1, 5), c
    assert str(c["pid"]) in pids
    assert "CONFLICT: rank 0 restarted" in r.stdout
    import sqlite3
    db = sqlite3.connect(r.artifact("telemetry.sqlite"))
    rows = db.execute("SELECT incarnation, COUNT(*), MIN(step), MAX(step) FROM steps"
                      " WHERE rank = 0 GROUP BY incarnation ORDER BY incarnation").fetchall()
    db.close()
    assert rows == [(0, 5, 0, 4), (1, 7, 0, 6)], rows
