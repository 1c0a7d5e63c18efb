"""A plain PyTorch training script, with no TraceML in it: run it as is
with `traceml run examples/unmodified/train.py` (zero-edit tracing,
docs/zero-edit.md). Its DataLoader sleeps --delay-ms per batch (a slow
transform, num_workers=0), so the run is INPUT-BOUND; every --eval-every
steps it evaluates under torch.no_grad(), which is not a training step.
--accum N accumulates gradients over N batches per optimizer step;
--manual-update replaces the optimizer with a hand-written SGD update.
"""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, default_collate


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--delay-ms", type=float, default=10.0)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--manual-update", action="store_true")
    a = p.parse_args()

    torch.manual_seed(0)
    x = torch.randn(a.steps * 32, 64)
    y = (x[:, :10].sum(dim=1) > 0).long()

    def slow_collate(samples):
        time.sleep(a.delay_ms / 1000.0)
        return default_collate(samples)

    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True,
                        collate_fn=slow_collate)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    optimizer = None if a.manual_update else torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    for step, (inputs, targets) in enumerate(loader):
        model.train()
        loss = loss_fn(model(inputs), targets) / a.accum
        loss.backward()
        if a.manual_update:
            with torch.no_grad():
                for w in model.parameters():
                    w -= 0.05 * w.grad
                    w.grad = None
        elif (step + 1) % a.accum == 0:
            optimizer.step()
            optimizer.zero_grad()
        if a.eval_every and (step + 1) % a.eval_every == 0:
            model.eval()
            with torch.no_grad():
                acc = (model(x[:512]).argmax(dim=1) == y[:512]).float().mean().item()
            print("step %d  loss %.3f  accuracy %.2f" % (step + 1, loss.item(), acc), flush=True)


if __name__ == "__main__":
    main()
