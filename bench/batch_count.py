"""What counting a fetched batch costs (throughput, docs/summary-json.md).

    OMP_NUM_THREADS=1 .venv/bin/python bench/batch_count.py [--pairs 5]

The engine's fetch wrapper (the PhaseCall that times a DataLoader's
__next__) around a function that returns a prepared batch: counted (its
lead tensor's shape read, one ring write) against the same wrapper with
counting off (trace_step(samples=0) turns the loader's counting off for
good, so each side is its own process). Batches: a tuple (images,
labels) and a Hugging Face style dict of input_ids. Per process the
median of 9 blocks of 20,000 fetches, the training thread's CPU time;
processes alternate, and the table prints the median over pairs of
(counted - off) and the ratio.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r'''
import json, sys, time
import torch
import traceml_ai as traceml
from traceml_ai import _traceml as c
traceml.init(mode="manual")
if sys.argv[1] == "off":
    traceml.trace_step(samples=0)
batches = {"tuple": (torch.zeros(32, 3, 8, 8), torch.zeros(32, dtype=torch.long)),
           "dict": {"input_ids": torch.zeros(8, 128, dtype=torch.long),
                    "attention_mask": torch.ones(8, 128, dtype=torch.long)}}
out = {}
for name, b in batches.items():
    fetch = c.PhaseCall(lambda: b, c.INPUT, c.KIND_INPUT)
    blocks = []
    for _ in range(9):
        t0 = time.thread_time_ns()
        for _ in range(20000):
            fetch()
        blocks.append((time.thread_time_ns() - t0) / 20000)
    out[name] = sorted(blocks)[4]
print("BENCH " + json.dumps(out))
'''


def one(side):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEML_")}
    env["OMP_NUM_THREADS"] = "1"
    with tempfile.TemporaryDirectory() as here:   # the run's logs/ go there
        p = subprocess.run([sys.executable, "-c", CHILD, side], capture_output=True, text=True,
                           env=env, timeout=300, cwd=here)
    for line in p.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[6:])
    raise SystemExit("child failed: " + p.stderr[-2000:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    a = ap.parse_args()
    diffs, ons, offs = {}, {}, {}
    for i in range(a.pairs):
        order = ("on", "off") if i % 2 == 0 else ("off", "on")
        r = {side: one(side) for side in order}
        for k in r["on"]:
            diffs.setdefault(k, []).append(r["on"][k] - r["off"][k])
            ons.setdefault(k, []).append(r["on"][k])
            offs.setdefault(k, []).append(r["off"][k])
    print("batch    off ns/fetch   counted ns/fetch   added ns (median of %d pairs)   ratio"
          % a.pairs)
    for k in diffs:
        on, off = statistics.median(ons[k]), statistics.median(offs[k])
        print("%-8s %12.0f %18.0f %14.0f %30.3f" % (k, off, on, statistics.median(diffs[k]),
                                                   on / off))


if __name__ == "__main__":
    main()
