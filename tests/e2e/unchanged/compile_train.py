"""torch.compile in a training loop with no TraceML in it: counts the
graphs Dynamo compiles (a counting backend) and writes them, the losses and
a hash of the trained parameters to --out, so a run under `traceml run`
can be compared with a plain one.

    --how module      torch.compile(model)
    --how inplace     model.compile()
    --how function    torch.compile(train_step) calling the model
    --how hooked      the same, the model having a forward hook
    --how allreduce   a compiled function calling dist.all_reduce (gloo, 1 rank)
    --how optimizer   torch.compile(optimizer.step)
    --how ddp         torch.compile(DDP(model)), the model with a BatchNorm
                      (DDP broadcasts its buffers in every forward; gloo, 1 rank)
"""
import argparse
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--how", default="module")
p.add_argument("--fullgraph", action="store_true")
p.add_argument("--steps", type=int, default=12)
p.add_argument("--out", required=True)
a = p.parse_args()

if a.how in ("allreduce", "ddp"):
    dist.init_process_group("gloo", init_method="file://" + a.out + ".rdzv", rank=0, world_size=1)

graphs = []


def backend(gm, example_inputs):
    graphs.append(len(gm.graph.nodes))
    return gm.forward


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 64)
        self.norm = nn.BatchNorm1d(64) if a.how == "ddp" else nn.Identity()
        self.b = nn.Linear(64, 1)

    def forward(self, x):
        return self.b(torch.relu(self.norm(self.a(x.to(torch.float32)))))


torch.manual_seed(0)
model = Net()
if a.how == "hooked":
    model.register_forward_hook(lambda m, i, o: None)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
call = model
if a.how == "module":
    call = torch.compile(model, backend=backend, fullgraph=a.fullgraph)
elif a.how == "inplace":
    model.compile(backend=backend, fullgraph=a.fullgraph)
elif a.how == "ddp":
    from torch.nn.parallel import DistributedDataParallel as DDP
    call = torch.compile(DDP(model), backend=backend, fullgraph=a.fullgraph)


def loss_of(x, y):
    loss = ((call(x) - y) ** 2).mean()
    if a.how == "allreduce":
        dist.all_reduce(loss)
    return loss


step_loss = loss_of
if a.how in ("function", "hooked", "allreduce"):
    step_loss = torch.compile(loss_of, backend=backend, fullgraph=a.fullgraph)
opt_step = opt.step
if a.how == "optimizer":
    opt_step = torch.compile(opt.step, backend=backend, fullgraph=a.fullgraph)

g = torch.Generator().manual_seed(1)
losses = []
for i in range(a.steps):
    x, y = torch.randn(8, 16, generator=g), torch.randn(8, 1, generator=g)
    opt.zero_grad()
    loss = step_loss(x, y)
    loss.backward()
    opt_step()
    losses.append(round(loss.item(), 6))
params = hashlib.sha1(b"".join(t.detach().numpy().tobytes()
                              for t in list(model.parameters()) + list(model.buffers())))
out = {"graphs": graphs, "losses": losses, "params": params.hexdigest()}
print("graphs %d, final loss %.6f" % (len(graphs), losses[-1]))
with open(a.out, "w") as f:
    json.dump(out, f)
if a.how in ("allreduce", "ddp"):
    dist.barrier()   # the group's last work done before exit (docs/distributed.md)
    dist.destroy_process_group()
