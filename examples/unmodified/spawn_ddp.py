"""DDP started with torch.multiprocessing.spawn, no TraceML in it
(zero-edit tracing, docs/zero-edit.md):

    traceml run examples/unmodified/spawn_ddp.py --port P

The spawned processes have no RANK in their environment: each becomes a
rank of the run when it joins the process group, and the parent, which
only launches them, is not one. gloo on the CPU; rank 1's loader sleeps
--delay-ms per batch, so the run is an INPUT STRAGGLER naming R1.
"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset, default_collate


def worker(rank, world, a):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % a.port,
                            rank=rank, world_size=world)
    torch.manual_seed(0)
    x, y = torch.randn(a.steps * 16, 32), torch.randint(0, 4, (a.steps * 16,))

    def collate(samples):
        if rank == 1:
            time.sleep(a.delay_ms / 1000.0)
        return default_collate(samples)

    loader = DataLoader(TensorDataset(x, y), batch_size=16, collate_fn=collate)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for inputs, targets in loader:
        loss = nn.functional.cross_entropy(model(inputs), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print("rank 0: %d steps, loss %.3f" % (a.steps, loss.item()), flush=True)
    dist.barrier()   # the group's last work done before exit (docs/distributed.md)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--delay-ms", type=float, default=20.0)
    p.add_argument("--port", type=int, default=29611)
    a = p.parse_args()
    mp.spawn(worker, args=(2, a), nprocs=2)


if __name__ == "__main__":
    main()
