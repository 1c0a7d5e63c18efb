"""Builds traceml-ai with the project's own Makefile.

`make package` builds the engine (libtraceml.so), the `traceml` binary and
the CPython extension for this interpreter; build_ext then places them in
the package:

    traceml_ai/_traceml<EXT_SUFFIX>        the extension
    traceml_ai/bin/traceml                 the command (run by the entry point, _cli.py)
    traceml_ai/include/traceml/traceml.h   the C API ...
    traceml_ai/lib/libtraceml.so           ... for `traceml config --cflags --libs`

The objects go to $TRACEML_BUILD_DIR (default build/, shared with a plain
`make`, so a checkout that is built already installs in seconds).
Everything is compiled here, at build time; importing traceml_ai never
needs a compiler.
"""
import os
import re
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(HERE, "include", "traceml", "traceml.h"), encoding="utf-8") as f:
        return re.search(r'#define TML_VERSION_STRING "([^"]+)"', f.read()).group(1)


class MakeExt(build_ext):
    def build_extension(self, ext):
        self.build = os.path.join(HERE, os.environ.get("TRACEML_BUILD_DIR", "build"))
        jobs = str(os.cpu_count() or 1)
        subprocess.check_call(["make", "-C", HERE, "-j" + jobs, "B=" + self.build,
                               "PYTHON=" + sys.executable, "package"])
        dest = self.get_ext_fullpath(ext.name)
        self.place(os.path.dirname(dest), dest)

    def place(self, pkg, ext_file):
        """Copies what make built into the package folder pkg, stripped."""
        b = self.build
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        parts = [
            (os.path.join(b, "lib", "traceml", "python", "traceml_ai", "_traceml" + suffix), ext_file),
            (os.path.join(b, "bin", "traceml"), os.path.join(pkg, "bin", "traceml")),
            (os.path.join(b, "lib", "libtraceml.so"), os.path.join(pkg, "lib", "libtraceml.so")),
            (os.path.join(HERE, "include", "traceml", "traceml.h"),
             os.path.join(pkg, "include", "traceml", "traceml.h")),
        ]
        strip = shutil.which("strip")
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
        self.place(pkg, os.path.join(pkg, os.path.basename(self.get_ext_filename("_traceml"))))


setup(
    version=version(),
    ext_modules=[Extension("traceml_ai._traceml", sources=["python/_traceml.c"])],
    cmdclass={"build_ext": MakeExt},
)
