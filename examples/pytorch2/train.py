"""The loops PyTorch 2.x users write, under TraceML: a torch.compile'd
model, autocast with a GradScaler, FSDP (FullyShardedDataParallel or the
newer fully_shard) on CPU/gloo, zero_grad(set_to_none=True).

    traceml run examples/pytorch2/train.py --compile
    traceml run examples/pytorch2/train.py --amp
    traceml run --nproc-per-node 2 examples/pytorch2/train.py --fsdp 2

Each batch waits --input-delay-ms in the loader (a known, injected cause:
the run is INPUT-BOUND when that dominates). With --own-timings FILE the
script also times its own forward and optimizer step (with the scaler's
work around it) with perf_counter and writes them per step (ms, rank 0) to
FILE, so a test can check TraceML's figures against the script's own.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, IterableDataset

import traceml_ai as traceml


class SlowBatches(IterableDataset):
    """Ready-made batches, each after a fixed wait (slow storage)."""

    def __init__(self, steps, delay_s, batch=64, dim=256):
        g = torch.Generator().manual_seed(0)
        self.data = [(torch.randn(batch, dim, generator=g), torch.randint(0, 10, (batch,), generator=g))
                     for _ in range(16)]
        self.steps, self.delay_s = steps, delay_s

    def __iter__(self):
        for i in range(self.steps):
            time.sleep(self.delay_s)
            yield self.data[i % len(self.data)]


def make_model(args):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, args.width), nn.ReLU(),
                          nn.Linear(args.width, args.width), nn.ReLU(),
                          nn.Linear(args.width, 10))
    if args.fsdp == 1:
        from torch.distributed.fsdp import FullyShardedDataParallel
        model = FullyShardedDataParallel(model, device_id=torch.device("cpu"))
    elif args.fsdp == 2:
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:                                     # torch < 2.6
            from torch.distributed._composable.fsdp import fully_shard
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)
    if args.compile:
        model = torch.compile(model, backend=args.backend)
    return model


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--input-delay-ms", type=float, default=5.0)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--backend", default="inductor", help="torch.compile backend [inductor]")
    p.add_argument("--amp", action="store_true", help="autocast (bfloat16) with a GradScaler")
    p.add_argument("--fsdp", type=int, choices=(0, 1, 2), default=0,
                   help="1: FullyShardedDataParallel, 2: fully_shard (needs torchrun)")
    p.add_argument("--own-timings", help="write its own per-step timings (JSON) here")
    args = p.parse_args()

    torch.set_num_threads(1)
    if args.fsdp:
        dist.init_process_group("gloo")
    traceml.init(mode="auto")
    model = make_model(args)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", enabled=args.amp)
    loader = DataLoader(SlowBatches(args.steps, args.input_delay_ms / 1000.0), batch_size=None)
    fwd, stp = [], []
    for step, (x, y) in enumerate(loader):
        with traceml.trace_step(model):
            opt.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.amp):
                out = model(x)
            t1 = time.perf_counter()
            loss = nn.functional.cross_entropy(out.float(), y)
            scaler.scale(loss).backward()
            t2 = time.perf_counter()
            scaler.step(opt)
            scaler.update()
            t3 = time.perf_counter()
        fwd.append((t1 - t0) * 1e3)
        stp.append((t3 - t2) * 1e3)
        if step % 50 == 0:
            print("step %4d  loss %.4f" % (step, loss.item()), flush=True)
    if args.own_timings and int(os.environ.get("RANK", "0")) == 0:
        with open(args.own_timings, "w") as f:
            json.dump({"forward_ms": fwd, "optimizer_ms": stp,
                       "model_type": type(model).__name__}, f)
    if args.fsdp:
        dist.barrier()   # the group's last work done before exit (docs/distributed.md)
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
