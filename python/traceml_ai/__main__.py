"""`python -m traceml_ai ...` is the `traceml` command of this interpreter."""
import sys

from traceml_ai._cli import main

sys.exit(main())
