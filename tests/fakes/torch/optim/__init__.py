"""torch.optim: Optimizer with torch 2.x's global step hooks, SGD, Adam,
LBFGS; their steps update nothing (tests/fakes/torch)."""
from . import lr_scheduler, optimizer  # noqa: F401
from .optimizer import SGD, Adam, AdamW, LBFGS, Optimizer  # noqa: F401
