"""The deep dive's scenario (docs/deep-dive.md): an unmodified loop, no
TraceML in it, where one named module, heavy_block, does ~90% of the
work (a wide MLP) beside a thin stem and head. Under `traceml run` the
verdict is COMPUTE-BOUND and the deep dive names heavy_block.

--compile runs the model under torch.compile (the deep dive is skipped,
saying why); --params-out PATH saves the trained parameters (the
zero-harm test compares them bit for bit with and without the window);
--extra-on-rank R makes rank R's extra_block do work that the other
ranks' skip (the 2-rank COMPUTE STRAGGLER scenario: `traceml run
--nproc-per-node 2`, DDP over gloo); its result is discarded, so every
rank trains the same model.
"""
import argparse
import hashlib
import os

import torch
from torch import nn


class ExtraWork(nn.Module):
    """Work on one rank only, whose result is thrown away: a buffer, no
    parameters, so DDP sees the same model everywhere. About 12 ms a step
    on a 2-core VM's CPU, four times heavy_block's, so that the straggler
    it makes outweighs gloo's 6 ms of gradient traffic."""

    def __init__(self, active):
        super().__init__()
        self.active = active
        self.register_buffer("w", torch.randn(128, 1024) / 32)

    def forward(self, h):
        if self.active:
            for _ in range(96):
                torch.tanh(h.detach() @ self.w)
        return h


class Net(nn.Module):
    def __init__(self, extra=False):
        super().__init__()
        self.stem = nn.Linear(64, 128)
        self.heavy_block = nn.Sequential(nn.Linear(128, 768), nn.ReLU(), nn.Linear(768, 768),
                                         nn.ReLU(), nn.Linear(768, 128))
        self.extra_block = ExtraWork(extra)
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        h = self.extra_block(self.heavy_block(torch.relu(self.stem(x))))
        return self.head(torch.relu(h))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--params-out")
    p.add_argument("--extra-on-rank", type=int, default=-1)
    a = p.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Net(extra=rank == a.extra_on_rank)
    run = torch.compile(model) if a.compile else model
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        run = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    for _ in range(a.steps):
        x = torch.randn(64, 64, generator=g)
        y = torch.randint(0, 10, (64,), generator=g)
        loss = nn.functional.cross_entropy(run(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    h = hashlib.sha256()
    for t in model.state_dict().values():
        h.update(t.detach().contiguous().numpy().tobytes())
    print("rank %d loss %.6f params %s" % (rank, loss.item(), h.hexdigest()))
    if a.params_out:
        torch.save(model.state_dict(), a.params_out)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        import torch.distributed as dist
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
