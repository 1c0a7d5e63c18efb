"""RESIDUAL-HEAVY: inside each step, --delay-ms (default 5 ms) of work that
no phase covers (a stand-in for a CPU stall or logging). Expected:
RESIDUAL-HEAVY (CRITICAL), Residual ~ delay."""
import torch
from torch import nn

import traceml_ai as traceml
import _common as c


def main():
    a = c.parse(steps=150, delay_ms=5, description=__doc__)
    traceml.init(mode="auto")
    loader = c.fast_loader(c.dataset(a.steps, 32), 32)
    model = c.mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for x, y in loader:
        with traceml.trace_step(model):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            c.sleep_ms(a.delay_ms)          # untimed work inside the step
            opt.step()


if __name__ == "__main__":
    main()
