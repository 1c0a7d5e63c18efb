"""What every framework integration shares: starting TraceML when the
script did not, the framework's version check, and steps opened and
closed from a framework's callbacks instead of a `with` block.

All of it is glue: a step is the engine's own step context (the C
trace_step), entered and left from two callbacks.
"""
import traceml_ai as _t

from .. import _glue


def start():
    """init(mode="auto") unless TraceML was started already (by the
    script, by zero-edit tracing, or by another integration). True when
    TraceML runs in this process."""
    if _glue.config() is None:
        try:
            _t.init(mode="auto")
        except Exception as e:          # never break training
            _glue.warn("could not start TraceML (%s); training runs untraced" % (e,))
    return bool(_glue.active())


def attach_to_every(trainer_cls, attach):
    """TraceML 0.5.0's integration init(): TraceML started (mode="auto")
    and trainer_cls.__init__ wrapped, so that every trainer made afterwards
    gets TraceML's callback: attach(init, trainer, args, kwargs) calls the
    original init and adds the callback unless the trainer has one already.
    Returns init()'s InitConfig."""
    start()
    if _glue.active() and trainer_cls is not None:
        orig = trainer_cls.__init__
        if not getattr(orig, "_traceml_attach", False):
            import functools

            @functools.wraps(orig)
            def __init__(self, *args, **kwargs):
                attach(orig, self, args, kwargs)

            __init__._traceml_attach = True
            _glue.patch_with(trainer_cls, "__init__", __init__)
    return _glue.config()


def _version(dist):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return None


def supported(what, dist, minimum):
    """True when the installed `dist` is at least `minimum` ("2.0"). If it
    is missing or older: one warning line naming the version needed, and
    False (the integration then does nothing: training goes on untraced)."""
    found = _version(dist)
    if found is not None:
        have = _glue.version_tuple(found)
        need = _glue.version_tuple(minimum)
        if have >= need:
            return True
    _glue.warn("the %s integration needs %s >= %s (%s); training continues untraced"
             % (what, dist, minimum, "found %s" % found if found else "not installed"))
    return False


class Steps(object):
    """A step opened by one callback and closed by another:

        steps.begin(model)   # on_step_begin: the step starts now
        steps.end()          # on_step_end: it ends here
        steps.abort()        # the step failed or training stopped inside it

    begin() while a step is open does nothing (micro-batches of gradient
    accumulation fold into the open step); end() / abort() with none open
    do nothing. The models given to the first begin() get their forward
    timed, as trace_step(model) does."""

    __slots__ = ("ctx",)

    def __init__(self):
        self.ctx = None

    def begin(self, *models):
        if self.ctx is not None or not _glue.active():
            return
        ctx = _t.trace_step(*models)
        ctx.__enter__()
        self.ctx = ctx

    @property
    def open(self):
        return self.ctx is not None

    def end(self):
        ctx, self.ctx = self.ctx, None
        if ctx is not None:
            ctx.__exit__(None, None, None)

    def abort(self):
        ctx, self.ctx = self.ctx, None
        if ctx is not None:
            ctx.__exit__(RuntimeError, None, None)
