"""A GAN traced the way the brief writes a step, `trace_step(D)`: the
discriminator handed over, the generator not. Both models run in the step,
both optimizers step in it. The generator is the heavier model (its
forward also waits --delay-ms, default 10 ms: a stand-in for a large
generator's compute).

TraceML times the generator's forward too (it finds it from the optimizer
that steps inside the bracket, from the second step on) and says so in the
box: "also timed: Generator". Without that, its forward would be Residual
(RESIDUAL-HEAVY). Expected: no RESIDUAL-HEAVY; Forward = both models'
forwards.

With --own-timings FILE the script times every forward call of both models
itself (perf_counter) and writes their per-step sums (ms) to FILE, so a test
can check TraceML's Forward against the script's own figure. --manual runs
the same loop in manual mode with wrap_forward(D) only: the generator is
then not timed (manual mode times what the user wraps).

Under `traceml run --nproc-per-node 2` (WORLD_SIZE > 1) both models are
DistributedDataParallel on gloo, and the step is trace_step(D) with D the
DDP wrapper; rank 0 writes --own-timings.
"""
import argparse
import json
import os
import time

import torch
from torch import nn

import traceml_ai as traceml
import _common as c


class Generator(nn.Module):
    def __init__(self, wait_ms):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 64))
        self.wait_ms = wait_ms

    def forward(self, z):
        c.sleep_ms(self.wait_ms)
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1))

    def forward(self, x):
        return self.net(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=int(os.environ.get("TRACEML_EX_STEPS", 120)))
    p.add_argument("--delay-ms", type=float, default=10.0)
    p.add_argument("--own-timings", help="write its own per-step forward timings (JSON) here")
    p.add_argument("--manual", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(1)
    traceml.init(mode="manual" if a.manual else "auto")
    ddp = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if ddp:
        import torch.distributed as dist
        dist.init_process_group("gloo")
    rank = int(os.environ.get("RANK", "0"))
    ds = c.dataset(a.steps, 32, dim=64, seed=rank)
    loader = c.fast_loader(ds, 32)
    if a.manual:
        loader = traceml.wrap_dataloader_fetch(loader)
    torch.manual_seed(0)
    gen, disc = Generator(a.delay_ms), Discriminator()
    if ddp:
        from torch.nn.parallel import DistributedDataParallel as DDP
        gen, disc = DDP(gen), DDP(disc)
    if a.manual:
        traceml.wrap_forward(disc)
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4)
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4)
    if a.manual:
        traceml.wrap_optimizer(opt_g)
        traceml.wrap_optimizer(opt_d)
    bce = nn.BCEWithLogitsLoss()
    ones, zeros = torch.ones(32, 1), torch.zeros(32, 1)
    forward_ms = []
    clock = time.perf_counter

    for real, _ in loader:
        with traceml.trace_step(disc):
            t = clock()
            fake = gen(torch.randn(32, 16))
            own = clock() - t
            t = clock()
            d_real, d_fake = disc(real), disc(fake.detach())
            own += clock() - t
            loss_d = bce(d_real, ones) + bce(d_fake, zeros)
            opt_d.zero_grad()
            (traceml.wrap_backward(loss_d) if a.manual else loss_d).backward()
            opt_d.step()
            t = clock()
            d_gen = disc(fake)
            own += clock() - t
            loss_g = bce(d_gen, ones)
            opt_g.zero_grad()
            (traceml.wrap_backward(loss_g) if a.manual else loss_g).backward()
            opt_g.step()
        forward_ms.append(own * 1e3)
    if a.own_timings and rank == 0:
        with open(a.own_timings, "w") as f:
            json.dump({"forward_ms": forward_ms}, f)
    if ddp:
        dist.barrier()   # the group's last work done before exit (docs/distributed.md)
        dist.destroy_process_group()
    if rank == 0:
        print("trained %d steps" % len(forward_ms))


if __name__ == "__main__":
    main()
