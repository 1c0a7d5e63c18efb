"""What a training keeps alive, which model runs, what a compiled step
compiles, what it warns: a script with no TraceML in it (unless --how
manual) that writes what it saw to --out, so that a run under `traceml run`
can be compared with a plain one (tests/e2e/test_unchanged_lifetimes.py).

    --how memory   a `def train():` loop (two optimizers, the second made
                   at step 3): every tensor it frees -- a 20 MB buffer
                   deleted after step 1, each step's output and loss -- is
                   watched with weakref.finalize, and the order in which
                   they are freed, between the loop's own markers, is the
                   result
    --how manual   the same, through TraceML's own API (traceml.init,
                   trace_step naming one model of two): run by
                   lifetimes_manual.py (this file has no import of TraceML,
                   so that zero-edit tracing traces its other cases);
                   TRACEML_DISABLED=1 is the run without TraceML
    --how clone    a model cloned through its __dict__ (Cls.__new__ +
                   __dict__.update) with its head swapped: the clone's
                   output shape, the original's, and their attributes
    --how clone_call  the same with a model class that has its own __call__
    --how compiled_step  @torch.compile on a whole train step (forward,
                   backward, optimizer.step()): Dynamo's counters
    --how gc       a model that no frame holds (built and kept in a
                   module's attribute, trained through a helper that
                   receives only a closure), so zero-edit tracing falls back
                   to searching the process's objects; stderr is compared
"""
import argparse
import gc
import json
import os
import sys
import weakref

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--how", required=True)
p.add_argument("--steps", type=int, default=6)
p.add_argument("--out", required=True)
a = p.parse_args()

events = []


def watch(name, obj):
    weakref.finalize(obj, events.append, "freed " + name)


class Net(nn.Module):
    def __init__(self, out=1):
        super().__init__()
        self.body = nn.Linear(16, 32)
        self.head = nn.Linear(32, out)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


class CallNet(Net):
    def __call__(self, *args, **kwargs):         # a class with its own __call__
        return super().__call__(*args, **kwargs)


def train(model, other, steps, step_cm):
    """One model trained, another (a teacher) run beside it; a second
    optimizer from step 3 on. Every tensor the loop drops is watched."""
    g = torch.Generator().manual_seed(1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        events.append("step %d" % step)
        if step == 3:
            opt = torch.optim.Adam(model.parameters(), lr=0.001)
            events.append("new optimizer")
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 1, generator=g)
        watch("x%d" % step, x)
        with step_cm(model):
            opt.zero_grad()
            out = model(x)
            watch("out%d" % step, out)
            loss = ((out - y) ** 2).mean() + 0 * other(x).sum()
            watch("loss%d" % step, loss)
            if step == 0:
                buf = torch.zeros(5 * 1024 * 1024)      # 20 MB, dropped after step 1
                watch("buf", buf)
            if step == 1:
                del buf
                events.append("del buf")
            loss.backward()
            opt.step()
    events.append("loop done")
    return round(loss.item(), 6)


def memory(manual):
    import contextlib
    step_cm = lambda m: contextlib.nullcontext()       # noqa: E731
    if manual:                  # run by lifetimes_manual.py, which imports it
        traceml = sys.modules["traceml_ai"]
        traceml.init(mode="auto")
        step_cm = traceml.trace_step
    torch.manual_seed(0)
    model, other = Net(), Net()
    other.requires_grad_(False)
    # two optimizers of one model that the trace_step bracket did not name
    # (manual): the second one is found beside it at step 3
    loss = train(model, other, a.steps, step_cm)
    events.append("returned")
    gc.collect()
    events.append("collected")
    return {"events": events, "loss": loss}


def clone(cls):
    torch.manual_seed(0)
    model = cls()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        x = torch.randn(3, 16, generator=g)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    # clone by __dict__ (as some fine-tuning code does), new head
    new = cls.__new__(cls)
    new.__dict__.update(model.__dict__)
    new._modules = dict(model._modules)
    new.head = nn.Linear(32, 2)
    x = torch.randn(3, 16, generator=g)
    return {"clone_shape": list(new(x).shape), "model_shape": list(model(x).shape),
            "clone_dict": sorted(k for k in vars(new) if not k.startswith("_modules")),
            "model_dict": sorted(vars(model)),
            "clone_compiled_call": repr(getattr(new, "_compiled_call_impl", None))}


def compiled_step():
    import torch._dynamo.utils as du
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(len(gm.graph.nodes))
        return gm.forward

    @torch.compile(backend=backend)
    def train_step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(a.steps):
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 1, generator=g)
        losses.append(round(train_step(x, y).item(), 6))
    c = du.counters
    return {"losses": losses, "graphs": graphs,
            "graph_breaks": sum(c["graph_break"].values()),
            "unique_graphs": c["stats"]["unique_graphs"],
            "calls_captured": c["stats"]["calls_captured"],
            "frames": c["frames"]["total"], "frames_ok": c["frames"]["ok"],
            "break_reasons": sorted(c["graph_break"]),
            "counters": {k: {str(n): v for n, v in sorted(d.items())}
                         for k, d in sorted(c.items()) if k != "graph_break"}}


class _Holder(object):
    pass


HOLDER = _Holder()


def by_gc():
    """The model lives only in an attribute of an object no frame names
    (nor one attribute down: two down), trained by a closure: zero-edit
    tracing's frame search finds none and falls back to gc."""
    torch.manual_seed(0)
    HOLDER.inner = _Holder()
    HOLDER.inner.model = Net()
    opt = torch.optim.SGD(HOLDER.inner.model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)

    def step():
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 1, generator=g)
        loss = ((HOLDER.inner.model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return round(loss.item(), 6)
    return {"losses": [step() for _ in range(a.steps)]}


if a.how in ("memory", "manual"):
    res = memory(a.how == "manual")
elif a.how == "clone":
    res = clone(Net)
elif a.how == "clone_call":
    res = clone(CallNet)
elif a.how == "compiled_step":
    res = compiled_step()
elif a.how == "gc":
    res = by_gc()
else:
    sys.exit("unknown --how")
print(json.dumps(res))
with open(a.out, "w") as f:
    json.dump(res, f)
