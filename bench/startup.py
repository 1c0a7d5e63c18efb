"""What installing and starting TraceML costs: import time, wheel size, and
the time to the first training step under `traceml run`.

    .venv/bin/python bench/startup.py [--repeats 15] [--json OUT]

- import: `python -c "import traceml_ai"` against `python -c "pass"` in the
  venv, alternating fresh processes; the paired difference is what the
  import adds (it does not import torch).
- wheel: `python -m build --wheel` of this checkout (no build isolation:
  the venv's setuptools), the wheel's size and the installed package's.
- first step: the same script (imports torch and traceml_ai, builds a
  small model, runs one traced step) started three ways, alternating:
      plain     python script.py with TRACEML_DISABLED=1 (no TraceML at all)
      in-proc   python script.py (TraceML without the launcher)
      run       traceml run script.py (the entry point, the interpreter
                check, the aggregator, then the script)
  What TraceML adds before the first step is the sum of two figures with
  little noise: the launch (the parent's spawn to the script's first line)
  and the set-up in the script (traceml.init() and the first trace_step
  entry), each against plain. The wall time to the first step is shown
  too, but importing torch (~2 s, +-100 ms) drowns a difference there.
  Target (issue "Install and run like a PyTorch user"): `traceml run`
  adds <= 50 ms to the first step against plain.
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
VENV = os.environ.get("TRACEML_VENV", os.path.join(REPO, ".venv"))
PY = os.path.join(VENV, "bin", "python")
TRACEML = os.path.join(VENV, "bin", "traceml")

SCRIPT = r'''
import sys, time
t0 = float(sys.argv[1])
started = time.time() - t0
import torch
import traceml_ai as traceml
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
t = time.perf_counter()
traceml.init(mode="auto")
with traceml.trace_step(model):
    setup = time.perf_counter() - t
    first = time.time() - t0
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
    opt.step()
print("FIRST %.6f %.6f %.6f" % (started, setup, first), flush=True)
'''


def timed(cmd, env=None):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return (time.perf_counter() - t) * 1000.0


def first_step_ms(cmd, env):
    """(script started, init + first trace_step entry, first step), ms."""
    p = subprocess.run(cmd + [repr(time.time())], capture_output=True, text=True, env=env)
    for line in p.stdout.splitlines():
        if line.startswith("FIRST "):
            return [float(x) * 1000.0 for x in line.split()[1:]]
    raise RuntimeError("no first step (rc %s): %s %s" % (p.returncode, p.stdout[-1000:],
                                                        p.stderr[-1000:]))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    for p in (PY, TRACEML):
        if not os.access(p, os.X_OK):
            sys.exit("bench/startup.py: %s is missing (run scripts/venv)" % p)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("TRACEML_DISABLED", None)
    res = {}

    # import time
    bare, imp = [], []
    for i in range(args.repeats + 2):
        a = timed([PY, "-c", "pass"], env)
        b = timed([PY, "-c", "import traceml_ai"], env)
        if i >= 2:
            bare.append(a)
            imp.append(b)
    d = [b - a for a, b in zip(bare, imp)]
    res["import"] = {"python_ms": statistics.median(bare), "with_import_ms": statistics.median(imp),
                     "added_median_ms": statistics.median(d), "added_p90_ms": pct(d, 0.9)}

    with tempfile.TemporaryDirectory(prefix="traceml-startup-") as tmp:
        # wheel size
        subprocess.run([PY, "-m", "build", "--wheel", "--no-isolation", "--outdir", tmp, REPO],
                       check=True, capture_output=True, env=env)
        wheel = [f for f in os.listdir(tmp) if f.endswith(".whl")][0]
        import traceml_ai
        pkg = os.path.dirname(traceml_ai.__file__)
        installed = sum(os.path.getsize(os.path.join(r, f))
                        for r, _, fs in os.walk(pkg) for f in fs)
        res["wheel"] = {"file": wheel, "bytes": os.path.getsize(os.path.join(tmp, wheel)),
                        "installed_bytes": installed}

        # time to the first step
        script = os.path.join(tmp, "first.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        logs = os.path.join(tmp, "logs")
        ways = {
            "plain": ([PY, script], dict(env, TRACEML_DISABLED="1")),
            "in-proc": ([PY, script], dict(env, TRACEML_LOGS_DIR=logs)),
            "run": ([TRACEML, "run", "--logs-dir", logs, script], env),
        }
        got = {k: [] for k in ways}
        for i in range(args.repeats + 1):
            order = list(ways) if i % 2 == 0 else list(ways)[::-1]
            for k in order:
                ms = first_step_ms(*ways[k])
                if i >= 1:                       # the first round warms the caches
                    got[k].append(ms)
        for k in ways:
            pairs = list(zip(got[k], got["plain"]))
            launch = [a[0] - b[0] for a, b in pairs]
            setup = [a[1] - b[1] for a, b in pairs]
            both = [x + y for x, y in zip(launch, setup)]
            res["first_step_" + k] = {
                "launch_ms": statistics.median(a[0] for a in got[k]),
                "setup_ms": statistics.median(a[1] for a in got[k]),
                "first_step_ms": statistics.median(a[2] for a in got[k]),
                "added_launch_ms": statistics.median(launch),
                "added_setup_ms": statistics.median(setup),
                "added_median_ms": statistics.median(both), "added_p90_ms": pct(both, 0.9)}

    print()
    print("TraceML start-up (%d repeats, medians; added = paired difference)" % args.repeats)
    i = res["import"]
    print("import traceml_ai      python -c pass %.1f ms, with the import %.1f ms: added %.1f ms "
          "(p90 %.1f)" % (i["python_ms"], i["with_import_ms"], i["added_median_ms"],
                          i["added_p90_ms"]))
    w = res["wheel"]
    print("wheel                  %s: %.2f MB (installed package %.2f MB)"
          % (w["file"], w["bytes"] / 1e6, w["installed_bytes"] / 1e6))
    print("%-22s %10s %10s %12s | %12s %12s %10s" % (
        "first step", "launch ms", "setup ms", "1st step ms", "added launch", "added setup",
        "added p90"))
    for k in ("plain", "in-proc", "run"):
        r = res["first_step_" + k]
        print("%-22s %10.1f %10.1f %12.1f | %+12.1f %+12.1f %+10.1f" % (
            k, r["launch_ms"], r["setup_ms"], r["first_step_ms"], r["added_launch_ms"],
            r["added_setup_ms"], r["added_p90_ms"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    print("BENCH_RESULT " + json.dumps(res))


if __name__ == "__main__":
    main()
