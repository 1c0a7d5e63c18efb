"""A plain DistributedDataParallel script with no TraceML in it (zero-edit
tracing, docs/zero-edit.md):

    traceml run --nproc-per-node 2 examples/unmodified/ddp.py

gloo on the CPU; each rank's DataLoader sleeps --delay-ms per batch.
"""
import argparse
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset, default_collate
from torch.utils.data.distributed import DistributedSampler


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--delay-ms", type=float, default=5.0)
    a = p.parse_args()
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    torch.manual_seed(0)
    x = torch.randn(a.steps * 16 * world, 32)
    y = torch.randint(0, 4, (a.steps * 16 * world,))

    def collate(samples):
        time.sleep(a.delay_ms / 1000.0)
        return default_collate(samples)

    data = TensorDataset(x, y)
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data), collate_fn=collate)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    for inputs, targets in loader:
        loss = loss_fn(model(inputs), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if dist.get_rank() == 0:
        print("done, loss %.3f" % loss.item(), flush=True)
    dist.barrier()   # the group's last work done before exit (docs/distributed.md)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
