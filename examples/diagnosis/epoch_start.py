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
start) to the new epoch's first batch ("epoch start ms: ...").
"""
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
    starts = []
    last_step_end = time.perf_counter()
    for epoch in range(a.epochs):
        first = True
        for x, y in loader:
            if first:
                starts.append(1000 * (time.perf_counter() - last_step_end))
                first = False
            with traceml.trace_step(model):
                loss = loss_fn(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            last_step_end = time.perf_counter()
        print("epoch %d loss %.3f" % (epoch, loss.item()), flush=True)
    print("epoch start ms: " + " ".join("%.3f" % s for s in starts), flush=True)


if __name__ == "__main__":
    main()
