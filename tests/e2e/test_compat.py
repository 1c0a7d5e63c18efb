"""TraceML 0.5.0's Python names, keywords and return shapes (docs/compat.md).

A 0.5.0 script must not die on its first TraceML line here: init() and
start() take every 0.5.0 keyword (with its meaning where this engine has
one, else one warning line naming it) and return the configuration
object 0.5.0 scripts read; summary() / final_summary() take 0.5.0's
keywords; `import traceml` is not ours (no top-level package); the integrations
have their 0.5.0 names and init() entries.

The glue is tested on the fake torch (quick tier); the integrations'
init() on the real transformers and Lightning (full tier).
"""
import json
import os
import re
import signal
import subprocess

import pytest

from conftest import FAKE_TORCH, PYTHON, REPO, TIMEOUT, TRACEML, base_env, traceml_warnings

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "integrations")

LOOP = r'''
import os, sys, json, time
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import traceml_ai as traceml

def train(steps=12):
    x, y = torch.randn(steps * 4, 8), torch.randint(0, 2, (steps * 4,))
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for xb, yb in DataLoader(TensorDataset(x, y), batch_size=4):
        with traceml.trace_step(model):
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad(); loss.backward(); opt.step()
'''


def py(code, tmp_path, env=None):
    e = base_env(**FAKE_TORCH)
    e["TRACEML_LOGS_DIR"] = str(tmp_path / "logs")
    e.update(env or {})
    path = tmp_path / "script.py"
    path.write_text(code)
    return subprocess.run([PYTHON, str(path)], cwd=str(tmp_path), env=e, capture_output=True,
                          text=True, timeout=TIMEOUT)


def warnings(stderr):
    return traceml_warnings(stderr)


@pytest.mark.quick
def test_init_takes_every_0_5_0_keyword(tmp_path):
    """The keywords of 0.5.0's init(): session_id names the run folder,
    mode="custom" is "selective" with 0.5.0's reading of patch_* (the
    unnamed ones off), the return value is the configuration, a repeat
    returns the same; the keywords without a meaning here are one warning
    line each, and training goes on."""
    code = LOOP + r'''
cfg = traceml.init(mode="custom", patch_dataloader=True, patch_forward=True,
                   session_id="from_0_5_0", interval=0.5, ui_mode="dashboard",
                   enable_logging=True, connect_timeout_sec=3.0,
                   connect_retry_interval_sec=0.1, on_missing_aggregator="warn")
assert cfg.mode == "selective" and not cfg.disabled and cfg.source == "user", cfg
assert (cfg.patch_dataloader, cfg.patch_forward, cfg.patch_backward, cfg.patch_h2d) == \
    (True, True, False, False), cfg
assert isinstance(cfg, traceml.TraceMLInitConfig)
again = traceml.start(mode="selective", patch_dataloader=True, patch_forward=True,
                      session_id="from_0_5_0")
assert again is cfg and again.same_effective_configuration(cfg)
assert os.environ["TRACEML_INTERVAL"] == "0.5"
train()
print("trained")
'''
    r = py(code, tmp_path)
    assert r.returncode == 0 and "trained" in r.stdout, r.stdout + r.stderr
    assert os.listdir(tmp_path / "logs") == ["from_0_5_0"]
    w = warnings(r.stderr)
    named = sorted(re.search(r"init\((\w+)=", l).group(1) for l in w)
    assert named == ["connect_retry_interval_sec", "connect_timeout_sec", "enable_logging",
                     "ui_mode"], w
    assert all("has no meaning here" in l for l in w), w
    s = json.loads((tmp_path / "logs" / "from_0_5_0" / "final_summary.json").read_text())
    assert s["meta"]["common_steps"] == 12, s["meta"]


@pytest.mark.quick
def test_wrapper_and_init_guards_050(tmp_path):
    """TraceML 0.5.0's guards (issue 47, item 6): a wrapper given the wrong
    kind of object is a TypeError, one used before init() a RuntimeError,
    and so is one on a phase the script's init() already times;
    init() with patch_* outside mode='selective', or a selective init that
    patches nothing, a ValueError. TraceML disabled: everything passes
    through unchecked, as in 0.5.0."""
    code = LOOP + r'''
def raises(exc, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except exc as e:
        return str(e)
    raise AssertionError("%s did not raise %s" % (fn.__name__, exc.__name__))

if os.environ.get("TRACEML_DISABLED"):
    obj = object()
    assert traceml.wrap_forward(obj) is obj and traceml.wrap_backward(obj) is obj
    print("passed through")
    sys.exit(0)
model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for wrap, what in ((traceml.wrap_forward, "nn.Module"), (traceml.wrap_backward, "backward()"),
                   (traceml.wrap_optimizer, "step()"), (traceml.wrap_dataloader_fetch, "iterator")):
    assert what in raises(TypeError, wrap, 42), wrap
for wrap, arg in ((traceml.wrap_forward, model), (traceml.wrap_optimizer, opt),
                  (traceml.wrap_dataloader_fetch, [1, 2])):
    assert "traceml.init" in raises(RuntimeError, wrap, arg)
assert "selective" in raises(ValueError, traceml.init, mode="auto", patch_forward=True)
assert "selective" in raises(ValueError, traceml.init, mode="manual", patch_h2d=False)
assert "patch_" in raises(ValueError, traceml.init, mode="selective")
assert "patch_" in raises(ValueError, traceml.init, mode="selective", patch_dataloader=False,
                          patch_forward=False, patch_backward=False, patch_h2d=False,
                          patch_optimizer=False, patch_comm=False)
traceml.init(mode="selective", patch_forward=False, patch_optimizer=False)
assert traceml.wrap_forward(model) is model and traceml.wrap_optimizer(opt) is opt
# what the script's init() already times: 0.5.0's RuntimeError
loader = DataLoader(TensorDataset(torch.randn(8, 8), torch.randint(0, 2, (8,))), batch_size=4)
assert "patch_dataloader" in raises(RuntimeError, traceml.wrap_dataloader_fetch, loader)
assert "patch_backward" in raises(RuntimeError, traceml.wrap_backward, model(torch.randn(2, 8)).sum())
gen = (b for b in loader)          # not a DataLoader: patch_dataloader does not see it
assert traceml.wrap_dataloader_fetch(gen) is not gen
print("guarded")
'''
    r = py(code, tmp_path)
    assert r.returncode == 0 and "guarded" in r.stdout, r.stdout + r.stderr
    r = py(code, tmp_path, env={"TRACEML_DISABLED": "1"})
    assert r.returncode == 0 and "passed through" in r.stdout, r.stdout + r.stderr


@pytest.mark.quick
def test_init_config_when_disabled_and_bad_values(tmp_path):
    """disabled=True returns a disabled configuration; TRACEML_DISABLED
    likewise; bad values are a ValueError naming them, as in 0.5.0."""
    code = LOOP + r'''
cfg = traceml.init(disabled=True)
assert cfg.disabled and cfg.mode == "auto", cfg
for bad in (dict(mode="turbo"), dict(on_missing_aggregator="explode"), dict(interval=0)):
    try:
        traceml.init(**bad)
    except ValueError:
        pass
    else:
        raise SystemExit("accepted %r" % bad)
train()
assert traceml.summary(timeout_sec=1) is None
print("ok")
'''
    r = py(code, tmp_path)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
    assert not (tmp_path / "logs").exists()


@pytest.mark.quick
def test_on_missing_aggregator_raise(tmp_path):
    """on_missing_aggregator="raise" (or TRACEML_ON_MISSING_AGGREGATOR)
    raises where the engine cannot start (here: a logs folder that cannot
    be made); "warn", the default, is one warning and an untraced run."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = LOOP + r'''
try:
    traceml.init(logs_dir=BAD, on_missing_aggregator="raise")
except RuntimeError as e:
    print("raised:", e)
'''.replace("BAD", repr(str(blocker / "logs")))
    r = py(code, tmp_path)
    assert r.returncode == 0 and "raised: traceml.init():" in r.stdout, r.stdout + r.stderr
    code = LOOP + r'''
cfg = traceml.init(logs_dir=BAD)
assert cfg.disabled, cfg
train()
print("trained")
'''.replace("BAD", repr(str(blocker / "logs")))
    r = py(code, tmp_path)
    assert r.returncode == 0 and "trained" in r.stdout, r.stdout + r.stderr
    assert len(warnings(r.stderr)) == 1, r.stderr


@pytest.mark.quick
def test_summary_keywords_and_print_text(tmp_path):
    """summary() / final_summary() with 0.5.0's keywords: print_text
    prints the box; rank0_only is 0.5.0's name for not all_ranks."""
    code = LOOP + r'''
import atexit
def after():
    fs = traceml.final_summary(timeout_sec=5.0, poll_interval_sec=0.1, print_text=True,
                               rank0_only=True)
    s = traceml.summary(timeout_sec=5.0, poll_interval_sec=0.1, rank0_only=False)
    assert fs["meta"]["common_steps"] == 12 and s["traceml/meta/common_steps"] == 12
    print("SUMMARY_OK")
atexit.register(after)
traceml.init()
train()
'''
    r = py(code, tmp_path)
    assert r.returncode == 0 and "SUMMARY_OK" in r.stdout, r.stdout + r.stderr
    assert r.stdout.count("TraceML Run Summary") == 2, r.stdout   # at exit, and print_text


@pytest.mark.quick
def test_wrappers_take_050_keywords(tmp_path):
    """0.5.0's API functions called with their keywords (trace_step(model=),
    wrap_dataloader_fetch(obj=), wrap_forward(model=), wrap_backward(loss=),
    wrap_optimizer(optimizer=), wrap_h2d(obj=)): every phase is timed."""
    code = r'''
import json, sys
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import traceml_ai as traceml
traceml.init(mode="manual")
x, y = torch.randn(48, 8), torch.randint(0, 2, (48,))
model = traceml.wrap_forward(model=nn.Linear(8, 2))
opt = traceml.wrap_optimizer(optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
for xb, yb in traceml.wrap_dataloader_fetch(obj=DataLoader(TensorDataset(x, y), batch_size=4)):
    with traceml.trace_step(model=model):
        xb = traceml.wrap_h2d(obj=xb).to("cpu")
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        traceml.wrap_backward(loss=loss).backward()
        opt.step()
try:
    traceml.trace_step(models=model)
except TypeError as e:
    print("TYPEERROR", e)
s = traceml.final_summary()
print("MISSING", json.dumps(s["step_time"]["diagnosis"]["evidence"]["missing_phases"]))
print("STEPS", s["meta"]["common_steps"])
'''
    r = py(code, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "MISSING []" in r.stdout and "STEPS 12" in r.stdout, r.stdout + r.stderr
    assert "TYPEERROR trace_step() got an unexpected keyword argument 'models'" in r.stdout


@pytest.mark.quick
def test_import_traceml_is_not_ours():
    """The package installs no top-level `traceml` (that name may be another
    distribution's): `import traceml` is Python's own ModuleNotFoundError,
    and 0.5.0's guidance (import traceml_ai as traceml) is in the docs."""
    r = subprocess.run([PYTHON, "-c", "import traceml"], env=base_env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == \
        "ModuleNotFoundError: No module named 'traceml'", r.stderr
    with open(os.path.join(REPO, "docs", "compat.md"), encoding="utf-8") as f:
        assert "import traceml_ai as traceml" in f.read()


@pytest.mark.quick
def test_aggregator_host_and_port_reach_traceml_serve(tmp_path):
    """init(aggregator_host=, aggregator_port=): the ranks report to the
    aggregator of `traceml serve` there (0.5.0's direct launch), with the
    run id and secret serve printed."""
    serve = subprocess.Popen([TRACEML, "serve", "--run-name", "served", "--logs-dir",
                              str(tmp_path / "served")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=base_env())
    try:
        line = ""
        while not line.startswith("export "):
            line = serve.stdout.readline()
            assert line, serve.stderr.read()
        exported = dict(w.split("=", 1) for w in line.split()[1:])
        host, port = exported.pop("TRACEML_ADDR").rsplit(":", 1)
        code = LOOP + r'''
traceml.init(aggregator_host=HOST, aggregator_port=PORT)
train()
print("trained")
'''.replace("HOST", repr(host)).replace("PORT", port)
        r = py(code, tmp_path, env=exported)
        assert r.returncode == 0 and "trained" in r.stdout, r.stdout + r.stderr
    finally:
        serve.send_signal(signal.SIGINT)
        out, err = serve.communicate(timeout=TIMEOUT)
    assert serve.returncode == 0, err
    s = json.loads((tmp_path / "served" / "served" / "final_summary.json").read_text())
    assert s["meta"]["common_steps"] == 12, s["meta"]
    assert not (tmp_path / "logs").exists()


# --------------------------------------------------------------------------
# The integrations' 0.5.0 entries, on the real frameworks

def steps_of(r):
    m = re.search(r"optimizer steps: (\d+)", r.stdout)
    return int(m.group(1)) if m else None


def test_huggingface_init_attaches_once(plain_python):
    """huggingface.init() before Trainer(...): the Trainer gets the callback
    (steps marked, one per optimizer step). Passed TraceMLTrainerCallback
    as well, it still counts each step once: test_integrations_hf's
    accumulation run does both."""
    pytest.importorskip("transformers")
    r = plain_python(os.path.join(EXAMPLES, "hf_trainer.py"), "--steps", 12, "--api", "init")
    assert r.rc == 0, r.explain()
    s = r.summary()
    assert steps_of(r) == 12 and s["meta"]["common_steps"] == 12, s["meta"]
    assert s["meta"]["step_detection"] == "marked", s["meta"]
    assert warnings(r.stderr) == [], r.stderr[-2000:]


def test_lightning_init_attaches_once(plain_python):
    """lightning.init() before Trainer(...): the same for Lightning (with
    the callback passed as well: test_integrations_lightning's
    accumulation run)."""
    pytest.importorskip("lightning")
    r = plain_python(os.path.join(EXAMPLES, "lightning_train.py"), "--steps", 12,
                     "--device-ms", 2, "--api", "init")
    assert r.rc == 0, r.explain()
    s = r.summary()
    assert steps_of(r) == 12 and s["meta"]["common_steps"] == 12, s["meta"]
    assert s["meta"]["step_detection"] == "marked", s["meta"]
    assert warnings(r.stderr) == [], r.stderr[-2000:]
