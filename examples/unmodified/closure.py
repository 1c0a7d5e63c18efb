"""A plain loop with a closure optimizer (LBFGS: forward and backward run
inside optimizer.step(closure)), no TraceML in it (zero-edit tracing,
docs/zero-edit.md). Each phase must be counted once: Forward, Backward and
Optimizer add up to no more than the step.
"""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, default_collate


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--delay-ms", type=float, default=2.0)
    a = p.parse_args()
    torch.manual_seed(0)
    x = torch.randn(a.steps * 64, 32)
    y = x @ torch.randn(32, 1)

    def collate(samples):
        time.sleep(a.delay_ms / 1000.0)
        return default_collate(samples)

    loader = DataLoader(TensorDataset(x, y), batch_size=64, collate_fn=collate)
    model = nn.Sequential(nn.Linear(32, 256), nn.Tanh(), nn.Linear(256, 1))
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
    loss_fn = nn.MSELoss()
    for inputs, targets in loader:
        def closure():
            opt.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            return loss
        loss = opt.step(closure)
    print("loss %.4f" % loss.item(), flush=True)


if __name__ == "__main__":
    main()
