"""DDP started by torch.multiprocessing.spawn: the ranks have no RANK in
their environment and learn who they are from torch.distributed, which
TraceML picks up (traceml.init after init_process_group, or the first
trace_step). Rank 1's loader is slowed, so the run is an INPUT STRAGGLER
naming R1.

    traceml run examples/distributed/spawn_ddp.py [--steps N] [--delay-ms MS]
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import traceml_ai as traceml


def worker(rank, world, steps, delay_s, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=world)
    traceml.init(mode="auto")
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = [(torch.randn(16, 32), torch.randint(0, 4, (16,))) for _ in range(steps)]

    def batches():
        for b in data:
            if rank == 1:
                time.sleep(delay_s)
            yield b

    for x, y in traceml.wrap_dataloader_fetch(batches()):
        with traceml.trace_step(model):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    dist.barrier()   # the group's last work done before exit (docs/distributed.md)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--delay-ms", type=float, default=20.0)
    p.add_argument("--port", type=int, default=29611)
    a = p.parse_args()
    mp.spawn(worker, args=(2, a.steps, a.delay_ms / 1000.0, a.port), nprocs=2)


if __name__ == "__main__":
    main()
