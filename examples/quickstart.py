"""TraceML quickstart: a small training whose DataLoader is deliberately slow.

    traceml run examples/quickstart.py        # or: python3 examples/quickstart.py

Every batch takes ~10 ms to collate (a stand-in for slow decoding or
augmentation, with num_workers=0), while the model needs ~1 ms per step, so
the run ends with `Verdict: INPUT-BOUND (CRITICAL)`. Only the three lines
marked "TraceML" are added to an ordinary PyTorch loop.

Knobs (environment): QUICKSTART_STEPS (default 300), QUICKSTART_DELAY_MS
(default 10), QUICKSTART_FIXED=1 (the loader fixed: the slow per-batch work
is done once up front and cached, so batches are ready at once; compare
the two runs with `traceml compare`, docs/compare.md).
"""
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, default_collate

import traceml_ai as traceml                      # TraceML

STEPS = int(os.environ.get("QUICKSTART_STEPS", "300"))
DELAY_S = float(os.environ.get("QUICKSTART_DELAY_MS", "10")) / 1000.0
FIXED = os.environ.get("QUICKSTART_FIXED", "") not in ("", "0")


def slow_collate(samples):
    time.sleep(DELAY_S)            # the bottleneck TraceML should find
    return default_collate(samples)


def main():
    traceml.init(mode="auto")                     # TraceML
    torch.manual_seed(0)
    x = torch.randn(STEPS * 32, 64)
    y = (x[:, :10].sum(dim=1) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True,
                        num_workers=0, collate_fn=slow_collate)
    if FIXED:
        # The fix: pay for the slow collation once, up front, and serve the
        # cached batches (a stand-in for pre-processed data or more workers).
        cached = list(DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True,
                                 num_workers=0, collate_fn=default_collate))
        loader = DataLoader(cached, batch_size=None, shuffle=False, num_workers=0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(),
                          nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    for step, (inputs, targets) in enumerate(loader):
        with traceml.trace_step(model):           # TraceML
            logits = model(inputs)
            loss = loss_fn(logits, targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if step % 100 == 0:
            print("step %4d  loss %.4f" % (step, loss.item()), flush=True)


if __name__ == "__main__":
    main()
