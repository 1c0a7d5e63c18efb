"""The suite's own machinery (tests/run): the tests of one xdist_group run
on one pytest worker, one after the other, so a group's session fixture
(a shared real-torch run, the wheel built once) is made once, and two of
its builds never run at once in the checkout."""
import os
import subprocess
import sys

QUICK = True

GROUPED = '''
import os, time, pytest
pytestmark = pytest.mark.xdist_group("one")
def test_a(): time.sleep(0.2); open("a." + os.environ["PYTEST_XDIST_WORKER"], "w").close()
def test_b(): time.sleep(0.2); open("b." + os.environ["PYTEST_XDIST_WORKER"], "w").close()
def test_c(): time.sleep(0.2); open("c." + os.environ["PYTEST_XDIST_WORKER"], "w").close()
def test_d(): time.sleep(0.2); open("d." + os.environ["PYTEST_XDIST_WORKER"], "w").close()
'''


def test_a_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-n", "2", "--dist", "loadgroup", "test_grouped.py"],
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    workers = {f.split(".")[1] for f in os.listdir(tmp_path) if f[:2] in ("a.", "b.", "c.", "d.")}
    assert len(workers) == 1, (sorted(os.listdir(tmp_path)), p.stdout[-2000:])


# torchrun's report of a rank that aborted at exit (its lines as torch
# 2.13 prints them), after the rank's own message
TORCHRUN_REPORT = '''Traceback (most recent call last):
  File ".../torch/distributed/run.py", line 1019, in run
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : %s (pid: 10089)  (SIG%s)
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : -6 (pid: 10090)  (SIGABRT)
  traceback : Signal 6 (SIGABRT) received by PID 10090
'''


def test_gloo_exit_abort_recognised_exactly():
    """conftest.gloo_exit_abort (what every multi-rank test accepts besides
    exit 0): PyTorch's abort at exit and nothing else."""
    from conftest import GLOO_EXIT_ABORT as MARK, gloo_exit_abort
    report = TORCHRUN_REPORT % ("-15", "TERM")   # the peer torchrun then stopped
    spawn = ("Traceback (most recent call last):\n  File \"x.py\", line 9\n"
             "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated "
             "with signal SIGABRT\n")
    assert gloo_exit_abort(1, "W1204 warning\n%s\n%s" % (MARK, report))
    assert gloo_exit_abort(1, MARK + "\n" + spawn)
    assert gloo_exit_abort(134, MARK + "\n")               # one process, no launcher
    assert not gloo_exit_abort(0, MARK)                     # nothing failed
    assert not gloo_exit_abort(1, report)                   # another abort
    # a Python error before it, a rank that failed otherwise, an error after it
    assert not gloo_exit_abort(1, "Traceback (most recent call last):\nValueError: x\n%s\n%s"
                               % (MARK, report))
    assert not gloo_exit_abort(1, "%s\n%s" % (MARK, TORCHRUN_REPORT % ("1", "?")))
    assert not gloo_exit_abort(1, MARK + "\nTraceback (most recent call last):\nOSError: disk\n")
    assert not gloo_exit_abort(1, MARK + "\n" + spawn.replace("SIGABRT", "SIGSEGV"))
