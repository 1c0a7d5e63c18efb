"""Loops that make more than one optimizer, with no TraceML in them:

    --case lrfinder   an LR range test (20 steps, its own optimizer, then
                      dropped), then the real training (100 steps)
    --case phases     fine-tuning in two phases: 30 SGD steps on the head,
                      then 50 Adam steps on everything
    --case epochs     a new optimizer every epoch (5 x 20 steps)
    --case kept       like lrfinder, but the finder's optimizer is kept alive
    --case models     a model and its optimizer trained (50 steps), dropped,
                      then a new model and optimizer (50 steps)

Writes to --out the optimizer steps it made and whether every optimizer (and
model) it dropped was freed (TraceML must hold no reference to them).
"""
import argparse
import gc
import json
import weakref

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--case", default="lrfinder")
p.add_argument("--out", required=True)
a = p.parse_args()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                      nn.Linear(1024, 10))
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
steps, refs, kept = 0, [], []


def train(opt, n):
    global steps
    for _ in range(n):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        steps += 1


def dropped_later(opt):
    """opt is dropped by the script after this: was it freed? (at the end)"""
    refs.append(weakref.ref(opt))


if a.case in ("lrfinder", "kept"):
    finder = torch.optim.Adam(model.parameters(), lr=1e-7)
    sched = torch.optim.lr_scheduler.LambdaLR(finder, lambda i: 1.5 ** i)
    for _ in range(20):
        train(finder, 1)
        sched.step()
    if a.case == "kept":
        kept.append(finder)
    else:
        dropped_later(finder)
    del finder, sched
    train(torch.optim.Adam(model.parameters(), lr=1e-3), 100)
elif a.case == "phases":
    head = torch.optim.SGD(model[-1].parameters(), lr=0.01)
    train(head, 30)
    dropped_later(head)
    del head
    train(torch.optim.Adam(model.parameters(), lr=1e-3), 50)
elif a.case == "models":
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    train(opt, 50)
    dropped_later(opt)
    dropped_later(model)
    del opt
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    train(torch.optim.Adam(model.parameters(), lr=1e-3), 50)
elif a.case == "epochs":
    for epoch in range(5):
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        train(opt, 20)
        dropped_later(opt)
        del opt
gc.collect()
print("optimizer steps: %d" % steps)
with open(a.out, "w") as f:
    json.dump({"steps": steps, "dropped_freed": [r() is None for r in refs]}, f)
