"""The Lightning callback, once for both namespaces.

Lightning accepts a callback only if it is an instance of its own
namespace's Callback: `lightning.pytorch.callbacks.Callback` and
`pytorch_lightning.callbacks.Callback` are two unrelated classes with the
same code. So the hooks live here in a mixin, and lightning.py and
pytorch_lightning.py each put it in front of their namespace's Callback.

Where Lightning's loop puts things (lightning 2.x, training_epoch_loop.py
and the automatic optimization loop), and what TraceML makes of them:

  next(data_fetcher)             DataLoader fetch: Input Wait (patched by init)
  batch_to_device                transfer_batch_to_device: H2D (wrapped here)
  on_train_batch_start           the step opens (first micro-batch of a window)
  optimizer.step(closure)        Optimizer: the rest of the optimizer call
    closure: training_step       Forward (wrapped here; the LightningModule's
                                 own forward, when training_step calls self(x),
                                 is timed too and nests inside it)
             backward            Backward (Tensor.backward, patched by init)
    on_before_optimizer_step     marks the batch as the one that steps
  on_train_batch_end             the step closes, if the optimizer stepped

A fetch and a transfer happen before on_train_batch_start, outside the
step: the engine carries the last fetch and the copies after it into the
step that opens next. With gradient accumulation the fetches of the later
micro-batches fall inside the open step, so a step's Input Wait is the sum
of its micro-batches' fetches.
"""
import importlib


from . import _common
from .. import _glue


def _own(obj, name):
    """The instance attribute `name` of obj, or None."""
    try:
        return vars(obj).get(name)
    except TypeError:
        return None


class _Wrapped(object):
    """An instance attribute of a module replaced by a timed call, and how
    to put the original back (the module may be pickled, or fit() again)."""

    __slots__ = ("obj", "name", "had", "orig", "wrapper")

    def __init__(self, obj, name, phase):
        self.obj = obj
        self.name = name
        own = _own(obj, name)
        self.had = own is not None
        self.orig = own
        self.wrapper = _glue.engine.PhaseCall(getattr(obj, name), phase)
        vars(obj)[name] = self.wrapper

    def undo(self):
        d = vars(self.obj)
        if d.get(self.name) is not self.wrapper:
            return          # someone replaced it since: leave theirs
        if self.had:
            d[self.name] = self.orig
        else:
            del d[self.name]


def init(trainer_cls, callback_cls):
    """TraceML 0.5.0's lightning.init(): TraceML started and a
    `callback_cls` added to the callbacks of every `trainer_cls` made
    afterwards, unless the script passed one (Trainer's arguments are
    keywords). Returns traceml.init()'s config."""
    def attach(orig, trainer, args, kwargs):
        try:
            cbs = kwargs.get("callbacks")
            cbs = [] if cbs is None else list(cbs) if isinstance(cbs, (list, tuple)) else [cbs]
            if not any(isinstance(cb, callback_cls) for cb in cbs):
                kwargs = dict(kwargs, callbacks=cbs + [callback_cls()])
        except Exception as e:          # never break training
            _glue.warn("cannot add TraceMLCallback to the Trainer (%s)" % (e,))
        orig(trainer, *args, **kwargs)

    return _common.attach_to_every(trainer_cls, attach)


def init_for(package, callback_cls):
    """init() of the namespace `package` ("lightning.pytorch",
    "pytorch_lightning"): its Trainer, when it imports and is recent
    enough, gets a `callback_cls`."""
    trainer = None
    if not callback_cls._MISSING and _common.supported("Lightning", callback_cls._DIST,
                                                       callback_cls._MINIMUM):
        trainer = importlib.import_module(package).Trainer
    return init(trainer, callback_cls)


class TraceMLCallbackMixin(object):
    """TraceML inside a Lightning Trainer: one TraceML step per optimizer
    step. Put it first in front of the namespace's Callback."""

    _DIST = "lightning"          # the distribution whose version is checked
    _MINIMUM = "2.0"
    _MISSING = None              # the callbacks module that did not import

    def __init__(self, time_transfer=None, *args, **kwargs):
        """time_transfer: time LightningModule.transfer_batch_to_device as
        H2D. None (the default) does it only when the Trainer's root device
        is a GPU, so that a CPU run shows no copy that is not one; True
        always (a custom transfer hook that does real work on the CPU, or
        a test); False never."""
        super(TraceMLCallbackMixin, self).__init__(*args, **kwargs)
        self._time_transfer = time_transfer
        self._on = None            # None: not decided yet; False: untraced
        self._steps = _common.Steps()
        self._stepped = False
        self._training = False
        self._transfer = None      # _Wrapped of transfer_batch_to_device
        self._step_fn = None       # _Wrapped of training_step
        if self._MISSING:
            self._unavailable(self._MISSING)

    # -- setting up and tearing down ----------------------------------------

    def _enable(self, trainer, pl_module):
        if self._on is None:
            self._on = bool(_common.supported("Lightning", self._DIST, self._MINIMUM)
                            and _common.start())
        return self._on

    def setup(self, trainer, pl_module, stage=None, *args, **kwargs):
        # Lightning calls it after the process group exists (the strategy's
        # setup_environment comes first), so init() reads the rank from
        # torch.distributed when the launcher did not set RANK (Lightning's
        # own ddp launcher sets only LOCAL_RANK, NODE_RANK and WORLD_SIZE).
        if stage not in (None, "fit"):        # validate/test/predict: no steps
            return
        try:
            if self._enable(trainer, pl_module):
                _glue.sync_identity()
        except Exception as e:
            self._fail(e)

    def on_fit_start(self, trainer, pl_module, *args, **kwargs):
        # setup() may be skipped by a subclass that overrides it
        try:
            self._enable(trainer, pl_module)
        except Exception as e:
            self._fail(e)

    def _unavailable(self, module):
        """The namespace's Callback did not import: one warning (the
        version check's when the package is missing or too old), and the
        callback does nothing."""
        if _common.supported("Lightning", self._DIST, self._MINIMUM):
            _glue.warn("the Lightning integration cannot import %s; training "
                     "continues untraced" % module)
        self._on = False

    def _fail(self, e):
        _glue.warn("the Lightning integration stopped (%s); training continues untraced" % (e,))
        self._on = False
        self._unwrap()
        try:
            self._steps.abort()
        except Exception:
            pass

    def _want_transfer(self, trainer):
        if self._time_transfer is not None:
            return bool(self._time_transfer)
        try:
            return trainer.strategy.root_device.type == "cuda"
        except Exception:
            return False

    def _wrap_transfer(self, trainer, pl_module):
        if self._transfer is None and self._want_transfer(trainer):
            self._transfer = _Wrapped(pl_module, "transfer_batch_to_device", _glue.engine.H2D)

    def _unwrap_transfer(self):
        w, self._transfer = self._transfer, None
        if w is not None:
            w.undo()

    def _unwrap(self):
        w, self._step_fn = self._step_fn, None
        if w is not None:
            try:
                w.undo()
            except Exception:
                pass
        try:
            self._unwrap_transfer()
        except Exception:
            pass

    def on_train_start(self, trainer, pl_module, *args, **kwargs):
        if not self._on or not _glue.active():
            return
        try:
            self._training = True
            self._stepped = False
            # training_step is the forward pass plus the loss, whether it
            # calls self(x) (then the LightningModule's forward nests
            # inside, timed by trace_step) or its submodules directly.
            if self._step_fn is None:
                self._step_fn = _Wrapped(pl_module, "training_step", _glue.engine.FORWARD)
            self._wrap_transfer(trainer, pl_module)
        except Exception as e:
            self._fail(e)

    # Lightning calls transfer_batch_to_device for validation batches too;
    # those are not part of a training step, so the timed call is taken
    # away while validation runs (no Python runs per batch for it).
    def on_validation_start(self, trainer, pl_module, *args, **kwargs):
        if self._transfer is not None:
            try:
                self._unwrap_transfer()
            except Exception as e:
                self._fail(e)

    def on_validation_end(self, trainer, pl_module, *args, **kwargs):
        if self._on and self._training and _glue.active():
            try:
                self._wrap_transfer(trainer, pl_module)
            except Exception as e:
                self._fail(e)

    def on_train_end(self, trainer, pl_module, *args, **kwargs):
        self._stop()

    def on_exception(self, trainer, pl_module, exception=None, *args, **kwargs):
        self._stop()

    def teardown(self, trainer, pl_module, stage=None, *args, **kwargs):
        self._stop()

    def _stop(self):
        self._training = False
        try:
            self._steps.abort()      # a step left open did not step
        except Exception:
            pass
        self._unwrap()

    # -- steps --------------------------------------------------------------

    def on_train_batch_start(self, trainer, pl_module, *args, **kwargs):
        if not self._on:
            return
        try:
            self._steps.begin(pl_module)     # no-op while a window is open
        except Exception as e:
            self._fail(e)

    def on_before_optimizer_step(self, trainer, pl_module, *args, **kwargs):
        self._stepped = True

    def on_train_batch_end(self, trainer, pl_module, *args, **kwargs):
        if not self._stepped:
            return                           # accumulating: the step stays open
        self._stepped = False
        try:
            self._steps.end()
        except Exception as e:
            self._fail(e)
