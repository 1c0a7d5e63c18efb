"""TraceML installed the ways PyTorch users install packages, into fresh
virtual environments beside the test venv (.venv/, which has torch):

- the wheel as published (issue 27): an sdist made from the checkout
  (`python -m build --sdist`), and the wheel built from that sdist with
  `python -m build --wheel` where the system's SQLite and ncurses (headers,
  static and shared libraries), xxd and Debian's libjs-dygraphs are hidden
  (a mount namespace): it builds with only a C compiler and Python; it is
  cp310-abi3-manylinux_2_N_x86_64, and abi3audit and `auditwheel show` agree; `pip wheel .` of the checkout gives the same
  tags; it installs into CPython 3.10 and every later one here and traces
  a training (on the fake torch); installed into a fresh venv, its extension, library and binary need
  no libsqlite3, libncursesw or libtinfo (ldd), and with those hidden (a mount
  namespace) `traceml run` trains the quickstart, the terminal view runs
  under tmux and the dashboard serves;
  with all of them still hidden, `traceml run` trains the quickstart too;
- the wheel installed offline (--no-index) into a fresh venv works:
  `traceml`, the import, and the C API through `traceml config --cflags --libs`;
- `pip install -e .` and `uv pip install .`;
- the right interpreter: `traceml run` runs the Python of the venv it was
  installed in, also for `--nproc-per-node` (torch.distributed.run of that
  Python); --python and TRACEML_PYTHON choose another; a Python without
  torch, or none at all, is one line naming it and how to choose, exit 2.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from shlex import quote as shlex_quote
import urllib.request
import zipfile

import pytest

from conftest import free_port, EXAMPLES, PYTHON, REPO, VENV, base_env, ranks_finished

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


def path_without(tool, where):
    """A folder of links to every program on PATH but `tool`: a PATH on
    which it cannot be found."""
    os.makedirs(where, exist_ok=True)
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for n in os.listdir(d):
            link = os.path.join(where, n)
            if n != tool and not os.path.lexists(link) and os.access(os.path.join(d, n), os.X_OK):
                os.symlink(os.path.join(d, n), link)
    return where


# cp310-abi3: one wheel for every CPython >= 3.10 (the stable ABI)
WHEEL_RE = r"traceml_ai-[0-9.]+-cp310-abi3-manylinux_2_(\d+)_x86_64\.whl$"


# Building from the sdist needs only a C compiler and Python (issue 27): the
# wheel every test here installs is built from the sdist in a mount namespace
# where SQLite's and ncurses' headers and libraries are hidden (hiding_dev),
# with no xxd on PATH and the chart library out of reach, when the suite may
# make one (root, unshare); test_sdist_builds_with_only_a_compiler checks it.
CAN_HIDE = os.geteuid() == 0 and bool(shutil.which("unshare"))


@pytest.fixture(scope="session")
def dist(tmp_path_factory):
    """(sdist, wheel): `python -m build --sdist` of the checkout, and the
    wheel built from it with `python -m build --wheel` as on a machine with
    only a C compiler and Python (hiding_dev: the sdist carries SQLite and
    the chart library's generated source)."""
    out = tmp_path_factory.mktemp("dist")
    ok(sh([PYTHON, "-m", "build", "--sdist", "--outdir", out, REPO], timeout=600))
    sdist = glob.glob(str(out / "traceml_ai-*.tar.gz"))
    assert len(sdist) == 1, os.listdir(out)
    src = tmp_path_factory.mktemp("sdist")
    with tarfile.open(sdist[0]) as t:
        t.extractall(src)
    (tree,) = glob.glob(str(src / "traceml_ai-*"))
    bare = path_without("xxd", str(tmp_path_factory.mktemp("bin")))
    build = [PYTHON, "-m", "build", "--wheel", "--outdir", out, tree]
    extra = dict(PATH=bare, TRACEML_DYGRAPHS_DIR="/nonexistent/dygraphs")
    if CAN_HIDE:
        cmd, env = hiding_dev(tmp_path_factory.mktemp("hide"), build, **extra)
    else:
        cmd, env = build, base_env(**extra)
    assert subprocess.run(["sh", "-c", "command -v xxd"], env=env).returncode != 0
    p = ok(sh(cmd, timeout=1200, env=env))
    assert "gen-web-assets --charts" not in p.stdout, "the sdist's chart source was remade"
    wheel = glob.glob(str(out / "traceml_ai-*.whl"))
    assert len(wheel) == 1, os.listdir(out)
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
                 "include/traceml/traceml.h", "python/_traceml.c", "web/report.js",
                 "web/gen/dygraphs.c", "third_party/sqlite/sqlite3.c",
                 "third_party/sqlite/sqlite3.h", "cli/screen.c", "cli/run/run.c",
                 "cli/run/run.h", "python/traceml_ai/_sitecustomize.py", "LICENSE", "NOTICE"):
        assert need in names, need
    assert not [n for n in names if n.startswith(("build/", ".venv/")) or n.endswith((".o", ".so"))]
    with zipfile.ZipFile(wheel) as z:
        info = {i.filename: i for i in z.infolist()}
    exe = info["traceml_ai/bin/traceml"]
    assert (exe.external_attr >> 16) & 0o111, "traceml is not executable in the wheel"
    for need in ("traceml_ai/__init__.py", "traceml_ai/_cli.py", "traceml_ai/lib/libtraceml.so",
                 "traceml_ai/include/traceml/traceml.h", "traceml_ai/_traceml.abi3.so",
                 "traceml_ai/_sitecustomize.py"):
        assert need in info, need
    assert [n for n in info if n.startswith("traceml_ai/_traceml.")] == ["traceml_ai/_traceml.abi3.so"]
    # the licence and the third-party notices in the dist-info (PEP 639);
    # no top-level package but traceml_ai (`traceml` may be another's)
    meta = [n for n in info if n.endswith(".dist-info/METADATA")]
    with zipfile.ZipFile(wheel) as z:
        assert "License-Expression: Apache-2.0" in z.read(meta[0]).decode()
        lic = {n.rsplit("/", 1)[1]: z.read(n).decode() for n in info
               if ".dist-info/licenses/" in n}
    assert "Apache License" in lic["LICENSE"] and "Version 2.0" in lic["LICENSE"], sorted(lic)
    assert "SQLite" in lic["NOTICE"] and "dygraphs" in lic["NOTICE"] and "MIT" in lic["NOTICE"]
    assert {n.split("/")[0] for n in info if "/" in n and ".dist-info" not in n} == {"traceml_ai"}
    # the library and the binary: at most 2 MB each, SQLite inside
    for big in ("traceml_ai/lib/libtraceml.so", "traceml_ai/bin/traceml"):
        assert info[big].file_size <= 2 * 1024 * 1024, (big, info[big].file_size)
    with zipfile.ZipFile(wheel) as z:
        charts = z.read("traceml_ai/lib/libtraceml.so")
    assert b"dygraphs 2." in charts, "the chart library is missing from the engine"
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


def venv_tool(name):
    path = os.path.join(VENV, "bin", name)
    if not os.access(path, os.X_OK):
        pytest.fail("%s is missing from %s (scripts/venv --test installs it)" % (name, VENV))
    return path


def test_wheel_tags_and_audits(dist):
    """cp310-abi3 (abi3audit: only the limited API of 3.10) and manylinux
    for the glibc the binaries really need (`auditwheel show` agrees)."""
    wheel = dist[1]
    m = re.search(WHEEL_RE, os.path.basename(wheel))
    assert m, os.path.basename(wheel)
    p = ok(sh([venv_tool("auditwheel"), "show", wheel]))
    text = " ".join(p.stdout.split())
    assert 'is consistent with the following platform tag: "manylinux_2_%s_x86_64"' % m.group(1) \
        in text, p.stdout
    assert "external shared libraries" not in text or "no external" in text, p.stdout
    p = ok(sh([venv_tool("abi3audit"), "--strict", "--report", wheel]))
    report = json.loads(p.stdout[p.stdout.index("{"):])
    (spec,) = report["specs"].values()
    ext = {r["name"]: r["result"] for r in spec["wheel"]}
    assert ext["_traceml.abi3.so"]["is_abi3"] and ext["_traceml.abi3.so"]["baseline"] == "3.10"
    for r in ext.values():
        assert not r["non_abi3_symbols"] and not r["future_abi3_objects"], ext


def test_pip_wheel_of_the_checkout(tmp_path):
    """`pip wheel .` makes the same wheel as `python -m build --wheel`."""
    ok(sh([PYTHON, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path / "w", REPO],
          timeout=900))
    (wheel,) = os.listdir(tmp_path / "w")
    assert re.search(WHEEL_RE, wheel), wheel


def at_once(tmp_path, argv):
    """argv + [OUT_i, REPO] twice at the same time; the two OUT folders."""
    outs = [tmp_path / ("out%d" % i) for i in range(2)]
    procs = [subprocess.Popen(argv + [str(out), REPO], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=base_env())
             for out in outs]
    logs = [p.communicate(timeout=900)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], logs
    return outs


def test_two_builds_of_the_checkout_at_once(tmp_path):
    """Two `pip wheel .` of one checkout at the same time (two users, or
    the suite's workers building the wheel and the RF-DETR venv): both
    make the whole wheel (setup.py: setuptools' folders of their own, make's
    objects in turn); and two sdists (setuptools' release tree in the
    checkout, in turn)."""
    listings = []
    for out in at_once(tmp_path, [PYTHON, "-m", "pip", "wheel", "-q", "--no-deps", "-w"]):
        (wheel,) = os.listdir(out)
        with zipfile.ZipFile(out / wheel) as z:
            listings.append(sorted((n.filename, n.file_size) for n in z.infolist()
                                   if ".dist-info/" not in n.filename))
    assert listings[0] == listings[1]
    listings = []
    for out in at_once(tmp_path / "sdist", [PYTHON, "-m", "build", "--sdist", "--outdir"]):
        (sdist,) = os.listdir(out)
        with tarfile.open(out / sdist) as t:
            listings.append(sorted((m.name, m.size) for m in t.getmembers()))
    assert listings[0] == listings[1]


def with_test_torch(v):
    """The test venv's torch seen from venv v (a .pth file)."""
    torch_site = ok(sh([PYTHON, "-c", "import os, torch; "
                        "print(os.path.dirname(os.path.dirname(torch.__file__)))"])).stdout.strip()
    site = ok(sh([v / "bin" / "python", "-c", "import sysconfig; "
                  "print(sysconfig.get_paths()['purelib'])"])).stdout.strip()
    with open(os.path.join(site, "zz_test_venv_torch.pth"), "w") as f:
        f.write(torch_site + "\n")


@pytest.fixture(scope="session")
def wheel_torch_venv(dist, tmp_path_factory):
    """A fresh venv with the wheel installed, and the test venv's torch
    (a .pth file: traceml_ai comes from the wheel, torch from .venv)."""
    v = venv(tmp_path_factory.mktemp("wheel_torch") / "venv", pip=False)
    ok(sh([PYTHON, "-m", "pip", "--python", v / "bin" / "python", "install", "--no-index",
           "--no-deps", dist[1]]))
    with_test_torch(v)
    p = ok(sh([v / "bin" / "python", "-c", "import traceml_ai, torch; print(traceml_ai.__file__)"]))
    assert p.stdout.startswith(str(v)), p.stdout
    return v


# the system libraries the wheel must not need, hidden from what follows
HIDDEN = ("libsqlite3.so.0", "libncursesw.so.6", "libncurses.so.6", "libtinfo.so.6")

# Run "$@" in a mount namespace where each of $HIDE_LIBS is an empty file,
# after checking that none of HIDDEN loads any more.
HIDE_SH = r"""
set -e
empty=$1; py=$2; shift 2
for lib in $HIDE_LIBS; do mount --bind "$empty" "$lib"; done
for n in %s; do
    if "$py" -c "import ctypes; ctypes.CDLL('$n')" 2>/dev/null; then
        echo "hide: $n still loads" >&2; exit 97
    fi
done
exec "$@"
""" % " ".join(HIDDEN)


def hiding(v, tmp_path, argv):
    """argv run with HIDDEN hidden, and the environment it needs."""
    paths = set()
    for line in ok(sh(["ldconfig", "-p"])).stdout.splitlines():
        m = re.match(r"\s*(\S+) \(.*\) => (\S+)$", line)
        if m and m.group(1) in HIDDEN:
            paths.add(os.path.realpath(m.group(2)))
    empty = tmp_path / "empty.so"
    empty.write_bytes(b"")
    cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", HIDE_SH, "sh",
           str(empty), str(v / "bin" / "python")] + [str(a) for a in argv]
    return cmd, base_env(HIDE_LIBS=" ".join(sorted(paths)))


def links_neither(f):
    """f's ldd: every library found, none of SQLite's or ncurses'."""
    ldd = ok(sh(["ldd", f])).stdout
    assert "not found" not in ldd, ldd
    for lib in ("libsqlite3", "libncurses", "libtinfo"):
        assert lib not in ldd, (f, ldd)
    return ldd


def wait_for(pred, timeout, step=0.25):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = pred()
        if r:
            return r
        time.sleep(step)
    return pred()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("tmux"),
                    reason="needs root (a mount namespace), unshare and tmux (scripts/deps)")
def test_wheel_runs_without_system_sqlite_or_ncurses(wheel_torch_venv, tmp_path):
    v = wheel_torch_venv
    pkg = ok(sh([v / "bin" / "python", "-c", "import os, traceml_ai; "
                 "print(os.path.dirname(traceml_ai.__file__))"])).stdout.strip()
    ext = glob.glob(os.path.join(pkg, "_traceml*.so"))
    assert [os.path.basename(e) for e in ext] == ["_traceml.abi3.so"], ext
    for f in ext + [os.path.join(pkg, "lib", "libtraceml.so"), os.path.join(pkg, "bin", "traceml")]:
        ldd = links_neither(f)
        # the extension finds the engine in the wheel, nowhere else
        if f in ext:
            assert re.search(r"libtraceml\.so => %s/lib/libtraceml\.so" % re.escape(pkg), ldd), ldd
    traceml = v / "bin" / "traceml"
    logs = tmp_path / "logs"

    # summary mode: the quickstart trains and prints the box
    cmd, env = hiding(v, tmp_path, [traceml, "run", "--logs-dir", logs, "--run-name", "qs",
                                    os.path.join(EXAMPLES, "quickstart.py")])
    p = ok(sh(cmd, env=env, cwd=str(tmp_path), timeout=300))
    assert "TraceML Run Summary" in p.stdout and "Verdict: INPUT-BOUND" in p.stdout, p.stdout[-3000:]
    assert json.loads((logs / "qs" / "final_summary.json").read_text())["meta"]["common_steps"] > 0

    # the terminal view under tmux: its own escape sequences, no curses and
    # no terminal database
    train = [os.path.join(REPO, "tests", "e2e", "live", "live_train.py"), "--steps", "900"]
    cmd, env = hiding(v, tmp_path, [traceml, "run", "--mode", "cli", "--interval", "0.25",
                                    "--logs-dir", logs, "--run-name", "cli"] + train)
    done = tmp_path / "cli_exit"
    line = "%s; echo $? > %s; sleep 600" % (" ".join(shlex_quote(c) for c in cmd), done)
    sock = "traceml-wheel-%d" % os.getpid()
    tmux_env = dict(env, TERM="xterm-256color", LANG="C.UTF-8", LC_ALL="C.UTF-8")
    envs = sum((["-e", "%s=%s" % kv] for kv in env.items() if kv[0] == "HIDE_LIBS"), [])
    ok(sh(["tmux", "-L", sock, "-f", "/dev/null", "new-session", "-d", "-s", "w", "-x", "150",
           "-y", "45"] + envs + [line], env=tmux_env))
    try:
        def screen():
            return sh(["tmux", "-L", sock, "capture-pane", "-p", "-t", "w"]).stdout
        s = wait_for(lambda: "STEP TIMING" in screen() and "Verdict: " in screen() and screen(), 90)
        assert s and "TraceML live" in s, screen()
        assert wait_for(done.exists, 180), screen()
        hist = sh(["tmux", "-L", sock, "capture-pane", "-p", "-S", "-3000", "-t", "w"]).stdout
        assert done.read_text().strip() == "0", hist[-3000:]
        assert "TraceML Run Summary" in hist, hist[-3000:]
    finally:
        sh(["tmux", "-L", sock, "kill-server"])

    # the dashboard serves its page and /metrics
    port = free_port()
    cmd, env = hiding(v, tmp_path, [traceml, "run", "--mode", "dashboard", "--dashboard-port",
                                    port, "--interval", "0.5", "--logs-dir", logs,
                                    "--run-name", "dash"] + train)
    proc = subprocess.Popen(cmd, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        def get(path):
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
                    return r.status, r.read().decode()
            except OSError:
                return None
        def metrics():
            r = get("/metrics")
            return r[1] if r and "traceml_steps_received_total" in r[1] else None
        text = wait_for(metrics, 90)
        assert text and re.search(r"^traceml_up(\{[^}]*\})? 1$", text, re.M), text
        status, page = get("/")
        assert status == 200 and "<html" in page.lower(), page[:300]
        out, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0, out[-3000:]
        assert "TraceML Run Summary" in out, out[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


# SQLite's and ncurses' headers and libraries, development files and
# run-time ones alike, hidden from the sdist's build and from what it built.
SYSTEM_DEV = ("/usr/include/sqlite3*.h", "/usr/include/*curses*.h", "/usr/include/term.h",
              "/usr/include/termcap.h", "/usr/include/unctrl.h", "/usr/include/*/sqlite3*.h",
              "/usr/include/*/*curses*.h", "/usr/lib/*/libsqlite3.*", "/usr/lib/*/libncurses*",
              "/usr/lib/*/libtinfo.*", "/lib/*/libsqlite3.*", "/lib/*/libncurses*",
              "/lib/*/libtinfo.*")

# Run "$@" in a mount namespace where each of $HIDE_FILES is an empty file
# and each of $HIDE_DIRS an empty folder, after checking that a program
# using SQLite, or curses, no longer compiles and links.
HIDE_DEV_SH = r"""
set -e
empty=$1; emptydir=$2; probes=$3; shift 3
for f in $HIDE_FILES; do mount --bind "$empty" "$f"; done
for d in $HIDE_DIRS; do mount --bind "$emptydir" "$d"; done
if cc -o "$probes/sqlite" "$probes/sqlite.c" -lsqlite3 2>/dev/null; then
    echo "hide: SQLite still builds" >&2; exit 97
fi
if cc -o "$probes/curses" "$probes/curses.c" -lncursesw 2>/dev/null ||
   cc -o "$probes/curses" "$probes/curses.c" -lncurses 2>/dev/null; then
    echo "hide: ncurses still builds" >&2; exit 97
fi
exec "$@"
"""


def hiding_dev(tmp_path, argv, **env):
    """argv run with SYSTEM_DEV hidden (and the environment it needs)."""
    files, dirs = set(), {"/usr/include/ncursesw", "/usr/include/ncurses"}
    for pattern in SYSTEM_DEV:
        for f in glob.glob(pattern):
            r = os.path.realpath(f)
            (dirs if os.path.isdir(r) else files).add(r)
    dirs = {d for d in dirs if os.path.isdir(d)}
    probes = tmp_path / "probes"
    probes.mkdir(exist_ok=True)
    (probes / "sqlite.c").write_text("#include <sqlite3.h>\n"
                                     "int main(void) { return sqlite3_libversion_number(); }\n")
    (probes / "curses.c").write_text("#include <curses.h>\n"
                                     "int main(void) { initscr(); return endwin(); }\n")
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    emptydir = tmp_path / "emptydir"
    emptydir.mkdir(exist_ok=True)
    cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", HIDE_DEV_SH, "sh",
           str(empty), str(emptydir), str(probes)] + [str(a) for a in argv]
    return cmd, base_env(HIDE_FILES=" ".join(sorted(files)), HIDE_DIRS=" ".join(sorted(dirs)),
                         **env)


@pytest.mark.skipif(not CAN_HIDE, reason="needs root (a mount namespace) and unshare")
def test_sdist_builds_with_only_a_compiler(wheel_torch_venv, tmp_path):
    """The wheel built from the sdist where the system has no SQLite and no
    ncurses, headers or libraries (nor xxd, nor the chart library: the
    `dist` fixture) links neither, and `traceml run` trains the quickstart
    to its box with them still hidden."""
    v = wheel_torch_venv
    pkg = ok(sh([v / "bin" / "python", "-c", "import os, traceml_ai; "
                 "print(os.path.dirname(traceml_ai.__file__))"])).stdout.strip()
    assert pkg.startswith(str(v)), pkg
    for f in [os.path.join(pkg, "_traceml.abi3.so"), os.path.join(pkg, "lib", "libtraceml.so"),
              os.path.join(pkg, "bin", "traceml")]:
        links_neither(f)
    logs = tmp_path / "logs"
    cmd, env = hiding_dev(tmp_path, [v / "bin" / "traceml", "run", "--logs-dir", logs,
                                     "--run-name", "qs", os.path.join(EXAMPLES, "quickstart.py")])
    p = ok(sh(cmd, env=env, cwd=str(tmp_path), timeout=300))
    assert "TraceML Run Summary" in p.stdout and "Verdict: INPUT-BOUND" in p.stdout, p.stdout[-3000:]
    assert json.loads((logs / "qs" / "final_summary.json").read_text())["meta"]["common_steps"] > 0


def cpythons():
    """{(3, N): interpreter} of the CPythons >= 3.10 this machine has (on
    PATH, or pyenv's)."""
    found = {}
    for minor in range(10, 20):
        name = "python3.%d" % minor
        for cand in [shutil.which(name)] + sorted(glob.glob(os.path.expanduser(
                "~/.pyenv/versions/3.%d.*/bin/%s" % (minor, name)))):
            if not cand:
                continue
            p = subprocess.run([cand, "-c", "import sys, venv; print(*sys.version_info[:2])"],
                               capture_output=True, text=True)
            if p.returncode == 0 and p.stdout.split() == ["3", str(minor)]:
                found[(3, minor)] = cand
                break
    return found


FAKE_TRAIN = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import traceml_ai as traceml
traceml.init(mode="auto")
x, y = torch.randn(64, 8), torch.randint(0, 2, (64,))
model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for xb, yb in DataLoader(TensorDataset(x, y), batch_size=4):
    with traceml.trace_step(model):
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad(); loss.backward(); opt.step()
"""


def test_the_wheel_on_every_cpython(dist, tmp_path):
    """The one abi3 wheel installs into CPython 3.10 (the floor) and every
    later CPython here, and traces a training (the glue on the fake torch,
    tests/fakes/torch) through `traceml run`."""
    pys = cpythons()
    if (3, 10) not in pys:
        pytest.skip("no CPython 3.10 here (the wheel's floor)")
    script = tmp_path / "train.py"
    script.write_text(FAKE_TRAIN)
    for ver, interp in sorted(pys.items()):
        # a venv without pip of its own (ensurepip is most of a venv's
        # making): the test venv's pip installs into it
        v = tmp_path / ("venv%d%d" % ver)
        ok(sh([interp, "-m", "venv", "--without-pip", v]))
        ok(sh([PYTHON, "-m", "pip", "--python", v / "bin" / "python", "install", "-q",
               "--no-index", "--no-deps", dist[1]]))
        p = ok(sh([v / "bin" / "traceml", "run", "--logs-dir", tmp_path / "logs", "--run-name",
                   "py%d%d" % ver, script], cwd=str(tmp_path),
                  env=base_env(PYTHONPATH=os.path.join(REPO, "tests", "fakes"))))
        assert "TraceML Run Summary" in p.stdout, (ver, p.stdout[-2000:])
        summary = json.loads((tmp_path / "logs" / ("py%d%d" % ver) / "final_summary.json")
                             .read_text())
        assert summary["meta"]["common_steps"] == 16, (ver, summary["meta"])
    assert len(pys) >= 2, "only %s here: the wheel was tried on one CPython" % sorted(pys)


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
    p = sh([os.path.join(VENV, "bin", "traceml"), "run", "--logs-dir", tmp_path / "logs",
            "--nproc-per-node", "2", script], cwd=str(tmp_path))
    ranks_finished(p, None)   # (ranks without torch.distributed: nothing to summarise)
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


OWN_SQLITE_C = r'''
#include <sqlite3.h>
#include <stdio.h>
#include "traceml/traceml.h"
int main(void)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK)
        return 1;
    if (sqlite3_prepare_v2(db, "select json('[1]')", -1, &st, NULL) != SQLITE_OK) {
        printf("prepare: %s\n", sqlite3_errmsg(db));
        return 1;
    }
    if (sqlite3_step(st) != SQLITE_ROW)
        return 1;
    printf("json %s sqlite %s traceml %s\n", sqlite3_column_text(st, 0), sqlite3_libversion(),
           tml_version());
    sqlite3_finalize(st);
    sqlite3_close(db);
    return 0;
}
'''


def test_installed_libraries_keep_the_programs_sqlite(tmp_path):
    """`make install`'s libtraceml.a and libtraceml.so export the C API
    (tml_*) and nothing else: a C program that links its own SQLite
    (Debian's, with JSON) beside either gets its own, not TraceML's
    trimmed one (`select json('[1]')` works)."""
    root = tmp_path / "root"
    ok(sh(["make", "-C", REPO, "install", "DESTDIR=" + str(root), "PREFIX=/usr/local"]))
    lib, inc = root / "usr/local/lib", root / "usr/local/include"
    for f, nm in (("libtraceml.a", ["nm", "-g", "--defined-only"]),
                  ("libtraceml.so", ["nm", "-D", "--defined-only"])):
        names = [ln.split()[-1] for ln in ok(sh(nm + [lib / f])).stdout.splitlines()
                 if len(ln.split()) == 3]
        assert names and all(n.startswith("tml_") for n in names), (f, names)
    src = tmp_path / "own.c"
    src.write_text(OWN_SQLITE_C)
    builds = {"static": [lib / "libtraceml.a", "-lsqlite3", "-lpthread", "-ldl", "-lm"],
              "shared": ["-L%s" % lib, "-Wl,-rpath,%s" % lib, "-ltraceml", "-lsqlite3"]}
    for how, libs in builds.items():
        exe = tmp_path / how
        ok(sh(["cc", "-std=c11", "-I%s" % inc, "-o", exe, src] + libs))
        out = ok(sh([exe])).stdout
        assert out.startswith("json [1] sqlite 3.") and "traceml " in out, (how, out)
