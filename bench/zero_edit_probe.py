"""Zero-edit tracing's cost per step against marked steps and against no
TraceML (docs/performance.md, "Zero-edit tracing"): a batch-1
nn.Linear(4, 1) loop with a DataLoader, no TraceML in it. Prints the
fastest 250-step block's training-thread CPU time per step (µs) on stderr.

    for i in 1 2 3 4; do
      OMP_NUM_THREADS=1 .venv/bin/traceml run --disable-traceml bench/zero_edit_probe.py
      OMP_NUM_THREADS=1 .venv/bin/traceml run bench/zero_edit_probe.py
      OMP_NUM_THREADS=1 .venv/bin/traceml run bench/zero_edit_probe_marked.py
    done 2>&1 | grep RESULT
"""
import os, time, statistics, sys
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
N = 4000
x = torch.randn(N, 4); y = torch.randn(N, 1)
loader = DataLoader(TensorDataset(x, y), batch_size=1)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
lf = nn.MSELoss()
MARKED = False
blocks, t0, i = [], time.thread_time_ns(), 0
for xb, yb in loader:
    if True:
        loss = lf(model(xb), yb); opt.zero_grad(); loss.backward(); opt.step()
    i += 1
    if i % 250 == 0:
        t = time.thread_time_ns(); blocks.append((t - t0) / 250 / 1000); t0 = t
print("RESULT %.2f" % min(blocks[2:]), file=sys.stderr)
