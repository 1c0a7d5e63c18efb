"""The aggregator from 8 to 10,000 ranks in one table (issue 26's scale
table): bench/loadgen's two measurements per rank count, side by side.

    make && python3 bench/scale.py [--ranks 8,100,1000,10000] [--seconds 20]
                                   [--rate 10] [--steps 2000] [--repeats 5]

Per rank count R:
  live   `loadgen --live-only --ranks R --rate RATE --seconds S`: R simulated
         ranks speak the wire protocol to a forked aggregator (event loop,
         aggregator, SQLite store on its writer thread), one STEPS frame per
         record: records lost, the aggregator's CPU (all threads, and its
         event loop's thread) as % of one core, its peak RSS, and at that
         load a late rank's handshake and rank 0's summary() over the wire
         (ms, median / max of 4);
  long   `loadgen --long STEPS --ranks R --repeats N`: the aggregator object
         with its store fed R x STEPS records as fast as it takes them:
         RSS, a mid-run summary() (what a rank's traceml.summary() gets:
         median / max ms, the answer's KB), the live snapshot the live views
         build once a second (median / max ms), the final summary after every
         goodbye, and whether it named the injected straggler (rank 7's
         input).
Standard library only; loadgen exits 1 when a record is lost.
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LOADGEN = os.path.join(HERE, "..", "build", "bench", "loadgen")


def rows(out):
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in out.splitlines() if re.match(r"\| \d", line)]


def run(args):
    p = subprocess.run([LOADGEN] + [str(a) for a in args], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit("loadgen %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode,
                                                  p.stderr.strip()))
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="8,100,1000,10000")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--rate", type=int, default=10)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    print("| ranks | live: lost | live: CPU % all / loop | live: peak RSS MiB | "
          "live: handshake ms | live: summary() over the wire ms med / max | "
          "long: steps x ranks | long: RSS MB | summary() ms med / max | summary() KB | "
          "snapshot ms med / max | final summary ms | verdict |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in [int(x) for x in a.ranks.split(",")]:
        (lv,) = rows(run(["--live-only", "--ranks", r, "--rate", a.rate,
                          "--seconds", a.seconds]))
        lost, cpu, loop, rss = lv[3], lv[5], lv[6], lv[7].split("/")[1].strip()
        join, asked = lv[10], lv[11].split("(")[0].strip()
        out = run(["--long", a.steps, "--ranks", r, "--repeats", a.repeats])
        lg = rows(out)[-1]
        fin = re.search(r"goodbye: (\d+) ms \((\w+); ([^)]*)\)", out)
        print("| %d | %s | %s / %s | %s | %s | %s | %s x %d | %s | %s | %s | %s | %s | %s |" % (
            r, lost, cpu, loop, rss, join, asked, lg[0], r, lg[2], lg[4], lg[5], lg[6],
            fin.group(1) if fin else "?", fin.group(3) if fin else "?"))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
