"""In-process cost of TraceML's auto mode on a ~1 ms CPU training step.

    /usr/bin/python3 bench/overhead.py [--repeats 5] [--steps 2000] [--json OUT]

Runs the same tiny training loop (DataLoader fetch, forward, backward,
optimizer step, all instrumented by auto mode) three ways, interleaved and
repeated, each in a fresh process started by the built launcher:

  baseline   `traceml run --disable-traceml`  (same launch, no instrumentation)
  traceml    `traceml run`                     (auto mode)
  profiler   `traceml run --disable-traceml` with the loop under torch.profiler

Each worker times its own loop (perf_counter_ns around every iteration,
after a warm-up) and reports the median and mean microseconds per step.
The table shows, per variant, the median over repeats and the added cost
against the baseline as the median of the paired per-repeat differences.
OMP_NUM_THREADS=1 so that the two cores of a small machine do not fight.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("TRACEML_BUILD", os.path.join(REPO, "build"))
TRACEML = os.path.join(BUILD, "bin", "traceml")


def worker(args):
    import torch
    from torch import nn
    from torch.utils.data import BatchSampler, DataLoader, SequentialSampler, TensorDataset
    import traceml_ai as traceml

    torch.set_num_threads(1)
    traceml.init(mode="auto")
    torch.manual_seed(0)
    batch, dim = 32, 64
    total = args.steps + args.warmup
    x = torch.randn(total * batch, dim)
    y = torch.randint(0, 10, (total * batch,))
    ds = TensorDataset(x, y)
    loader = DataLoader(ds, sampler=BatchSampler(SequentialSampler(ds), batch, False),
                        batch_size=None)
    model = nn.Sequential(nn.Linear(dim, args.width), nn.ReLU(),
                          nn.Linear(args.width, args.width), nn.ReLU(),
                          nn.Linear(args.width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def loop(times):
        t_prev = time.perf_counter_ns()
        for xb, yb in loader:
            with traceml.trace_step(model):
                loss = loss_fn(model(xb), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
            t = time.perf_counter_ns()
            times.append(t - t_prev)
            t_prev = t

    times = []
    if args.profiler:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            loop(times)
        del prof
    else:
        loop(times)
    t = sorted(times[args.warmup:])
    out = {"median_us": statistics.median(t) / 1000.0,
           "p10_us": t[len(t) // 10] / 1000.0,
           "mean_us": sum(t) / len(t) / 1000.0, "steps": len(t)}
    print("BENCH " + json.dumps(out), flush=True)


def inproc(args):
    """The glue alone, A/B in one process: the same loop of near-empty steps
    (nn.Linear(4, 4), batch 1) before and after traceml.init(mode="auto").
    Before init every TraceML call returns at once, so the difference is what
    the instrumentation adds per step. Best (lowest) block mean of each side,
    which a busy machine disturbs much less than a whole-run median."""
    import torch
    from torch import nn
    from torch.utils.data import BatchSampler, DataLoader, SequentialSampler, TensorDataset
    import traceml_ai as traceml

    torch.set_num_threads(1)
    torch.manual_seed(0)
    block, blocks = 2000, 7
    ds = TensorDataset(torch.randn(block, 4), torch.randn(block, 4))
    loader = DataLoader(ds, sampler=BatchSampler(SequentialSampler(ds), 1, False),
                        batch_size=None)
    model = nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.001)

    def run():
        best = None
        for _ in range(blocks):
            t0 = time.perf_counter_ns()
            for xb, yb in loader:
                with traceml.trace_step(model):
                    loss = ((model(xb) - yb) ** 2).sum()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            per = (time.perf_counter_ns() - t0) / block / 1000.0
            best = per if best is None else min(best, per)
        return best

    base = run()
    traceml.init(mode="auto")
    with_tml = run()
    print("BENCH " + json.dumps({"baseline_us": base, "traceml_us": with_tml,
                                 "added_us": with_tml - base}), flush=True)


def run_variant(variant, args, logs):
    cmd = [TRACEML, "run", "--logs-dir", logs, "--run-name",
           "bench_%s_%d_%d" % (variant, os.getpid(), time.monotonic_ns())]
    if variant in ("baseline", "profiler"):
        cmd.append("--disable-traceml")
    if variant == "inproc":
        cmd += [os.path.abspath(__file__), "--inproc"]
    else:
        cmd += [os.path.abspath(__file__), "--worker", "--steps", str(args.steps),
                "--warmup", str(args.warmup), "--width", str(args.width)]
    if variant == "profiler":
        cmd.append("--profiler")
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    for line in p.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[6:])
    raise RuntimeError("%s run failed (rc %s):\n%s\n%s" % (variant, p.returncode,
                                                          p.stdout[-2000:], p.stderr[-2000:]))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profiler", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--inproc", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.inproc:
        return inproc(args)
    if not os.access(TRACEML, os.X_OK):
        sys.exit("bench/overhead.py: %s is not built (run make)" % TRACEML)

    variants = ["baseline", "traceml", "profiler"]
    res = {v: [] for v in variants}
    p10 = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="traceml-bench-") as logs:
        for r in range(args.repeats):
            order = variants if r % 2 == 0 else variants[::-1]
            for v in order:
                out = run_variant(v, args, logs)
                res[v].append(out["median_us"])
                p10[v].append(out["p10_us"])
            print("repeat %d/%d: %s" % (r + 1, args.repeats, "  ".join(
                "%s %.1f us" % (v, res[v][-1]) for v in variants)), file=sys.stderr, flush=True)

        inproc_runs = []
        for r in range(args.repeats):
            inproc_runs.append(run_variant("inproc", args, logs))
            print("in-process A/B %d/%d: added %.1f us/step" % (
                r + 1, args.repeats, inproc_runs[-1]["added_us"]), file=sys.stderr, flush=True)

    base = statistics.median(res["baseline"])
    base10 = statistics.median(p10["baseline"])
    rows = []
    for v in variants:
        med = statistics.median(res[v])
        added = statistics.median(a - b for a, b in zip(res[v], res["baseline"]))
        m10 = statistics.median(p10[v])
        added10 = statistics.median(a - b for a, b in zip(p10[v], p10["baseline"]))
        rows.append((v, med, added, med / base, m10, added10, m10 / base10))
    print()
    print("TraceML overhead: %d repeats x %d steps, tiny MLP (width %d), OMP_NUM_THREADS=1"
          % (args.repeats, args.steps, args.width))
    print("median over repeats of each run's per-step median (and of its 10th percentile);")
    print("added = median of the paired per-repeat differences against the baseline")
    print("%-10s %12s %12s %8s | %12s %12s %8s" % (
        "variant", "us/step med", "added us", "ratio", "us/step p10", "added us", "ratio"))
    for v, med, added, ratio, m10, added10, ratio10 in rows:
        if v == "baseline":
            added = added10 = 0.0
        print("%-10s %12.1f %12.1f %8.3f | %12.1f %12.1f %8.3f" % (
            v, med, added, ratio, m10, added10, ratio10))
    ib = statistics.median(x["baseline_us"] for x in inproc_runs)
    it = statistics.median(x["traceml_us"] for x in inproc_runs)
    ia = statistics.median(x["added_us"] for x in inproc_runs)
    print()
    print("Glue alone, in-process A/B (near-empty step, best block of 2000, median of %d runs)"
          % args.repeats)
    print("%-10s %14.1f %16.1f %8.3f" % ("no-op", ib, 0.0, 1.0))
    print("%-10s %14.1f %16.1f %8.3f" % ("traceml", it, ia, it / ib))
    result = {"inproc": inproc_runs, "inproc_added_us_median": ia,
              "repeats": args.repeats, "steps": args.steps, "width": args.width,
              "us_per_step": res, "p10_us_per_step": p10,
              "summary": {r[0]: {"median_us": r[1], "added_us": r[2], "ratio": r[3],
                                 "p10_us": r[4], "added_p10_us": r[5], "ratio_p10": r[6]}
                          for r in rows}}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    print("BENCH_RESULT " + json.dumps(result["summary"]))


if __name__ == "__main__":
    main()
