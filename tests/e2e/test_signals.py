"""The launcher is the training's transparent parent (cli/run/signals.c):
a signal that stops a training as a job's preemption sends it (SIGTERM to
the launcher, or to the whole process group as Slurm does), Ctrl-C, a
hangup under nohup, Slurm's SIGUSR1 warning, or a death by a signal, ends
the same way under `traceml run` as under plain Python: the same output,
the same checkpoint bytes, the same exit status -- however long the
checkpoint takes. Each case runs the script (tests/e2e/unchanged/preempt.py,
real torch) both ways and compares.
"""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import PYTHON, REPO, TIMEOUT, TRACEML, base_env, shell_signals

SCRIPT = os.path.join(REPO, "tests", "e2e", "unchanged", "preempt.py")


def wait_files(paths, proc, timeout=TIMEOUT):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if all(os.path.exists(p) for p in paths):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    out, err = proc.communicate(timeout=30)
    raise AssertionError("the training never got ready (rc %s):\n%s\n%s"
                         % (proc.returncode, out[-2000:], err[-3000:]))


class Case(object):
    """preempt.py run plainly (or by torchrun, ranks > 1) and under
    `traceml run`, each sent sig (to the launcher/interpreter alone, or
    to the whole process group) once it trained a step."""

    def __init__(self, tmp_path, on, sig, to="process", ranks=1, launcher_args=(),
                 preexec=None, mb=30):
        self.tmp, self.on, self.sig, self.to, self.ranks = tmp_path, on, sig, to, ranks
        self.launcher_args, self.preexec, self.mb = list(launcher_args), preexec, mb
        self.res = {}

    def command(self, how):
        d = self.tmp / how
        d.mkdir(exist_ok=True)
        args = ["--on", self.on, "--save", str(d / "ckpt"), "--ready", str(d / "ready"),
                "--mb", str(self.mb)]
        if how == "plain":
            if self.ranks > 1:
                return [PYTHON, "-m", "torch.distributed.run", "--standalone",
                        "--nproc-per-node", str(self.ranks), SCRIPT] + args
            return [PYTHON, SCRIPT] + args
        dist = ["--nproc-per-node", str(self.ranks)] if self.ranks > 1 else []
        return ([TRACEML, "run", "--logs-dir", str(self.tmp / "logs"), "--run-name", "sig"]
                + dist + self.launcher_args + [SCRIPT] + args)

    def fresh(self):
        """In the child: a shell's signal state (conftest.shell_signals)."""
        shell_signals()
        if self.preexec:
            self.preexec()

    def run(self, how, between=None):
        d = self.tmp / how
        p = subprocess.Popen(self.command(how), cwd=str(self.tmp), env=base_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True, preexec_fn=self.fresh)
        try:
            ready = [str(d / "ready")]
            if self.ranks > 1:
                ready = [str(d / ("ready.rank%d" % r)) for r in range(self.ranks)]
            wait_files(ready, p)
            if between:
                between(p)
            if self.to == "group":
                os.killpg(p.pid, self.sig)
            else:
                os.kill(p.pid, self.sig)
            out, err = p.communicate(timeout=TIMEOUT)
        finally:
            try:                          # nothing of it outlives the test
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            if p.returncode is None:
                p.communicate()
        files = sorted(f for f in os.listdir(str(d)) if f.startswith("ckpt"))
        sizes = {f: os.path.getsize(str(d / f)) for f in files}
        said = sorted(l for l in out.splitlines() if l.startswith("preempt:"))
        self.res[how] = {"rc": p.returncode, "sizes": sizes, "said": said, "out": out,
                         "err": err}
        return self.res[how]

    def both(self, between=None):
        plain = self.run("plain", between)
        traced = self.run("traced", between)
        assert "TraceML Run Summary" in traced["out"], traced["out"][-3000:] + traced["err"][-3000:]
        for k in ("rc", "sizes", "said"):
            assert traced[k] == plain[k], (k, plain[k], traced[k], traced["err"][-3000:])
        return plain, traced


def full(case, how="plain", files=1):
    r = case.res[how]
    assert len(r["sizes"]) == files and set(r["sizes"].values()) == {case.mb << 20}, r
    return r


def test_sigterm_to_the_launcher_lets_the_checkpoint_finish(tmp_path):
    """Kubernetes and most schedulers send SIGTERM to the job's first
    process and wait 30-120 s: the 1.5 s checkpoint is written whole."""
    c = Case(tmp_path, "term", signal.SIGTERM)
    plain, traced = c.both()
    assert plain["rc"] == 0 and full(c)
    assert plain["said"] == ["preempt: rank 0 saved %d bytes after ['SIGTERM']" % (30 << 20),
                             "preempt: rank 0 stopped (['SIGTERM'])"]
    m = traced["out"]
    assert "INTERRUPTED" in m, m[-2000:]


def test_sigterm_to_the_process_group_is_delivered_once(tmp_path):
    """Slurm signals the whole process group: the training got it already,
    and a second copy would run its handler twice."""
    c = Case(tmp_path, "term", signal.SIGTERM, to="group")
    plain, traced = c.both()
    assert plain["rc"] == 0 and full(c)
    assert "after ['SIGTERM']" in plain["said"][0]    # once, not ['SIGTERM', 'SIGTERM']


def test_ctrl_c_save_in_keyboardinterrupt(tmp_path):
    """`except KeyboardInterrupt: save()`: the terminal's Ctrl-C (the
    foreground group's SIGINT) and the save runs to its end."""
    c = Case(tmp_path, "int", signal.SIGINT, to="group")
    plain, traced = c.both()
    assert plain["rc"] == 0 and full(c)


def test_nohup_keeps_the_hangup_ignored(tmp_path):
    """`nohup traceml run ...`: a hangup (the terminal closed) reaches
    every process of the group and must not end the training; a SIGTERM
    later does, as it would."""
    def hangup(p):
        os.killpg(p.pid, signal.SIGHUP)
        time.sleep(0.5)
        assert p.poll() is None, "the hangup ended it"

    c = Case(tmp_path, "term", signal.SIGTERM,
             preexec=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    plain, traced = c.both(between=hangup)
    assert plain["rc"] == 0 and full(c)


def test_sigusr1_reaches_the_script(tmp_path):
    """Slurm's --signal=USR1@90: the launcher passes SIGUSR1 on (it used
    to die of it, leaving the training untraced and orphaned)."""
    c = Case(tmp_path, "none", signal.SIGUSR1)
    plain, traced = c.both()
    assert plain["rc"] == 0 and full(c)
    assert "after ['SIGUSR1']" in plain["said"][0]


@pytest.mark.parametrize("sig,to", [(signal.SIGTERM, "process"), (signal.SIGINT, "group")])
def test_a_death_by_signal_is_the_launchers_too(tmp_path, sig, to):
    """No handler: Python dies of the signal, and so does the launcher,
    after the summary (a parent's waitpid sees the signal, not 128+N; a
    shell still prints 128+N)."""
    c = Case(tmp_path, "none", sig, to=to)
    plain, traced = c.both()
    assert plain["rc"] == -sig and plain["sizes"] == {}
    m = traced["out"]
    assert "INTERRUPTED" in m, m[-2000:]


def test_kill_after_is_the_users_grace_period(tmp_path):
    """A training that ignores SIGTERM runs on (as without TraceML) unless
    the user set --kill-after: then SIGKILL, and the launcher dies of it."""
    c = Case(tmp_path, "ignore", signal.SIGTERM, launcher_args=["--kill-after", "1"])
    r = c.run("traced")
    assert r["rc"] == -signal.SIGKILL, r["err"][-3000:]
    assert "did not end within --kill-after 1 s" in r["err"]
    assert "TraceML Run Summary" in r["out"] and r["sizes"] == {}


def test_two_ranks_save_before_the_launcher_exits(tmp_path):
    """torchrun passes SIGTERM to its workers and waits for them: under
    `traceml run --nproc-per-node 2` both ranks' checkpoints are whole when
    the launcher exits, and no rank outlives it."""
    c = Case(tmp_path, "term", signal.SIGTERM, ranks=2, mb=20)
    plain, traced = c.both()
    full(c, "plain", files=2)
    full(c, "traced", files=2)


@pytest.mark.skipif(not shutil.which("tmux") or not shutil.which("timeout"),
                    reason="tmux not installed (scripts/deps)")
def test_timeout_in_a_terminal_trains(tmp_path):
    """`timeout N traceml run --mode cli` runs the launcher outside the
    terminal's foreground job: its full-screen set-up would be stopped by
    SIGTTOU, and the training with it. It prints plain lines instead."""
    from test_live import Tmux, wait_for
    done = tmp_path / "exit_code"
    env = base_env(LANG="C.UTF-8", LC_ALL="C.UTF-8", TERM="xterm-256color",
                   PATH=os.environ.get("PATH", "/usr/bin:/bin"))
    d = tmp_path / "t"
    d.mkdir()
    cmd = ("cd %s && timeout %d %s run --mode cli --logs-dir %s --run-name tmo %s --on none "
           "--save %s --ready %s --max-steps 300 2>&1; echo $? > %s; sleep 600"
           % (tmp_path, TIMEOUT, TRACEML, tmp_path / "logs", SCRIPT, d / "ckpt", d / "ready",
              done))
    t = Tmux("tmo", cmd, env)
    try:
        assert wait_for(lambda: done.exists() and done.read_text().strip(), TIMEOUT), \
            t.history()
        assert done.read_text().strip() == "0", t.history()
        h = t.history()
        assert "not the terminal's foreground job" in h, h
        assert "preempt: rank 0 saved" in h and "TraceML Run Summary" in h, h
    finally:
        t.kill()
