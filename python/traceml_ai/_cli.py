"""The `traceml` command of a pip-installed TraceML.

pip writes a `traceml` entry point into the environment's bin/ that runs
under that environment's own interpreter and calls main(): it replaces
itself with the C binary shipped in this package (bin/traceml), passing
sys.executable on, so that `traceml run train.py` trains with the Python
(and the torch) of the environment TraceML was installed in
(cli/python.c). Nothing else happens in Python.
"""
import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "traceml")
    os.environ["TRACEML_ENV_PYTHON"] = sys.executable
    try:
        os.execv(exe, ["traceml"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("traceml: error: cannot run %s (%s); reinstall traceml-ai\n"
                         % (exe, e.strerror))
        return 2


if __name__ == "__main__":
    sys.exit(main())
