"""TraceML inside the Hugging Face Trainer (docs/integrations.md).

    from traceml_ai.integrations.huggingface import TraceMLCallback, TraceMLTrainer

    trainer = Trainer(model=model, args=args, train_dataset=ds,
                      callbacks=[TraceMLCallback()])
    # or TraceMLTrainer(model=model, ...), or TraceML 0.5.0's names:
    # callbacks=[TraceMLTrainerCallback()], or huggingface.init() before
    # making the Trainer (every Trainer made afterwards gets the callback)

One TraceML step is one optimizer step: the step opens at on_step_begin
(the first micro-batch of an accumulation window) with the Trainer's model,
whose forward is then timed, and closes at on_step_end, after the
optimizer. Gradient-accumulation micro-batches fold into it (on_substep_end
does nothing). Logging, evaluation and saving, which the Trainer runs after
on_step_end, stay outside the steps. Backward (Tensor.backward, which
accelerator.backward calls) and the optimizer (torch's global step hooks:
Accelerate's AcceleratedOptimizer calls the inner torch optimizer's step)
are timed by TraceML's automatic patches.

Input Wait. The Trainer fetches the batches of a whole accumulation window
before on_step_begin, in get_batch_samples(); the engine counts as a step's
Input Wait only the last fetch that ended before the step (so that an
evaluation loop between steps is not billed to the next step), which would
leave out all but one of the window's fetches. While training, the trainer's
get_batch_samples is therefore replaced (an instance attribute, removed at
on_train_end) by one that pulls the window's batches from the epoch
iterator inside a single Input span, then hands them to the original
get_batch_samples, which counts num_items_in_batch outside that span: in
DDP that count is a cross-rank gather, a wait for the other ranks that is
not data loading.

The callback has no reference to its trainer in the callback API, so it is
given one: TraceMLTrainer passes itself; TraceMLCallback(trainer) takes one;
a TraceMLCallback made without one finds, at on_train_begin, the Trainer
whose train() called it (the calling frames' `self` that holds this
callback). Without a trainer, steps are still traced, and only the window's
last fetch counts as Input Wait (one warning line says so).
"""
import sys
import weakref

from . import _common
from .. import _glue
from .. import _zero_edit

try:
    import transformers as _tf
    from transformers import TrainerCallback as _Base
except Exception:                       # missing or broken: the check says so
    _tf = None
    _Base = object

__all__ = ["TraceMLCallback", "TraceMLTrainerCallback", "TraceMLTrainer", "init"]

_NEEDS = ("Hugging Face", "transformers", "4.30")
_checked = None


def _enabled():
    """The version check and start, once per process."""
    global _checked
    if _checked is None:
        _checked = bool(_common.supported(*_NEEDS) and _tf is not None and _common.start())
    return _checked


def _pull(iterator, n):
    """The next n batches (fewer at the end of the epoch), as a list."""
    out = []
    for _ in range(n):
        try:
            out.append(next(iterator))
        except StopIteration:
            break
    return out


def _windowed(orig, steps=None, model=None):
    """get_batch_samples whose fetches are one Input span: the batches are
    pulled first, inside the span, and the original then runs on them
    (its loop takes them from a list).

    With several ranks (`steps` given), the original's num_items_in_batch
    count is a gather across ranks: a collective where every rank waits
    for the slowest, like the gradient all-reduce. The step then opens
    before it (on_step_begin finds it open) and the count is timed as
    Backward, the phase that holds DDP's collectives, where the straggler
    score looks for the other ranks' wait. Without that, the wait for a
    rank with a slow loader fell between steps (UNTRACED-HEAVY, no
    straggler named)."""
    pull = _glue.engine.PhaseCall(_pull, _glue.engine.INPUT, _glue.engine.KIND_INPUT)
    synced = _glue.engine.PhaseCall(orig, _glue.engine.BACKWARD) if steps is not None else None

    def get_batch_samples(epoch_iterator, num_batches, *args, **kwargs):
        batches = pull(epoch_iterator, num_batches)
        if synced is not None and batches:
            steps.begin(model)
            return synced(iter(batches), num_batches, *args, **kwargs)
        return orig(iter(batches), num_batches, *args, **kwargs)

    get_batch_samples.__wrapped__ = orig
    get_batch_samples._traceml = True
    return get_batch_samples


def _find_trainer(callback):
    """The Trainer whose train() is calling `callback` now: the nearest
    calling frame whose `self` is a Trainer that holds the callback."""
    if _tf is None:
        return None
    f = sys._getframe(1)
    for _ in range(16):
        if f is None:
            break
        obj = _zero_edit.frame_locals(f).get("self")   # leaves no snapshot behind
        if isinstance(obj, _tf.Trainer):
            handler = getattr(obj, "callback_handler", None)
            if any(cb is callback for cb in getattr(handler, "callbacks", ())):
                return obj
        f = f.f_back
    return None


class TraceMLCallback(_Base):
    """A transformers.TrainerCallback that makes one TraceML step of each
    optimizer step (see the module's docstring). `trainer` is optional: the
    Trainer it is added to, for the Input Wait of gradient accumulation;
    without it the callback finds the Trainer that calls it."""

    def __init__(self, trainer=None):
        self._steps = _common.Steps()
        self._trainer = weakref.ref(trainer) if trainer is not None else None
        self._patched = None            # weakref to the trainer whose get_batch_samples we set
        _enabled()                      # the warning, if any, when the callback is made

    # -- training -----------------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs):
        if not _enabled():
            return
        try:
            trainer = self._trainer() if self._trainer is not None else _find_trainer(self)
            if trainer is None:
                _glue.warn("TraceMLCallback: the Trainer was not found (pass it: "
                         "TraceMLCallback(trainer)); with gradient accumulation only the "
                         "last fetch of each window counts as Input Wait")
                return
            self._wrap(trainer)
        except Exception as e:
            _glue.warn("TraceMLCallback: cannot time the Trainer's batch fetches as one "
                     "input wait (%s)" % (e,))

    def _wrap(self, trainer):
        own = vars(trainer)
        cur = own.get("get_batch_samples")
        if cur is not None and getattr(cur, "_traceml", False):
            return
        orig = getattr(trainer, "get_batch_samples", None)
        if orig is None:
            return          # transformers < 4.46: each micro-batch is fetched in the loop
        ranks = getattr(getattr(trainer, "args", None), "world_size", 1) or 1
        if ranks > 1:
            own["get_batch_samples"] = _windowed(orig, self._steps, trainer.model)
        else:
            own["get_batch_samples"] = _windowed(orig)
        self._patched = (weakref.ref(trainer), cur)

    def _unwrap(self):
        patched, self._patched = self._patched, None
        if patched is None:
            return
        ref, before = patched
        trainer = ref()
        if trainer is None:
            return
        own = vars(trainer)
        if getattr(own.get("get_batch_samples"), "_traceml", False):
            if before is None:
                del own["get_batch_samples"]
            else:
                own["get_batch_samples"] = before

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if _checked:
            if model is not None:
                self._steps.begin(model)
            else:
                self._steps.begin()

    def on_step_end(self, args, state, control, **kwargs):
        self._steps.end()

    def on_train_end(self, args, state, control, **kwargs):
        self._steps.abort()     # a step still open here never reached its optimizer
        try:
            self._unwrap()
        except Exception as e:
            _glue.warn("TraceMLCallback: cannot restore get_batch_samples (%s)" % (e,))


TraceMLTrainerCallback = TraceMLCallback      # TraceML 0.5.0's name


def _ensure_callback(trainer):
    """A TraceMLCallback that knows `trainer`, unless it has one (passed by
    the script as an instance or a class): one step per step, never two."""
    callbacks = getattr(getattr(trainer, "callback_handler", None), "callbacks", ())
    if not any(isinstance(cb, TraceMLCallback) for cb in callbacks):
        trainer.add_callback(TraceMLCallback(trainer))


def _attach(init, trainer, args, kwargs):
    init(trainer, *args, **kwargs)
    try:
        _ensure_callback(trainer)
    except Exception as e:          # never break training
        _glue.warn("cannot add TraceMLCallback to the Trainer (%s)" % (e,))


def init():
    """TraceML 0.5.0's entry: starts TraceML (mode="auto") and adds a
    TraceMLCallback to every transformers.Trainer made afterwards (not a
    second one to a Trainer given one). Returns traceml.init()'s config."""
    return _common.attach_to_every(_tf.Trainer if _tf is not None and _enabled() else None,
                                   _attach)


if _tf is not None:
    class TraceMLTrainer(_tf.Trainer):
        """transformers.Trainer with a TraceMLCallback that knows it."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            _ensure_callback(self)
else:
    class TraceMLTrainer(object):
        def __init__(self, *args, **kwargs):
            _enabled()
            raise ImportError("TraceMLTrainer needs transformers, which is not installed")
