"""The `traceml` command of a pip-installed TraceML.

pip writes a `traceml` entry point into the environment's bin/ that runs
under that environment's own interpreter and calls main(): it replaces
itself with the C binary shipped in this package (bin/traceml), passing
sys.executable on, so that `traceml run train.py` trains with the Python
(and the torch) of the environment TraceML was installed in
(cli/python.c). For `run` and `watch` it also says what this interpreter
can import, in the words of cli/python.c's probe, which then need not
start it once more (~15 ms). Nothing else happens in Python: this
interpreter imports no sitecustomize (traceml_ai_command.pth, installed
beside the package), which is the training's to meet.
"""
import os
import sys


def _probe():
    """"torch VERSION|- traceml_ai 1", as cli/python.c's probe prints it."""
    from importlib.util import find_spec
    spec = find_spec("torch")
    version = "-"
    for d in (spec.submodule_search_locations or ()) if spec else ():
        try:
            with open(os.path.join(d, "version.py")) as f:
                version = next((l.split("=", 1)[1].strip().strip("'\"") for l in f
                                if l.startswith("__version__")), "?") or "?"
            break
        except OSError:
            version = "?"
    return "torch %s traceml_ai 1" % version


def _customized():
    """True when this interpreter would have imported a sitecustomize or
    usercustomize that traceml_ai_command.pth (site-packages) kept site.py
    from importing here: the training meets it, once, as without TraceML.
    It may extend sys.path, so _probe() cannot answer for the training's
    interpreter then: the binary asks it."""
    from importlib.util import find_spec
    found = False
    for name in ("sitecustomize", "usercustomize"):
        if getattr(sys.modules.get(name), "__traceml_skipped__", False):
            del sys.modules[name]
            found = found or find_spec(name) is not None
    return found


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "traceml")
    os.environ["TRACEML_ENV_PYTHON"] = sys.executable
    try:
        customized = _customized()
    except Exception:
        customized = True
    if len(sys.argv) > 1 and sys.argv[1] in ("run", "watch") and not customized:
        try:
            os.environ["TRACEML_ENV_PYTHON_PROBE"] = _probe()
        except Exception:
            pass        # the binary probes the interpreter itself
    try:
        os.execv(exe, ["traceml"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("traceml: error: cannot run %s (%s); reinstall traceml-ai\n"
                         % (exe, e.strerror))
        return 2


if __name__ == "__main__":
    sys.exit(main())
