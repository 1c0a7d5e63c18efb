"""Durations from the monotonic clock, and the PARTIAL line of a summary
rebuilt after the aggregator was lost, with real PyTorch.

The wall clock of every process of a run (launcher, aggregator, training)
is moved mid-run without root: tests/fakes/clockjump.c, preloaded, adds the
seconds a file holds to every wall-clock reading, and the training itself
rewrites that file. Nothing is compared with a fixed delay: durations with
what this test measured on its own monotonic clock around the run, step
counts with what the training says it did.
"""
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

from conftest import BUILD, REPO, TRACEML, base_env, free_port_pair

# A small real training. Every step sleeps --step-ms (so that a run has a
# steady pace on a loaded machine too); after --start-s of start-up (a
# model loading, say) before the first step. At --mark it writes
# OUT.mark (its own monotonic time since it started, and the step), at
# --jump1 / --jump2 it moves the wall clock by +1 day / -1 hour, and after
# --jump2 it waits (up to 60 s) for OUT.go before going on. At the end,
# OUT.done: the steps it did and how long it ran. --empty: steps of no
# work, started by traceml.init(mode="manual"); --crash-after K: SIGSEGV
# right after step K.
TRAIN = r'''
import json, os, sys, time
t0 = time.monotonic()
import argparse
ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--steps", type=int, default=100)
ap.add_argument("--step-ms", type=float, default=10)
ap.add_argument("--start-s", type=float, default=0)
ap.add_argument("--mark", type=int, default=-1)
ap.add_argument("--jump1", type=int, default=-1)
ap.add_argument("--jump2", type=int, default=-1)
ap.add_argument("--crash-after", type=int, default=-1)
ap.add_argument("--empty", action="store_true")
a = ap.parse_args()
import torch
from torch import nn
import traceml_ai as traceml

def write(path, obj):
    with open(path + ".tmp", "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))
    os.rename(path + ".tmp", path)

def jump(seconds):
    write(os.environ["TRACEML_TEST_CLOCK_FILE"], "%d\n" % seconds)

time.sleep(a.start_s)
model = nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 64)
if a.empty:
    traceml.init(mode="manual")   # under --no-auto-trace: the start; nothing patched
    time.sleep(0.3)               # the shipper idles: a pass every 80 ms
done = 0
for i in range(a.steps):
    with traceml.trace_step(model):
        if not a.empty:           # empty: 20 steps take well under a millisecond
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(a.step_ms / 1000.0)
    done += 1
    if i == a.crash_after:
        import signal
        os.kill(os.getpid(), signal.SIGSEGV)
    if i == a.mark:
        write(a.out + ".mark", {"step": i, "elapsed_s": time.monotonic() - t0,
                                "pid": os.getpid()})
    if i == a.jump1:
        jump(86400)
    if i == a.jump2:
        jump(-3600)
        write(a.out + ".jumped", {"step": i, "elapsed_s": time.monotonic() - t0})
        deadline = time.monotonic() + 60
        while not os.path.exists(a.out + ".go") and time.monotonic() < deadline:
            time.sleep(0.01)
write(a.out + ".done", {"steps": done, "elapsed_s": time.monotonic() - t0})
'''

CLOCKJUMP = os.path.join(BUILD, "fakes", "libclockjump.so")


def wait_file(path, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
        if proc.poll() is not None:
            break
        time.sleep(0.01)
    out, err = proc.communicate(timeout=60)
    raise AssertionError("no %s\n--- stdout\n%s\n--- stderr\n%s" % (path, out[-3000:], err[-3000:]))


def start(tmp_path, name, args, launcher_args=(), env=None):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    out = str(tmp_path / "t")
    cmd = [TRACEML, "run", "--logs-dir", str(tmp_path / "logs"), "--run-name", name]
    cmd += list(launcher_args) + [str(script), out] + [str(a) for a in args]
    proc = subprocess.Popen(cmd, cwd=REPO, env=base_env(**(env or {})), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    return proc, out


def aggregator_of(launcher_pid):
    kids = []
    for tid in os.listdir("/proc/%d/task" % launcher_pid):
        with open("/proc/%d/task/%s/children" % (launcher_pid, tid)) as f:
            kids += [int(x) for x in f.read().split()]
    agg = [k for k in kids if b"__aggregate" in open("/proc/%d/cmdline" % k, "rb").read()]
    assert len(agg) == 1, kids
    return agg[0]


def live(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/api/live" % port, timeout=5) as r:
            return json.loads(r.read().decode("utf-8"))
    except (urllib.error.URLError, OSError, ValueError):
        return None


def test_wall_clock_jumps_leave_durations_alone(tmp_path):
    """+1 day, then -1 hour, mid-run: the run's duration (box, JSON,
    manifest), the live elapsed_s and the background-CPU share stay those
    of the real run. Tolerance: 0.15 s (the box's one decimal, the JSON's
    rounding) around bounds this test and the training measured."""
    clock = tmp_path / "clock"
    clock.write_text("0\n")
    port = free_port_pair()
    t_launch = time.monotonic()
    proc, out = start(tmp_path, "jumps", ["--steps", "150", "--jump1", "40", "--jump2", "90"],
                      ["--mode", "dashboard", "--dashboard-port", str(port), "--interval", "0.5"],
                      env={"LD_PRELOAD": CLOCKJUMP, "TRACEML_TEST_CLOCK_FILE": str(clock)})
    try:
        jumped = wait_file(out + ".jumped", proc)
        # a snapshot made after the jump back: it shows a time an hour behind
        snap = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            snap = live(port)
            if snap and snap["unix_ms"] < time.time() * 1000 - 3000 * 1000:
                break
            time.sleep(0.1)
        t_poll = time.monotonic() - t_launch
        assert snap and snap["unix_ms"] < time.time() * 1000 - 3000 * 1000, snap
        open(out + ".go", "w").close()
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    t_run = time.monotonic() - t_launch
    assert proc.returncode == 0, stderr
    done = json.loads(open(out + ".done").read())
    # the live view: from the training's own time at the jump (the run
    # started before it) to this test's time at the poll
    assert jumped["elapsed_s"] - 0.15 <= snap["elapsed_s"] <= t_poll + 0.15, (jumped, snap, t_poll)
    run_dir = tmp_path / "logs" / "jumps"
    s = json.loads((run_dir / "final_summary.json").read_text())
    d = s["duration_s"]
    assert done["elapsed_s"] - 0.15 <= d <= t_run + 0.15, (done, d, t_run)
    assert " · %.1fs" % d in stdout, stdout
    m = json.loads((run_dir / "manifest.json").read_text())
    assert done["elapsed_s"] - 0.15 <= m["duration_s"] <= t_run + 0.15, (m, t_run)
    # the wall clock moved: the manifest's end is a person's time, an hour back
    assert m["end_unix_ms"] < m["start_unix_ms"], m
    bg = s["meta"]["traceml_background_cpu_percent"]
    # shipper, sampler and aggregator threads over a run of seconds: some
    # CPU, less than one core (a day-long duration made it ~1e-6 %, a
    # zero one n/a)
    assert bg is not None and 0.01 < bg < 100, bg


def partial_of(tmp_path, name):
    s = json.loads((tmp_path / "logs" / name / "final_summary.json").read_text())
    return s["meta"]["partial"]


def test_killed_aggregator_counts_the_steps_traced(tmp_path):
    """Node 0's aggregator SIGKILLed mid-run of a training with a slow
    start-up (3 s before its first step): the PARTIAL line says how many
    steps the training did, as the training itself counted them (the old
    estimate, at the rate since the process started, was ~60% short)."""
    proc, out = start(tmp_path, "killed", ["--steps", "400", "--start-s", "3", "--mark", "60"])
    wait_file(out + ".mark", proc)
    time.sleep(0.5)                            # > one store flush (200 ms)
    os.kill(aggregator_of(proc.pid), signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    done = json.loads(open(out + ".done").read())
    partial = partial_of(tmp_path, "killed")
    assert partial.startswith("the aggregator was killed by signal 9 "), partial
    assert partial.endswith(", of %d traced on this node" % done["steps"]), (partial, done)
    assert "PARTIAL: the aggregator was killed by signal 9" in stdout
    assert not (tmp_path / "logs" / "killed" / "progress").exists()


def test_stopped_aggregator_dated_and_counted(tmp_path):
    """A SIGSTOPped aggregator: dated by the last step it stored (between
    the training's own time at the mark and this test's time at the stop,
    0.05 s either side for the one decimal), not by the launcher's giving
    up at the end; and the steps counted like a killed one's."""
    t_launch = time.monotonic()
    proc, out = start(tmp_path, "stopped", ["--steps", "400", "--start-s", "2", "--mark", "60"],
                      ["--finalize-timeout-sec", "2"])
    mark = wait_file(out + ".mark", proc)
    time.sleep(0.5)                            # > one store flush (200 ms)
    agg = aggregator_of(proc.pid)
    os.kill(agg, signal.SIGSTOP)
    t_stop = time.monotonic() - t_launch
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        try:
            os.kill(agg, signal.SIGKILL)
        except OSError:
            pass
    assert proc.returncode == 0, stderr
    done = json.loads(open(out + ".done").read())
    partial = partial_of(tmp_path, "stopped")
    assert partial.startswith("the aggregator stopped answering "), partial
    at = float(partial.split("stopped answering ")[1].split(" s into")[0])
    assert mark["elapsed_s"] - 0.05 <= at <= t_stop + 0.05, (partial, mark, t_stop)
    assert "did not finish the summary within 2 s" in partial, partial
    assert partial.endswith(", of %d traced on this node" % done["steps"]), (partial, done)


def test_crash_before_any_step_reached_the_aggregator(tmp_path):
    """A training that SIGSEGVs itself right after 20 quick steps, before
    the shipper's next pass: "before any step reached the aggregator (20
    were traced)", never "before any step was traced". A pass may still
    come in between (rarely: microseconds out of 80 ms): then steps did
    arrive, and the run is tried again, at most five times."""
    for attempt in range(5):
        name = "crash%d" % attempt
        proc, out = start(tmp_path, name, ["--steps", "100", "--empty", "--crash-after", "19"],
                          ["--no-auto-trace"])
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == -signal.SIGSEGV, stderr   # the launcher dies as it did
        s = json.loads((tmp_path / "logs" / name / "final_summary.json").read_text())
        if s["meta"]["ranks_reported"] == 0:      # no step arrived
            break
    why = s["primary_diagnosis"]["why"]
    assert why == ("The training exited with code 139 before any step reached the aggregator "
                   "(20 were traced)."), why
    # the box wraps its lines at the terminal's width: read it as one text
    text = " ".join(stdout.replace("|", " ").split())
    assert "before any step reached the aggregator (20 were traced)" in text, stdout
