"""Does `traceml compare` tell noise from a real change on this machine?

    .venv/bin/python bench/compare_stats.py [--runs 20] [--steps 200] [--slower 1.10]
                                            [--delay-ms 10]

Runs examples/quickstart.py (a DataLoader that sleeps --delay-ms a batch,
plus ~1.5 ms of compute a step) under `traceml run` --runs times as is and
--runs times slowed by --slower (its per-batch sleep scaled so the step is
about that much longer), alternating, then compares:

  same vs same     base[i] against base[i+1]    (runs - 1 pairs)
  base vs slowed   base[i] against slow[i]      (runs pairs)

and prints how many of each got which verdict, with the step-time change
and the test's p-value per pair. Targets (issue "Drop-in fidelity"): at
least 19/20 EQUIVALENT for same-vs-same, at least 19/20 REGRESSION for the
10%-slowed pairs. docs/performance.md ("Compare on noise") quotes it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(REPO, ".venv")
TRACEML = os.path.join(VENV, "bin", "traceml")
QUICKSTART = os.path.join(REPO, "examples", "quickstart.py")


def run(logs, name, steps, delay_ms):
    env = dict(os.environ, QUICKSTART_STEPS=str(steps), QUICKSTART_DELAY_MS="%.3f" % delay_ms,
               OMP_NUM_THREADS="1")
    p = subprocess.run([TRACEML, "run", "--logs-dir", logs, "--run-name", name, QUICKSTART],
                       env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit("run %s failed:\n%s" % (name, p.stderr[-2000:]))
    return os.path.join(logs, name, "final_summary.json")


def compare(a, b, out):
    subprocess.run([TRACEML, "compare", a, b, "--output", out], capture_output=True,
                   text=True, timeout=120)
    with open(out + ".json", encoding="utf-8") as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--slower", type=float, default=1.10)
    ap.add_argument("--delay-ms", type=float, default=10.0)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="traceml-compare-")
    logs = os.path.join(tmp, "logs")
    base_ms = a.delay_ms
    # the quickstart's step is the sleep plus ~1 ms of work: scale the sleep
    # so the whole step is `slower` times longer
    slow_ms = base_ms + (a.slower - 1.0) * (base_ms + 1.0)
    base, slow = [], []
    for i in range(a.runs):
        base.append(run(logs, "base%02d" % i, a.steps, base_ms))
        slow.append(run(logs, "slow%02d" % i, a.steps, slow_ms))
    results = {"same vs same": [], "base vs slowed": []}
    for i in range(a.runs - 1):
        results["same vs same"].append(compare(base[i], base[i + 1], os.path.join(tmp, "s%d" % i)))
    for i in range(a.runs):
        results["base vs slowed"].append(compare(base[i], slow[i], os.path.join(tmp, "r%d" % i)))

    print("## traceml compare on %d + %d runs of the quickstart (%d steps each, %g ms "
          "sleep a batch), slowed x%.2f\n" % (a.runs, a.runs, a.steps, base_ms, a.slower))
    print("| pairs | n | EQUIVALENT | REGRESSION | IMPROVEMENT | other | median change % "
          "| median p |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, rs in results.items():
        verdicts = [r["verdict"] for r in rs]
        changes = [r["test"]["change_percent"] if r.get("test") else r["step_time_change_percent"]
                   for r in rs]
        ps = [r["test"]["p_value"] for r in rs if r.get("test")]
        other = len(rs) - sum(verdicts.count(v) for v in ("EQUIVALENT", "REGRESSION",
                                                          "IMPROVEMENT"))
        print("| %s | %d | %d | %d | %d | %d | %+.1f | %s |" % (
            name, len(rs), verdicts.count("EQUIVALENT"), verdicts.count("REGRESSION"),
            verdicts.count("IMPROVEMENT"), other, statistics.median(changes),
            "%.2g" % statistics.median(ps) if ps else "n/a"))
    print()
    for name, rs in results.items():
        odd = [r for r in rs if r["verdict"] != ("EQUIVALENT" if name == "same vs same"
                                                 else "REGRESSION")]
        for r in odd:
            print("%s: %s: %s" % (name, r["verdict"], r["why"]))
    print("\n(run folders in %s)" % tmp)


if __name__ == "__main__":
    main()
