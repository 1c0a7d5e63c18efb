"""lifetimes.py --how manual: the same loop through TraceML's own API
(traceml.init, trace_step). A file of its own because a script that
imports TraceML instruments itself, and lifetimes.py's other cases are
for zero-edit tracing (docs/zero-edit.md)."""
import os
import runpy
import sys

import traceml_ai  # noqa: F401  (lifetimes.py takes it from sys.modules)

sys.argv[1:1] = ["--how", "manual"]
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lifetimes.py"),
               run_name="__main__")
