"""Memory creep: every step keeps a reference to a fresh --mib-per-step MiB
tensor (like appending outputs or losses to a list without .item() or
.detach()). Expected: STEP MEMORY: MEMORY CREEP, with a growth per step
close to the injected amount (on the CPU the analysis runs on per-step
RSS). Pass TRACEML_THRESHOLDS=creep_mb=N to fire below the 1 GiB default."""
import argparse
import os

import torch
from torch import nn

import traceml_ai as traceml
import _common as c


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=int(os.environ.get("TRACEML_EX_STEPS", 120)))
    p.add_argument("--mib-per-step", type=float, default=4.0)
    a = p.parse_args()
    traceml.init(mode="auto")
    loader = c.fast_loader(c.dataset(a.steps, 64), 64)
    model = c.mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    kept = []
    n = int(a.mib_per_step * 1024 * 1024 / 4)
    for x, y in loader:
        with traceml.trace_step(model):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            kept.append(torch.ones(n))      # written: resident, not just reserved
    print("kept %d tensors, %.0f MiB" % (len(kept), len(kept) * a.mib_per_step))


if __name__ == "__main__":
    main()
