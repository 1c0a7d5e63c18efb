"""Hogwild training in the shape of pytorch/examples mnist_hogwild, no
TraceML in it (zero-edit tracing, docs/zero-edit.md):

    traceml run examples/unmodified/hogwild.py --processes 2

The model's parameters live in shared memory; --processes child
processes (multiprocessing, spawn), with no process group, each train it
with their own DataLoader and SGD; the parent only starts them, waits,
and evaluates the result on a DataLoader of its own (no optimizer step:
it stays no rank, as mnist_hogwild's parent). Each child is a rank of the run (numbered in
the order they start), the parent none. Each batch sleeps --delay-ms in
the loader (a slow transform), so the run is INPUT-BOUND; each child
prints its own step count and time per step.
"""
import argparse
import time

import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, default_collate


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 64, generator=g), torch.randint(0, 10, (n,), generator=g))


class SlowCollate(object):
    def __init__(self, delay_s):
        self.delay_s = delay_s

    def __call__(self, samples):
        time.sleep(self.delay_s)
        return default_collate(samples)


def train(rank, a, model):
    torch.manual_seed(a.seed + rank)
    torch.set_num_threads(1)
    loader = DataLoader(dataset(a.steps * a.batch, a.seed + rank), batch_size=a.batch,
                        shuffle=True, collate_fn=SlowCollate(a.delay_ms / 1000.0))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    model.train()
    steps, t0 = 0, time.perf_counter()
    for data, target in loader:
        opt.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        opt.step()
        steps += 1
    ms = 1000 * (time.perf_counter() - t0) / max(steps, 1)
    print("process %d: %d steps, %.3f ms/step, loss %.3f" % (rank, steps, ms, loss.item()),
          flush=True)


def test(model):
    # as mnist_hogwild's test(): a DataLoader of the parent's own
    loader = DataLoader(dataset(512, 1234), batch_size=128)
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in loader:
            correct += (model(data).argmax(1) == target).sum().item()
    print("test accuracy %d/512" % correct, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--steps", type=int, default=60, help="optimizer steps per process")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--delay-ms", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    mp.set_start_method("spawn", force=True)
    torch.manual_seed(a.seed)
    model = Net()
    model.share_memory()   # gradients are allocated lazily, so they are not shared
    processes = []
    for rank in range(a.processes):
        proc = mp.Process(target=train, args=(rank, a, model))
        proc.start()
        processes.append(proc)
    for proc in processes:
        proc.join()
    test(model)


if __name__ == "__main__":
    main()
