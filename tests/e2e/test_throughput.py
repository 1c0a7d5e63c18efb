"""Throughput and FLOPs (docs/summary-json.md, "throughput") on real torch
through `traceml run`: the samples and tokens each step consumed, counted
from the loops people write (a DataLoader of token batches, gradient
accumulation with a validation loop between steps, a dict batch, no
DataLoader at all), the FLOPs of a model counted once under
FlopCounterMode and checked against the model's own arithmetic, and that
counting changes nothing the training computes. Rates are checked against
the summary's own step times (what the run measured), never against a
delay the script asked for."""
import json
import os
import subprocess

from conftest import PYTHON, base_env

SCRIPT = r'''
import hashlib, json, os, sys, collections
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

kind = sys.argv[1]
torch.manual_seed(0)
B, S, V = 8, 16, 50


class Tokens(nn.Module):
    """A small language model: embedding, a linear block with dropout and
    batch norm (RNG and running statistics: anything a second forward
    would change), a head."""
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 32)
        self.block = nn.Sequential(nn.Linear(32, 64), nn.Dropout(0.1), nn.ReLU())
        self.norm = nn.BatchNorm1d(64)
        self.head = nn.Linear(64, V)

    def forward(self, ids):
        h = self.block(self.emb(ids)).mean(dim=1)
        return self.head(self.norm(h))


def digest(model):
    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode()); h.update(v.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


reads = []
ids = torch.randint(0, V, (B * 60, S))
labels = torch.randint(0, V, (B * 60,))
if kind in ("tokens", "compiled"):
    model = Tokens()
    if kind == "compiled":
        model = torch.compile(model, backend="eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(TensorDataset(ids, labels), batch_size=B)
    for x, y in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
elif kind == "accumulate":
    # 4 micro-batches per optimizer step, and every 10 steps a validation
    # loop whose batches (of 32) feed no step
    model = Tokens()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(TensorDataset(ids, labels), batch_size=B)
    val = DataLoader(TensorDataset(ids[:96], labels[:96]), batch_size=32)
    for i, (x, y) in enumerate(loader):
        (nn.functional.cross_entropy(model(x), y) / 4).backward()
        if i % 4 == 3:
            opt.step()
            opt.zero_grad()
            if i % 40 == 39:
                model.eval()
                with torch.no_grad():
                    for vx, vy in val:
                        model(vx)
                model.train()
elif kind in ("dict", "mapping"):
    # dict: Hugging Face style, a UserDict (as BatchEncoding) of input_ids;
    # mapping: a Mapping of the script's own whose data is a property:
    # TraceML runs none of a batch's code (so it cannot count this one)
    class Encoding(collections.UserDict):
        pass

    class Lazy(collections.abc.Mapping):
        def __init__(self, **kw):
            self._d = kw
        def __getitem__(self, k):
            return self._d[k]
        def __iter__(self):
            return iter(self._d)
        def __len__(self):
            return len(self._d)
        @property
        def data(self):
            reads.append(1)
            return self._d

    def collate(rows, make=Encoding if kind == "dict" else Lazy):
        return make(input_ids=torch.stack([r[0] for r in rows]),
                    labels=torch.stack([r[1] for r in rows]))
    model = Tokens()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(TensorDataset(ids, labels), batch_size=B, collate_fn=collate)
    for batch in loader:
        opt.zero_grad()
        nn.functional.cross_entropy(model(batch["input_ids"]), batch["labels"]).backward()
        opt.step()
elif kind == "manual":
    # manual mode: the loader wrapped by hand (TimedIter), steps marked
    import traceml_ai as traceml
    traceml.init(mode="manual")
    model = Tokens()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = traceml.wrap_dataloader_fetch(DataLoader(TensorDataset(ids, labels), batch_size=B))
    for x, y in loader:
        with traceml.trace_step(model):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
elif kind == "told":
    # no DataLoader: the script says what a step consumed
    import traceml_ai as traceml
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    for step in range(60):
        with traceml.trace_step(model, samples=32, tokens=32 * 64):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
print("RESULT " + json.dumps({"digest": digest(model), "reads": len(reads)}))
'''


def run_script(tmp_path, kind, traced=True, env=None, name="r"):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    logs = tmp_path / ("logs_" + name)
    if traced:
        cmd = [os.path.join(os.path.dirname(PYTHON), "traceml"), "run", "--logs-dir", str(logs),
               "--run-name", name, str(path), kind]
    else:
        cmd = [PYTHON, str(path), kind]
    p = subprocess.run(cmd, cwd=str(tmp_path), env=base_env(**(env or {})),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    result = [json.loads(l[7:]) for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    summary = None
    if traced:
        with open(logs / name / "final_summary.json", encoding="utf-8") as f:
            summary = json.load(f)
    return p, result[0], summary, logs / name


def wall_per_step_s(summary):
    """The median rank's window wall time per step (Step Time plus the
    Untraced time before it), as the summary measured it."""
    r = summary["step_time"]["per_rank"][0]
    return (r["step_time_ms"] + (r["untraced_ms"] or 0)) / 1e3


def test_token_batches_counted_and_flops_exact(tmp_path):
    p, _, s, run = run_script(tmp_path, "tokens")
    t = s["throughput"]
    assert t["samples_per_step"] == 8 and t["tokens_per_step"] == 8 * 16, t
    # the rate is the step's samples over its wall time (2%: the mean of
    # ratios against the ratio of means, and rounding)
    want = 8 / wall_per_step_s(s)
    assert abs(t["samples_per_s"] - want) <= 0.02 * want, (t, want)
    assert abs(t["tokens_per_s"] - 16 * t["samples_per_s"]) <= 0.001 * t["tokens_per_s"], t
    # FLOPs: what FlopCounterMode has formulas for in one forward (the two
    # linear layers' matrix products, 2*M*N*K: Linear(32, 64) on B*S rows
    # and Linear(64, V) on B rows), times 3 for forward + backward
    fwd_per_sample = 2 * (16 * 32 * 64) + 2 * (64 * 50)
    assert t["flops_per_step"] == 3 * fwd_per_sample * 8, t
    assert t["flops_counted_by"] == "flop_counter" and t["dtype"] == "fp32", t
    assert abs(t["achieved_flops_per_s"] - t["flops_per_step"] * t["samples_per_s"] / 8) <= \
        0.001 * t["achieved_flops_per_s"], t
    # on a CPU no peak is made up
    assert t["mfu_percent"] is None and t["peak_flops_per_s"] is None, t
    rank = s["step_time"]["per_rank"][0]
    assert rank["samples_per_s"] == t["samples_per_s"] and rank["mfu_percent"] is None, rank
    assert "Throughput: " in p.stdout and " samples/s · " in p.stdout, p.stdout
    assert "FLOPs: " in p.stdout and "(FlopCounterMode; no MFU:" in p.stdout, p.stdout
    log = (run / "traceml.log").read_text()
    assert "FLOPs: Tokens counted" in log, log


def test_counting_changes_nothing(tmp_path):
    """The counted forward and the batch counting leave the training as it
    was: the same parameters, bit for bit, with and without TraceML."""
    _, plain, _, _ = run_script(tmp_path, "tokens", traced=False)
    _, traced, _, _ = run_script(tmp_path, "tokens")
    assert plain["digest"] == traced["digest"]


def test_accumulation_and_validation(tmp_path):
    """Four micro-batches per optimizer step add up; the validation
    loop's batches between steps count for no step."""
    _, plain, _, _ = run_script(tmp_path, "accumulate", traced=False)
    _, traced, s, _ = run_script(tmp_path, "accumulate")
    assert plain["digest"] == traced["digest"]
    t = s["throughput"]
    assert t["samples_per_step"] == 32 and t["tokens_per_step"] == 32 * 16, t
    assert s["meta"]["step_detection"] == "automatic", s["meta"]


def test_dict_batches_and_compare(tmp_path):
    """A dict batch counts as a tuple does; compare shows both runs'
    throughput as rows of its Step Time table, with their change."""
    _, _, s, a = run_script(tmp_path, "dict", name="a")
    t = s["throughput"]
    assert t["samples_per_step"] == 8 and t["tokens_per_step"] == 8 * 16, t
    _, _, s2, b = run_script(tmp_path, "tokens", name="b")
    out = tmp_path / "cmp"
    p = subprocess.run([os.path.join(os.path.dirname(PYTHON), "traceml"), "compare", str(a),
                        str(b), "--output", str(out)], capture_output=True, text=True,
                       env=base_env(), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Samples/s" in p.stdout and "Tokens/s" in p.stdout, p.stdout
    with open(str(out) + ".json", encoding="utf-8") as f:
        rows = {r["metric"]: r for sec in json.load(f)["sections"].values() for r in sec}
    row = rows["samples_per_s"]
    assert (row["a"], row["b"]) == (t["samples_per_s"], s2["throughput"]["samples_per_s"]), row
    assert abs(row["delta_percent"] - 100 * (row["b"] - row["a"]) / row["a"]) < 0.01, row


def test_batch_code_never_runs(tmp_path):
    """Finding a batch's lead tensor runs none of the batch's own code: a
    Mapping whose data is a property is read by the script alone (it is
    not counted); a UserDict's data is read from its instance dict."""
    _, plain, _, _ = run_script(tmp_path, "mapping", traced=False)
    _, traced, s, _ = run_script(tmp_path, "mapping")
    assert plain == traced and traced["reads"] == 0, (plain, traced)
    assert s["throughput"]["samples_per_step"] is None, s["throughput"]


def test_manual_mode(tmp_path):
    _, _, s, _ = run_script(tmp_path, "manual")
    t = s["throughput"]
    assert t["samples_per_step"] == 8 and t["tokens_per_step"] == 8 * 16, t


def test_trace_step_told(tmp_path):
    _, _, s, _ = run_script(tmp_path, "told")
    t = s["throughput"]
    assert t["samples_per_step"] == 32 and t["tokens_per_step"] == 32 * 64, t
    assert t["flops_per_step"] == 3 * 2 * (64 * 256 + 256 * 10) * 32, t
    want = 32 / wall_per_step_s(s)
    assert abs(t["samples_per_s"] - want) <= 0.02 * want, (t, want)


def test_flops_off_and_compiled(tmp_path):
    """TRACEML_FLOPS=0 counts no FLOPs; a compiled model is not counted
    (a dispatch mode would recompile it), and traceml.log says why;
    samples are still counted."""
    _, _, s, _ = run_script(tmp_path, "tokens", env={"TRACEML_FLOPS": "0"}, name="off")
    assert s["throughput"]["flops_per_step"] is None and s["throughput"]["samples_per_step"] == 8
    _, plain, _, _ = run_script(tmp_path, "compiled", traced=False)
    _, traced, s, run = run_script(tmp_path, "compiled", name="compiled")
    assert plain["digest"] == traced["digest"]
    assert s["throughput"]["flops_per_step"] is None, s["throughput"]
    assert s["throughput"]["samples_per_step"] == 8, s["throughput"]
    assert "FLOPs not counted for OptimizedModule: a compiled model" in \
        (run / "traceml.log").read_text()
