"""TraceML for PyTorch Ignite training loops (docs/integrations.md):

    from ignite.engine import Engine            # or create_supervised_trainer(...)
    from traceml_ai.integrations.ignite import TraceMLHandler

    trainer = Engine(train_step)
    TraceMLHandler(model).attach(trainer)
    trainer.run(loader, max_epochs=2)

Any ignite.engine.Engine that trains: the handler knows nothing of the
process function. What it reads from the engine's own events:

  GET_BATCH_STARTED .. _COMPLETED  Input Wait: the engine's fetch of the
                                   batch from whatever iterable it runs on
  ITERATION_STARTED                the step opens (first micro-batch of a
                                   gradient-accumulation window)
  process function                 Forward: the model's forward (the model
                                   given, else the modules that hold the
                                   parameters of the first optimizer that
                                   steps, found once); Backward and
                                   Optimizer: TraceML's automatic patches
                                   (Tensor.backward, torch's optimizer-step
                                   hooks)
  ITERATION_COMPLETED              the step closes, if a torch optimizer
                                   stepped during it; else it stays open
                                   and the next iteration folds into it

So one TraceML step is one optimizer update, whatever the accumulation
rule of the loop. The fetch is one phase_begin / phase_end pair of C
calls that Ignite calls directly (no Python between); a fetch nested in it
(a torch DataLoader's, timed by init's automatic patch) counts once.

A fetch that ends the epoch (StopIteration) fires GET_BATCH_STARTED with
no COMPLETED: EPOCH_COMPLETED forgets it. A step still open when the run
completes or is terminated never reached an optimizer: it is aborted, as
is one left open by an exception (at the next run's STARTED). Nothing is
registered on EXCEPTION_RAISED: Ignite re-raises only when no handler is.
"""

from . import _common
from .. import _glue

try:
    from ignite.engine import Events as _Events
except Exception:               # missing or broken: the version check says so
    _Events = None

__all__ = ["TraceMLHandler"]

_NEEDS = ("PyTorch Ignite", "pytorch-ignite", "0.4.11")
_checked = None


def _enabled():
    """The version check and start, once per process."""
    global _checked
    if _checked is None:
        _checked = bool(_common.supported(*_NEEDS) and _Events is not None
                        and _common.start())
    return _checked


def _as_models(model):
    if model is None:
        return ()
    if isinstance(model, (list, tuple)):
        return tuple(m for m in model if m is not None)
    return (model,)


class TraceMLHandler(object):
    """An Ignite handler: TraceMLHandler(model=None).attach(trainer) makes
    one TraceML step of each optimizer update of `trainer` (see the
    module's docstring). `model`: the nn.Module (or a list of them) whose
    forward is timed; None finds them from the first optimizer that steps.
    One handler per training engine; attach it to the trainer, not to an
    evaluator (an engine whose iterations step no optimizer)."""

    def __init__(self, model=None):
        self._models = _as_models(model)
        self._steps = _common.Steps()
        self._stepped = False       # a torch optimizer stepped in the open step
        self._seen_step = False     # ... at least once this run
        self._every = False         # no optimizer ever steps: a step per iteration
        self._hook = None
        self._searched = set()      # id() of the optimizers whose models were looked for
        self._engine = None
        self._on = self._enabled()

    def _enabled(self):
        return _enabled()

    # -- attaching ------------------------------------------------------------

    def attach(self, engine):
        """Called by the script (or by MONAI for its train_handlers)."""
        if not self._on or not _glue.active():
            return
        if getattr(engine, "_traceml_handler", None) is not None:
            _glue.warn("this engine already has a TraceMLHandler; a second one is ignored")
            return
        if self._engine is not None:
            _glue.warn("this TraceMLHandler is attached to an engine already; use one "
                     "handler per engine (the second is not traced)")
            return
        try:
            if not self._attach(engine):
                return
            engine._traceml_handler = self
            self._engine = engine
        except Exception as e:
            self._fail(e)

    def _attach(self, engine):
        c, ev, on = _glue.engine, _Events, engine.add_event_handler
        on(ev.STARTED, self._started)
        on(ev.GET_BATCH_STARTED, c.phase_begin, c.INPUT)
        on(ev.GET_BATCH_COMPLETED, c.phase_end, c.INPUT)
        on(ev.ITERATION_STARTED, self._begin)
        on(ev.ITERATION_COMPLETED, self._end)
        on(ev.EPOCH_COMPLETED, self._epoch_completed)
        on(ev.COMPLETED, self._finished)
        on(ev.TERMINATE, self._finished)
        return True

    def _fail(self, e):
        _glue.warn("the Ignite integration stopped (%s); training continues untraced" % (e,))
        self._on = False
        self._finished()

    # -- the run ------------------------------------------------------------

    def _started(self):
        """Events.STARTED, once per engine.run()."""
        self._finished()            # what an earlier run left by an exception
        if not self._on or not _glue.active():
            return
        self._stepped = self._seen_step = False
        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook
            self._hook = register_optimizer_step_post_hook(self._optimizer_stepped)
        except Exception as e:
            self._fail(e)

    def _finished(self):
        """COMPLETED / TERMINATE: a step still open never stepped."""
        try:
            self._steps.abort()
            if _glue.active():
                _glue.engine.phase_cancel(_glue.engine.INPUT)
        except Exception:
            pass
        hook, self._hook = self._hook, None
        if hook is not None:
            try:
                hook.remove()
            except Exception:
                pass

    def _epoch_completed(self):
        # an iterable without len() ends its epoch in a fetch that raised
        # StopIteration: its GET_BATCH_STARTED has no COMPLETED
        _glue.engine.phase_cancel(_glue.engine.INPUT)
        if not self._seen_step and not self._every and self._hook is not None:
            # an epoch and no torch optimizer step: its step is no update
            self._every = True
            self._steps.abort()
            _glue.warn("the Ignite integration saw no torch.optim optimizer step in an epoch; "
                     "from now on each iteration is one TraceML step")

    # -- steps (per iteration) ----------------------------------------------

    def _begin(self):
        if self._on:
            self._steps.begin(*self._models)

    def _end(self):
        if self._stepped or self._every:
            self._stepped = False
            self._steps.end()

    def _optimizer_stepped(self, opt, args, kwargs):
        """torch's global optimizer-step post-hook, while the engine runs."""
        if self._steps.ctx is None:
            return                  # not inside one of this engine's iterations
        self._stepped = self._seen_step = True
        if not self._models and id(opt) not in self._searched:
            self._searched.add(id(opt))
            self._find_models(opt)

    def _find_models(self, opt):
        """The modules that hold opt's parameters, from the running frames
        (the process function's model) as zero-edit tracing finds them:
        their forward is timed from the next iteration on."""
        from .. import _zero_edit
        _zero_edit.discover(opt, _glue.install_forward, lambda: None, _glue.warn)
