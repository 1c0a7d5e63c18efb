"""TraceML for RF-DETR (Roboflow's detection transformer), TraceML 0.5.0's
name (docs/integrations.md):

    from rfdetr import RFDETRNano
    from traceml_ai.integrations import rfdetr as traceml_rfdetr

    traceml_rfdetr.init()                     # once, before model.train()
    model = RFDETRNano()
    model.train(dataset_dir="dataset/", epochs=10)

RF-DETR trains through PyTorch Lightning: RFDETR.train() builds its Trainer
with rfdetr.training.build_trainer() (looked up on that module at each
call). init() starts TraceML and replaces that module attribute by a
factory that calls RF-DETR's own and adds the pytorch_lightning
TraceMLCallback to the Trainer it returns (traceml_ai.integrations.
pytorch_lightning: one TraceML step per optimizer step, the accumulated
micro-batches of grad_accum_steps folded into it; Forward is
training_step, the model and the criterion). Not to a Trainer that has
one already, nor to the evaluation-only Trainer of RFDETR.evaluate()
(include_training_callbacks=False). RF-DETR's callbacks keep their order;
the callback is one more, before the checkpoint callbacks (Lightning's
own ordering).

RF-DETR's EMA callback copies the LightningModule at on_fit_start; the
callback installs its timing at on_train_start, after the copy, so the
averaged model is the plain one.
"""
import traceml_ai as _t

from .. import _glue

from . import _common

__all__ = ["init"]

_NEEDS = ("RF-DETR", "rfdetr", "1.10")


def _disabled_config():
    if _glue.config() is not None:
        return _glue.config()
    return _t.InitConfig("auto", (False,) * 6, True, None, None)


def init():
    """TraceML 0.5.0's entry: starts TraceML (mode="auto") and makes every
    Trainer that rfdetr.training.build_trainer() builds from now on carry a
    TraceMLCallback, so RFDETR.train() is traced. Idempotent. Returns
    traceml.init()'s config; when rfdetr (or its training extras) is
    missing or too old, one warning line, TraceML is not started, and the
    config returned says disabled."""
    if not _common.supported(*_NEEDS):
        return _disabled_config()
    try:
        from rfdetr import training
        from . import pytorch_lightning as pl_integration
    except Exception as e:
        _glue.warn("the RF-DETR integration cannot import rfdetr.training (%s; pip install "
                 "'rfdetr[train]'); training continues untraced" % (e,))
        return _disabled_config()
    if not _common.start():
        return _glue.config()
    try:
        _wrap_factory(training, pl_integration.TraceMLCallback)
    except Exception as e:                  # never break training
        _glue.warn("the RF-DETR integration cannot wrap rfdetr.training.build_trainer (%s); "
                 "training continues untraced" % (e,))
    return _glue.config()


def _auto(training):
    """Zero-edit tracing (`traceml run` on a script that does not import
    TraceML) when rfdetr.training has been imported: the factory wrapped as
    init() wraps it, if TraceML runs and rfdetr is recent enough (silently
    not otherwise: the script asked for nothing)."""
    found = _common._version("rfdetr")
    if not _glue.active() or found is None or \
            _glue.version_tuple(found) < _glue.version_tuple(_NEEDS[2]):
        return
    from . import pytorch_lightning as pl_integration
    _wrap_factory(training, pl_integration.TraceMLCallback)


def _wrap_factory(training, callback_cls):
    orig = training.build_trainer
    if getattr(orig, "_traceml", False):
        return
    import functools

    @functools.wraps(orig)
    def build_trainer(*args, **kwargs):
        trainer = orig(*args, **kwargs)
        if kwargs.get("include_training_callbacks", True):
            try:
                _add_callback(trainer, callback_cls)
            except Exception as e:          # never break training
                _glue.warn("cannot add TraceMLCallback to RF-DETR's Trainer (%s)" % (e,))
        return trainer

    build_trainer._traceml = True
    _glue.patch_with(training, "build_trainer", build_trainer)


def _add_callback(trainer, callback_cls):
    callbacks = list(trainer.callbacks)
    if any(isinstance(cb, callback_cls) for cb in callbacks):
        return
    callbacks.append(callback_cls())
    try:    # checkpoint callbacks last, as the Trainer's constructor orders them
        from pytorch_lightning.trainer.connectors.callback_connector import _CallbackConnector
        callbacks = _CallbackConnector._reorder_callbacks(callbacks)
    except Exception:
        pass
    trainer.callbacks = callbacks
