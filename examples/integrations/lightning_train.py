"""A small Lightning training run traced by TraceML's callback, with
injectable causes (tests/e2e/test_integrations_lightning.py).

    traceml run examples/integrations/lightning_train.py --delay-ms 20 --accum 2
    traceml run examples/integrations/lightning_train.py --devices 2 --slow-rank 1
    python examples/integrations/lightning_train.py          # summary at exit

The model is a tiny MLP on synthetic data; its forward also waits
--device-ms (default 10 ms), a stand-in for the accelerator time of a real
model, so that Lightning's own per-batch bookkeeping stays a small share of
a step on a loaded CPU. Injected causes, all exact:

  --delay-ms D        each batch's __getitem__ sleeps D ms (a slow dataset)
  --slow-rank R       rank R's training_step sleeps --slow-ms longer
  --transfer-ms T     transfer_batch_to_device sleeps T ms (a slow copy),
                      timed as H2D with --time-transfer (on a GPU it is
                      timed anyway)

--accum K sets accumulate_grad_batches (one TraceML step per optimizer
step, K batches each); --devices N > 1 runs DDP on gloo over N CPU
processes (Lightning starts ranks 1..N-1 by running this script again);
--val-every N validates on 4 batches every N training batches (outside
the steps); --pl uses the pytorch_lightning namespace instead of
lightning.pytorch.
"""
import argparse
import os
import sys
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40, help="optimizer steps (max_steps)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--device-ms", type=float, default=10.0)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-ms", type=float, default=20.0)
    p.add_argument("--transfer-ms", type=float, default=0.0)
    p.add_argument("--time-transfer", action="store_true")
    p.add_argument("--val-every", type=int, default=0,
                   help="validate every N batches (val_check_interval), 0: never")
    p.add_argument("--pl", action="store_true", help="import pytorch_lightning")
    p.add_argument("--api", choices=("callback", "init", "init+callback"), default="callback",
                   help="init: TraceML 0.5.0's lightning.init(), which adds the callback "
                   "to every Trainer")
    return p.parse_args()


def sleep_ms(ms):
    """Sleeps ms milliseconds (the tests compare with what it really slept)."""
    if ms > 0:
        time.sleep(ms / 1000.0)


def main():
    a = parse()
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset

    if a.pl:
        import pytorch_lightning as L
        from traceml_ai.integrations import pytorch_lightning as integration
    else:
        import lightning.pytorch as L
        from traceml_ai.integrations import lightning as integration
    TraceMLCallback = integration.TraceMLCallback
    if a.api.startswith("init"):
        integration.init()

    torch.set_num_threads(1)

    class Batches(Dataset):
        """Item i is batch i, whole: one __getitem__ (and one sleep) per batch."""

        def __init__(self, n, batch, dim=64, classes=10):
            g = torch.Generator().manual_seed(0)
            self.x = torch.randn(n, batch, dim, generator=g)
            self.y = torch.randint(0, classes, (n, batch), generator=g)

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            sleep_ms(a.delay_ms)
            return self.x[i], self.y[i]

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))

        def forward(self, x):
            sleep_ms(a.device_ms)
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            if self.global_rank == a.slow_rank:
                sleep_ms(a.slow_ms)
            return nn.functional.cross_entropy(self(x), y)

        def transfer_batch_to_device(self, batch, device, dataloader_idx):
            sleep_ms(a.transfer_ms)
            return super().transfer_batch_to_device(batch, device, dataloader_idx)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", nn.functional.cross_entropy(self(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    # enough batches for every rank's optimizer steps, in one epoch
    n = a.steps * a.accum * a.devices
    loader = DataLoader(Batches(n, a.batch), batch_size=None, shuffle=False, num_workers=0)
    kw = {}
    val = None
    if a.val_every > 0:
        kw["val_check_interval"] = a.val_every
        kw["limit_val_batches"] = 4
        val = DataLoader(Batches(4, a.batch), batch_size=None, num_workers=0)
    if a.devices > 1:
        kw["strategy"] = "ddp"
    trainer = L.Trainer(
        accelerator="cpu", devices=a.devices, max_steps=a.steps,
        accumulate_grad_batches=a.accum,
        callbacks=None if a.api == "init" else
        [TraceMLCallback(time_transfer=True if a.time_transfer else None)],
        enable_progress_bar=False, logger=False, enable_checkpointing=False,
        enable_model_summary=False, **kw)
    trainer.fit(Model(), loader, val)
    if trainer.global_rank == 0:
        print("optimizer steps: %d" % trainer.global_step)
        sys.stdout.flush()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
