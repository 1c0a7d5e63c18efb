"""TraceML for MONAI's trainers (docs/integrations.md), TraceML 0.5.0's names:

    from monai.engines import SupervisedTrainer
    from traceml_ai.integrations.monai import TraceMLHandler, init

    init()                                   # optional: starts TraceML (mode="auto")
    trainer = SupervisedTrainer(..., train_handlers=[TraceMLHandler()])
    trainer.run()

MONAI's engines are PyTorch Ignite engines, so this is the Ignite handler
(traceml_ai.integrations.ignite: Input Wait from the engine's fetch events,
one TraceML step per optimizer update, so the iterations of
accumulation_steps=K fold into one step) with what a SupervisedTrainer
tells more precisely, from MONAI's own IterationEvents:

  network(...) in the inferer               Forward (engine.network, timed)
  FORWARD_COMPLETED .. LOSS_COMPLETED       Forward (the loss function)
  LOSS_COMPLETED .. BACKWARD_COMPLETED      Backward (the loss scaling too)
  optimizer.step()                          Optimizer (torch's step hooks)

Each boundary is a C call that Ignite calls directly. engine.network is
read when the run starts (MONAI attaches the handlers before it sets it).
An evaluator is not a training: attached to one, the handler warns and
does nothing.
"""
import traceml_ai as _t

from .. import _glue

from . import _common, ignite as _ignite

try:
    from monai.engines import Evaluator as _Evaluator
    from monai.engines.utils import IterationEvents as _IterationEvents
except Exception:               # missing or broken: the version check says so
    _Evaluator = _IterationEvents = None

__all__ = ["TraceMLHandler", "init"]

_NEEDS = ("MONAI", "monai", "1.0")
_checked = None


def _enabled():
    """The version checks (MONAI, then the Ignite it runs on) and the start,
    once per process: one warning line at most."""
    global _checked
    if _checked is None:
        _checked = bool(_common.supported(*_NEEDS) and _IterationEvents is not None
                        and _ignite._enabled())
    return _checked


def init():
    """TraceML 0.5.0's entry: starts TraceML for a MONAI training (the
    handler still goes in train_handlers). Returns traceml.init()'s
    config; one whose `disabled` is True when MONAI is missing or too old
    (one warning line; TraceML is then not started)."""
    if not _enabled():
        if _glue.config() is not None:
            return _glue.config()
        return _t.InitConfig("auto", (False,) * 6, True, None, None)
    return _glue.config()


class TraceMLHandler(_ignite.TraceMLHandler):
    """A MONAI handler (train_handlers=[TraceMLHandler()]) that makes one
    TraceML step of each optimizer update of a SupervisedTrainer (or
    any MONAI trainer; see the module's docstring)."""

    def __init__(self):
        super(TraceMLHandler, self).__init__(None)

    def _enabled(self):
        return _enabled()

    def _attach(self, engine):
        if _Evaluator is not None and isinstance(engine, _Evaluator):
            _glue.warn("TraceMLHandler traces a MONAI trainer; %s is an evaluator (no "
                     "optimizer steps): not traced" % type(engine).__name__)
            return False
        super(TraceMLHandler, self)._attach(engine)
        c, ev, on = _glue.engine, _IterationEvents, engine.add_event_handler
        on(ev.FORWARD_COMPLETED, c.phase_begin, c.FORWARD)
        on(ev.LOSS_COMPLETED, c.phase_end, c.FORWARD)
        on(ev.LOSS_COMPLETED, c.phase_begin, c.BACKWARD)
        on(ev.BACKWARD_COMPLETED, c.phase_end, c.BACKWARD)
        return True

    def _started(self):
        engine = self._engine
        models = []
        for name in ("network", "g_network", "d_network"):     # GanTrainer: two
            m = getattr(engine, name, None)
            if m is not None and callable(m):
                models.append(m)
        self._models = tuple(models)
        super(TraceMLHandler, self)._started()
