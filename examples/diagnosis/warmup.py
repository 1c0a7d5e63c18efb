"""WARMUP: a single step is not enough to diagnose. Expected: WARMUP
(step time) and no bottleneck claimed."""
import torch
from torch import nn

import traceml_ai as traceml
import _common as c


def main():
    a = c.parse(steps=1, delay_ms=0, description=__doc__)
    traceml.init(mode="auto")
    loader = c.fast_loader(c.dataset(a.steps, 32), 32)
    model = c.mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in loader:
        with traceml.trace_step(model):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
