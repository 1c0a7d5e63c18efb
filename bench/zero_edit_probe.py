"""Zero-edit tracing's cost per step against marked steps and against no
TraceML (docs/performance.md, "Zero-edit tracing"): a batch-1
nn.Linear(4, 1) loop with a DataLoader, no TraceML in it. Prints the
fastest 250-step block's training-thread CPU time per step (µs) on stderr.
bench/zero_edit_probe_marked.py runs the same loop with init() and
trace_step(model).

    for i in 1 2 3 4; do
      OMP_NUM_THREADS=1 .venv/bin/traceml run --disable-traceml bench/zero_edit_probe.py
      OMP_NUM_THREADS=1 .venv/bin/traceml run bench/zero_edit_probe.py
      OMP_NUM_THREADS=1 .venv/bin/traceml run bench/zero_edit_probe_marked.py
    done 2>&1 | grep RESULT
"""
import contextlib
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def run(step=lambda model: contextlib.nullcontext(), steps=4000, block=250):
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(steps, 4), torch.randn(steps, 1)), batch_size=1)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()
    blocks, t0 = [], time.thread_time_ns()
    for i, (x, y) in enumerate(loader, 1):
        with step(model):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if i % block == 0:
            t = time.thread_time_ns()
            blocks.append((t - t0) / block / 1000)
            t0 = t
    print("RESULT %.2f" % min(blocks[2:]), file=sys.stderr)


if __name__ == "__main__":
    run()
