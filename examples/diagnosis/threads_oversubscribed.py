"""Intra-op threads set for a larger host: the script calls
torch.set_num_threads(--threads, default 8 × this host's CPUs), and its
layers are small (128 wide), so each op's parallel region waits for
threads the cores cannot all run at once. Expected: COMPUTE-BOUND with the
host's CPU busy; `traceml tune` measures fewer threads as a large gain
(docs/diagnosis.md §6)."""
import os

import torch
from torch import nn

import traceml_ai as traceml
import _common as c


def main():
    p = c.parser(steps=150, delay_ms=0, description=__doc__)
    p.add_argument("--threads", type=int, default=8 * (os.cpu_count() or 1))
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    traceml.init(mode="auto")
    loader = c.fast_loader(c.dataset(a.steps, 128, dim=128), 128)
    model = c.mlp(dim=128, width=128, depth=8)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for x, y in loader:
        with traceml.trace_step(model):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
