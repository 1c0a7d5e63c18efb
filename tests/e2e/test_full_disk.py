"""A run folder on a disk that fills up (SPEC 8, fail-open: never change
what the training does).

A small tmpfs is mounted in a private folder; telemetry.sqlite fills it
within a few hundred steps, and at the end final_summary.json and
final_summary.txt cannot be written either. The training must not notice
(its own exit code), and the summary must still be the whole one, the one
the aggregator holds in memory: every step the script ran, with a NOT SAVED
line giving the system's reason, and no "the aggregator exited" rebuild
from the truncated telemetry.sqlite. Nothing that was on disk is replaced
by half a file.
"""
import json
import os
import re
import subprocess

import pytest

from conftest import DIAG, PYTHON, REPO, TIMEOUT, TRACEML, base_env

STEPS = 1500          # healthy.py's own count: --steps
DISK = "256k"         # telemetry.sqlite fills it after a few hundred steps


@pytest.fixture
def full_disk(tmp_path):
    """A private tmpfs of DISK bytes, unmounted however the test ends."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + DISK, "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (%s)" % (p.stderr.strip() or p.returncode))
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def box_text(out):
    """The box's rows joined into one line, wrapped rows rejoined."""
    rows = [l[1:-1].strip() for l in out.splitlines()
            if l.startswith("|") and l.endswith("|")]
    return re.sub(r"\s+", " ", " ".join(rows))


def check_summary(out, run_dir):
    text = box_text(out)
    m = re.search(r"· (\d+) common steps? ·", text)
    assert m, out[-4000:]
    assert int(m.group(1)) == STEPS, out[-4000:]   # every step, not the sqlite's share
    assert ("NOT SAVED: final_summary.json, final_summary.txt: No space left on device ("
            in text), out[-4000:]
    assert re.sub(r"\s", "", run_dir + "/)") in re.sub(r"\s", "", text), out[-4000:]
    assert "aggregator exited" not in out, out[-4000:]
    # the store's failure is named with the system's words too
    assert re.search(r"PARTIAL: telemetry\.sqlite could not be written after \d+ steps? "
                     r"\(No space left on device\)", text), out[-4000:]
    assert "Full evidence:" not in text   # no path to a file that is not there
    assert "file could not be read or written" not in out


def check_folder(run_dir):
    names = os.listdir(run_dir)
    assert not [n for n in names if n.startswith(".")], names   # no temporary file left
    assert "final_summary.json" not in names and "final_summary.txt" not in names, names
    with open(os.path.join(run_dir, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)   # whole: the update failed, the old one stayed
    assert manifest["status"] == "running", manifest


def test_launcher_on_a_full_disk(full_disk):
    logs = full_disk / "logs"
    cmd = [TRACEML, "run", "--logs-dir", str(logs), "--run-name", "full",
           os.path.join(DIAG, "healthy.py"), "--steps", str(STEPS), "--delay-ms", "0"]
    p = subprocess.run(cmd, cwd=REPO, env=base_env(COLUMNS=250), capture_output=True,
                       text=True, timeout=TIMEOUT)
    explain = "rc=%s\n--- stdout\n%s\n--- stderr\n%s" % (p.returncode, p.stdout[-4000:],
                                                        p.stderr[-3000:])
    assert p.returncode == 0, explain   # the training's own exit code
    run_dir = str(logs / "full")
    check_summary(p.stdout, run_dir)
    assert "manifest.json: No space left on device" in p.stderr, explain
    check_folder(run_dir)


def test_plain_python_on_a_full_disk(full_disk):
    """No launcher: the in-process aggregator prints the same whole box."""
    logs = full_disk / "logs"
    p = subprocess.run([PYTHON, os.path.join(DIAG, "healthy.py"), "--steps", str(STEPS),
                        "--delay-ms", "0"], cwd=REPO,
                       env=base_env(TRACEML_LOGS_DIR=str(logs), COLUMNS=250),
                       capture_output=True, text=True, timeout=TIMEOUT)
    explain = "rc=%s\n--- stdout\n%s\n--- stderr\n%s" % (p.returncode, p.stdout[-4000:],
                                                        p.stderr[-3000:])
    assert p.returncode == 0, explain
    runs = os.listdir(logs)
    assert len(runs) == 1, runs
    run_dir = str(logs / runs[0])
    check_summary(p.stdout, run_dir)
    check_folder(run_dir)
