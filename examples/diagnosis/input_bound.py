"""INPUT-BOUND: every batch takes --delay-ms (default 8 ms) to load, the
model ~1 ms. Expected: INPUT-BOUND (CRITICAL), Input Wait ~ delay."""
import torch
from torch import nn

import traceml_ai as traceml
import _common as c


def main():
    a = c.parse(steps=150, delay_ms=8, description=__doc__)
    traceml.init(mode="auto")
    loader = c.slow_loader(c.dataset(a.steps, 32), 32, a.delay_ms / 1000.0)
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
