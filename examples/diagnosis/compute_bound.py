"""COMPUTE-BOUND: a wide MLP on a batch fetched in microseconds. Expected:
COMPUTE-BOUND (INFO), Input Wait and Residual near zero."""
import torch
from torch import nn

import traceml_ai as traceml
import _common as c


def main():
    a = c.parse(steps=60, delay_ms=0, description=__doc__)
    traceml.init(mode="auto")
    loader = c.fast_loader(c.dataset(a.steps, 128, dim=256), 128)
    model = c.mlp(dim=256, width=768, depth=2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    for x, y in loader:
        with traceml.trace_step(model):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
