"""Untraced time: after every step, --delay-ms (default 10 ms) of work
outside the bracket (a stand-in for logging, validation or checkpoints).
Expected: Untraced ~ delay per step; the step itself looks healthy, and the
run's verdict is UNTRACED-HEAVY (most of the wall-clock is between steps)."""
import torch
from torch import nn

import traceml_ai as traceml
import _common as c


def main():
    a = c.parse(steps=120, delay_ms=10, description=__doc__)
    traceml.init(mode="auto")
    loader = c.fast_loader(c.dataset(a.steps, 64, dim=128), 64)
    model = c.mlp(dim=128, width=256)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for x, y in loader:
        with traceml.trace_step(model):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        c.sleep_ms(a.delay_ms)              # outside every bracket


if __name__ == "__main__":
    main()
