"""TraceML for DeepSpeed: trace_engine(engine) on the engine that
deepspeed.initialize() returned.

    engine, optimizer, _, _ = deepspeed.initialize(model=model, config=cfg, ...)
    engine = trace_engine(engine)
    for x, y in loader:                    # fetches are timed as Input Wait
        loss = loss_fn(engine(x), y)       # opens the step; the module's forward is Forward
        engine.backward(loss)              # Backward
        engine.step()                      # Optimizer; closes the step at the boundary

One TraceML step is one optimizer step: DeepSpeed owns gradient
accumulation (gradient_accumulation_steps in its config), so the K
micro-batches of one update fold into one step, which closes when
engine.step() has taken the model step (the engine's global_steps
advanced). Only this engine instance changes (instance attributes, nothing
global): forward, backward and step are wrapped; the inner module
(engine.module) gets its forward timed as trace_step(model) does.

engine.backward() runs loss.backward() inside, which TraceML's automatic
patch times as Backward too; the engine counts a phase nested in the same
phase once, so the backward is not counted twice. Likewise the torch
optimizer's own step inside engine.step().
"""

from . import _common
from .. import _glue

MINIMUM = "0.10"


def _wrap_forward(engine, steps, orig):
    def forward(*args, **kwargs):
        if not steps.open:
            steps.begin(engine.module)
        try:
            return orig(*args, **kwargs)
        except BaseException:
            steps.abort()
            raise
    forward.__wrapped__ = orig
    return forward


def _wrap_backward(steps, orig):
    timed = _glue.engine.PhaseCall(orig, _glue.engine.BACKWARD)

    def backward(*args, **kwargs):
        try:
            return timed(*args, **kwargs)
        except BaseException:
            steps.abort()
            raise
    backward.__wrapped__ = timed
    return backward


def _boundary(engine):
    try:
        return bool(engine.is_gradient_accumulation_boundary())
    except Exception:
        return True


def _wrap_step(engine, steps, orig):
    timed = _glue.engine.PhaseCall(orig, _glue.engine.OPTIMIZER)

    def step(*args, **kwargs):
        # The engine's global_steps advances exactly when it took a model
        # step (managed accumulation at the boundary, or every step() with
        # managed_gradient_accumulation=false); the boundary query before
        # the call is the fallback for engines without that counter.
        before = getattr(engine, "global_steps", None)
        boundary = _boundary(engine) if not isinstance(before, int) else None
        try:
            out = timed(*args, **kwargs)
        except BaseException:
            steps.abort()
            raise
        after = getattr(engine, "global_steps", None)
        if (after != before) if isinstance(before, int) else boundary:
            steps.end()
        return out
    step.__wrapped__ = timed
    return step


def trace_engine(engine):
    """Traces a DeepSpeedEngine (from deepspeed.initialize()) and returns
    it. Starts TraceML (init(mode="auto")) unless the script or `traceml
    run` did. When deepspeed is missing or older than 0.10, or the engine
    is a PipelineEngine (train_batch), or it cannot be wrapped, one warning
    line and the engine is returned untouched: training goes on untraced.
    Calling it again on the same engine does nothing."""
    if not _common.supported("DeepSpeed", "deepspeed", MINIMUM):
        return engine
    if callable(getattr(engine, "train_batch", None)):
        # PipelineEngine: train_batch() runs its own schedule and refuses
        # forward/backward/step, so there is nothing here to wrap.
        _glue.warn("the DeepSpeed integration does not trace pipeline engines "
                 "(%s.train_batch); training continues untraced" % type(engine).__name__)
        return engine
    if not _common.start():
        return engine
    if getattr(engine, "_traceml_steps", None) is not None:
        return engine                       # traced already
    try:
        steps = _common.Steps()
        fwd, bwd, stp = engine.forward, engine.backward, engine.step
        own = vars(engine)
        own["forward"] = _wrap_forward(engine, steps, fwd)
        own["backward"] = _wrap_backward(steps, bwd)
        own["step"] = _wrap_step(engine, steps, stp)
        own["_traceml_steps"] = steps
    except Exception as e:                  # never break training
        for name in ("forward", "backward", "step", "_traceml_steps"):
            try:
                if getattr(vars(engine).get(name), "__wrapped__", None) is not None \
                        or name == "_traceml_steps":
                    del vars(engine)[name]
            except Exception:
                pass
        _glue.warn("cannot trace the DeepSpeed engine %s (%s); training continues untraced"
                 % (type(engine).__name__, e))
    return engine
