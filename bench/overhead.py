"""What TraceML's auto mode costs per training step, on torch 2.x.

    OMP_NUM_THREADS=1 .venv/bin/python bench/overhead.py [--repeats 10] [--only probe] [--json OUT]

Two workloads, the same loop (DataLoader fetch, forward, backward,
optimizer step, all instrumented by auto mode):

  probe   nn.Linear(4, 4), batch 1: a near-empty step (~0.3 ms), so that
          TraceML's cost is as large a share as it can be
  10ms    an MLP of about 8-10 ms per step on one core

Time is the training thread's CPU time (time.thread_time_ns): on a shared
virtual machine wall time also carries other tenants' steal time, which
moved 10 ms steps by +-5% between blocks here. What TraceML's own threads
(shipper, sampler) spend is reported beside it, per step.

Two pairings:

  in-process   one process, TraceML initialised, blocks of steps (2000 of
               the probe, 100 of the 10 ms step) with the
               instrumentation switched on and off in turn (the patched
               attributes, the optimizer hooks and the model's forward
               wrapper put in and taken out; trace_step or a no-op). Each
               on-block is paired with the mean of the off-blocks around
               it. This is the most precise figure: no process-to-process
               noise (memory layout, CPU frequency), and drift cancels.
  process      `traceml run` against `traceml run --disable-traceml` (same
               launch, no instrumentation), alternating fresh processes;
               per process the best block mean; pairs of adjacent
               runs. An A/A pairing (disabled against disabled) shows the
               noise floor of this pairing on the machine.

Reported per pairing: the median and the 90th percentile of the paired
differences (µs/step), and the ratio of the medians. Targets (issue
"Install and run like a PyTorch user"): median <= 5 us, p90 <= 10 us.

On a machine as noisy as the development VM (an A/A pairing moved the
probe by a p90 of 16 µs and the 10 ms step by 300 µs), timing cannot
resolve a few µs. `--instructions` counts instead, with valgrind's
callgrind (nearly deterministic: identical runs differ by a few thousand
instructions per step, against hundreds of µs of timing noise): the probe runs
N and 2N steps with TraceML on and off (PYTHONHASHSEED=0, no launcher:
the shipper thread hosts the aggregator), and the per-step instructions
of the training thread are (I(2N) - I(N)) / N. TraceML's cost is the
difference on - off, also as a share of the step and as µs at the step's
measured speed; the other threads' instructions per step are TraceML's
background work (shipper, in-process aggregator and SQLite, sampler).
What TraceML does per step does not depend on the model (the same calls
and markers), so the probe's count holds for any step; the 10 ms step is
not counted (its BLAS kernels take seconds per step under callgrind).
About 10 minutes.
"""
import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.environ.get("TRACEML_VENV", os.path.join(REPO, ".venv"))
TRACEML = os.environ.get("TRACEML_BIN", os.path.join(VENV, "bin", "traceml"))
BLOCKS = {"probe": 2000, "10ms": 100}   # steps per block: ~0.5-1 s

WORKLOADS = {   # name: (batch, dim, width, hidden layers)
    "probe": (1, 4, 4, 0),
    "10ms": (128, 512, 512, 2),
}


def build(name, blocks):
    import torch
    from torch import nn
    from torch.utils.data import BatchSampler, DataLoader, SequentialSampler, TensorDataset

    torch.set_num_threads(1)
    torch.manual_seed(0)
    batch, dim, width, layers = WORKLOADS[name]
    steps = BLOCKS[name]
    n = steps * batch
    ds = TensorDataset(torch.randn(n, dim), torch.randint(0, 4, (n,)))
    loader = DataLoader(ds, sampler=BatchSampler(SequentialSampler(ds), batch, False),
                        batch_size=None)
    mods = [nn.Linear(dim, width)]
    for _ in range(layers):
        mods += [nn.ReLU(), nn.Linear(width, width)]
    model = nn.Sequential(*mods, nn.ReLU(), nn.Linear(width, 4))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def block(step_ctx, background=None):
        t0, p0 = time.thread_time_ns(), time.process_time_ns()
        for xb, yb in loader:
            with step_ctx(model):
                loss = loss_fn(model(xb), yb)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        t = time.thread_time_ns() - t0
        if background is not None:     # the other threads' CPU: shipper, sampler
            background.append((time.process_time_ns() - p0 - t) / steps / 1000.0)
        return t / steps / 1000.0
    return model, block


def worker(args):
    """One process of the process pairing: best block mean of the training
    thread's CPU time and the other threads' CPU, µs/step."""
    import traceml_ai as traceml
    traceml.init(mode="auto")
    _, block = build(args.workload, args.blocks)
    for _ in range(2):
        block(traceml.trace_step)                      # warm-up
    bg = []
    best = min(block(traceml.trace_step, bg) for _ in range(args.blocks))
    print("BENCH " + json.dumps({"us": best, "bg_us": statistics.median(bg)}), flush=True)


def counted(args):
    """One process of the --instructions runs: N steps, nothing timed."""
    import traceml_ai as traceml
    traceml.init(mode="auto")
    _, block = build(args.workload, args.blocks)
    for _ in range(args.blocks):
        block(traceml.trace_step)


def callgrind_counts(args, workload, on, blocks, tmp):
    """Instructions of the main thread and of all others (callgrind)."""
    out = os.path.join(tmp, "cg.%s.%d.%d" % (workload, on, blocks))
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0",
               TRACEML_LOGS_DIR=os.path.join(tmp, "logs"))
    env.pop("TRACEML_DISABLED", None)
    if not on:
        env["TRACEML_DISABLED"] = "1"
    subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                    "--callgrind-out-file=" + out, sys.executable, os.path.abspath(__file__),
                    "--counted", "--workload", workload, "--blocks", str(blocks)],
                   check=True, capture_output=True, env=env, timeout=3600)
    threads = {}
    for f in os.listdir(tmp):
        if f.startswith(os.path.basename(out) + "-"):
            with open(os.path.join(tmp, f)) as fh:
                for line in fh:
                    if line.startswith(("summary:", "totals:")):
                        threads[int(f.rsplit("-", 1)[1])] = int(line.split()[1])
                        break
    main_ir = threads.pop(1)
    return main_ir, sum(threads.values())


def instructions(args):
    rows = []
    with tempfile.TemporaryDirectory(prefix="traceml-cg-") as tmp:
        for w in ("probe",):      # BLAS under callgrind: a 10 ms step takes seconds
            n = 1                   # block: 2000 steps
            per = {}
            for on in (False, True):
                a = callgrind_counts(args, w, on, n, tmp)
                b = callgrind_counts(args, w, on, 2 * n, tmp)
                steps = n * BLOCKS[w]
                per[on] = ((b[0] - a[0]) / steps, (b[1] - a[1]) / steps)
                print("%s %s: %.0f instructions/step (main), %.0f (other threads)" % (
                    w, "on" if on else "off", per[on][0], per[on][1]), file=sys.stderr,
                    flush=True)
            rows.append({"workload": w, "off_ir": per[False][0], "on_ir": per[True][0],
                         "added_ir": per[True][0] - per[False][0],
                         "added_share": (per[True][0] - per[False][0]) / per[False][0],
                         "background_ir": per[True][1] - per[False][1]})
    return rows


def inproc(args):
    """The in-process pairing: instrumentation toggled between blocks."""
    import torch
    import traceml_ai as traceml
    from torch.optim import optimizer as opt_mod

    traceml.init(mode="auto")
    model, block = build(args.workload, args.blocks)
    block(traceml.trace_step)                          # installs the forward wrapper
    patches = [(owner, name, getattr(owner, name), orig)
               for owner, name, orig in traceml._patched]
    hooks = (dict(opt_mod._global_optimizer_pre_hooks),
             dict(opt_mod._global_optimizer_post_hooks))
    slot = "_compiled_call_impl" if "_compiled_call_impl" in vars(model) else "forward"
    wrapper = vars(model)[slot]
    null = contextlib.nullcontext()

    def switch(on):
        for owner, name, ours, orig in patches:
            setattr(owner, name, ours if on else orig)
        for live, saved in zip((opt_mod._global_optimizer_pre_hooks,
                                opt_mod._global_optimizer_post_hooks), hooks):
            live.clear()
            if on:
                live.update(saved)
        if on:
            vars(model)[slot] = wrapper
        else:
            vars(model).pop(slot, None)
        return traceml.trace_step if on else (lambda m: null)

    for _ in range(2):
        block(switch(False))
        block(switch(True))
    offs, ons = [], []
    for _ in range(args.blocks):
        offs.append(block(switch(False)))
        ons.append(block(switch(True)))
    offs.append(block(switch(False)))
    diffs = [on - (offs[i] + offs[i + 1]) / 2.0 for i, on in enumerate(ons)]
    print("BENCH " + json.dumps({"off": offs, "on": ons, "diffs": diffs}), flush=True)
    del torch


def launch(args, workload, disabled, inproc_mode=False, logs=None):
    name = "bench_%d_%d" % (os.getpid(), time.monotonic_ns())
    cmd = [TRACEML, "run", "--logs-dir", logs, "--run-name", name]
    if disabled:
        cmd.append("--disable-traceml")
    cmd += [os.path.abspath(__file__), "--inproc" if inproc_mode else "--worker",
            "--workload", workload, "--blocks", str(args.blocks)]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    for line in p.stdout.splitlines():
        if line.startswith("BENCH "):
            out = json.loads(line[6:])
            # what the run's summary says it cost (docs/summary-json.md)
            try:
                with open(os.path.join(logs, name, "final_summary.json")) as f:
                    meta = json.load(f)["meta"]
                out["reported_us"] = meta.get("traceml_overhead_total_us_per_step")
                out["reported_step_us"] = meta.get("traceml_overhead_us_per_step")
                out["reported_bg_percent"] = meta.get("traceml_background_cpu_percent")
            except (OSError, ValueError, KeyError):
                pass
            return out
    raise RuntimeError("run failed (rc %s):\n%s\n%s" % (p.returncode, p.stdout[-2000:],
                                                       p.stderr[-2000:]))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def row(label, base, diffs):
    med = statistics.median(diffs)
    return {"pairing": label, "baseline_us": base, "n": len(diffs), "median_us": med,
            "p90_us": pct(diffs, 0.9), "ratio": (base + med) / base}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--inproc", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--counted", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--instructions", action="store_true",
                    help="also count instructions with callgrind (slow, deterministic)")
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="probe")
    ap.add_argument("--blocks", type=int, default=5, help="timed blocks per process [5]")
    ap.add_argument("--repeats", type=int, default=10,
                    help="process pairs per workload [10]; 0: no timing")
    ap.add_argument("--inproc-blocks", type=int, default=30,
                    help="on/off block pairs in the in-process pairing [40]")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--only", choices=sorted(WORKLOADS),
                    help="time this workload only [both]")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.inproc:
        return inproc(args)
    if args.counted:
        return counted(args)
    if not os.access(TRACEML, os.X_OK):
        sys.exit("bench/overhead.py: %s is missing (run scripts/venv)" % TRACEML)

    rows = []
    with tempfile.TemporaryDirectory(prefix="traceml-bench-") as logs:
        for w in [w for w in ("probe", "10ms") if args.only in (None, w)] if args.repeats > 0 else ():
            sub = argparse.Namespace(**vars(args))
            sub.blocks = args.inproc_blocks
            r = launch(sub, w, False, inproc_mode=True, logs=logs)
            rows.append(dict(row("in-process on/off", statistics.median(r["off"]), r["diffs"]),
                             workload=w))
            print("%s in-process: %s" % (w, rows[-1]), file=sys.stderr, flush=True)
            base, tml, aa, bg, reported = [], [], [], [], []
            for i in range(args.repeats):
                trio = [("b", True), ("t", False), ("a", True)]
                for kind, disabled in (trio if i % 2 == 0 else trio[::-1]):
                    out = launch(args, w, disabled, logs=logs)
                    {"b": base, "t": tml, "a": aa}[kind].append(out["us"])
                    if kind == "t" and out.get("reported_us") is not None:
                        reported.append((out["reported_us"], out.get("reported_step_us")))
                    if kind != "a":
                        bg.append((kind, out["bg_us"]))
                print("%s pair %d/%d: disabled %.1f, traceml %.1f, disabled again %.1f" % (
                    w, i + 1, args.repeats, base[-1], tml[-1], aa[-1]), file=sys.stderr, flush=True)
            b = statistics.median(base)
            rows.append(dict(row("process: traceml - disabled", b,
                                 [t - x for t, x in zip(tml, base)]), workload=w,
                             background_us=statistics.median(v for k, v in bg if k == "t")
                             - statistics.median(v for k, v in bg if k == "b")))
            rows.append(dict(row("process: A/A noise floor", b,
                                 [a - x for a, x in zip(aa, base)]), workload=w))
            if reported:
                rows[-2]["reported_us"] = statistics.median(r for r, _ in reported)
                rows[-2]["reported_step_us"] = statistics.median(s for _, s in reported)

    print()
    print("TraceML auto mode, µs added per step (OMP_NUM_THREADS=1; steps per block: %s)"
          % ", ".join("%s %d" % kv for kv in sorted(BLOCKS.items())))
    print("%-8s %-30s %10s %4s %10s %10s %7s %14s" % (
        "workload", "pairing", "base us", "n", "median", "p90", "ratio", "background us"))
    for r in rows:
        bgs = "%.2f" % r["background_us"] if "background_us" in r else ""
        print("%-8s %-30s %10.1f %4d %+10.2f %+10.2f %7.4f %14s" % (
            r["workload"], r["pairing"], r["baseline_us"], r["n"], r["median_us"], r["p90_us"],
            r["ratio"], bgs))
    # the summary's own figure against the measurement (issue "Drop-in
    # fidelity": within 2x on the probe)
    print()
    print("%-8s %26s %26s %8s %s" % ("workload", "reported us/step (in step)",
                                     "measured us/step (in-proc)", "ratio", "within 2x"))
    for w in ("probe", "10ms"):
        rep = [r for r in rows if r["workload"] == w and "reported_us" in r]
        mea = [r for r in rows if r["workload"] == w and r["pairing"].startswith("in-process")]
        if rep and mea and mea[0]["median_us"] > 0:
            ratio = rep[0]["reported_us"] / mea[0]["median_us"]
            print("%-8s %17.2f (%6.2f) %26.2f %8.2f %s" % (
                w, rep[0]["reported_us"], rep[0]["reported_step_us"], mea[0]["median_us"],
                ratio, "yes" if 0.5 <= ratio <= 2.0 else "NO"))
    result = {"timing": rows}
    if args.instructions:
        base = {r["workload"]: r["baseline_us"] for r in rows
                if r["pairing"].startswith("process: traceml")}
        cg = instructions(args)
        print()
        print("Instructions per step, training thread (callgrind; µs = share x the step's "
              "measured time)")
        print("%-8s %14s %14s %12s %9s %10s %16s" % (
            "workload", "off", "on", "added", "share", "added us", "background instr"))
        for r in cg:
            b = base.get(r["workload"])
            r["added_us"] = r["added_share"] * b if b else None
            print("%-8s %14.0f %14.0f %+12.0f %8.3f%% %10s %16.0f" % (
                r["workload"], r["off_ir"], r["on_ir"], r["added_ir"], 100 * r["added_share"],
                "%+.2f" % r["added_us"] if b else "-", r["background_ir"]))
        result["instructions"] = cg
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    print("BENCH_RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
