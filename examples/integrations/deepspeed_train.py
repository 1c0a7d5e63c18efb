"""DeepSpeed training traced by TraceML (traceml_ai.integrations.deepspeed).

    traceml run examples/integrations/deepspeed_train.py --delay-ms 20
    traceml run --nproc-per-node 2 examples/integrations/deepspeed_train.py \\
        --delay-ms 20 --slow-rank 1
    python examples/integrations/deepspeed_train.py --stage 2 --accum 4

An MLP on synthetic data, trained by a DeepSpeedEngine (ZeRO stage
--stage, SGD) on the CPU or the GPU DeepSpeed finds. Injected causes, all
exact, so the tests know what TraceML should find:

  --delay-ms D     the dataset is slow: each batch sleeps D ms
  --slow-rank K    only rank K's dataset is slow (a straggler)
  --device-ms M    each forward also waits M ms, a stand-in for accelerator
                   time, so that steps are long enough to compare ranks
                   that share a few CPU cores
  --accum K        gradient accumulation: K micro-batches per optimizer
                   step (one TraceML step); --steps counts optimizer steps

Without a launcher (plain python) it is a world of one process: RANK,
WORLD_SIZE and MASTER_ADDR/PORT are set here when missing. On a machine
without a GPU, DeepSpeed would JIT-compile its shared-memory all-reduce
kernel (deepspeed_shm_comm, tens of seconds, once per machine) whenever its
communication backend starts; this example turns that kernel off, and gloo
does the all-reduce.
"""
import argparse
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "diagnosis"))

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler  # noqa: E402

from _common import dataset, mlp, sleep_ms  # noqa: E402


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60, help="optimizer steps")
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--device-ms", type=float, default=0.0)
    p.add_argument("--stage", type=int, default=0, choices=(0, 1, 2))
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--width", type=int, default=256)
    return p.parse_args()


def single_process_env():
    """A world of one when no launcher set one up."""
    if "RANK" in os.environ:
        return
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))


class Net(nn.Module):
    def __init__(self, dim, width, wait_ms):
        super().__init__()
        self.net = mlp(dim=dim, width=width, depth=2)
        self.wait_ms = wait_ms

    def forward(self, x):
        if self.wait_ms > 0:
            sleep_ms(self.wait_ms)
        return self.net(x)


def loader(steps, batch, dim, delay_ms, seed):
    def collate(b):
        if delay_ms > 0:
            sleep_ms(delay_ms)
        return b
    ds = dataset(steps, batch, dim=dim, seed=seed)
    sampler = BatchSampler(SequentialSampler(ds), batch_size=batch, drop_last=True)
    return DataLoader(ds, sampler=sampler, batch_size=None, num_workers=0, collate_fn=collate)


def main():
    a = parse()
    single_process_env()
    rank = int(os.environ["RANK"])
    import deepspeed
    from deepspeed.accelerator import get_accelerator
    from traceml_ai.integrations.deepspeed import trace_engine

    accel = get_accelerator()
    if accel.device_name() == "cpu":
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    world = int(os.environ.get("WORLD_SIZE", "1"))
    config = {
        "train_micro_batch_size_per_gpu": a.batch,
        "gradient_accumulation_steps": a.accum,
        "train_batch_size": a.batch * a.accum * world,
        "optimizer": {"type": "SGD", "params": {"lr": 0.01, "momentum": 0.9}},
        "zero_optimization": {"stage": a.stage},
        "zero_allow_untested_optimizer": True,      # torch's SGD under ZeRO 1/2
        "steps_per_print": 10 ** 9,
    }
    model = Net(a.dim, a.width, a.device_ms)
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config=config)
    engine = trace_engine(engine)
    delay = a.delay_ms if a.slow_rank in (-1, rank) else 0.0
    data = loader(a.steps * a.accum, a.batch, a.dim, delay, seed=rank)
    device = engine.device
    loss_fn = nn.CrossEntropyLoss()
    t0 = time.perf_counter()
    for x, y in data:
        x, y = x.to(device), y.to(device)
        loss = loss_fn(engine(x), y)
        engine.backward(loss)
        engine.step()
    if rank == 0:
        print("deepspeed_train: %d optimizer steps (%d micro-batches each) in %.1f s"
              % (engine.global_steps, a.accum, time.perf_counter() - t0))


if __name__ == "__main__":
    main()
