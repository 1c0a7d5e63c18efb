"""What each installed patch costs a call, in one process (min of 7 x 2000).

    OMP_NUM_THREADS=1 TRACEML_LOGS_DIR=/tmp/glue .venv/bin/python bench/glue_costs.py

Times, with auto mode's patches in place and with the originals put back
(traceml_ai._patched keeps them): a DataLoader __next__, forward+backward of
Linear(4, 4) (the Tensor.backward and autograd.backward wrappers), a
CPU-to-CPU .to(), and an empty trace_step. docs/performance.md ("What the
summary says TraceML costs") quotes it.
"""
import time, torch, os
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import traceml_ai as traceml
os.environ.setdefault("TRACEML_LOGS_DIR", "/tmp/x/gluelogs")
traceml.init(mode="auto")
model = nn.Linear(4, 4); opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(1, 4)
ds = TensorDataset(torch.randn(100000, 4), torch.randn(100000, 4))
def tmin(fn, n=2000, r=7):
    best = 1e18
    for _ in range(r):
        t = time.perf_counter_ns()
        for _ in range(n): fn()
        best = min(best, (time.perf_counter_ns() - t) / n)
    return best
orig = {(o.__name__ if hasattr(o,'__name__') else str(o)) + "." + a: f for o, a, f in traceml._patched}
print(sorted(orig))
# (a) DataLoader next
it = iter(DataLoader(ds, batch_size=1))
dl_iter_cls = type(it).__mro__[1]
patched_next = dl_iter_cls.__next__
a1 = tmin(lambda: next(it))
dl_iter_cls.__next__ = orig["_BaseDataLoaderIter.__next__"]
a0 = tmin(lambda: next(it))
dl_iter_cls.__next__ = patched_next
print("dataloader next: +%.0f ns (%.0f -> %.0f)" % (a1 - a0, a0, a1))
# (b) backward
def bw():
    model(x).sum().backward()
b1 = tmin(bw, 500)
pt = torch.Tensor.backward; pa = torch.autograd.backward
torch.Tensor.backward = orig["Tensor.backward"]; torch.autograd.backward = orig["torch.autograd.backward"] if "torch.autograd.backward" in orig else orig.get("autograd.backward", pa)
b0 = tmin(bw, 500)
torch.Tensor.backward = pt; torch.autograd.backward = pa
print("forward+backward: +%.0f ns" % (b1 - b0))
# (c) .to
t1 = tmin(lambda: x.to("cpu"))
pto = torch.Tensor.to; torch.Tensor.to = orig["Tensor.to"]
t0 = tmin(lambda: x.to("cpu"))
torch.Tensor.to = pto
print(".to('cpu'): +%.0f ns" % (t1 - t0))
# (d) trace_step
def ts():
    with traceml.trace_step(model):
        pass
print("empty trace_step: %.0f ns" % tmin(ts))
