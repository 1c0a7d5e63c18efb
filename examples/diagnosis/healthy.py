"""A healthy run: fast loader, moderate model, nothing in the step but the
step. Expected: no WARNING or CRITICAL verdict (COMPUTE-BOUND INFO or
BALANCED). The fetch, a gather of 128 random rows, takes about 0.27 ms
on a 2-core VM, under 5% of the 768-wide model's 5.7 ms step: beside busy
loops both about double, far from INPUT-BOUND's 10% (512 wide it was 8%,
and 12% beside three busy loops)."""
import torch
from torch import nn

import traceml_ai as traceml
import _common as c


def main():
    a = c.parse(steps=120, delay_ms=0, description=__doc__)
    traceml.init(mode="auto")
    loader = c.fast_loader(c.dataset(a.steps, 128, dim=256), 128)
    model = c.mlp(dim=256, width=768, depth=2)
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
