"""Builds traceml-ai with the project's own Makefile.

`make package` builds the engine (libtraceml.so), the `traceml` binary and
the CPython extension for this interpreter; build_ext then places them in
the package:

    traceml_ai/_traceml.abi3.so            the extension (CPython's stable ABI, 3.10+)
    traceml_ai/bin/traceml                 the command (run by the entry point, _cli.py)
    traceml_ai/include/traceml/traceml.h   the C API ...
    traceml_ai/lib/libtraceml.so           ... for `traceml config --cflags --libs`,
                                           and the engine the extension links
    traceml_ai_command.pth                 (site-packages) no sitecustomize in the
                                           `traceml` command's own interpreter

One wheel serves every CPython >= 3.10: its tag is cp310-abi3 and, where
the binaries need nothing beyond glibc (SQLite is compiled in, from
third_party/sqlite; the terminal view needs no curses), manylinux_2_X for
the newest glibc symbol version they use (bdist_wheel.get_tag below; the
same reading as `auditwheel show`). Otherwise the plain linux_<arch> tag:
a wheel for this machine only.

The objects go to $TRACEML_BUILD_DIR (default build/, shared with a plain
`make`, so a checkout that is built already installs in seconds);
setuptools' own folders are the build's alone (build/setuptools/PID,
removed after it).
Everything is compiled here, at build time; importing traceml_ai never
needs a compiler. $TRACEML_CC and $TRACEML_STRIP name another compiler and
strip (scripts/wheels: zig cc for glibc 2.28 on x86_64 and aarch64; the
tag follows from the binaries, platform_tag below).
"""
import atexit
import fcntl
import glob
import os
import platform
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(HERE, "include", "traceml", "traceml.h"), encoding="utf-8") as f:
        return re.search(r'#define TML_VERSION_STRING "([^"]+)"', f.read()).group(1)


def turn(build):
    """The build folder's lock, held while it is open: two builds of one
    checkout at once (two `pip install .`, the test suite's workers) take
    turns at make and at placing its files, two sdists at the release tree
    setuptools makes in the checkout (traceml_ai-VERSION/)."""
    os.makedirs(build, exist_ok=True)
    lock = open(os.path.join(build, ".setup.lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    return lock


def build_dir():
    return os.path.join(HERE, os.environ.get("TRACEML_BUILD_DIR", "build"))


# site-packages/traceml_ai_command.pth: the `traceml` command's interpreter
# does not import sitecustomize (python/traceml_ai_command.pth, _cli.py)
PTH = "traceml_ai_command.pth"


class MakeExt(build_ext):
    def turn(self):
        self.build = build_dir()
        return turn(self.build)

    def build_extension(self, ext):
        with self.turn():
            jobs = str(os.cpu_count() or 1)
            cc = ["CC=" + os.environ["TRACEML_CC"]] if os.environ.get("TRACEML_CC") else []
            subprocess.check_call(["make", "-C", HERE, "-j" + jobs, "B=" + self.build,
                                   "PYTHON=" + sys.executable, *cc, "package"])
            dest = self.get_ext_fullpath(ext.name)
            self.place(os.path.dirname(dest), dest)
            if not self.inplace:        # the wheel's top level (site-packages)
                shutil.copyfile(os.path.join(HERE, "python", PTH),
                                os.path.join(self.build_lib, PTH))

    def place(self, pkg, ext_file):
        """Copies what make built into the package folder pkg, stripped."""
        b = self.build
        parts = [
            (os.path.join(b, "lib", "traceml", "python", "traceml_ai", "_traceml.abi3.so"), ext_file),
            (os.path.join(b, "bin", "traceml"), os.path.join(pkg, "bin", "traceml")),
            (os.path.join(b, "lib", "libtraceml.so"), os.path.join(pkg, "lib", "libtraceml.so")),
            (os.path.join(HERE, "include", "traceml", "traceml.h"),
             os.path.join(pkg, "include", "traceml", "traceml.h")),
        ]
        for old in glob.glob(os.path.join(pkg, "_traceml.*.so")):   # an earlier build's
            if old != ext_file:
                os.unlink(old)
        strip = shutil.which(os.environ.get("TRACEML_STRIP") or "strip")
        for src, dst in parts:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
            shutil.copymode(src, dst)
            if strip and not dst.endswith(".h"):
                subprocess.check_call([strip, "--strip-unneeded", dst])

    def copy_extensions_to_source(self):
        """pip install -e: the extension and the rest beside the sources."""
        build_py = self.get_finalized_command("build_py")
        pkg = build_py.get_package_dir("traceml_ai")
        with self.turn():
            self.place(pkg, os.path.join(pkg, os.path.basename(self.get_ext_filename("_traceml"))))


# What a manylinux wheel may need from the system (PEP 600: glibc's own
# libraries, the loader, libgcc_s).
MANYLINUX_LIBS = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                  "libutil.so.1", "libresolv.so.2", "libnsl.so.1", "libgcc_s.so.1",
                  "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}


def glibc_needs(path):
    """(libraries needed from the system, newest GLIBC_2.N version used) of
    one ELF file, from objdump -p; None when it cannot be read."""
    try:
        out = subprocess.run(["objdump", "-p", path], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    needed = set(re.findall(r"^\s*NEEDED\s+(\S+)", out, re.M))
    minors = [int(m) for m in re.findall(r"\bGLIBC_2\.(\d+)", out)]
    return needed, max(minors, default=17)


# ELF e_machine -> the wheel's architecture (the files' own, not this
# machine's: scripts/wheels builds aarch64 wheels on x86_64)
ELF_ARCH = {0x3E: "x86_64", 0xB7: "aarch64"}


def platform_tag(root):
    """manylinux_2_N_<arch> for the ELF files under root when they need
    nothing from the system beyond MANYLINUX_LIBS (those in the wheel
    itself excepted), else linux_<arch>. The arch is the files' own."""
    plain = "linux_" + platform.machine()
    if not sys.platform.startswith("linux"):
        return plain
    files, inside, arches = [], set(), set()
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                head = f.read(20)
            if head[:4] == b"\x7fELF":
                files.append(p)
                inside.add(n)
                arches.add(ELF_ARCH.get(int.from_bytes(head[18:20], "little")))
    if len(arches) != 1 or None in arches:
        return plain
    (arch,) = arches
    plain = "linux_" + arch
    minor = 17
    for p in files:
        r = glibc_needs(p)
        if r is None or r[0] - inside - MANYLINUX_LIBS:
            return plain
        minor = max(minor, r[1])
    return "manylinux_2_%d_%s" % (minor, arch)


class SdistWithCharts(sdist):
    """The sdist carries the chart library's generated source
    (web/gen/dygraphs.c, `make charts`, from Debian's libjs-dygraphs), so
    that a build from it needs only a C compiler and Python."""

    def run(self):
        with turn(build_dir()):
            subprocess.check_call(["make", "-C", HERE, "charts"])
            super().run()


class AbiWheel(bdist_wheel):
    """cp310-abi3-<platform_tag()>: the extension uses the limited API of
    CPython 3.10 (python/_traceml.c), the rest is Python and native code."""

    def get_tag(self):
        _, _, plat = super().get_tag()
        if not self.plat_name_supplied and plat.startswith("linux_"):
            plat = platform_tag(self.bdist_dir)
        return "cp310", "abi3", plat


# setuptools' own folders (build/lib.*, build/bdist.*: copies of what make
# built, and the wheel's staging) are this build's alone, and go with it:
# two builds of one checkout at once (two `pip install .`, the test suite's
# workers) would otherwise pack each other's half-written files.
BUILD_BASE = os.path.join(HERE, "build", "setuptools", str(os.getpid()))
atexit.register(shutil.rmtree, BUILD_BASE, True)

setup(
    options={"build": {"build_base": BUILD_BASE}},
    version=version(),
    ext_modules=[Extension("traceml_ai._traceml", sources=["python/_traceml.c"],
                           py_limited_api=True)],
    cmdclass={"build_ext": MakeExt, "bdist_wheel": AbiWheel, "sdist": SdistWithCharts},
)
