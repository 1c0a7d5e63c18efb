"""DDP with the comm-hook cases TraceML must not change, no TraceML in it
(run with --nproc-per-node 2, gloo on the CPU):

    --case default        DDP's own all-reduce
    --case fp16           a user hook (fp16_compress_hook)
    --case builtin_fp16   DDP's builtin FP16_COMPRESS hook
    --case builtin        DDP's builtin ALLREDUCE hook
    --case tensor_hook    a hook that returns a Tensor instead of a Future
    --case batchnorm      DDP's own all-reduce, a model with buffers (BatchNorm:
                          DDP broadcasts them in every forward), then DDP's
                          buffer broadcast from a rank that does not exist
    --case all            every case above, one after the other, in that order
                          (a hook's error ends that model's training only)

Each case trains a DDP model 20 steps (rank-dependent data), then tries to
register a second hook. Rank 0 writes to --out, per case: a hash of the
trained parameters (and buffers), and what the second registration and the
training raised (type and message).
"""
import argparse
import hashlib
import json

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

p = argparse.ArgumentParser()
p.add_argument("--case", default="default")
p.add_argument("--steps", type=int, default=20)
p.add_argument("--out", required=True)
a = p.parse_args()


def tensor_hook(state, bucket):
    return bucket.buffer()


def error(e):
    return "%s: %s" % (type(e).__name__, e)


dist.init_process_group("gloo")
rank = dist.get_rank()


def train(case):
    """One DDP model with the case's hook: what it gave and raised."""
    torch.manual_seed(0)
    norm = [nn.BatchNorm1d(256)] if case == "batchnorm" else []
    model = DDP(nn.Sequential(nn.Linear(32, 256), *norm, nn.ReLU(), nn.Linear(256, 4)),
                bucket_cap_mb=0.01)
    if case == "fp16":
        model.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
    elif case == "builtin_fp16":
        model._register_builtin_comm_hook(dist.BuiltinCommHookType.FP16_COMPRESS)
    elif case == "builtin":
        model._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE)
    elif case == "tensor_hook":
        model.register_comm_hook(None, tensor_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    out = {"train": "ok"}
    try:
        for i in range(a.steps):
            x, y = torch.randn(16, 32, generator=g), torch.randint(0, 4, (16,), generator=g)
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    except Exception as e:
        out["train"] = error(e)
    params = b"".join(t.detach().numpy().tobytes() for t in model.parameters())
    out["params"] = hashlib.sha1(params).hexdigest()
    if case == "batchnorm":
        bufs = b"".join(t.detach().numpy().tobytes() for t in model.buffers())
        out["buffers"] = hashlib.sha1(bufs).hexdigest()
        try:
            model._default_broadcast_coalesced(authoritative_rank=dist.get_world_size() + 3)
            out["bad_broadcast"] = "accepted"
        except Exception as e:
            out["bad_broadcast"] = error(e)
    try:
        model.register_comm_hook(None, default_hooks.allreduce_hook)
        out["second_hook"] = "accepted"
    except Exception as e:
        out["second_hook"] = error(e)
    return out


CASES = ["default", "fp16", "builtin_fp16", "builtin", "tensor_hook", "batchnorm"]
cases = CASES if a.case == "all" else [a.case]
results = {case: train(case) for case in cases}
if rank == 0:
    with open(a.out, "w") as f:
        json.dump(results, f, sort_keys=True)
    print("rank 0 done: %s" % ", ".join("%s %s" % (c, r["train"]) for c, r in results.items()),
          flush=True)
if all(r["train"] == "ok" for r in results.values()):
    dist.barrier()   # the group's last work done before exit (docs/distributed.md)
    dist.destroy_process_group()
