"""The Lightning integration on the real lightning / pytorch_lightning
packages (examples/integrations/lightning_train.py): one TraceML step per
optimizer step, the accumulated micro-batches folded into it, the batch
transfer timed as H2D, DDP ranks started by Lightning itself reported as
ranks of one run, and a too-old Lightning left untraced with one warning.

Every run injects a known cause with exact sleeps; the model's forward
waits 10 ms (--device-ms) so Lightning's own per-batch Python stays a small
share of a step on a loaded CPU.
"""
import json
import os
import re

from conftest import (REPO, Slept, covers, old_version_site, primary, ranks_finished,
                      step_diag, step_metric_ms)
from conftest import traceml_warnings

SCRIPT = os.path.join(REPO, "examples", "integrations", "lightning_train.py")


def _no_traceml_warning(r):
    # a TraceMLWarning names the script's line; Lightning prints a warning
    # of a file whose path says "lightning" (this example) as FILE:LINE:
    # MESSAGE, without the category, so: no warning at the script's lines
    at_script = [ln for ln in r.stderr.splitlines()
                 if re.match(r"^\S*%s:\d+: " % re.escape(os.path.basename(SCRIPT)), ln)]
    assert traceml_warnings(r.stderr) == [] and at_script == [], r.explain()


def test_input_bound_with_accumulation(traceml_run, slept):
    """accumulate_grad_batches=2, each batch's __getitem__ sleeps 20 ms:
    one step per optimizer step (30, not 60 batches), and the step's Input
    Wait is both micro-batches' fetches, 40 ms (the first fetch comes
    before the step opens and is carried into it; the second falls inside
    the open step). TraceML 0.5.0's lightning.init() and the callback
    passed as well: each step still counted once."""
    r = traceml_run(SCRIPT, "--steps", 30, "--delay-ms", 20, "--accum", 2,
                    "--api", "init+callback", env=slept.env())
    assert r.rc == 0, r.explain()
    _no_traceml_warning(r)
    assert "optimizer steps: 30" in r.stdout, r.explain()
    s = r.summary()
    assert s["meta"]["common_steps"] == 30, s["meta"]
    assert s["meta"]["step_detection"] == "marked", s["meta"]
    p = primary(s)
    assert (p["label"], p["severity"]) == ("INPUT-BOUND", "CRITICAL"), json.dumps(p)
    wait = step_metric_ms(s, "input_wait")
    assert covers(wait, 2 * slept.mean(20), abs_ms=2.0, extra_ms=2.0), (wait, s["step_time"])
    # training_step (forward + loss) of both micro-batches: 2 x 10 ms
    fwd = step_metric_ms(s, "forward")
    assert covers(fwd, 2 * slept.mean(10), rel=0.15, abs_ms=2.0), (fwd, s["step_time"])


def test_healthy_pytorch_lightning_namespace(traceml_run, slept):
    """No injected cause, through the pytorch_lightning namespace: no
    WARNING or CRITICAL verdict, one step per optimizer step, nothing
    copied on a CPU run (no H2D unless asked for)."""
    r = traceml_run(SCRIPT, "--steps", 40, "--pl", env=slept.env())
    assert r.rc == 0, r.explain()
    _no_traceml_warning(r)
    s = r.summary()
    assert s["meta"]["common_steps"] == 40, s["meta"]
    assert primary(s)["severity"] not in ("WARNING", "CRITICAL"), json.dumps(primary(s))
    assert step_diag(s)["severity"] not in ("WARNING", "CRITICAL"), json.dumps(step_diag(s))
    assert step_metric_ms(s, "h2d") < 0.5, s["step_time"]["median"]
    fwd = step_metric_ms(s, "forward")
    assert covers(fwd, slept.mean(10), rel=0.15, abs_ms=2.0), (fwd, s["step_time"]["median"])


def test_transfer_timed_as_h2d(traceml_run, slept):
    """transfer_batch_to_device sleeps 10 ms; TraceMLCallback(time_transfer=
    True) times it as H2D on this CPU machine. Lightning calls it before
    on_train_batch_start, outside the step: the engine carries it into the
    step that opens next."""
    r = traceml_run(SCRIPT, "--steps", 30, "--transfer-ms", 10, "--time-transfer",
                    "--device-ms", 5, env=slept.env())
    assert r.rc == 0, r.explain()
    _no_traceml_warning(r)
    s = r.summary()
    assert s["meta"]["common_steps"] == 30, s["meta"]
    h2d = step_metric_ms(s, "h2d")
    assert covers(h2d, slept.mean(10), abs_ms=2.0), (h2d, s["step_time"]["median"])


def test_ddp_two_devices_straggler(traceml_run):
    """Trainer(strategy="ddp", devices=2) on gloo: Lightning starts rank 1
    by running the script again; both ranks report to the one launcher as
    R0 and R1 (the rank read from torch.distributed in setup), and rank 1's
    20 ms longer training_step makes it the compute straggler."""
    r = traceml_run(SCRIPT, "--steps", 30, "--devices", 2, "--slow-rank", 1)
    s = ranks_finished(r, r.run_dir, ranks=2, steps=30)
    _no_traceml_warning(r)
    m = s["meta"]
    assert (m["world_size"], m["rank_conflicts"]) == (2, []), m
    p = primary(s)
    assert p["kind"] == "COMPUTE_STRAGGLER", json.dumps(p)
    assert "R1/N0" in p["why"], json.dumps(p)
    assert s["step_time"]["straggler"]["culprit"]["rank"] == 1, s["step_time"]["straggler"]


def test_own_ddp_launch_unmodified_no_conflict(traceml_run):
    """An unmodified script (no TraceML in it) with Trainer(strategy="ddp",
    devices=2) and no torchrun: Lightning runs the script again as rank 1,
    zero-edit tracing gives both Trainers the callback, and both are the
    run's ranks, R0 and R1, with no CONFLICT (a launcher that starts its
    ranks itself is not two processes claiming one rank); rank 1's 20 ms
    longer training_step makes it the compute straggler."""
    script = os.path.join(REPO, "examples", "unmodified", "lightning_ddp.py")
    r = traceml_run(script, "--steps", 30, "--slow-rank", 1)
    s = ranks_finished(r, r.run_dir, ranks=2, steps=30)
    assert s["meta"]["rank_conflicts"] == [] and "CONFLICT" not in r.stdout, r.explain()
    p = primary(s)
    assert p["kind"] == "COMPUTE_STRAGGLER" and "R1/N0" in p["why"], json.dumps(p)
    assert "rank 1: 30 optimizer steps" in r.stdout, r.explain()


def test_too_old_lightning_warns_once(plain_python, tmp_path):
    """lightning reported as 0.1: one warning naming lightning >= 2.0, and
    the training runs to its end untraced (no run folder)."""
    r = plain_python(SCRIPT, "--steps", 10, env={"PYTHONPATH": old_version_site(tmp_path, "lightning")})
    assert r.rc == 0, r.explain()
    assert "optimizer steps: 10" in r.stdout, r.explain()
    # Lightning formats the warnings of files whose path says "lightning"
    # (this example's) as FILE:LINE: MESSAGE, without the category
    lines = [re.sub(r"^.*:\d+: (TraceMLWarning: )?", "", ln) for ln in r.stderr.splitlines()
             if "integration needs" in ln]
    assert lines == ["the Lightning integration needs lightning >= 2.0 "
                     "(found 0.1); training continues untraced"], r.explain()
    assert r.all_runs == [], r.all_runs
    assert "TraceML Run Summary" not in r.stdout


ZERO_EDIT_PL = r'''
import time, torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import %s as L

class M(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(16, 2)
    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

def collate(b):
    time.sleep(0.02)
    return torch.stack([x for x, _ in b]), torch.stack([y for _, y in b])

ds = TensorDataset(torch.randn(256, 16), torch.randint(0, 2, (256,)))
t = L.Trainer(max_steps=30, accelerator="cpu", logger=False, enable_checkpointing=False,
              enable_progress_bar=False, enable_model_summary=False)
t.fit(M(), DataLoader(ds, batch_size=8, collate_fn=collate))
print("done")
'''


def test_zero_edit_trainer_gets_the_callback(traceml_run, tmp_path):
    """A script that never mentions TraceML, run by `traceml run`, in both
    namespaces: its Trainer gets TraceML's callback, as TraceML 0.5.0's
    launcher attached it (issue 47, item 7): one marked step per optimizer
    step, the collator's sleep as Input Wait, and the forward seen
    (automatic detection sees none: Lightning runs training_step inside
    optimizer.step(closure))."""
    for namespace in ("lightning.pytorch", "pytorch_lightning"):
        slept = Slept(tmp_path / ("slept_" + namespace))   # each run's own sleeps
        script = tmp_path / ("pl_%s.py" % namespace.split(".")[0])
        script.write_text(ZERO_EDIT_PL % namespace)
        r = traceml_run(str(script), run_name=namespace, env=slept.env())
        assert r.rc == 0 and "done" in r.stdout, r.explain()
        s = r.summary()
        assert s["meta"]["step_detection"] == "marked", (namespace, s["meta"])
        assert s["meta"]["common_steps"] == 30, (namespace, s["meta"])
        wait, ref = step_metric_ms(s, "input_wait"), slept.mean(20)
        assert covers(wait, ref, extra_ms=4.0, rel=0.10, abs_ms=2.0), \
            "%s: Input Wait %.1f ms, slept %.3f ms" % (namespace, wait, ref)
        assert step_metric_ms(s, "forward") > 0, (namespace, s["step_time"]["average"])
        assert traceml_warnings(r.stderr) == [], r.stderr[-2000:]
