"""A loader whose fetch waits (storage, network, decoding that releases the
GIL): each sample's __getitem__ sleeps --fetch-sleep-ms (default 5 ms), a
batch of --batch (16) samples ~80 ms, using almost no CPU; the model ~1 ms.
Expected: INPUT-BOUND (CRITICAL). Workers are not only cores: since the
fetch waits, N workers fetch N batches at once even on fewer cores, so
num_workers=2 about halves the step on 2 cores and more workers than cores
pay further (`traceml tune` plans its worker counts from the fetch's CPU
share, docs/tune.md)."""
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import traceml_ai as traceml
import _common as c


class Waiting(Dataset):
    def __init__(self, n, sleep_s, dim=64, classes=10):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, dim, generator=g)
        self.y = torch.randint(0, classes, (n,), generator=g)
        self.sleep_s = sleep_s

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(self.sleep_s)   # the storage's (or network's) latency
        return self.x[i], self.y[i]


def main():
    p = c.parser(steps=300, delay_ms=0, description=__doc__)
    p.add_argument("--fetch-sleep-ms", type=float, default=5.0)
    p.add_argument("--batch", type=int, default=16)
    a = p.parse_args()
    traceml.init(mode="auto")
    ds = Waiting(a.steps * a.batch, a.fetch_sleep_ms / 1000.0)
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=0)
    model = c.mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for x, y in loader:
        with traceml.trace_step(model):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
