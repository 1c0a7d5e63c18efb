"""What the deep dive costs (docs/deep-dive.md), on torch 2.x on the CPU.

    OMP_NUM_THREADS=1 .venv/bin/python bench/deep_dive.py [--repeats 3] [--steps 60]

examples/deep_dive/one_module.py runs under `traceml run`, alternately
with `--deep-dive` (a window of 3 steps from step 20) and with
`--no-deep-dive` (in turn, the order alternating between pairs),
--repeats times each. Per pair:

  window      the window's wall time (deep_dive.window_ms: the profiler on,
              the 3 steps, the reduction of its events, the hand-over)
  3 steps     what those 3 steps cost without the profiler: 3 x the run's
              own mean Step Time (step_time.median.step_time_ms)
  cost        window - 3 steps: what the deep dive adds, paid once
  per step    cost / 3, also as a multiple of a step
  outside     the mean Step Time of the --deep-dive run against the
              --no-deep-dive run's: the window is left out of the figures
              and nothing stays after it, so this is run-to-run noise

The median over the pairs is printed as a table (docs/deep-dive.md quotes
it). Timing, so never asserted in a test.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.environ.get("TRACEML_VENV", os.path.join(REPO, ".venv"))
SCRIPT = os.path.join(REPO, "examples", "deep_dive", "one_module.py")


def run(logs, name, flag, steps):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for k in list(env):
        if k.startswith("TRACEML_") and k != "TRACEML_VENV":
            del env[k]
    p = subprocess.run([os.path.join(VENV, "bin", "traceml"), "run", "--logs-dir", logs,
                        "--run-name", name, flag, SCRIPT, "--steps", str(steps)],
                       env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("bench: %s failed:\n%s" % (name, p.stderr[-2000:]))
    with open(os.path.join(logs, name, "final_summary.json"), encoding="utf-8") as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as logs:
        for i in range(a.repeats):
            # the order alternates, so that what the machine does between
            # the two runs of a pair (a neighbour's load) does not favour one
            if i % 2:
                off = run(logs, "off%d" % i, "--no-deep-dive", a.steps)
                on = run(logs, "on%d" % i, "--deep-dive", a.steps)
            else:
                on = run(logs, "on%d" % i, "--deep-dive", a.steps)
                off = run(logs, "off%d" % i, "--no-deep-dive", a.steps)
            dd = on["deep_dive"]
            n = dd["last_step"] - dd["first_step"] + 1
            step_on = on["step_time"]["median"]["step_time_ms"]
            step_off = off["step_time"]["median"]["step_time_ms"]
            cost = dd["window_ms"] - n * step_on
            rows.append({"n": n, "step": step_on, "window": dd["window_ms"], "cost": cost,
                         "per": cost / n, "x": cost / n / step_on,
                         "outside": 100.0 * (step_on - step_off) / step_off,
                         "top": dd["modules"][0]["name"], "pct": dd["modules"][0]["percent"]})
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k != "top"}
    print("| workload | window | Step Time | window wall | 3 steps | cost | per profiled step "
          "| Step Time outside, on vs off |")
    print("|---|---|---|---|---|---|---|---|")
    print("| one_module.py (%s %.0f%%) | %d steps | %.2f ms | %.1f ms | %.1f ms | %.1f ms | "
          "%.1f ms (%.1fx a step) | %+.1f%% |" % (
              rows[0]["top"], med["pct"], med["n"], med["step"], med["window"],
              med["n"] * med["step"], med["cost"], med["per"], med["x"], med["outside"]))
    print("(median of %d pairs; each: %s)" % (len(rows), ", ".join(
        "cost %.1f ms / outside %+.1f%%" % (r["cost"], r["outside"]) for r in rows)))


if __name__ == "__main__":
    main()
