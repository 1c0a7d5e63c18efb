"""bench/zero_edit_probe.py's loop with init() and trace_step(model): the
marked steps zero-edit tracing is compared with."""
import os
import sys

import traceml_ai as traceml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zero_edit_probe  # noqa: E402

if __name__ == "__main__":
    traceml.init(mode="auto")
    zero_edit_probe.run(traceml.trace_step)
