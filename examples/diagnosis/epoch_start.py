"""EPOCH START: a DataLoader with worker processes (num_workers=2) and no
persistent_workers starts its workers again every epoch, and each worker
takes --delay-ms to get ready (a dataset that loads an index, opens files
or imports heavy modules when a worker starts: worker_init_fn sleeps).
Short epochs (--steps-per-epoch) make that start-up a large share of the
run while the steady-state steps are fast. Expected: EPOCH START with the
wait per epoch start close to the injected delay, the steady-state figures
free of it (no INPUT-BOUND), and "persistent_workers=True" in Next;
--persistent: no EPOCH START. It prints what each epoch's start took, from
the previous epoch's last step (its workers shut down, the new ones
start) to the new epoch's first batch ("epoch start ms: ..."), and the
loader's own part of it, from making the iterator to its first batch
("loader start ms: ...").

--validate-ms: before each epoch after the first, the script validates as
pytorch/examples' imagenet does, on a loader of its own with two workers
(each batch's evaluation sleeps), and saves a checkpoint: its own time,
which TraceML must count as Untraced time between epochs, not as the
training loader's start ("between epochs ms: ..." per epoch).
"""
import os
import tempfile
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import traceml_ai as traceml
import _common as c


def slow_worker_start(worker_id):
    time.sleep(float(torch.utils.data.get_worker_info().dataset.delay_s))


class Data(TensorDataset):
    delay_s = 0.0


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--steps-per-epoch", type=int, default=20)
    p.add_argument("--delay-ms", type=float, default=300.0)
    p.add_argument("--persistent", action="store_true")
    p.add_argument("--validate-ms", type=float, default=0.0,
                   help="validation before each epoch after the first (and a checkpoint)")
    a = p.parse_args()
    traceml.init(mode="auto")
    torch.manual_seed(0)
    n = a.steps_per_epoch * 32
    data = Data(torch.randn(n, 64), torch.randint(0, 10, (n,)))
    data.delay_s = a.delay_ms / 1000.0
    loader = DataLoader(data, batch_size=32, num_workers=2, worker_init_fn=slow_worker_start,
                        persistent_workers=a.persistent)
    model = c.mlp(width=1024, depth=4)   # ~5 ms a step: the workers keep up
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    starts, own, between = [], [], []
    last_step_end = time.perf_counter()
    for epoch in range(a.epochs):
        if epoch and a.validate_ms:
            t = time.perf_counter()
            validate(model, a.validate_ms / 1000.0)
            checkpoint(model, opt)
            between.append(1000 * (time.perf_counter() - t))
        first = True
        made = time.perf_counter()
        for x, y in iter(loader):
            if first:
                now = time.perf_counter()
                starts.append(1000 * (now - last_step_end))
                own.append(1000 * (now - made))
                first = False
            with traceml.trace_step(model):
                loss = loss_fn(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            last_step_end = time.perf_counter()
        print("epoch %d loss %.3f" % (epoch, loss.item()), flush=True)
    print("epoch start ms: " + " ".join("%.3f" % s for s in starts), flush=True)
    print("loader start ms: " + " ".join("%.3f" % s for s in own), flush=True)
    if between:
        print("between epochs ms: " + " ".join("%.3f" % s for s in between), flush=True)


def validate(model, total_s):
    """Eight batches on a two-worker loader of its own, each evaluated for
    total_s / 8 (a forward under no_grad, then a sleep: a larger model)."""
    data = TensorDataset(torch.randn(8 * 32, 64), torch.randint(0, 10, (8 * 32,)))
    model.eval()
    with torch.no_grad():
        for x, _ in DataLoader(data, batch_size=32, num_workers=2):
            model(x)
            time.sleep(total_s / 8)
    model.train()


def checkpoint(model, opt):
    with tempfile.TemporaryDirectory() as d:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()},
                   os.path.join(d, "checkpoint.pt"))


if __name__ == "__main__":
    main()
