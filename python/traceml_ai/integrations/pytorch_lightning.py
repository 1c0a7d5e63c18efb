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
from . import _common, _lightning_impl
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

    def __init__(self, time_transfer=None):
        super(TraceMLCallback, self).__init__(time_transfer)
        if _Callback is object:
            self._unavailable("pytorch_lightning.callbacks")


def init():
    """TraceML 0.5.0's entry: starts TraceML and adds a TraceMLCallback to
    every pytorch_lightning.Trainer made afterwards (not to one given a TraceMLCallback
    already). Returns traceml.init()'s config."""
    trainer = None
    if _Callback is not object and _common.supported("Lightning", TraceMLCallback._DIST,
                                                     TraceMLCallback._MINIMUM):
        from pytorch_lightning import Trainer as trainer
    return _lightning_impl.init(trainer, TraceMLCallback)
