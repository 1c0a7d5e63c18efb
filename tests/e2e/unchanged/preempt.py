"""A training loop that saves a checkpoint when it is asked to stop, as a
job does on Slurm's or Kubernetes' preemption, with no TraceML in it.

  --on term    a SIGTERM handler asks the loop to stop, then it saves
  --on int     `except KeyboardInterrupt: save()` around the loop
  --on none    no handler: SIGTERM/SIGINT end it as they end Python
  --on ignore  SIGTERM ignored: only SIGKILL ends it

SIGUSR1 (Slurm's "your time is nearly up") is answered by a line, then the
loop stops and saves. The checkpoint is --mb chunks of 1 MiB, written
slowly (a busy file system), well past one second. Writes --ready once it
trained a step (each rank: --ready.rankN); prints what it saw (prefix "preempt:"), and the checkpoint's
size. With torch.distributed (RANK set) every rank saves its own file.
"""
import argparse
import os
import signal
import sys
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--on", default="term", choices=["term", "int", "none", "ignore"])
p.add_argument("--save", required=True)
p.add_argument("--ready", required=True)
p.add_argument("--mb", type=int, default=30)
p.add_argument("--max-steps", type=int, default=200000)
a = p.parse_args()

rank = int(os.environ.get("RANK", "0"))
if "RANK" in os.environ:
    import torch.distributed as dist
    dist.init_process_group("gloo")
tag = ".rank%d" % rank if "RANK" in os.environ else ""
save, ready = a.save + tag, a.ready + tag
asked = []


def ask(sig, frame):
    asked.append(signal.Signals(sig).name)


if a.on == "term":
    signal.signal(signal.SIGTERM, ask)
elif a.on == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGUSR1, ask)


def say(line):
    """One write(2) of the whole line: under PYTHONUNBUFFERED print() writes
    the text and its newline apart, and two ranks sharing the stdout pipe
    (torchrun's, or `traceml run`'s, both inherited) could land between
    them ("...['SIGTERM']preempt: rank 0 ..."). One write under PIPE_BUF
    is atomic."""
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), (line + "\n").encode())


def checkpoint():
    with open(save, "wb") as f:
        for _ in range(a.mb):
            f.write(b"\0" * (1 << 20))
            f.flush()
            time.sleep(0.05)
    say("preempt: rank %d saved %d bytes after %s" % (rank, os.path.getsize(save), asked))


model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
try:
    while not asked and step < a.max_steps:
        loss = model(torch.randn(16, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step == 1:
            open(ready, "w").close()
        time.sleep(0.005)
except KeyboardInterrupt:
    if a.on != "int":
        raise
    asked.append("KeyboardInterrupt")
say("preempt: rank %d stopped (%s)" % (rank, asked))
checkpoint()
sys.exit(0)
