"""TraceML for Lightning (the `pytorch_lightning` package):

    from pytorch_lightning import Trainer
    from traceml_ai.integrations.pytorch_lightning import TraceMLCallback

    trainer = Trainer(callbacks=[TraceMLCallback()], ...)
    trainer.fit(model, loader)

One TraceML step per optimizer step; see _lightning_impl.py for what lands
in which phase, and docs/integrations.md. For the unified `lightning`
package (lightning.pytorch) use traceml_ai.integrations.lightning: Lightning accepts
only its own namespace's Callback.
"""
from . import _lightning_impl
from ._lightning_impl import TraceMLCallbackMixin as _Mixin

try:
    from pytorch_lightning.callbacks import Callback as _Callback
except Exception:       # not installed, or unimportable:
    _Callback = object  # the callback warns when made and does nothing

__all__ = ["TraceMLCallback", "init"]


class TraceMLCallback(_Mixin, _Callback):
    """A pytorch_lightning Callback that traces every optimizer step of
    Trainer.fit(). TraceMLCallback(time_transfer=None | True | False):
    whether transfer_batch_to_device is timed as H2D (None: on GPU only)."""

    _DIST = "pytorch_lightning"
    _MISSING = "pytorch_lightning.callbacks" if _Callback is object else None


def init():
    """TraceML 0.5.0's entry: starts TraceML and adds a TraceMLCallback to
    every pytorch_lightning.Trainer made afterwards (not to one given a TraceMLCallback
    already). Returns traceml.init()'s config."""
    return _lightning_impl.init_for("pytorch_lightning", TraceMLCallback)
