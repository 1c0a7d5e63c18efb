"""bench/zero_edit_probe.py's loop with init() and trace_step(model): the
marked steps zero-edit tracing is compared with."""
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
MARKED = True
if MARKED:
    import traceml_ai as traceml
    traceml.init(mode="auto")
blocks, t0, i = [], time.thread_time_ns(), 0
for xb, yb in loader:
    if MARKED:
        with traceml.trace_step(model):
            loss = lf(model(xb), yb); opt.zero_grad(); loss.backward(); opt.step()
    else:
        loss = lf(model(xb), yb); opt.zero_grad(); loss.backward(); opt.step()
    i += 1
    if i % 250 == 0:
        t = time.thread_time_ns(); blocks.append((t - t0) / 250 / 1000); t0 = t
print("RESULT %.2f" % min(blocks[2:]), file=sys.stderr)
