"""FSDP2 (torch.distributed.fsdp.fully_shard) on CPU/gloo, for TraceML's
communication timing: the all-gathers and reduce-scatters FSDP issues are
torch.distributed collectives, timed as Communication.

    traceml run --nproc-per-node 2 examples/distributed/train_fsdp.py --steps 30
"""
import argparse

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

import traceml_ai as traceml


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    a = p.parse_args()
    traceml.init(mode="auto")
    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [torch.randn(32, 64) for _ in range(8)]
    for step in range(a.steps):
        with traceml.trace_step(model):
            loss = model(batches[step % len(batches)]).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    dist.barrier()   # the group's last work done before exit (docs/distributed.md)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
