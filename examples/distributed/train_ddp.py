"""A small DDP training run on CPU (gloo) with injectable causes, for the
distributed scenarios of TraceML (tests/e2e/test_distributed.py).

    traceml run --nproc-per-node 2 examples/distributed/train_ddp.py --slow-input-rank 1

Each rank trains a tiny MLP under DistributedDataParallel. Every forward
also waits --device-ms (default 15 ms): a stand-in for the accelerator time
a real model spends, so that steps are long enough for timings to be stable
when several ranks share two CPU cores. Injected causes, all exact:

  --slow-input-rank K    rank K's DataLoader sleeps --delay-ms per batch
  --slow-input-all       every rank's DataLoader sleeps --delay-ms
  --slow-compute-rank K  rank K's forward takes --delay-ms longer
  --slow-residual-rank K rank K computes matmuls for --delay-ms in the step
                         after optimizer.step(), in no phase (a rank-only
                         metric, extra work); it prints the time it spent
                         ("rank K residual work X ms/step")
  --kill-rank K --kill-at-step S   rank K SIGKILLs itself at step S
  --abort-at-exit-rank K rank K, after its last step and TraceML's goodbye,
                         dies in std::terminate at interpreter exit, as
                         PyTorch's gloo exit race ends a rank
                         (docs/distributed.md, "A rank aborts at exit")
  --rank-eval K --eval-every N   rank K alone spends --delay-ms between
                         steps every N steps (rank-0-only evaluation or
                         checkpointing): the others wait in their all-reduce
  --grad-mb M            the model carries M MB more gradients (a parameter
                         that costs no compute): on a slow link, the
                         all-reduce outlasts backward (COMMUNICATION-BOUND)
  --all-reduce-loss      every step also all-reduces the loss (a blocking
                         torch.distributed collective, as logging code does)
  --comm-hook fp16       the DDP model's gradients go through DDP's own
                         fp16_compress_hook (a user comm hook)
  --batchnorm            the model holds buffers (a BatchNorm1d): DDP's
                         forward broadcasts them from rank 0 every step,
                         so a rank waits for a slower one there, in DDP's
                         wrapper, before the model's own forward
  --trace-inner          trace_step(model.module), as TraceML 0.5.0's
                         examples do, instead of trace_step(model)

Ranks are told apart by RANK (torchrun) or SLURM_PROCID (srun), like
torch.distributed itself. Set OMP_NUM_THREADS=1 on small machines.
"""
import argparse
import atexit
import ctypes
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "diagnosis"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import traceml_ai as traceml  # noqa: E402
from _common import dataset, fast_loader, mlp, sleep_ms, slow_loader  # noqa: E402


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=int(os.environ.get("TRACEML_EX_STEPS", 40)))
    p.add_argument("--delay-ms", type=float, default=60.0)
    p.add_argument("--device-ms", type=float, default=15.0)
    p.add_argument("--slow-input-rank", type=int, default=-1)
    p.add_argument("--slow-input-all", action="store_true")
    p.add_argument("--slow-compute-rank", type=int, default=-1)
    p.add_argument("--slow-residual-rank", type=int, default=-1)
    p.add_argument("--kill-rank", type=int, default=-1)
    p.add_argument("--kill-at-step", type=int, default=10)
    p.add_argument("--abort-at-exit-rank", type=int, default=-1)
    p.add_argument("--rank-eval", type=int, default=-1)
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--grad-mb", type=float, default=0.0)
    p.add_argument("--all-reduce-loss", action="store_true")
    p.add_argument("--comm-hook", choices=["fp16"], default=None)
    p.add_argument("--print-loss", action="store_true")
    p.add_argument("--batchnorm", action="store_true")
    p.add_argument("--trace-inner", action="store_true")
    return p.parse_args()


def bn_mlp(dim=64, width=64, classes=10, seed=0):
    """The MLP with a BatchNorm1d: running mean and variance are buffers."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(dim, width), nn.BatchNorm1d(width), nn.ReLU(),
                         nn.Linear(width, classes))


class Device(nn.Module):
    """The MLP plus a fixed wait: what a forward on an accelerator costs."""

    def __init__(self, net, wait_ms, grad_mb=0.0):
        super().__init__()
        self.net = net
        self.wait_ms = wait_ms
        n = int(grad_mb * 1e6 / 4)
        self.ballast = nn.Parameter(torch.zeros(n)) if n else None

    def forward(self, x):
        sleep_ms(self.wait_ms)
        out = self.net(x)
        if self.ballast is not None:
            out = out + self.ballast[:1].sum() * 0.0
        return out


def main():
    a = parse()
    if "RANK" not in os.environ and "SLURM_PROCID" in os.environ:
        os.environ.setdefault("RANK", os.environ["SLURM_PROCID"])
        os.environ.setdefault("WORLD_SIZE", os.environ.get("SLURM_NTASKS", "1"))
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
    if int(os.environ.get("RANK", "0")) == a.abort_at_exit_rank:
        # registered before TraceML's own exit handler, so it runs after it
        atexit.register(lambda: ctypes.CDLL("libstdc++.so.6")._ZSt9terminatev())
    traceml.init(mode="auto")
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)

    batch = 32
    ds = dataset(a.steps, batch, seed=rank)
    slow = a.slow_input_all or rank == a.slow_input_rank
    loader = slow_loader(ds, batch, a.delay_ms / 1000.0) if slow else fast_loader(ds, batch)
    extra = a.delay_ms if rank == a.slow_compute_rank else 0.0
    net = bn_mlp() if a.batchnorm else mlp(width=64)
    model = DDP(Device(net, a.device_ms + extra, a.grad_mb))
    traced = model.module if a.trace_inner else model
    if a.comm_hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    extra_work = []                        # --slow-residual-rank: what it spent
    w = torch.randn(128, 128)
    for step, (x, y) in enumerate(loader):
        if rank == a.kill_rank and step == a.kill_at_step:
            print("rank %d: SIGKILL at step %d" % (rank, step), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        if rank == a.rank_eval and step % a.eval_every == a.eval_every - 1:
            sleep_ms(a.delay_ms)        # rank-only work between steps
        with traceml.trace_step(traced):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            if rank == a.slow_residual_rank:   # CPU work, not a sleep
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < a.delay_ms / 1000.0:
                    w = torch.tanh(w @ w)
                extra_work.append(time.perf_counter() - t0)
            if a.all_reduce_loss:
                dist.all_reduce(loss.detach())
        if a.print_loss and rank == 0:
            print("loss %.6f" % loss.item(), flush=True)
    if extra_work:
        print("rank %d residual work %.3f ms/step" % (rank, 1000 * sum(extra_work) / len(extra_work)),
              flush=True)
    dist.barrier()   # the group's last work done before exit (docs/distributed.md)
    dist.destroy_process_group()
    if rank == 0:
        print("trained %d steps" % a.steps)


if __name__ == "__main__":
    main()
