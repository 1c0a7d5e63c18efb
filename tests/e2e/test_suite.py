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
