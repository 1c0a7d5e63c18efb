"""Ray Train with TraceML: two CPU workers, one TraceML run.

    python examples/integrations/ray_train.py --steps 60
    traceml run examples/integrations/ray_train.py --delay-ms 20

TraceMLTorchTrainer is ray.train.torch.TorchTrainer with each worker
reporting as one rank (R0, R1) of one run. Under plain python it starts
the aggregator (`traceml serve`) for the length of fit() and the summary
is printed when fit() returns; under `traceml run` the launcher's
aggregator is used and the launcher prints the summary.

The loop is the usual Ray Train one: a tiny MLP through
ray.train.torch.prepare_model (DDP on gloo), a DataLoader through
prepare_data_loader, synthetic data. Every forward waits --device-ms (a
stand-in for accelerator time, so steps are long enough to time on a small
machine). Injected causes:

  --delay-ms D     every worker's collate sleeps D ms per batch (slow input)
  --slow-rank R    world rank R's forward takes --slow-ms longer (a straggler)
  --marked         steps are marked with traceml.trace_step(model) instead
                   of found automatically (one per optimizer.step())

Ray's session files go under $RAY_TMPDIR (default: the system's temp
folder) and Ray Train's results under --storage-path.
"""
import argparse
import os
import sys
import tempfile
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60, help="optimizer steps per worker")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--delay-ms", type=float, default=0.0, help="slow collate, every worker")
    p.add_argument("--device-ms", type=float, default=15.0, help="fixed wait in each forward")
    p.add_argument("--slow-rank", type=int, default=-1, help="world rank with a slower forward")
    p.add_argument("--slow-ms", type=float, default=40.0, help="what --slow-rank adds")
    p.add_argument("--marked", action="store_true", help="use traceml.trace_step(model)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--num-cpus", type=int, default=None,
                   help="CPUs of the local Ray cluster (default: workers + 1, which Ray "
                        "Train V1 needs for its trainer actor)")
    p.add_argument("--storage-path", default=os.path.join(tempfile.gettempdir(), "ray_results"))
    return p.parse_args()


def train_loop_per_worker(config):
    """Runs in each Ray worker (a process of its own)."""
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset

    import ray.train
    import ray.train.torch
    import traceml_ai as traceml

    torch.set_num_threads(1)
    rank = ray.train.get_context().get_world_rank()
    world = ray.train.get_context().get_world_size()

    class Synthetic(Dataset):
        def __init__(self, n, dim=64, classes=10, seed=0):
            g = torch.Generator().manual_seed(seed)
            self.x = torch.randn(n, dim, generator=g)
            self.y = torch.randint(0, classes, (n,), generator=g)

        def __len__(self):
            return len(self.y)

        def __getitem__(self, i):
            return self.x[i], self.y[i]

    delay_s = config["delay_ms"] / 1000.0

    def collate(items):
        if delay_s > 0:
            time.sleep(delay_s)         # a slow transform, on every worker
        xs, ys = zip(*items)
        return torch.stack(xs), torch.stack(ys)

    class Device(nn.Module):
        """The MLP plus a fixed wait: what a forward on an accelerator costs."""

        def __init__(self, net, wait_ms):
            super().__init__()
            self.net = net
            self.wait_s = wait_ms / 1000.0

        def forward(self, x):
            time.sleep(self.wait_s)
            return self.net(x)

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    wait = config["device_ms"] + (config["slow_ms"] if rank == config["slow_rank"] else 0.0)
    model = ray.train.torch.prepare_model(Device(net, wait))
    batch = config["batch"]
    ds = Synthetic(config["steps"] * batch * world)
    loader = ray.train.torch.prepare_data_loader(
        DataLoader(ds, batch_size=batch, shuffle=True, drop_last=True, collate_fn=collate))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    steps = 0
    for x, y in loader:
        if config["marked"]:
            with traceml.trace_step(model):
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
        else:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        steps += 1
    ray.train.report({"loss": float(loss.detach()), "steps": steps})


def main():
    a = parse()
    import ray
    from ray.train import RunConfig, ScalingConfig

    from traceml_ai.integrations.ray import TraceMLTorchTrainer

    ray.init(num_cpus=a.num_cpus or a.workers + 1, include_dashboard=False,
             log_to_driver=True, logging_level="WARNING")
    try:
        trainer = TraceMLTorchTrainer(
            train_loop_per_worker,
            train_loop_config={"steps": a.steps, "batch": a.batch, "delay_ms": a.delay_ms,
                               "device_ms": a.device_ms, "slow_rank": a.slow_rank,
                               "slow_ms": a.slow_ms, "marked": a.marked},
            scaling_config=ScalingConfig(num_workers=a.workers, use_gpu=False),
            run_config=RunConfig(name="traceml_ray_%d" % os.getpid(),
                                 storage_path=a.storage_path))
        result = trainer.fit()
        print("trained %d steps on %d workers (%s)"
              % (a.steps, a.workers, "failed" if result.error else "ok"))
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
