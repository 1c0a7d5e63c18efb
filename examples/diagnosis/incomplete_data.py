"""INCOMPLETE DATA: the loop calls model.forward(x) directly, which bypasses
nn.Module.__call__ and so every forward hook. Expected: INCOMPLETE DATA
naming Forward (call model(x) instead)."""
import torch
from torch import nn

import traceml_ai as traceml
import _common as c


def main():
    a = c.parse(steps=100, delay_ms=0, description=__doc__)
    traceml.init(mode="auto")
    loader = c.fast_loader(c.dataset(a.steps, 32), 32)
    model = c.mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for x, y in loader:
        with traceml.trace_step(model):
            loss = loss_fn(model.forward(x), y)     # the mistake
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
