"""Does `traceml compare` tell noise from a real change on this machine?

    .venv/bin/python bench/compare_stats.py [--runs 20] [--steps 200] [--slower 1.10]
                                            [--delay-ms 10] [--busy 2] [--per-side 3]
                                            [--before /work/main/build/bin/traceml]

Runs examples/quickstart.py (a DataLoader that sleeps --delay-ms a batch,
plus ~1.5 ms of compute a step) under `traceml run` --runs times as is and
--runs times slowed by --slower (its per-batch sleep scaled so the step is
about that much longer), alternating, then compares:

  same vs same     base[i] against base[i+1]    (runs - 1 pairs)
  base vs slowed   base[i] against slow[i]      (runs pairs)

and prints how many of each got which verdict, with the step-time change
and the test's p-value per pair.

Issue 45 ("a compare you can gate CI on"): --busy N starts N bounded busy
loops beside every run (killed at the end, whatever happens); each round
then runs base, again (the same script) and slowed, interleaved, and
--per-side K adds the same two questions asked with K runs a side
(`--baseline base[jK..] --candidate again[jK..]` / `slow[jK..]`): false
alarms (same vs same not EQUIVALENT/INCONCLUSIVE) and misses (slowed not
REGRESSION). --before BIN also asks another traceml (main's, before the
change) the one-run-a-side questions on the same summaries. Targets (issue "Drop-in fidelity"): at
least 19/20 EQUIVALENT for same-vs-same, at least 19/20 REGRESSION for the
10%-slowed pairs. docs/performance.md ("Compare on noise") quotes it.
"""
import argparse
import json
import os
import signal
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


def compare(a, b, out, binary=TRACEML):
    if isinstance(a, list):
        args = ["--baseline"] + a + ["--candidate"] + b
    else:
        args = [a, b]
    subprocess.run([binary, "compare"] + args + ["--output", out], capture_output=True,
                   text=True, timeout=120)
    with open(out + ".json", encoding="utf-8") as f:
        return json.load(f)


def table(results):
    print("| pairs | n | EQUIVALENT | REGRESSION | IMPROVEMENT | INCONCLUSIVE | other "
          "| median change % | median p |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, rs in results.items():
        if not rs:
            continue
        verdicts = [r["verdict"] for r in rs]
        changes = [r["test"]["change_percent"] if r.get("test") else r["step_time_change_percent"]
                   for r in rs]
        changes = [c for c in changes if c is not None]
        ps = [r["test"]["p_value"] for r in rs if r.get("test")]
        known = ("EQUIVALENT", "REGRESSION", "IMPROVEMENT", "INCONCLUSIVE")
        other = len(rs) - sum(verdicts.count(v) for v in known)
        print("| %s | %d | %d | %d | %d | %d | %d | %s | %s |" % (
            name, len(rs), verdicts.count("EQUIVALENT"), verdicts.count("REGRESSION"),
            verdicts.count("IMPROVEMENT"), verdicts.count("INCONCLUSIVE"), other,
            "%+.1f" % statistics.median(changes) if changes else "n/a",
            "%.2g" % statistics.median(ps) if ps else "n/a"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--slower", type=float, default=1.10)
    ap.add_argument("--delay-ms", type=float, default=10.0)
    ap.add_argument("--busy", type=int, default=0, help="busy loops beside every run")
    ap.add_argument("--per-side", type=int, default=0, help="also compare K runs a side")
    ap.add_argument("--before", default="", help="another traceml binary: the same pairs")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="traceml-compare-")
    logs = os.path.join(tmp, "logs")
    base_ms = a.delay_ms
    # the quickstart's step is the sleep plus ~1 ms of work: scale the sleep
    # so the whole step is `slower` times longer
    slow_ms = base_ms + (a.slower - 1.0) * (base_ms + 1.0)
    base, again, slow = [], [], []
    loops = [subprocess.Popen(["timeout", "3600", "sh", "-c", "while :; do :; done"],
                              start_new_session=True) for _ in range(a.busy)]
    try:
        for i in range(a.runs):
            base.append(run(logs, "base%02d" % i, a.steps, base_ms))
            again.append(run(logs, "again%02d" % i, a.steps, base_ms))
            slow.append(run(logs, "slow%02d" % i, a.steps, slow_ms))
    finally:
        for lp in loops:   # the group: a SIGKILL to `timeout` alone leaves its loop
            os.killpg(lp.pid, signal.SIGKILL)
            lp.wait()
    binaries = [("after", TRACEML)] + ([("before", a.before)] if a.before else [])
    K = a.per_side
    print("## traceml compare on 3 x %d interleaved runs of the quickstart (%d steps each, "
          "%g ms sleep a batch), slowed x%.2f, %d busy loops beside\n"
          % (a.runs, a.steps, base_ms, a.slower, a.busy))
    for label, binary in binaries:
        results = {"same vs same, 1 a side": [], "base vs slowed, 1 a side": []}
        for i in range(a.runs):
            results["same vs same, 1 a side"].append(
                compare(base[i], again[i], os.path.join(tmp, "%s_s%d" % (label, i)), binary))
            results["base vs slowed, 1 a side"].append(
                compare(base[i], slow[i], os.path.join(tmp, "%s_r%d" % (label, i)), binary))
        if K and label == "after":
            results["same vs same, %d a side" % K] = []
            results["base vs slowed, %d a side" % K] = []
            for j in range(a.runs // K):
                g = slice(j * K, (j + 1) * K)
                results["same vs same, %d a side" % K].append(
                    compare(base[g], again[g], os.path.join(tmp, "n_s%d" % j)))
                results["base vs slowed, %d a side" % K].append(
                    compare(base[g], slow[g], os.path.join(tmp, "n_r%d" % j)))
        print("### %s (%s)\n" % (label, binary))
        table(results)
        print()
        for name, rs in results.items():
            want = "EQUIVALENT" if name.startswith("same") else "REGRESSION"
            for r in rs:
                if r["verdict"] != want:
                    print("%s: %s: %s" % (name, r["verdict"], r["why"][:300]))
        print()
    print("(run folders in %s)" % tmp)


if __name__ == "__main__":
    main()
