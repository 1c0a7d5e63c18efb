"""INCOMPLETE DATA: the loop brackets its steps with trace_step() but does
not say which model it trains, so nothing times the forward. Expected:
INCOMPLETE DATA naming Forward (pass the model: trace_step(model)), or,
when another verdict fires, that verdict with the missing Forward as its
caveat."""
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
        with traceml.trace_step():                  # the mistake: no model
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
