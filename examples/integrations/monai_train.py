"""A small MONAI SupervisedTrainer run traced by TraceML's MONAI handler,
with injectable causes (tests/e2e/test_integrations_monai.py).

    traceml run examples/integrations/monai_train.py --delay-ms 20
    traceml run examples/integrations/monai_train.py --accum 2 --epochs 2
    python examples/integrations/monai_train.py          # summary at exit

The network is a tiny MLP on synthetic dict data ({"image", "label"}, as
MONAI's transforms produce); its forward also waits --device-ms (default
10 ms), a stand-in for the accelerator time of a real model, so that
MONAI's and Ignite's own per-iteration Python stays a small share of a
step on a loaded CPU. Injected cause, exact:

  --delay-ms D        the DataLoader's collate_fn sleeps D ms per batch

--accum K sets SupervisedTrainer(accumulation_steps=K) (one TraceML step
per optimizer update, K iterations each); --epochs E splits the batches
over E epochs; --thread-loader uses MONAI's ThreadDataLoader (batches
prepared on a thread while the step computes); --api init+handler calls TraceML 0.5.0's
traceml_ai.integrations.monai.init() first; --api none trains without
TraceML (the same run, untraced). Prints "optimizer steps: N" (counted by
a hook on the optimizer) at the end.
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
    p.add_argument("--workers", type=int, default=0, help="DataLoader num_workers")
    p.add_argument("--thread-loader", action="store_true",
                   help="monai.data.ThreadDataLoader (batches fetched on a thread)")
    p.add_argument("--api", choices=("handler", "init+handler", "none"), default="handler")
    return p.parse_args()


def sleep_ms(ms):
    """Sleeps ms milliseconds (the tests compare with what it really slept)."""
    if ms > 0:
        time.sleep(ms / 1000.0)


def main():
    a = parse()
    import torch
    from torch import nn
    from monai.data import DataLoader, Dataset, ThreadDataLoader, list_data_collate
    from monai.engines import SupervisedTrainer

    if a.api != "none":
        from traceml_ai.integrations import monai as traceml_monai
        if a.api == "init+handler":
            traceml_monai.init()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    per_epoch = a.steps * a.accum // a.epochs
    assert per_epoch * a.epochs == a.steps * a.accum, "--epochs must divide steps x accum"
    g = torch.Generator().manual_seed(0)
    items = [{"image": torch.randn(64, generator=g),
              "label": torch.randint(0, 10, (), generator=g)}
             for _ in range(per_epoch * a.batch)]

    def slow_collate(batch):
        sleep_ms(a.delay_ms)
        return list_data_collate(batch)

    loader = (ThreadDataLoader if a.thread_loader else DataLoader)(
        Dataset(items), batch_size=a.batch, shuffle=False, num_workers=a.workers,
        collate_fn=slow_collate)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))

        def forward(self, x):
            sleep_ms(a.device_ms)
            return self.mlp(x)

    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    updates = []
    opt.register_step_post_hook(lambda *args: updates.append(1))
    handlers = [] if a.api == "none" else [traceml_monai.TraceMLHandler()]
    trainer = SupervisedTrainer(
        device=torch.device("cpu"), max_epochs=a.epochs, train_data_loader=loader,
        network=net, optimizer=opt, loss_function=nn.CrossEntropyLoss(),
        train_handlers=handlers, accumulation_steps=a.accum)
    trainer.run()
    print("optimizer steps: %d" % len(updates), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
