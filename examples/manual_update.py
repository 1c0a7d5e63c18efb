"""A nanoGPT-style loop: batches from a get_batch() function (no
DataLoader), a hand-written SGD update (no optimizer object), and two
models in the step (a frozen teacher and the student). TraceML is told
about the batch function and both models:

    traceml run examples/manual_update.py [--steps N] [--delay-ms D]

get_batch() sleeps --delay-ms (a slow read), so the run is INPUT-BOUND
with Input Wait close to it.
"""
import argparse
import time

import torch
from torch import nn

import traceml_ai as traceml


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--delay-ms", type=float, default=6.0)
    a = p.parse_args()
    traceml.init(mode="auto")
    torch.manual_seed(0)
    data = torch.randn(4096, 64)

    @traceml.wrap_input
    def get_batch():
        time.sleep(a.delay_ms / 1000.0)
        i = torch.randint(0, data.shape[0] - 32, (1,)).item()
        return data[i:i + 32]

    teacher = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8)).eval()
    student = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))
    for step in range(a.steps):
        x = get_batch()
        with traceml.trace_step(student, teacher):
            with torch.no_grad():
                target = teacher(x)
            loss = ((student(x) - target) ** 2).mean()
            student.zero_grad(set_to_none=True)
            loss.backward()
            with torch.no_grad():                 # the hand-written update
                for w in student.parameters():
                    w -= 0.01 * w.grad
        if (step + 1) % 50 == 0:
            print("step %d  loss %.4f" % (step + 1, loss.item()), flush=True)


if __name__ == "__main__":
    main()
