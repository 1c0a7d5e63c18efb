"""A small PyTorch Ignite training traced by TraceML's Ignite handler, with
injectable causes (tests/e2e/test_integrations_ignite.py).

    traceml run examples/integrations/ignite_train.py --delay-ms 20
    traceml run examples/integrations/ignite_train.py --loop supervised --accum 2
    python examples/integrations/ignite_train.py          # summary at exit

--loop custom (default): an Engine on a hand-written process function that
uses the module-level `model` (the handler is given no model and finds it
from the optimizer); --loop supervised: ignite's create_supervised_trainer
(gradient_accumulation_steps=--accum), the handler given the model. The
model is a tiny MLP whose forward also waits --device-ms (default 10 ms),
a stand-in for the accelerator time of a real model. Injected cause, exact:

  --delay-ms D        the DataLoader's collate_fn sleeps D ms per batch

--epochs E splits the batches over E epochs; --iterable feeds the engine a
plain generator-backed iterable without len() instead of the DataLoader
(each epoch then ends in a fetch that raises StopIteration); --api none
trains without TraceML. Prints "optimizer steps: N" at the end.
"""
import argparse
import os
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40, help="optimizer steps in all")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--device-ms", type=float, default=10.0)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--loop", choices=("custom", "supervised"), default="custom")
    p.add_argument("--iterable", action="store_true", help="an iterable without len()")
    p.add_argument("--api", choices=("handler", "none"), default="handler")
    return p.parse_args()


def sleep_ms(ms):
    """Sleeps ms milliseconds (the tests compare with what it really slept)."""
    if ms > 0:
        time.sleep(ms / 1000.0)


a = parse()
import torch                                             # noqa: E402
from torch import nn                                     # noqa: E402
from torch.utils.data import DataLoader, TensorDataset   # noqa: E402
from torch.utils.data import default_collate             # noqa: E402
from ignite.engine import Engine, create_supervised_trainer   # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))

    def forward(self, x):
        sleep_ms(a.device_ms)
        return self.mlp(x)


class Batches(object):
    """An iterable without len(): the DataLoader's batches, re-iterable."""

    def __init__(self, loader):
        self.loader = loader

    def __iter__(self):
        for b in self.loader:
            yield b


torch.set_num_threads(1)
torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()


def train_step(engine, batch):
    """The hand-written loop: one optimizer update per --accum iterations."""
    model.train()
    x, y = batch
    loss = loss_fn(model(x), y) / a.accum
    loss.backward()
    if engine.state.iteration % a.accum == 0:
        optimizer.step()
        optimizer.zero_grad()
    return loss.item()


def main():
    per_epoch = a.steps * a.accum // a.epochs
    assert per_epoch * a.epochs == a.steps * a.accum, "--epochs must divide steps x accum"
    g = torch.Generator().manual_seed(0)
    n = per_epoch * a.batch
    data = TensorDataset(torch.randn(n, 64, generator=g), torch.randint(0, 10, (n,), generator=g))

    def slow_collate(batch):
        sleep_ms(a.delay_ms)
        return default_collate(batch)

    loader = DataLoader(data, batch_size=a.batch, shuffle=False, num_workers=0,
                        collate_fn=slow_collate)
    updates = []
    optimizer.register_step_post_hook(lambda *args: updates.append(1))
    if a.loop == "supervised":
        trainer = create_supervised_trainer(model, optimizer, loss_fn,
                                            gradient_accumulation_steps=a.accum)
    else:
        trainer = Engine(train_step)
    if a.api != "none":
        from traceml_ai.integrations.ignite import TraceMLHandler
        TraceMLHandler(model if a.loop == "supervised" else None).attach(trainer)
    if a.iterable:
        trainer.run(Batches(loader), max_epochs=a.epochs)
    else:
        trainer.run(loader, max_epochs=a.epochs)
    print("optimizer steps: %d" % len(updates), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
