"""The live views' training: INPUT-BOUND by construction (each batch sleeps
--delay-ms, the model takes ~1 ms), printing a line every 20 steps to stdout
and one every 100 to stderr, so the terminal view's output panel has
something to show. Runs --steps steps."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "examples", "diagnosis"))
import torch  # noqa: E402
from torch import nn  # noqa: E402

import traceml_ai as traceml  # noqa: E402
import _common as c  # noqa: E402


def main():
    a = c.parse(steps=1500, delay_ms=8, description=__doc__)
    traceml.init(mode="auto")
    loader = c.slow_loader(c.dataset(a.steps, 32), 32, a.delay_ms / 1000.0)
    model = c.mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for i, (x, y) in enumerate(loader):
        with traceml.trace_step(model):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if i % 20 == 0:
            print("train step %d loss %.4f" % (i, loss.item()))
        if i % 100 == 0:
            print("stderr line at step %d" % i, file=sys.stderr)
    print("LIVE TRAINING DONE")


if __name__ == "__main__":
    main()
