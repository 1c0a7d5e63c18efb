"""TraceML inside a hand-written Hugging Face Accelerate loop
(docs/integrations.md).

    from traceml_ai.integrations.accelerate import trace_step

    model, opt, loader = accelerator.prepare(model, opt, loader)
    for batch in loader:                          # the fetch: Input Wait
        with trace_step(accelerator, model):      # one optimizer step
            with accelerator.accumulate(model):
                loss = loss_fn(model(batch["x"]), batch["y"])
                accelerator.backward(loss)
                opt.step()
                opt.zero_grad()

trace_step() times the forward of the unwrapped models
(accelerator.unwrap_model: the module inside DDP, not the wrapper).
Backward (accelerator.backward calls Tensor.backward) and the optimizer
(AcceleratedOptimizer calls the inner torch optimizer's step, which
torch's global step hooks see) are TraceML's automatic patches.

One TraceML step is one optimizer step: leaving the block closes the step
only when `accelerator.sync_gradients` is True (the micro-batch that
steps the optimizer; always, without accumulation). Otherwise the step
stays open, the next micro-batch's fetch lands inside it, and the
micro-batches fold into one step. An exception inside the block aborts the
open step (nothing is recorded for it) and propagates.
"""
import weakref

from . import _common
from .. import _glue

__all__ = ["trace_step"]

_NEEDS = ("Accelerate", "accelerate", "0.20")
_checked = None
_steps = weakref.WeakKeyDictionary()     # accelerator -> its _common.Steps
_inner = weakref.WeakKeyDictionary()     # prepared model -> unwrapped (unwrap_model
                                         # costs ~0.6 ms: once per model, not per step)


def _enabled():
    """The version check and start, once per process."""
    global _checked
    if _checked is None:
        _checked = bool(_common.supported(*_NEEDS) and _common.start())
    return _checked


class _NullBlock(object):
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NULL = _NullBlock()


class _Block(object):
    """One `with trace_step(accelerator, *models):` block."""
    __slots__ = ("acc", "models", "steps")

    def __init__(self, acc, models, steps):
        self.acc = acc
        self.models = models
        self.steps = steps

    def __enter__(self):
        steps = self.steps
        if not steps.open:
            steps.begin(*[self._unwrapped(m) for m in self.models])
        return self

    def _unwrapped(self, m):
        try:
            return _inner[m]
        except (KeyError, TypeError):
            pass
        try:
            inner = self.acc.unwrap_model(m)
        except Exception as e:
            _glue.warn("accelerate trace_step: cannot unwrap the model (%s); "
                     "its forward is timed through the wrapper" % (e,))
            inner = m
        try:
            _inner[m] = inner
        except TypeError:            # not weak-referenceable: unwrapped every step
            pass
        return inner

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.steps.abort()
            return False
        try:
            sync = bool(self.acc.sync_gradients)
        except Exception:
            sync = True
        if sync:
            self.steps.end()
        return False


def trace_step(accelerator, *models):
    """A context manager around one micro-batch of an Accelerate loop that
    makes one TraceML step of each optimizer step (see the module's
    docstring). `models` are the prepared models whose forward to time.
    Does nothing (an empty block) when accelerate is missing or older than
    0.20, or TraceML is disabled."""
    if not _enabled():
        return _NULL
    steps = _steps.get(accelerator)
    if steps is None:
        # `for batch in loader:` made the first epoch's iterator before
        # this first block started TraceML's patches, so the loader's
        # settings were not seen there: the prepared loader's, now
        for loader in getattr(accelerator, "_dataloaders", ())[:1]:
            _glue.note_loader(loader)
        steps = _common.Steps()
        try:
            _steps[accelerator] = steps
        except TypeError:            # not weak-referenceable: one Steps per call
            pass
    return _Block(accelerator, models, steps)
