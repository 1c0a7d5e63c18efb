"""The training never depends on the launcher (docs/live.md, "Where the
training's output goes"): under `--mode cli` its stdout and stderr are a
pseudo-terminal drained by a process of its own into training_output.log,
so a launcher that is killed or stopped neither kills nor stalls a
training that prints.

The training is tests/e2e/live/ticker.py, which prints a ~1 KB line every
20 ms and logs its own progress (iteration, CLOCK_MONOTONIC) to a file;
a small sh wrapper around it records the launcher's pid (its parent) and
the training's own exit status. Both runs are in tmux, full screen.
"""
import os
import re
import shlex
import shutil
import signal
import sys
import time

import pytest

from conftest import REPO, TRACEML, base_env
from test_live import Tmux, wait_for

QUICK = True      # no real torch: the quick tier (conftest.py)

TICKER = os.path.join(REPO, "tests", "e2e", "live", "ticker.py")
ITERATIONS = 300

pytestmark = pytest.mark.skipif(not shutil.which("tmux"),
                                reason="tmux not installed (scripts/deps)")


def read_progress(path):
    """[(iteration, monotonic time)] and the other lines ("done N", "error ...")."""
    ticks, other = [], []
    try:
        text = open(path, encoding="utf-8").read()
    except FileNotFoundError:
        return ticks, other
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            try:
                ticks.append((int(parts[0]), float(parts[1])))
                continue
            except ValueError:
                pass
        if line.strip():
            other.append(line)
    return ticks, other


class TickerRun(object):
    """traceml run --mode cli -- sh train.sh, in tmux; train.sh runs the
    ticker and writes its parent's pid (the launcher) and the ticker's exit
    status to files of the test's folder."""

    def __init__(self, tmp_path, name):
        self.dir = tmp_path
        self.logs = tmp_path / "logs"
        self.run_dir = self.logs / name
        self.progress = tmp_path / "progress"
        self.launcher_pid_file = tmp_path / "launcher.pid"
        self.train_rc = tmp_path / "train.rc"
        self.launcher_rc = tmp_path / "launcher.rc"
        wrapper = tmp_path / "train.sh"
        wrapper.write_text("echo $PPID > %s\n%s %s --progress %s --iterations %d\necho $? > %s\n" % (
            shlex.quote(str(self.launcher_pid_file)), shlex.quote(sys.executable),
            shlex.quote(TICKER), shlex.quote(str(self.progress)), ITERATIONS,
            shlex.quote(str(self.train_rc))))
        env = base_env(LANG="C.UTF-8", LC_ALL="C.UTF-8", TERM="xterm-256color",
                       PATH=os.environ.get("PATH", "/usr/bin:/bin"))
        cmd = ("cd %s && %s run --mode cli --interval 0.25 --logs-dir %s --run-name %s -- sh %s; "
               "echo $? > %s; sleep 600") % (
            shlex.quote(REPO), shlex.quote(TRACEML), shlex.quote(str(self.logs)), name,
            shlex.quote(str(wrapper)), shlex.quote(str(self.launcher_rc)))
        self.t = Tmux(name, cmd, env)

    def ticks(self):
        return read_progress(self.progress)[0]

    def started(self):
        """Waits for the full-screen view showing the ticker's lines, 50
        iterations in; returns the launcher's pid."""
        def shown():
            s = self.t.screen()
            return ("TRAINING OUTPUT" in s and re.search(r"tick \d+ t=", s) and
                    len(self.ticks()) >= 50)
        assert wait_for(shown, 90), "no full-screen view with the training's output:\n" + \
            self.t.screen() + "\nprogress: %d" % len(self.ticks())
        pid = int(self.launcher_pid_file.read_text())
        cmdline = open("/proc/%d/cmdline" % pid, "rb").read().split(b"\0")
        assert b"run" in cmdline and b"--mode" in cmdline, cmdline
        return pid

    def finished(self):
        """The training's exit status (it writes it itself), within 120 s."""
        assert wait_for(lambda: self.train_rc.exists() and self.train_rc.read_text().strip(),
                        120, 0.1), "the training did not end:\n" + self.t.history()[-3000:]
        return int(self.train_rc.read_text())

    def assert_all_iterations(self):
        ticks, other = read_progress(self.progress)
        errors = [l for l in other if l.startswith("error")]
        assert not errors, "the training died: %s\n%s" % (errors, self.t.history()[-2000:])
        assert "done %d" % ITERATIONS in other, other
        assert [i for i, _ in ticks] == list(range(ITERATIONS)), ticks[-5:]

    def processes(self):
        """Pids of live traceml processes whose command line names this
        run's logs folder: the launcher, the aggregator, the drainer."""
        mark = str(self.logs).encode()
        pids = []
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    cmd = f.read()
                with open("/proc/%s/stat" % p, "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if (mark in cmd and os.path.basename(cmd.split(b"\0")[0]) == b"traceml" and
                    state != b"Z"):
                pids.append(int(p))
        return pids


def test_training_outlives_a_killed_launcher(tmp_path):
    """SIGKILL of the launcher mid-run: the training keeps printing (its
    output goes on to the terminal and to training_output.log), does every
    iteration and exits 0; nothing of TraceML outlives it for long."""
    r = TickerRun(tmp_path, "killed")
    try:
        launcher = r.started()
        os.kill(launcher, signal.SIGKILL)
        at_kill = len(r.ticks())
        assert at_kill < ITERATIONS - 50, "the training ended before the kill; make it longer"
        rc = r.finished()
        assert rc == 0, "training exit status %d\n%s" % (rc, r.t.history()[-3000:])
        r.assert_all_iterations()
        assert wait_for(lambda: r.launcher_rc.exists(), 10), r.t.history()[-2000:]
        assert r.launcher_rc.read_text().strip() == "137"
        # everything in the log; the terminal got the output after the kill
        out = (r.run_dir / "training_output.log").read_text()
        assert "tick %d t=" % (ITERATIONS - 1) in out and "TICKER DONE" in out
        h = wait_for(lambda: "TICKER DONE" in r.t.history() and r.t.history(), 10)
        assert h, "the output did not go on to the terminal:\n" + r.t.history()[-3000:]
        assert "the training goes on" in h, h[-3000:]
        assert re.search(r"^tick %d t=" % (ITERATIONS - 1), h, re.M), h[-3000:]
        # the drainer ends with the training's output; the aggregator finalizes
        left = wait_for(lambda: not r.processes(), 30) or r.processes()
        assert left is True, "still running after the training ended: %s" % left
    finally:
        r.t.kill()


@pytest.mark.solo
def test_training_runs_on_while_the_launcher_is_stopped(tmp_path):
    """SIGSTOP of the launcher for 1.5 s: the training's progress during the
    stop is about what it makes in as much time before it (its own measured
    rate, so a loaded machine slows both alike); after SIGCONT the run ends
    as usual, summary and exit 0."""
    r = TickerRun(tmp_path, "stopped")
    try:
        launcher = r.started()
        t_rate = time.monotonic()
        time.sleep(1.0)                    # a second of progress to measure the rate on
        before = [(i, t) for i, t in r.ticks() if t >= t_rate]
        assert len(before) >= 10, before
        rate = (before[-1][0] - before[0][0]) / (before[-1][1] - before[0][1])

        t0 = time.monotonic()
        os.kill(launcher, signal.SIGSTOP)
        try:
            time.sleep(1.5)
            t1 = time.monotonic()
            during = [(i, t) for i, t in r.ticks() if t0 <= t <= t1]
            state = open("/proc/%d/stat" % launcher).read().rsplit(")", 1)[1].split()[0]
        finally:
            os.kill(launcher, signal.SIGCONT)
        assert state == "T", "the launcher was not stopped (state %s)" % state
        expected = rate * (t1 - t0)
        times = [t0] + [t for _, t in during] + [t1]
        gaps = [b - a for a, b in zip(times, times[1:])]
        print("launcher stopped %.2f s: %d iterations, %.1f expected at %.1f/s, longest pause "
              "%.3f s" % (t1 - t0, len(during), expected, rate, max(gaps)))
        assert len(during) >= 0.5 * expected, (
            "%d iterations during a %.2f s stop, %.0f expected at the rate before it "
            "(%.1f/s); longest pause %.2f s" % (len(during), t1 - t0, expected, rate, max(gaps)))
        assert ITERATIONS - 1 not in [i for i, _ in during], "the training ended during the stop"

        rc = r.finished()
        assert rc == 0, "training exit status %d" % rc
        r.assert_all_iterations()
        assert wait_for(lambda: r.launcher_rc.exists(), 60), r.t.history()[-3000:]
        assert r.launcher_rc.read_text().strip() == "0"
        h = r.t.history()
        assert "TraceML Run Summary" in h, h[-3000:]
        out = (r.run_dir / "training_output.log").read_text()
        assert "tick %d t=" % (ITERATIONS - 1) in out and "TICKER DONE" in out
    finally:
        r.t.kill()
