"""Shared pieces of the diagnosis scenarios: a command line, synthetic data,
a fast and a slow loader, and an MLP of adjustable size.

Every scenario takes --steps and --delay-ms (also from the environment as
TRACEML_EX_STEPS and TRACEML_EX_DELAY_MS), so the end-to-end tests know the
injected cause exactly. Everything runs on the CPU; set OMP_NUM_THREADS=1
for stable timings.
"""
import argparse
import os
import time

import torch
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset, default_collate


def parser(steps, delay_ms, description=""):
    """--steps and --delay-ms; a scenario adds its own options."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int,
                   default=int(os.environ.get("TRACEML_EX_STEPS", steps)))
    p.add_argument("--delay-ms", type=float,
                   default=float(os.environ.get("TRACEML_EX_DELAY_MS", delay_ms)))
    return p


def parse(steps, delay_ms, description=""):
    return parser(steps, delay_ms, description).parse_args()


def dataset(steps, batch, dim=64, classes=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(steps * batch, dim, generator=g)
    y = torch.randint(0, classes, (steps * batch,), generator=g)
    return TensorDataset(x, y)


def fast_loader(ds, batch):
    """A whole batch per index list: fetching costs tens of microseconds."""
    sampler = BatchSampler(RandomSampler(ds), batch_size=batch, drop_last=True)
    return DataLoader(ds, sampler=sampler, batch_size=None, num_workers=0)


def slow_loader(ds, batch, delay_s):
    """Like fast_loader, but each batch sleeps delay_s (a slow transform)."""
    def collate(b):
        time.sleep(delay_s)
        return b
    sampler = BatchSampler(RandomSampler(ds), batch_size=batch, drop_last=True)
    return DataLoader(ds, sampler=sampler, batch_size=None, num_workers=0,
                      collate_fn=collate)


def mlp(dim=64, width=256, depth=2, classes=10, seed=0):
    torch.manual_seed(seed)
    layers, d = [], dim
    for _ in range(depth):
        layers += [nn.Linear(d, width), nn.ReLU()]
        d = width
    layers.append(nn.Linear(d, classes))
    return nn.Sequential(*layers)


def sleep_ms(ms):
    """Sleeps ms milliseconds: the injected cause. On a loaded machine the
    sleep overshoots; the tests compare TraceML's figures with what the
    script really slept (tests/e2e/slept), not with ms."""
    time.sleep(ms / 1000.0)
