"""A hand-written Hugging Face Accelerate loop with TraceML, on the CPU: an
MLP on random data, prepared by an Accelerator, one TraceML step per
optimizer step.

    traceml run examples/integrations/hf_accelerate.py --steps 60
    python examples/integrations/hf_accelerate.py --steps 60    # summary at exit

--delay-ms D sleeps D ms in the collate_fn per batch (a slow input
pipeline); --grad-accum K accumulates K micro-batches per optimizer step
(accelerator.accumulate); --hidden sets the MLP's width.
"""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, default_collate
from accelerate import Accelerator

from traceml_ai.integrations.accelerate import trace_step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60, help="optimizer steps")
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--delay-ms", type=float, default=0.0, help="collate_fn sleep per batch")
    a = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    delay = a.delay_ms / 1000.0

    def collate(samples):
        if delay:
            time.sleep(delay)
        return default_collate(samples)

    n = a.steps * a.grad_accum * a.batch_size
    x = torch.randn(n, 64)
    y = (x[:, 0] > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=a.batch_size, shuffle=True,
                        collate_fn=collate)
    model = nn.Sequential(nn.Linear(64, a.hidden), nn.ReLU(), nn.Linear(a.hidden, a.hidden),
                          nn.ReLU(), nn.Linear(a.hidden, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=a.grad_accum)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    updates = 0
    model.train()
    for xb, yb in loader:
        with trace_step(accelerator, model):
            with accelerator.accumulate(model):
                loss = loss_fn(model(xb), yb)
                accelerator.backward(loss)
                opt.step()
                opt.zero_grad()
            updates += int(accelerator.sync_gradients)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        print("optimizer steps: %d" % updates)


if __name__ == "__main__":
    main()
