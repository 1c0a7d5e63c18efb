"""A nanoGPT-style loop: batches from a get_batch() function (no
DataLoader), a hand-written SGD update (no optimizer object), and two
models in the step (a frozen teacher and the student). TraceML is told
about the batch function and both models:

    traceml run examples/manual_update.py [--steps N] [--delay-ms D]

get_batch() sleeps --delay-ms (a slow read), so the run is INPUT-BOUND
with Input Wait close to it.

--in-step: get_batch() is not wrapped and is called inside the step (as
nanoGPT does): nothing times it, and with the hand-written update it is
the time outside the traced forward and backward, which the verdict
states (RESIDUAL-HEAVY, naming both) instead of INCOMPLETE DATA.
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
    p.add_argument("--in-step", action="store_true")
    a = p.parse_args()
    traceml.init(mode="auto")
    torch.manual_seed(0)
    data = torch.randn(4096, 64)

    def get_batch():
        time.sleep(a.delay_ms / 1000.0)
        i = torch.randint(0, data.shape[0] - 32, (1,)).item()
        return data[i:i + 32]

    if not a.in_step:
        get_batch = traceml.wrap_input(get_batch)

    teacher = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8)).eval()
    student = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))
    for step in range(a.steps):
        x = None if a.in_step else get_batch()
        with traceml.trace_step(student, teacher):
            if a.in_step:
                x = get_batch()
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
