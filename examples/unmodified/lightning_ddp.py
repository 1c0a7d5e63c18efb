"""Lightning's own DDP launch, no TraceML in it (zero-edit tracing,
docs/zero-edit.md):

    traceml run examples/unmodified/lightning_ddp.py --slow-rank 1

Trainer(strategy="ddp", devices=2) on the CPU (gloo), without torchrun:
Lightning starts rank 1 by running this script again. Zero-edit tracing
gives each Trainer TraceML's callback; both processes are ranks of the
run, none a CONFLICT. --slow-rank R: rank R's training_step sleeps
--slow-ms more (a COMPUTE STRAGGLER naming it).
"""
import argparse
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl


class Model(pl.LightningModule):
    def __init__(self, slow_rank, slow_ms):
        super().__init__()
        self.layer = torch.nn.Linear(32, 1)
        self.slow_rank, self.slow_ms = slow_rank, slow_ms

    def training_step(self, batch, batch_idx):
        x, y = batch
        time.sleep(0.005)   # a stand-in for the accelerator's time
        if self.global_rank == self.slow_rank:
            time.sleep(self.slow_ms / 1000.0)
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-ms", type=float, default=20.0)
    a = p.parse_args()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64 * a.steps, 32), torch.randn(64 * a.steps, 1))
    trainer = pl.Trainer(strategy="ddp", devices=a.devices, accelerator="cpu",
                         max_steps=a.steps, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Model(a.slow_rank, a.slow_ms), DataLoader(data, batch_size=32))
    print("rank %d: %d optimizer steps" % (trainer.global_rank, trainer.global_step), flush=True)


if __name__ == "__main__":
    main()
