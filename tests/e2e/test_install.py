"""TraceML installed the ways PyTorch users install packages, into fresh
virtual environments beside the test venv (.venv/, which has torch):

- `python -m build`: an sdist, and a wheel built from that sdist; the wheel
  installed offline (--no-index) into a fresh venv works: `traceml`, the
  import, and the C API through `traceml config --cflags --libs`;
- `pip install -e .` and `uv pip install .`;
- the right interpreter: `traceml run` runs the Python of the venv it was
  installed in, also for `--nproc-per-node` (torch.distributed.run of that
  Python); --python and TRACEML_PYTHON choose another; a Python without
  torch, or none at all, is one line naming it and how to choose, exit 2.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

from conftest import PYTHON, REPO, VENV, base_env

# its tests share one fixture's runs: all on one pytest worker (tests/run), and the
# fixture session-scoped there, so the worker's other tests in between do not
# make it again
pytestmark = pytest.mark.xdist_group("install")

# One write(2) per line: under PYTHONUNBUFFERED print() writes each piece
# apart, and two ranks sharing a pipe interleave them ("PY PY 0 1 ...").
PRINT_PY = ("import os, sys\n"
            "os.write(1, ('PY %s %s\\n' % (os.environ.get('RANK', '-'), sys.prefix)).encode())\n")


def sh(cmd, timeout=300, **kw):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       timeout=timeout, env=kw.pop("env", base_env()), **kw)
    return p


def ok(p):
    assert p.returncode == 0, "%s\n--- stdout\n%s\n--- stderr\n%s" % (
        p.args, p.stdout[-3000:], p.stderr[-3000:])
    return p


def venv(path, pip=True):
    ok(sh([sys.executable, "-m", "venv"] + ([] if pip else ["--without-pip"]) + [path]))
    return path


def one_error_line(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("traceml: error: "), p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture(scope="session")
def dist(tmp_path_factory):
    """sdist + wheel (built from the sdist) with `python -m build`."""
    out = tmp_path_factory.mktemp("dist")
    ok(sh([PYTHON, "-m", "build", "--outdir", out, REPO], timeout=600))
    sdist = glob.glob(str(out / "traceml_ai-*.tar.gz"))
    wheel = glob.glob(str(out / "traceml_ai-*.whl"))
    assert len(sdist) == 1 and len(wheel) == 1, os.listdir(out)
    return sdist[0], wheel[0]


@pytest.fixture(scope="session")
def wheel_venv(dist, tmp_path_factory):
    """A fresh venv (no torch) with the wheel installed, offline."""
    v = venv(tmp_path_factory.mktemp("wheel") / "venv")
    ok(sh([v / "bin" / "python", "-m", "pip", "install", "--no-index", "--no-deps", dist[1]]))
    return v


def test_sdist_and_wheel_contents(dist):
    sdist, wheel = dist
    with tarfile.open(sdist) as t:
        names = [n.split("/", 1)[1] for n in t.getnames() if "/" in n]
    for need in ("Makefile", "setup.py", "pyproject.toml", "scripts/gen-web-assets",
                 "include/traceml/traceml.h", "python/_traceml.c", "web/report.js"):
        assert need in names, need
    assert not [n for n in names if n.startswith(("build/", ".venv/")) or n.endswith((".o", ".so"))]
    with zipfile.ZipFile(wheel) as z:
        info = {i.filename: i for i in z.infolist()}
    exe = info["traceml_ai/bin/traceml"]
    assert (exe.external_attr >> 16) & 0o111, "traceml is not executable in the wheel"
    for need in ("traceml_ai/__init__.py", "traceml_ai/_cli.py", "traceml_ai/lib/libtraceml.so",
                 "traceml_ai/include/traceml/traceml.h"):
        assert need in info, need
    assert [n for n in info if n.startswith("traceml_ai/_traceml.") and n.endswith(".so")]
    entry = [n for n in info if n.endswith("entry_points.txt")]
    with zipfile.ZipFile(wheel) as z:
        assert "traceml = traceml_ai._cli:main" in z.read(entry[0]).decode()
    assert os.path.getsize(wheel) <= 2 * 1024 * 1024, os.path.getsize(wheel)


def test_wheel_in_a_fresh_venv(wheel_venv, tmp_path):
    v = wheel_venv
    p = ok(sh([v / "bin" / "traceml", "--version"]))
    assert p.stdout.startswith("traceml ")
    p = ok(sh([v / "bin" / "python", "-c", "import traceml_ai, sys; print(traceml_ai.__file__); "
               "print('torch' in sys.modules)"]))
    assert p.stdout.split()[0].startswith(str(v)) and p.stdout.split()[1] == "False"
    p = ok(sh([v / "bin" / "python", "-m", "traceml_ai", "--version"]))
    assert p.stdout.startswith("traceml ")


def test_two_venvs_side_by_side(wheel_venv, tmp_path):
    """Each `traceml` runs its own venv's Python; the one without torch says so."""
    script = tmp_path / "which.py"
    script.write_text(PRINT_PY)
    logs = tmp_path / "logs"
    # the test venv (torch): its own interpreter
    p = ok(sh([os.path.join(VENV, "bin", "traceml"), "run", "--logs-dir", logs, script],
              cwd=str(tmp_path)))
    assert "PY - %s\n" % VENV in p.stdout, p.stdout
    # the fresh venv (no torch): a clear line naming its interpreter
    line = one_error_line(sh([wheel_venv / "bin" / "traceml", "run", "--logs-dir", logs, script],
                             cwd=str(tmp_path)), "cannot import torch", str(wheel_venv),
                          "--python")
    assert "installed in" in line
    assert not (logs / "which_fresh").exists()
    # ... which can be pointed at the torch venv, by flag or environment
    for args, env in ((["--python", PYTHON], {}), ([], {"TRACEML_PYTHON": PYTHON})):
        p = ok(sh([wheel_venv / "bin" / "traceml", "run", "--logs-dir", logs] + args + [script],
                  cwd=str(tmp_path), env=base_env(**env)))
        assert "PY - %s\n" % VENV in p.stdout, p.stdout
    # bad interpreters
    one_error_line(sh([wheel_venv / "bin" / "traceml", "run", "--python", "/nonexistent/python",
                       script], cwd=str(tmp_path)), "/nonexistent/python", "--python")
    bare = venv(tmp_path / "bare", pip=False)
    one_error_line(sh([os.path.join(VENV, "bin", "traceml"), "run", "--python",
                       bare / "bin" / "python", script], cwd=str(tmp_path)),
                   "cannot import torch", str(bare))
    one_error_line(sh([os.path.join(VENV, "bin", "traceml"), "run", "--python", "/bin/true",
                       script], cwd=str(tmp_path)), "does not run as a Python")


def test_distributed_launcher_uses_the_venv_python(wheel_venv, tmp_path):
    script = tmp_path / "which.py"
    script.write_text(PRINT_PY)
    p = ok(sh([os.path.join(VENV, "bin", "traceml"), "run", "--logs-dir", tmp_path / "logs",
               "--nproc-per-node", "2", script], cwd=str(tmp_path)))
    # the ranks write to one pipe: a line may start after another process's
    # unterminated output, so the lines are found wherever they start
    found = re.findall(r"PY (\S+) (\S+)$", p.stdout, re.M)
    assert sorted(rank for rank, _ in found) == ["0", "1"], p.stdout
    assert all(prefix == VENV for _, prefix in found), p.stdout
    one_error_line(sh([wheel_venv / "bin" / "traceml", "run", "--nproc-per-node", "2", script],
                      cwd=str(tmp_path)), "cannot import torch")


def test_c_api_from_the_wheel(wheel_venv, tmp_path):
    """`traceml config --cflags --libs` builds a C training loop against the
    wheel's header and library; it runs (rpath, no LD_LIBRARY_PATH) and
    reports to `traceml run`."""
    flags = ok(sh([wheel_venv / "bin" / "traceml", "config", "--cflags", "--libs"])).stdout.split()
    assert any(f.startswith("-I" + str(wheel_venv)) for f in flags), flags
    exe = tmp_path / "toy_train"
    ok(sh(["cc", "-std=c11", "-O2", "-o", exe, os.path.join(REPO, "examples", "c", "toy_train.c")]
          + flags))
    ldd = ok(sh(["ldd", exe])).stdout
    assert str(wheel_venv) in ldd and "not found" not in ldd, ldd
    logs = tmp_path / "logs"
    p = ok(sh([wheel_venv / "bin" / "traceml", "run", "--logs-dir", logs, "--run-name", "c",
               "--", exe, "--steps", "40", "--load-ms", "2"], cwd=str(tmp_path)))
    assert "INPUT-BOUND" in p.stdout, p.stdout
    assert (logs / "c" / "final_summary.json").exists()


def test_editable_install(tmp_path):
    v = venv(tmp_path / "venv")
    inplace = [os.path.join(REPO, "python", "traceml_ai", d) for d in ("bin", "lib", "include")]
    try:
        ok(sh([v / "bin" / "python", "-m", "pip", "install", "-q", "-e", REPO], timeout=600))
        p = ok(sh([v / "bin" / "python", "-c", "import traceml_ai; print(traceml_ai.__file__)"],
                  cwd=str(tmp_path)))
        assert p.stdout.strip() == os.path.join(REPO, "python", "traceml_ai", "__init__.py")
        p = ok(sh([v / "bin" / "traceml", "config", "--prefix"]))
        assert p.stdout.strip() == os.path.join(REPO, "python", "traceml_ai")
    finally:   # what the editable build put into the checkout
        for d in inplace:
            shutil.rmtree(d, ignore_errors=True)
        for f in glob.glob(os.path.join(REPO, "python", "traceml_ai", "_traceml.*.so")):
            os.unlink(f)


def test_uv_pip_install(tmp_path):
    uv = os.path.join(VENV, "bin", "uv")
    if not os.access(uv, os.X_OK):
        pytest.fail("uv is missing from %s (scripts/venv --test installs it)" % VENV)
    v = venv(tmp_path / "venv", pip=False)
    ok(sh([uv, "pip", "install", "--python", v / "bin" / "python", REPO], timeout=600))
    ok(sh([v / "bin" / "traceml", "--version"]))
    ok(sh([v / "bin" / "python", "-c", "import traceml_ai._traceml"]))
