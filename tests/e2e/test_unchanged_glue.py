"""TraceML never changes what the training does, the smaller things a
script can see (docs/zero-edit.md, "What stays the same"): where torch's
warnings say they come from, what a failing sitecustomize prints, the
steps of a process that replaces itself with os.exec*. As in
test_unchanged.py, each script runs without TraceML and under `traceml
run` (Pair), on the real torch, and what it printed, its exit code and
what it saw must be the same.
"""
import os
import subprocess

import pytest

from conftest import PYTHON, TIMEOUT, base_env
from test_unchanged import Pair, training_output


# --------------------------------------------------------------------------
# torch's warnings name torch's line (or the script's), never TraceML's

WARNINGS = r'''
import json, os, sys, warnings
how = sys.argv[1]
if how == "manual":
    import traceml_ai as traceml
    traceml.init(mode="manual")
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

seen = []
show = warnings.showwarning
def record(message, category, filename, lineno, file=None, line=None):
    seen.append([category.__name__, str(message)[:60], filename, lineno])
    show(message, category, filename, lineno, file, line)
warnings.showwarning = record

if how == "ignore-torch":      # a filter on torch's module names
    warnings.filterwarnings("ignore", module=r"torch\.")
elif how == "always":
    warnings.simplefilter("always")

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
if how != "manual":
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + os.path.abspath("pg"),
                            rank=0, world_size=1)
    # DDP's own deprecation warning, at stacklevel=2: the line below
    model = nn.parallel.DistributedDataParallel(model, check_reduction=True)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
for epoch in range(3):
    # pin_memory without an accelerator: DataLoader's iterator warns, at
    # stacklevel=2, once per location under the default filter
    for x, y in DataLoader(data, batch_size=16, pin_memory=True):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
if how == "manual":
    # a C++ warning (TORCH_WARN) names the innermost Python frame: the
    # script's, through wrap_h2d's proxy too
    z = torch.randn(4, dtype=torch.complex64)
    print(traceml.wrap_h2d(z).to(torch.float32).shape)
else:
    dist.destroy_process_group()
print("loss %.4f" % loss.item())
with open(sys.argv[sys.argv.index("--out") + 1], "w") as f:
    json.dump({"warnings": seen}, f)
'''


@pytest.mark.parametrize("how", ["default", "always", "ignore-torch", "manual"])
def test_torch_warnings_name_the_same_line(tmp_path, how):
    script = tmp_path / "warns.py"
    script.write_text(WARNINGS)
    # manual: the script imports TraceML, so the run without it is
    # `traceml run --disable-traceml` (init() is a no-op there)
    r = Pair(tmp_path, str(script), [how], plain=how != "manual")
    r.assert_same()
    seen = r.result("with")["warnings"]
    text = r.proc("with").stderr
    assert "traceml_ai" not in text, r.explain()
    pin = [w for w in seen if "pin_memory" in w[1]]
    if how == "ignore-torch":
        # torch's own line is filtered out; DDP's names the script's
        assert pin == [], r.explain()
    if how == "manual":
        assert len(pin) == 1 and pin[0][2].endswith("dataloader.py"), r.explain()
        assert any(w[1].startswith("Casting complex values") and w[2] == str(script)
                   for w in seen), r.explain()
    else:
        if how != "ignore-torch":
            assert len(pin) == (3 if how == "always" else 1), r.explain()
            assert pin[0][2].endswith(os.path.join("torch", "utils", "data", "dataloader.py")), \
                r.explain()
        ddp = [w for w in seen if "check_reduction" in w[1]]
        assert len(ddp) == 1 and ddp[0][2] == str(script), r.explain()


# --------------------------------------------------------------------------
# A sitecustomize that raises: reported once, as Python reports it

SITE_LOOP = r'''
import json, sys
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for i in range(20):
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss %.4f" % loss.item())
with open(sys.argv[sys.argv.index("--out") + 1], "w") as f:
    json.dump({"site_ran": sys.modules.get("site_ran") is not None}, f)
'''


def test_sitecustomize_that_raises_is_reported_once(tmp_path):
    # the `traceml` command is a Python of its own (pip's entry point, or
    # python -m traceml_ai): it must not meet the user's sitecustomize,
    # whose output (stdout and stderr) and error are the training's
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\nprint('sitecustomize was here')\nsys.modules['site_ran'] = sys\n"
        "raise ValueError('broken site')\n")
    script = tmp_path / "train.py"
    script.write_text(SITE_LOOP)
    env = base_env(PYTHONPATH=str(site))
    r = Pair(tmp_path, str(script), env={"PYTHONPATH": str(site)})
    r.assert_same()        # stderr byte-identical: the error once, no line of TraceML's
    plain = r.proc("without")
    assert plain.stderr == ("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                            "ValueError: broken site\n"), r.explain()
    assert plain.stdout.count("sitecustomize was here") == 1, r.explain()
    assert r.result("with") == {"site_ran": True}, r.explain()   # it ran, up to its raise
    s = r.summary()        # and the training is traced
    assert s["meta"]["step_detection"] == "automatic" and s["meta"]["common_steps"] == 20, \
        s["meta"]
    # the same command by module, and its --disable-traceml baseline
    for extra in ([], ["--disable-traceml"]):
        p = subprocess.run([PYTHON, "-m", "traceml_ai", "run", "--logs-dir", str(tmp_path / "m"),
                            *extra, str(script), "--out", str(tmp_path / "m.json")],
                           cwd=str(tmp_path), env=env, capture_output=True, text=True,
                           timeout=TIMEOUT)
        assert p.returncode == 0, p.stderr
        assert p.stderr == plain.stderr, (extra, p.stderr)
        assert training_output(p.stdout) == plain.stdout, (extra, p.stdout)


# --------------------------------------------------------------------------
# A process that replaces itself (os.exec*): every image's steps count

REEXEC = r'''
import os, sys
import torch
from torch import nn
again = "--again" in sys.argv
torch.manual_seed(1 if again else 0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for i in range(STEPS_AFTER if again else STEPS_BEFORE):
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("image", 2 if again else 1, "loss %.4f" % loss.item(), flush=True)
if not again:
    # a script that restarts itself (after a config change, say), by
    # whichever exec the script uses
    if sys.argv[1] == "execv":
        os.execv(sys.executable, [sys.executable] + sys.argv + ["--again"])
    else:
        os.execlp(os.path.basename(sys.executable), sys.executable, *sys.argv, "--again")
with open(sys.argv[sys.argv.index("--out") + 1], "w") as f:
    f.write("{}")
'''


@pytest.mark.parametrize("call", ["execv", "execlp"])
def test_steps_before_an_exec_are_counted(tmp_path, call):
    script = tmp_path / "reexec.py"
    script.write_text(REEXEC.replace("STEPS_BEFORE", "12").replace("STEPS_AFTER", "7"))
    env = {"PATH": os.path.dirname(PYTHON) + os.pathsep + os.environ.get("PATH", "")}
    r = Pair(tmp_path, str(script), [call], env=env)
    r.assert_same()
    s = r.summary()
    # both images' steps, the second image the same rank restarted
    assert s["meta"]["common_steps"] == 19, (s["meta"], r.explain())
    conflicts = s["meta"]["rank_conflicts"]
    assert [c["kind"] for c in conflicts] == ["restarted"], conflicts
    assert conflicts[0]["first_step"] == 12, conflicts
    assert s["meta"]["lost_ranks"] == [], s["meta"]
