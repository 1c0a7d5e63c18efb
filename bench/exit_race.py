"""How often does PyTorch's gloo exit race abort a rank, and does ending the
script with dist.barrier() before dist.destroy_process_group() avoid it?

    .venv/bin/python bench/exit_race.py [--runs 10] [--switch 2.0] [--steps 5] [--traced]

The race (docs/distributed.md, "A rank aborts at exit"): a collective made
in backward captures the backward's Python context in its gloo Work; the
gloo worker thread that drops that Work needs the GIL, and if the main
thread has begun finalizing the interpreter by then, taking the GIL ends
the worker thread inside a C++ destructor: "terminate called without an
active exception", SIGABRT, after the rank's last step.

On an idle machine it is rare (0 in 34 FSDP runs beside two busy loops
here); --switch widens the window on purpose: a sitecustomize sets
sys.setswitchinterval(SWITCH), so a worker thread waiting for the GIL
waits up to SWITCH seconds while the main thread runs on to exit. 0 keeps
Python's own 5 ms.

Each script runs --runs times as shipped (dist.barrier() before
dist.destroy_process_group()) and as a copy without that barrier, the two
alternating, with TraceML off (`traceml run --disable-traceml`: plain
torchrun), and with --traced under `traceml run` too; the table is the
share of runs that aborted so. Any other failure is printed and counted
apart.
"""
import argparse
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(REPO, ".venv")
PYTHON = os.path.join(VENV, "bin", "python")
TRACEML = os.path.join(VENV, "bin", "traceml")
MARK = "terminate called without an active exception"
BARRIER = "dist.barrier()   # the group's last work done before exit (docs/distributed.md)\n"
SCRIPTS = [("FSDP2", "examples/distributed/train_fsdp.py", []),
           ("DDP + fp16 comm hook", "examples/distributed/train_ddp.py",
            ["--comm-hook", "fp16", "--device-ms", "5"])]


def without_barrier(path, tmp):
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        src = f.read()
    assert BARRIER in src, "%s has no end-of-run barrier" % path
    out = os.path.join(tmp, "nobarrier_" + os.path.basename(path))
    with open(out, "w", encoding="utf-8") as f:
        f.write(src.replace(BARRIER, "pass\n"))
    return out


def run_once(script, args, traced, env, tmp):
    logs = tempfile.mkdtemp(dir=tmp)
    cmd = [TRACEML, "run", "--logs-dir", logs, "--run-name", "r", "--nproc-per-node", "2"]
    cmd += ([] if traced else ["--disable-traceml"]) + [script] + args
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    if p.returncode == 0:
        return "ok"
    if MARK in p.stderr and "Traceback" not in p.stderr.split(MARK)[0]:
        return "abort"
    print("  other failure (rc %d): %s" % (p.returncode, p.stderr[-400:]), file=sys.stderr)
    return "other"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--switch", type=float, default=2.0)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--traced", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, OMP_NUM_THREADS="1")
        env = {k: v for k, v in env.items() if not k.startswith("TRACEML_")}
        # the copies import examples/diagnosis/_common.py as the originals do
        env["PYTHONPATH"] = os.path.join(REPO, "examples", "diagnosis")
        if a.switch > 0:
            site = os.path.join(tmp, "site")
            os.mkdir(site)
            with open(os.path.join(site, "sitecustomize.py"), "w") as f:
                f.write("import sys\nsys.setswitchinterval(%r)\n" % a.switch)
            env["PYTHONPATH"] = site + os.pathsep + env["PYTHONPATH"]
        rows = []
        for name, path, args in SCRIPTS:
            arms = [("as shipped", os.path.join(REPO, path)),
                    ("no barrier", without_barrier(path, tmp))]
            for traced in (False, True) if a.traced else (False,):
                counts = {arm: {"ok": 0, "abort": 0, "other": 0} for arm, _ in arms}
                for _ in range(a.runs):
                    for arm, script in arms:
                        got = run_once(script, args + ["--steps", str(a.steps)], traced, env, tmp)
                        counts[arm][got] += 1
                for arm, _ in arms:
                    c = counts[arm]
                    rows.append((name, "traceml run" if traced else "TraceML off", arm,
                                 c["abort"], c["other"]))
        print("switch interval %s s, %d runs per row, %d steps, 2 ranks (gloo)\n"
              % (a.switch if a.switch > 0 else "0.005 (default)", a.runs, a.steps))
        print("%-22s %-12s %-11s %8s %6s" % ("script", "TraceML", "ending", "aborts", "other"))
        for name, how, arm, ab, other in rows:
            print("%-22s %-12s %-11s %4d/%-3d %6d" % (name, how, arm, ab, a.runs, other))


if __name__ == "__main__":
    main()
