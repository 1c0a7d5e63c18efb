"""torch.multiprocessing: spawn / start_processes are names zero-edit
tracing wraps; the fake cannot start processes."""
from .spawn import spawn, start_processes  # noqa: F401
