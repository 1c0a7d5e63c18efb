"""The training raises mid-run: its traceback appears as usual, the summary
of the steps done so far is still written, and the exit code is the
script's (1). --steps is the step that raises (default 40)."""
import torch
from torch import nn

import traceml_ai as traceml
import _common as c


def main():
    a = c.parse(steps=40, delay_ms=0, description=__doc__)
    traceml.init(mode="auto")
    loader = c.fast_loader(c.dataset(a.steps + 10, 32), 32)
    model = c.mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i, (x, y) in enumerate(loader):
        with traceml.trace_step(model):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i == a.steps:
                raise RuntimeError("injected failure at step %d" % i)


if __name__ == "__main__":
    main()
