"""TraceML: why does a training step take as long as it does?

    import traceml_ai as traceml
    traceml.init(mode="auto")
    for batch in loader:                    # the fetch is timed as input wait
        with traceml.trace_step(model):     # one training step
            ...forward, loss.backward(), optimizer.step()...

This package is glue: it installs the engine's C callables (see
python/_traceml.c) into PyTorch objects and nothing else. Timing, step
assembly, diagnosis and every report live in the C engine. No Python code
of this package runs per step except what installs hooks on a model the
first time trace_step() sees it.

Importing it does not import torch; init(mode="auto") does. TraceML never
breaks training: a failure while setting up is a warning (TraceMLWarning,
through Python's `warnings`) and the run goes on uninstrumented.
"""

import atexit as _atexit
import collections as _collections
import os as _os
import sys as _sys

__all__ = [
    "init", "start", "InitConfig", "TraceMLInitConfig", "TraceMLWarning", "trace_step",
    "summary", "final_summary",
    "wrap_dataloader_fetch", "wrap_input", "wrap_forward", "wrap_backward",
    "wrap_optimizer", "wrap_h2d", "wrap_ddp", "finish", "compare",
]

__version__ = "0.1.0"

try:
    from . import _traceml as _c
    _import_error = None
    __version__ = _c.VERSION
except ImportError as _e:          # the engine is missing: fail open
    _c = None
    _import_error = _e

_MODES = ("auto", "manual", "selective")


def _env(name):
    """A TRACEML_* variable as the engine reads it (its one table,
    docs/cli.md "Environment variables"): True/False, an int, a float, a
    str, or None (no value; or the engine is missing). Asked, never parsed
    here again."""
    return _c.config(name) if _c is not None else None
_config = None          # the configuration of the first successful init()
_detected = False       # started by zero-edit tracing (_zero_edit.py), not by the script
_armed = False          # deferred zero-edit tracing: starts at the first use (_arm_deferred)
_armed_hooks = []       # the optimizer-step hooks registered while armed
_opt_hooks = []         # the optimizer-step hooks of the running TraceML
_active = False         # the engine is running and patches may be installed
_patched = []           # (owner, attribute, original) of every patch
_stop_hooks = []        # fn(status) called once TraceML stopped (_on_stop)
_warned = set()         # the messages _warn() gave
_HERE = _os.path.dirname(_os.path.abspath(__file__))


class TraceMLWarning(UserWarning):
    """The category of every warning this package gives: a hook it could
    not install, a keyword with no meaning here, a tracker that refused
    the data. TraceML's trouble is not the training's: it warns and the
    training goes on. Silence or capture them as any warning:

        warnings.filterwarnings("ignore", category=traceml_ai.TraceMLWarning)
        logging.captureWarnings(True)            # into the "py.warnings" logger
    """


def _library(name):
    """A file of an installed library or of the standard library: a
    warning names a line of the user's code, not torch's or a
    framework's."""
    import sysconfig
    if "%ssite-packages%s" % (_os.sep, _os.sep) in name or name.startswith("<frozen"):
        return True
    if "%sdist-packages%s" % (_os.sep, _os.sep) in name:
        return True
    paths = sysconfig.get_paths()
    return any(name.startswith(_os.path.join(paths[k], "")) for k in ("stdlib", "platstdlib")
               if paths.get(k))


def _stacklevel():
    """warnings.warn's stacklevel for _warn's caller's warning: the first
    frame of the user's code (outside this package, installed libraries
    and the standard library: their init(), their trainer.fit() when a
    framework called TraceML's callback), else the first outside this
    package, else the outermost frame there is. Counted as `warnings`
    counts: importlib's frames are skipped."""
    def internal(f):
        name = f.f_code.co_filename
        return "importlib" in name and "_bootstrap" in name
    level, f, outside = 2, _sys._getframe(2), None
    while True:
        name = f.f_code.co_filename
        if not name.startswith(_HERE + _os.sep):
            if not _library(name):
                return level
            outside = outside or level
        g = f.f_back
        while g is not None and internal(g):
            g = g.f_back
        if g is None:
            return outside or level
        f, level = g, level + 1


def _warn(msg):
    """A TraceMLWarning through Python's `warnings`, so that filters and
    captures see it; once per message in a process, as before (a setting
    DDP refuses is said once, not for every model built). It never raises
    into the training loop: where a filter makes it an error, it is the
    line `traceml: warning: MESSAGE` on stderr instead."""
    if msg in _warned:
        return
    _warned.add(msg)
    try:
        import warnings
        warnings.warn(msg, TraceMLWarning, stacklevel=_stacklevel())
        return
    except Exception:
        pass
    try:
        _sys.stderr.write("traceml: warning: %s\n" % msg)
        _sys.stderr.flush()
    except Exception:
        pass


# --------------------------------------------------------------------------
# The per-step entry: a C function when the engine is there.

class _NullStep(object):
    """Used only when the extension could not be loaded."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NULL_STEP = _NullStep()

def _batch_types():
    """What the engine counts a fetched batch by (throughput, docs/summary-
    json.md): asked at the first fetch, when torch is whole."""
    torch = _sys.modules["torch"]
    return torch.Tensor, (torch.int64, torch.int32), _collections.UserDict


if _c is not None:
    trace_step = _c.trace_step
    _c._set_batch_types(_batch_types)
else:
    def trace_step(*models, model=None):
        return _NULL_STEP



# --------------------------------------------------------------------------
# Patches

def _is_ours(fn):
    for _ in range(16):
        if fn is None:
            return False
        if _c is not None and isinstance(fn, (_c.PhaseCall,)):
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False


def _patch(owner, name, phase, kind=None):
    orig = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
    if orig is None:
        orig = getattr(owner, name)
    if _is_ours(orig):
        return
    if kind is None:
        kind = _c.KIND_PHASE
    setattr(owner, name, _c.PhaseCall(orig, phase, kind))
    _patched.append((owner, name, orig))


def _patch_with(owner, name, new):
    """Replaces owner.name with new (a plain Python wrapper), recorded like
    the C patches."""
    orig = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
    setattr(owner, name, new)
    _patched.append((owner, name, orig))


def _sync_identity():
    """Tells the engine this process's rank when only torch.distributed
    knows it (no RANK / SLURM_PROCID in the environment, e.g. ranks started
    by torch.multiprocessing.spawn). Never imports torch itself."""
    if "RANK" in _os.environ or "SLURM_PROCID" in _os.environ:
        return
    dist = _sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            _c.set_rank(dist.get_rank(), dist.get_world_size())
    except Exception as e:
        _warn("cannot read the rank from torch.distributed (%s)" % (e,))


_loader_reported = False


def _note_loader(loader):
    """Tells the engine the first DataLoader's num_workers / pin_memory, so
    an INPUT-BOUND verdict can say what to change."""
    global _loader_reported
    if _loader_reported or not _active:
        return
    workers = getattr(loader, "num_workers", None)
    if not isinstance(workers, int):
        return
    _loader_reported = True
    try:
        _c.set_loader_config(workers, bool(getattr(loader, "pin_memory", False)))
    except Exception:
        pass


def _loader_iter_made(self, loader, *args, **kwargs):
    if not _loader_reported:
        _note_loader(loader)
    if getattr(loader, "num_workers", 0) and not getattr(loader, "persistent_workers", False):
        _c.mark_epoch_start()


def _report_loader_settings(iter_cls):
    """After the DataLoader iterator's __init__ (once per epoch, never per
    step): reports the loader's settings the first time, and marks the
    step after it as an epoch start when the loader's workers start anew
    (num_workers > 0 without persistent_workers): its wait is spin-up,
    reported apart (EPOCH START). A C callable (KIND_AFTER): the
    iterator's own warnings (pin_memory without an accelerator, at
    stacklevel=2) name torch's line that made it, not TraceML's."""
    orig = iter_cls.__dict__["__init__"]
    if _is_ours(orig):
        return
    iter_cls.__init__ = _c.PhaseCall(orig, 0, _c.KIND_AFTER, _loader_iter_made)
    _patched.append((iter_cls, "__init__", orig))


_timed = None           # weak set of the models whose forward is timed
_also_timed = []        # class names of those found beside trace_step's (_announce)


def _note_timed(model):
    global _timed
    try:
        if _timed is None:
            import weakref
            _timed = weakref.WeakSet()
        _timed.add(model)
    except TypeError:
        pass


def _find_extra(opt):
    """Called by the engine's glue (python/_traceml.c) when an optimizer
    not seen before steps inside a trace_step(model) bracket: the other
    models of the step get their forward timed (_zero_edit.find_extra)."""
    from . import _zero_edit
    _zero_edit.hide_from_dynamo(_find_extra)
    _zero_edit.find_extra(opt, _timed if _timed is not None else (), _install_forward,
                          _announce, _warn)


def _announce(model):
    """Names a model found beside trace_step's in the summary: "also timed:
    Generator" (tml_set_auto_models)."""
    from . import _zero_edit
    name = _zero_edit.model_name(model)
    if name in _also_timed:
        return
    _also_timed.append(name)
    try:
        _c.set_auto_models(", ".join(_also_timed))
    except Exception:
        pass


def _install_forward(model):
    """Called by the C trace_step() the first time it sees `model`, and by
    zero-edit tracing for the models it finds: times the model's calls as
    Forward (python/_traceml.c, KIND_FORWARD)."""
    _note_timed(model)
    _sync_identity()
    if _comm_on:
        from . import _comm
        _comm.attach(model)
    try:
        torch = _sys.modules["torch"]
        if _call_slot(model, torch):
            _time_calls(model, torch)
        else:
            _time_forward(model)
    except Exception as e:
        _warn("cannot time the forward of %s (%s); call traceml.wrap_forward() "
              "on an nn.Module" % (type(model).__name__, e))


def _call_slot(model, torch):
    """True when nn.Module.__call__ goes through the instance's
    _compiled_call_impl (torch >= 2.2: where Module.compile() puts the
    compiled call), as it does for every class that keeps Module's
    __call__ (OptimizedModule's calls it)."""
    module_t = torch.nn.Module
    if not hasattr(module_t, "_compiled_call_impl") or not hasattr(module_t, "_wrapped_call_impl"):
        return False
    call = type(model).__call__
    if call is module_t.__call__:
        return True
    optimized = getattr(getattr(torch, "_dynamo", None), "eval_frame", None)
    optimized = getattr(optimized, "OptimizedModule", None)
    return optimized is not None and isinstance(model, optimized)


def _time_calls(model, torch):
    """The model's calls, timed from the one place nn.Module.__call__ looks
    at that nothing else does: _compiled_call_impl. Nothing goes into the
    instance: its class gets a _Timed descriptor there, which answers None
    (nn.Module's own value) for every instance but the timed one, and the
    timed call for it -- so a module pickles, deep-copies and
    state_dict()s as without TraceML, torch.jit.script skips it, and a
    copy of the instance (a clone through its __dict__) runs its own
    forward, untimed. torch.compile never sees it on its fast path (it
    inlines forward); where it does (a module with hooks called from a
    compiled function), the descriptor asks torch.compiler.is_compiling()
    first and answers None, so no graph breaks. A module compiled in
    place (model.compile()) is timed around its compiled call, in the
    instance: a copy carries that compiled call of the original anyway."""
    own = vars(model)
    cur = own.get("_compiled_call_impl")
    if getattr(cur, "_traceml_timed", False) or _Timed.has(model):
        return
    if cur is None:
        call_impl = type(model)._call_impl
        _Timed.install(model, "_compiled_call_impl",
                       _c.PhaseCall(call_impl, _c.FORWARD, _c.KIND_FORWARD,
                                    _flop_counter(model, torch)), torch)
        return
    timed = _c.PhaseCall(cur, _c.FORWARD, _c.KIND_FORWARD)
    compiling = _compiling(torch)

    def _traceml_timed_call(*args, **kwargs):
        if compiling():
            return cur(*args, **kwargs)
        return timed(*args, **kwargs)

    _traceml_timed_call._traceml_timed = True
    from . import _zero_edit
    _zero_edit.hide_from_dynamo(_traceml_timed_call, _Timed.__get__)
    own["_compiled_call_impl"] = _traceml_timed_call


def _flop_counter(model, torch):
    """The one-shot FLOP count of a model's first forward (_flops.py), or
    None: TRACEML_FLOPS=0, or a compiled model (a dispatch mode around a
    compiled call would recompile it)."""
    if _env("TRACEML_FLOPS") is False:
        return None
    optimized = getattr(getattr(getattr(torch, "_dynamo", None), "eval_frame", None),
                        "OptimizedModule", None)
    if optimized is not None and isinstance(model, optimized):
        _c.log_note("FLOPs not counted for %s: a compiled model (counting would "
                    "recompile it)" % type(model).__name__)
        return None
    from . import _flops, _zero_edit
    count = _flops.counter(_c, _c.log_note)
    _zero_edit.hide_from_dynamo(count, _batch_types)   # they run inside a compiled step's eager parts
    return count


import types as _types      # _Timed


class _Timed(object):
    """A class attribute (_compiled_call_impl, or forward) that gives the
    timed instances of the class their timed call and every other
    instance what the class had: TraceML keeps nothing in an instance,
    where a copy of it would carry it along. Instances are known by
    id() and a weak reference (TraceML keeps no model alive)."""
    calls = {}              # id(instance) -> (weakref, PhaseCall of the plain function)
    compiling = None        # torch.compiler.is_compiling

    def __init__(self, plain):
        self.plain = plain  # None (nn.Module's _compiled_call_impl), or the class's forward

    def __get__(self, obj, cls=None):
        plain = self.plain
        if obj is not None and not _Timed.compiling():
            hit = _Timed.calls.get(id(obj))
            if hit is not None and hit[0]() is obj:
                return _types.MethodType(hit[1], obj)
        return plain if plain is None else plain.__get__(obj, cls)

    @staticmethod
    def has(model):
        hit = _Timed.calls.get(id(model))
        return hit is not None and hit[0]() is model

    @staticmethod
    def lookup(cls, name):
        """cls's `name` as the class defines it (no descriptor called)."""
        for k in cls.__mro__:
            if name in k.__dict__:
                return k.__dict__[name]
        raise TypeError("its class has no %s" % name)

    @staticmethod
    def install(model, name, timed, torch):
        """Times model's `name` with timed(model, ...) from its class;
        the class's own `name` (looked up as Python does) is kept."""
        import weakref
        cls = type(model)
        plain = _Timed.lookup(cls, name)
        if not isinstance(plain, _Timed):
            if not (plain is None or isinstance(plain, _types.FunctionType)):
                raise TypeError("its class defines %s as a %s" % (name, type(plain).__name__))
            setattr(cls, name, _Timed(plain))
        _Timed.compiling = _compiling(torch)
        from . import _zero_edit
        _zero_edit.hide_from_dynamo(_Timed.__get__)
        key = id(model)

        def gone(ref):
            if _Timed.calls.get(key, (None,))[0] is ref:
                del _Timed.calls[key]
        _Timed.calls[key] = (weakref.ref(model, gone), timed)


def _compiling(torch):
    """torch.compiler.is_compiling (torch.compile and torch.export fold it
    to True while they trace, so a wrapper that asks it first is invisible
    to them), or torch 2.1's name for it."""
    return getattr(getattr(torch, "compiler", None), "is_compiling", None) or \
        getattr(getattr(torch, "_dynamo", None), "is_compiling", None) or (lambda: False)


def _time_forward(model):
    """torch 2.1, or a class with its own __call__: the forward, timed
    from the class as _time_calls does it (_Timed: a copy of the instance
    runs its own forward, untimed). A forward set on the instance itself
    is wrapped there (a copy carries that one anyway: a pickle carries it
    as getattr(model, "forward"))."""
    own = vars(model)
    cur = own.get("forward")
    if isinstance(cur, _c.PhaseCall) and cur.kind == _c.KIND_FORWARD or _Timed.has(model):
        return
    if cur is None:
        plain = _Timed.lookup(type(model), "forward")
        plain = plain.plain if isinstance(plain, _Timed) else plain
        _Timed.install(model, "forward", _c.PhaseCall(plain, _c.FORWARD, _c.KIND_FORWARD),
                       _sys.modules["torch"])
        return
    own["forward"] = _c.PhaseCall(cur, _c.FORWARD, _c.KIND_FORWARD)


def _patch_optimizer(torch):
    """torch 2.x's global optimizer-step hooks, as C callables: every
    optimizer, including the user's own classes and those made later.
    Those registered while armed (_arm_deferred) are the ones: init() may
    run inside one of them, where registering another would change the
    hook table while torch iterates it."""
    if _armed_hooks:
        _opt_hooks.extend(_armed_hooks)
        del _armed_hooks[:]
    else:
        _opt_hooks.extend(_register_optimizer_hooks(torch))


def _register_optimizer_hooks(torch):
    """The engine's C hooks behind one Python call each, which a compiled
    optimizer step (torch.compile(opt.step)) traces as nothing: Dynamo
    cannot trace a C function (a graph break, a warning, and an error under
    fullgraph=True). A compiled step is therefore not timed."""
    from torch.optim import optimizer as opt_mod
    compiling, begin, end = _compiling(torch), _c._opt_begin, _c._opt_end
    running = [0]       # eager steps begun and not ended (one optimizer may step another)

    def _traceml_optimizer_begin(opt, args, kwargs):
        if not compiling():
            running[0] += 1
            begin(opt, args, kwargs)

    # Not is_compiling() again: Dynamo compiles the frame that asks it, even
    # where it would otherwise run an empty one as is (the rest of a
    # compiled step after its graph break) -- a frame more than without
    # TraceML. A compiled step began nothing, so it ends nothing.
    def _traceml_optimizer_end(opt, args, kwargs):
        if running[0]:
            running[0] -= 1
            end(opt, args, kwargs)

    from . import _zero_edit
    _zero_edit.hide_from_dynamo(_traceml_optimizer_begin, _traceml_optimizer_end)
    return [opt_mod.register_optimizer_step_pre_hook(_traceml_optimizer_begin),
            opt_mod.register_optimizer_step_post_hook(_traceml_optimizer_end)]


_comm_on = False        # DDP buckets and torch.distributed collectives are timed


def _comm_patch(torch):
    """DDP's buckets and the collectives; TRACEML_COMM=0 leaves them alone
    (a Python comm hook costs DDP more per bucket than its C++ all-reduce:
    docs/performance.md, "Communication hook")."""
    global _comm_on
    if _env("TRACEML_COMM") is False:
        return
    from . import _comm
    _comm.install(_c, _warn, _patch_with)
    _comm_on = True


def _apply_patches(torch, dataloader, forward, backward, h2d, optimizer, comm):
    def dl_patch():
        from torch.utils.data import dataloader as dl
        _patch(dl._BaseDataLoaderIter, "__next__", _c.INPUT, _c.KIND_INPUT)
        _report_loader_settings(dl._BaseDataLoaderIter)

    def bw_patch():
        _patch(torch.Tensor, "backward", _c.BACKWARD)
        _patch(torch.autograd, "backward", _c.BACKWARD)

    def h2d_patch():
        _patch(torch.Tensor, "to", _c.H2D, _c.KIND_H2D)
        _patch(torch.Tensor, "cuda", _c.H2D, _c.KIND_H2D)
        _patch(torch.Tensor, "copy_", _c.H2D, _c.KIND_H2D_COPY)

    for on, what, fn, helper in (
            (dataloader, "DataLoader fetches", dl_patch, "wrap_dataloader_fetch"),
            (backward, "backward", bw_patch, "wrap_backward"),
            (h2d, "host-to-device copies", h2d_patch, "wrap_h2d"),
            (optimizer, "optimizer steps", lambda: _patch_optimizer(torch), "wrap_optimizer"),
            (comm, "communication", lambda: _comm_patch(torch), "wrap_ddp")):
        if not on:
            continue
        try:
            fn()
        except Exception as e:
            _warn("cannot time %s automatically (%s); use traceml.%s()" % (what, e, helper))
    _c._configure(_install_forward if forward else None, bool(forward))
    _c._set_extra_finder(_find_extra if forward else None)


# --------------------------------------------------------------------------
# GPU runs: the GPU clock and per-step CUDA memory (docs/design.md)

def _gpu_setup(torch):
    """Installs the two GPU callables the engine calls (python/_traceml.c):
    a hook that trace_step() calls on its first steps until CUDA is
    initialised, which then points the GPU clock at the current stream, and
    a probe that reads the CUDA caching allocator's figures at the end of
    each step and of the traced forward. Nothing happens without a usable
    GPU, and nothing here initialises CUDA or resets the user's peak
    counters (the probe only reads them)."""
    if torch is None:
        return
    try:
        if not torch.cuda.is_available():
            return
    except Exception:
        return
    state = {}

    def probe():
        dev = state["device"]
        s = state["stats"](dev)
        a, r = s["allocated_bytes"]["all"], s["reserved_bytes"]["all"]
        return (a["current"], r["current"], a["peak"], r["peak"], state["total"])

    def hook():
        if not torch.cuda.is_initialized():
            return False
        dev = torch.cuda.current_device()
        state["device"] = dev
        state["total"] = int(torch.cuda.get_device_properties(dev).total_memory)
        state["stats"] = getattr(torch._C, "_cuda_memoryStats", None) or \
            torch.cuda.memory_stats_as_nested_dict
        rc = _c.set_cuda_stream(torch.cuda.current_stream(dev).cuda_stream)
        if rc < 0:
            _warn("GPU clock unavailable (%s); step times use the CPU clock"
                  % _c.strerror(rc))
        _c._set_gpu_hooks(None, probe)
        return True

    _c._set_gpu_hooks(hook, None)


# --------------------------------------------------------------------------
# Overhead calibration: what one call through this glue costs.

def _calibrate(n=2000, repeats=5):
    """Glue cost per marker, in ns: every marker of a step comes from a C
    wrapper or context (fetch, step, forward, backward, optimizer; one
    forwarding call per two markers), measured on an inert stand-in that
    records nothing."""
    now = _c.now_ns
    raw = _c._noop
    wrapped = _c.PhaseCall(raw, 0, _c.KIND_PLAIN)
    rng = range(n)

    def loop(fn):
        t0 = now()
        for _ in rng:
            fn()
        return now() - t0

    t_raw = min(loop(raw) for _ in range(repeats))
    t_wrapped = min(loop(wrapped) for _ in range(repeats))
    per_wrap = max(0.0, (t_wrapped - t_raw) / float(n) / 2.0)
    return int(max(per_wrap, t_raw / float(n)))     # at least one C call per marker


# --------------------------------------------------------------------------
# init

def _version_tuple(v):
    """(major, minor) of "2.13.0+cpu", "2.1.0a0+git..."; (0, 0) if unreadable."""
    parts = []
    for p in str(v).split(".")[:2]:
        digits = ""
        for ch in p:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits) if digits else 0)
    return tuple(parts + [0] * (2 - len(parts)))


def _env_disabled():
    return bool(_env("TRACEML_DISABLED"))


class InitConfig(object):
    """What init() set up, returned by it (TraceML 0.5.0's
    TraceMLInitConfig): mode ("auto", "manual", "selective"), the patch_*
    flags in effect, disabled (True also when init failed open), source
    ("user", or "zero-edit" when `traceml run` started tracing first,
    "watch" under `traceml watch`),
    logs_dir and run_name."""

    _fields = ("mode", "patch_dataloader", "patch_forward", "patch_backward", "patch_h2d",
               "patch_optimizer", "patch_comm", "disabled", "source", "logs_dir", "run_name")
    __slots__ = _fields

    def __init__(self, mode, flags, disabled, logs_dir, run_name, source="user"):
        values = (mode,) + tuple(flags) + (disabled, source, logs_dir, run_name)
        for name, value in zip(self._fields, values):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError("InitConfig is read-only")

    def _key(self):
        return tuple(getattr(self, f) for f in self._fields if f != "source")

    def same_effective_configuration(self, other):
        return self._key() == other._key()

    def __eq__(self, other):
        return isinstance(other, InitConfig) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return "InitConfig(%s)" % ", ".join("%s=%r" % (f, getattr(self, f))
                                            for f in self._fields)


TraceMLInitConfig = InitConfig   # 0.5.0's name


def _patch_flags(mode, given):
    """The six patch flags (dataloader, forward, backward, h2d, optimizer,
    comm) for a mode. In "selective" an unspecified flag is on when the
    call only switches some off (`patch_h2d=False`), and off when it
    switches some on (`patch_dataloader=True`, TraceML 0.5.0's reading)."""
    if mode == "auto":
        return (True,) * 6
    if mode == "manual":
        return (False,) * 6
    default = not any(g for g in given if g is not None)
    return tuple(default if g is None else bool(g) for g in given)


# 0.5.0 keywords this engine has no use for: why, in the warning naming it
_NO_MEANING = {
    "ui_mode": "the live view is chosen by `traceml run --mode cli|dashboard`",
    "enable_logging": "logging is not switched: warnings go through Python's `warnings` "
                      "(TraceMLWarning; logging.captureWarnings() logs them), and under "
                      "`traceml run` the run folder keeps traceml.log",
    "connect_timeout_sec": "the engine connects in the background and never makes "
                           "the training wait",
    "connect_retry_interval_sec": "the engine connects in the background and never "
                                  "makes the training wait",
}


def _legacy_options(interval, aggregator_host, aggregator_port, on_missing, **unused):
    """The 0.5.0 keywords of init(): those with a meaning here go to the
    engine's environment (an explicit argument wins over it, as in 0.5.0),
    the others are one warning line each. Returns the missing-aggregator
    policy, "warn" or "raise"."""
    for name, value in sorted(unused.items()):
        if value is not None and not (name == "ui_mode" and value == "summary"):
            _warn("init(%s=%r) has no meaning here (%s); ignored"
                  % (name, value, _NO_MEANING[name]))
    if interval is not None:
        interval = float(interval)
        if not 0.01 <= interval <= 3600:
            raise ValueError("traceml.init(): interval=%r is out of range (0.01 to 3600 "
                             "seconds)" % interval)
        _os.environ["TRACEML_INTERVAL"] = repr(interval)
    if (aggregator_host or aggregator_port) and not _env("TRACEML_ADDR"):
        # an aggregator of `traceml serve` (it prints TRACEML_SECRET to export)
        _os.environ["TRACEML_ADDR"] = "%s:%d" % (aggregator_host or "127.0.0.1",
                                                 int(aggregator_port or 29765))
    policy = (on_missing or _env("TRACEML_ON_MISSING_AGGREGATOR") or "warn")
    policy = str(policy).strip().lower()
    if policy not in ("warn", "raise"):
        raise ValueError("traceml.init(): on_missing_aggregator=%r (expected 'warn' or "
                         "'raise')" % (on_missing,))
    return policy


def init(mode="auto", *, patch_dataloader=None, patch_forward=None,
         patch_backward=None, patch_h2d=None, patch_optimizer=None, patch_comm=None,
         disabled=None, logs_dir=None, run_name=None, session_id=None, interval=None,
         ui_mode=None, enable_logging=None, aggregator_host=None, aggregator_port=None,
         connect_timeout_sec=None, connect_retry_interval_sec=None,
         on_missing_aggregator=None, _source="user"):
    """Starts TraceML in this process; returns an InitConfig.

    mode="auto" instruments DataLoader fetches, the traced model's forward,
    backward, optimizer steps, host-to-device copies and communication (DDP's
    gradient buckets, torch.distributed collectives); "selective" (or
    "custom") those whose patch_* flag is true; "manual" nothing (use the
    wrap_* helpers). A second call with the same arguments returns the
    first one's configuration; with different ones it raises RuntimeError.
    TRACEML_DISABLED=1 (or disabled=True) makes every call a no-op.

    TraceML 0.5.0's keywords are accepted (docs/compat.md): session_id is
    run_name, interval the sampling interval, aggregator_host/_port the
    aggregator of `traceml serve`, on_missing_aggregator="raise" raises
    where the engine could not start; the others are a warning line each.
    """
    global _config, _active
    mode = "selective" if mode == "custom" else mode
    if mode not in _MODES:
        raise ValueError("traceml.init(): unknown mode %r (expected one of %s, or 'custom')"
                         % (mode, ", ".join(repr(m) for m in _MODES)))
    given = (patch_dataloader, patch_forward, patch_backward, patch_h2d, patch_optimizer,
             patch_comm)
    if mode != "selective" and any(g is not None for g in given):   # TraceML 0.5.0's checks
        raise ValueError("traceml.init(): the patch_* flags may only be given with "
                         "mode='selective' (got them with mode=%r)" % mode)
    if mode == "selective" and (all(g is None for g in given) or
                                not any(_patch_flags(mode, given))):
        raise ValueError("traceml.init(): mode='selective' needs a patch_* flag switched on "
                         "(mode='manual' patches nothing)")
    policy = _legacy_options(interval, aggregator_host, aggregator_port,
                             on_missing_aggregator, ui_mode=ui_mode,
                             enable_logging=enable_logging,
                             connect_timeout_sec=connect_timeout_sec,
                             connect_retry_interval_sec=connect_retry_interval_sec)
    disabled = bool(disabled) or _env_disabled()
    flags = _patch_flags(mode, given)
    if logs_dir is not None:
        logs_dir = _os.fspath(logs_dir)
    if run_name is None:
        run_name = session_id
    if _watching():     # traceml watch: the engine reports, nothing is instrumented
        mode, flags = "manual", (False,) * 6
    config = InitConfig(mode, flags, disabled, logs_dir, run_name, _source)
    _disarm(flags[4] and not disabled)
    if _config is not None:
        if _config == config or _detected:   # zero-edit tracing got there first
            return _config
        raise RuntimeError(
            "traceml.init() was already called with a different configuration "
            "(first: %r; now: %r)" % (_config, config))
    _config = config
    off = InitConfig(mode, (False,) * 6, True, logs_dir, run_name)
    if disabled:
        return config

    def failed(msg):
        if policy == "raise":
            raise RuntimeError("traceml.init(): " + msg)
        _warn(msg + "; training runs without TraceML")
        return off

    if _c is None:
        return failed("the TraceML engine could not be loaded (%s)" % (_import_error,))
    dataloader, forward, backward, h2d, optimizer, comm = flags
    if mode == "selective":
        mask = 0
        for on, phase in ((dataloader, _c.INPUT), (h2d, _c.H2D), (forward, _c.FORWARD),
                          (backward, _c.BACKWARD), (optimizer, _c.OPTIMIZER),
                          (comm, _c.COMM)):
            if on:
                mask |= 1 << phase
    else:
        # auto: everything; manual: what will be wrapped cannot be known
        # yet, so every phase is required and a never-seen one is missing.
        mask = _c.PHASES_ALL
    _sync_identity()
    try:
        rc = _c.init(run_name, logs_dir, mask, False)
    except Exception as e:
        return failed("init failed (%s)" % (e,))
    if rc == _c.ECONFIG:
        raise RuntimeError("traceml.init(): the engine was already started with "
                           "a different configuration")
    if rc == _c.EDISABLED:
        return off
    if rc < 0:
        return failed("init failed (%s)" % (_c.strerror(rc),))
    _active = True
    _atexit.register(_at_exit)
    _patch_exec()
    torch = None
    if any(flags):
        try:
            import torch
            if _version_tuple(torch.__version__) < (2, 1):
                _warn("torch %s is older than 2.1, the oldest TraceML supports"
                      % torch.__version__)
            _apply_patches(torch, *flags)
        except Exception as e:
            _warn("could not install the automatic instrumentation (%s); "
                  "use the wrap_* helpers" % (e,))
    try:
        _c.set_call_cost_ns(_calibrate())
    except Exception as e:
        _warn("overhead calibration failed (%s)" % (e,))
    try:
        _gpu_setup(torch if torch is not None else _sys.modules.get("torch"))
    except Exception as e:
        _warn("GPU timing could not be set up (%s)" % (e,))
    try:
        _arm_deep_dive()
    except Exception as e:
        _warn("the deep dive could not be set up (%s)" % (e,))
    return config


_deep = None            # the deep dive of this run (_deep_dive.py), or None


def _arm_deep_dive():
    """The deep dive's step hook, unless TRACEML_DEEP_DIVE is off
    (`traceml run --no-deep-dive`): "on" (--deep-dive) profiles its window
    whatever the verdict, "auto" only when the verdict so far is
    COMPUTE_BOUND (docs/deep-dive.md)."""
    global _deep
    mode = (_env("TRACEML_DEEP_DIVE") or "auto").lower()
    if mode not in ("on", "auto", "off"):
        _warn("TRACEML_DEEP_DIVE=%r is not on, auto or off; using auto" % (mode,))
        mode = "auto"
    torch = _sys.modules.get("torch")
    if mode == "off" or torch is None or _env("TRACEML_PROFILE") == "watch":
        return
    from . import _deep_dive, _zero_edit

    def models():
        return list(_timed) if _timed is not None else []

    def compiled():
        return _zero_edit.compiled_before(torch) or \
            any(type(m).__name__ == "OptimizedModule" for m in models())
    _deep = _deep_dive.DeepDive(_c, mode, _env("TRACEML_DEEP_DIVE_START"),
                                _env("TRACEML_DEEP_DIVE_STEPS"),
                                models, compiled, _warn)
    _zero_edit.hide_from_dynamo(_deep_dive.DeepDive.__call__)   # called inside compiled steps
    _c._set_step_hook(_deep)


start = init     # the original TraceML's name for it


def _start_detected(run_name=None, logs_dir=None, source="zero-edit"):
    """Zero-edit tracing (_zero_edit.py, a notebook's %%traceml cell):
    init(mode="auto") with automatic step detection, unless the script
    already called init() itself."""
    global _detected
    if _config is not None:
        return
    init(mode="auto", run_name=run_name, logs_dir=logs_dir, _source=source)
    if not _active:
        return
    _detected = True
    torch = _sys.modules["torch"]
    try:
        cuda = bool(torch.cuda.is_available())
    except Exception:
        cuda = False
    from . import _zero_edit

    def compiled():
        return _zero_edit.compiled_before(torch)

    def discover(opt):
        _zero_edit.discover(opt, _install_forward, _c._set_have_optimizer, _warn)
    _zero_edit.hide_from_dynamo(compiled, discover)
    _c._set_auto_steps(torch.is_grad_enabled, cuda, compiled)
    _c._set_discover(discover)
    _mark_spawner()


def _mark_spawner():
    """A parent that spawns the ranks (torch.multiprocessing), or starts
    processes that train on their own (Hogwild's multiprocessing.Process),
    is their launcher, not a rank."""
    from . import _zero_edit
    try:
        import multiprocessing.process as mpp
        import torch.multiprocessing as tmp
        for owner in (_sys.modules.get("torch.multiprocessing.spawn"), tmp):
            orig = getattr(owner, "start_processes", None)
            if orig is not None and not getattr(orig, "_traceml_launcher", False):
                w = _zero_edit.launcher_wrapper(orig, _c._set_launcher)
                _patch_with(owner, "start_processes", w)
        orig = mpp.BaseProcess.__dict__["start"]
        if not getattr(orig, "_traceml_launcher", False):
            _patch_with(mpp.BaseProcess, "start",
                        _zero_edit.process_start_wrapper(orig, _c._set_launcher))
    except Exception as e:
        _warn("cannot watch torch.multiprocessing (%s)" % (e,))


def _watching():
    """`traceml watch` (TraceML 0.5.0's TRACEML_PROFILE=watch): system and
    process metrics only, no step tracing."""
    return _env("TRACEML_PROFILE") == "watch"


def _start_watch():
    """`traceml watch` (_zero_edit.py): the engine, whose sampler reports
    this process, with nothing instrumented; the script's own init() then
    returns this configuration (the aggregator drops any step it traces)."""
    global _detected
    if _config is not None:
        return
    init(mode="manual", _source="watch")
    _detected = _active
    if _active:
        from . import _zero_edit
        _zero_edit._after_torch(_mark_spawner)


def _arm_deferred(starter=None):
    """Zero-edit tracing of a script that imports TraceML (_zero_edit.py):
    its own init() decides; until it calls one, the first wrap_*() or
    trace_step() call or optimizer step starts TraceML in auto mode
    (starter(), when given, decides whether to). The optimizer-step hooks
    are the engine's C ones, registered now."""
    global _armed
    if _config is not None or _c is None or _armed:
        return
    try:
        _armed_hooks[:] = _register_optimizer_hooks(_sys.modules["torch"])
    except Exception as e:
        _warn("zero-edit tracing cannot watch the optimizers (%s)" % (e,))
    _armed = True
    _c._set_starter(starter or _start_detected)


def _disarm(keep_hooks):
    """init() came: the script's configuration wins over deferred zero-edit
    tracing; its optimizer-step hooks stay only where that one wants them."""
    global _armed
    if not _armed:
        return
    _armed = False
    _c._set_starter(None)
    if not keep_hooks:
        for h in _armed_hooks:
            h.remove()
        del _armed_hooks[:]


def _patch_exec():
    """os.execv and os.execve, which every os.exec* calls: the steps this
    process image has not shipped yet would be lost with it, so they go
    first. Under a launcher they go to its aggregator (tml_flush), which
    takes the new image, when it starts TraceML, as the same rank
    restarted; in-process, this image's run ends there, as at exit. A C
    callable (KIND_BEFORE): an exec that fails raises as it would."""
    hook = _c.flush if _env("TRACEML_ADDR") else _stop_before_exec
    for name in ("execv", "execve"):
        orig = getattr(_os, name, None)
        if orig is None or _is_ours(orig):
            continue
        try:
            setattr(_os, name, _c.PhaseCall(orig, 0, _c.KIND_BEFORE, hook))
            _patched.append((_os, name, orig))
        except Exception as e:
            _warn("cannot ship the steps before os.%s (%s)" % (name, e))


def _stop_before_exec(*args, **kwargs):
    _stop()


def _running():
    """True when TraceML runs in this process; under deferred zero-edit
    tracing, reaching TraceML (a wrap_*() call) starts it."""
    if not _active and _armed:
        _start_detected()
    return _active


def _at_exit():
    last = getattr(_sys, "last_value", None)
    if isinstance(last, KeyboardInterrupt):
        _stop("interrupted", 130)
    elif last is not None and not isinstance(last, SystemExit):
        _stop("failed", 1)
    else:
        _stop()


def _on_stop(fn):
    """Calls fn(status) when TraceML stops in this process, status being
    how its run ended here ("completed", "failed", "interrupted": what the
    summary says): a tracker's tag that said "running" mid-run says so at
    the end."""
    if fn not in _stop_hooks:
        _stop_hooks.append(fn)


def _stop(*status, quiet=False):
    """Stops TraceML in this process: the hooks are cut loose from the
    engine, and the engine flushes (a rank says goodbye with its last
    records) and prints the summary when it hosts the aggregator (quiet:
    returns it instead). At exit, or where no exit comes (a Ray worker
    that is reused or killed, a notebook's run: finish())."""
    global _active
    if not _active:
        return None
    _active = False
    global _deep
    if _deep is not None:
        _deep.stop()
        _deep = None
    try:
        _c._configure(None, False)
        _c._set_gpu_hooks(None, None)
        _c._set_discover(None)
        _c._set_extra_finder(None)
        _c._set_starter(None)
        text = _c.shutdown(*status)
    except Exception as e:
        _warn("shutdown failed (%s)" % (e,))
        return None
    if text and not quiet:
        try:
            _sys.stdout.write(text if text.endswith("\n") else text + "\n")
            _sys.stdout.flush()
        except Exception:
            pass
    for fn in _stop_hooks:
        try:
            fn(status[0] if status else "completed")
        except Exception as e:
            _warn("%r at the end of the run failed (%s)" % (fn, e))
    return text


def _forget_run():
    """After a run that ended before the process does (finish(), a
    notebook's cell): every patch and hook taken back and the next init()
    free to start a new run, as the first one did. A model keeps its
    forward's timing (_Timed: on its class, idle without a run)."""
    global _config, _detected, _loader_reported, _timed, _comm_on
    for owner, name, orig in reversed(_patched):
        try:
            if orig is None:
                delattr(owner, name)
            else:
                setattr(owner, name, orig)
        except Exception as e:
            _warn("cannot restore %s (%s)" % (name, e))
    del _patched[:]
    for h in _opt_hooks:
        h.remove()
    del _opt_hooks[:]
    del _also_timed[:]
    _config, _detected, _loader_reported, _timed, _comm_on = None, False, False, None, False
    _atexit.unregister(_at_exit)


def finish(status="completed", *, display=None):
    """Ends this process's run now, as the end of the script would: the
    summary is written to the run folder, and returned as a dict
    (final_summary.json's shape; None when TraceML was not running). The
    box is printed; in a notebook kernel (display=None there, or
    display=True) the summary is displayed in the cell instead: the card
    and the HTML report. status is how the run ended: "completed",
    "failed" or "interrupted". A later init() (or %%traceml cell) starts a
    new run in the same process."""
    if status not in ("completed", "failed", "interrupted"):
        raise ValueError("traceml.finish(): status=%r (expected 'completed', 'failed' or "
                         "'interrupted')" % (status,))
    from . import _notebook
    if display is None:
        display = _notebook.in_kernel()
    if not _active:
        return None
    code = {"completed": 0, "failed": 1, "interrupted": 130}[status]
    run_dir = _c.run_dir()
    box = _stop(status, code, quiet=bool(display))
    text = _summary_text()
    _forget_run()
    _notebook.note_run(run_dir)
    if display and text:
        _notebook.show(text, box)
    import json
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def compare(a, b, *options, display=None):
    """`traceml compare A B [options]` (docs/compare.md) on two runs, each
    a run name of this process (a notebook's cells), a run folder or a
    final_summary.json: returns the comparison (traceml_compare.json's
    dict; None when it could not be made). Its box is printed, or in a
    notebook kernel displayed in the cell."""
    from . import _notebook
    return _notebook.compare(a, b, options, display)


def load_ipython_extension(ipython):
    """`%load_ext traceml_ai`: the %%traceml and %traceml_compare magics
    (docs/notebooks.md)."""
    from . import _notebook
    _notebook.register(ipython)


# --------------------------------------------------------------------------
# Manual mode

def _wrapper_allowed(name, obj, ok, expects, owner=None):
    """TraceML 0.5.0's checks of a wrap_*() call (docs/compat.md): with
    TraceML disabled the object passes through; one of the wrong kind is a
    TypeError; before init() (and without `traceml run`) a RuntimeError,
    and so is one on what the script's own init() already times (owner:
    its patch_* flag). True when the wrapper should time it."""
    if _env_disabled() or (_config is not None and _config.disabled):
        return False
    if not ok:
        raise TypeError("%s() expects %s, not %s" % (name, expects, type(obj).__name__))
    if _running():
        if owner and _config.source == "user" and getattr(_config, owner):
            raise RuntimeError("%s() cannot instrument what traceml.init(mode=%r) already "
                               "times (%s): drop the wrapper, or use mode='manual' or "
                               "mode='selective' with %s=False" % (name, _config.mode, owner,
                                                                    owner))
        return True
    if _config is None and not _detected:
        raise RuntimeError("%s() requires TraceML initialization: call traceml.init(...) "
                           "before creating manual wrappers (or run the script with "
                           "`traceml run`)" % name)
    return False        # init() could not start the engine: the training runs untraced


def wrap_dataloader_fetch(obj):
    """Returns an iterable (for a loader) or iterator (for an iterator)
    whose fetches are timed as input wait:

        for batch in traceml.wrap_dataloader_fetch(loader): ...
    """
    ok = callable(getattr(obj, "__next__", None)) or callable(getattr(obj, "__iter__", None))
    data = _sys.modules.get("torch.utils.data.dataloader")
    kinds = tuple(k for k in (getattr(data, "DataLoader", None),
                              getattr(data, "_BaseDataLoaderIter", None)) if isinstance(k, type))
    torch_loader = bool(kinds) and isinstance(obj, kinds)   # what patch_dataloader times
    if not _wrapper_allowed("wrap_dataloader_fetch", obj, ok, "a loader or iterator object",
                            "patch_dataloader" if torch_loader else None):
        return obj
    _note_loader(obj)
    return _c.TimedIter(obj)


def wrap_input(fn):
    """Times each call of `fn` as input wait: for batches that do not come
    from a DataLoader (a `get_batch()` function, a memory-mapped array):

        get_batch = traceml.wrap_input(get_batch)
        x, y = get_batch("train")          # timed as Input Wait

    Also a decorator. Returns fn unchanged when TraceML is not running."""
    if not _running() or not callable(fn):
        return fn
    return _c.PhaseCall(fn, _c.INPUT, _c.KIND_INPUT)


def wrap_forward(model):
    """Times `model`'s forward (an nn.Module; see _install_forward); returns it."""
    torch = _sys.modules.get("torch")
    module = getattr(getattr(torch, "nn", None), "Module", None)
    ok = (module is not None and isinstance(model, module) and
          callable(getattr(model, "forward", None)))
    if _wrapper_allowed("wrap_forward", model, ok, "an nn.Module instance", "patch_forward"):
        _install_forward(model)
    return model


def wrap_backward(loss):
    """Makes `loss.backward()` timed as backward; returns the loss:

        traceml.wrap_backward(loss).backward()
    """
    if not _wrapper_allowed("wrap_backward", loss, callable(getattr(loss, "backward", None)),
                            "an object with a callable backward() method", "patch_backward"):
        return loss
    try:
        bound = loss.backward
        if not _is_ours(bound):
            loss.backward = _c.PhaseCall(bound, _c.BACKWARD)
    except Exception as e:
        _warn("wrap_backward: cannot wrap %s (%s)" % (type(loss).__name__, e))
    return loss


def wrap_optimizer(optimizer):
    """Makes `optimizer.step()` timed as the optimizer phase; returns the
    optimizer. Only this instance changes (an LR scheduler made before or
    after keeps working)."""
    if not _wrapper_allowed("wrap_optimizer", optimizer,
                            callable(getattr(optimizer, "step", None)),
                            "an object with a callable step() method", "patch_optimizer"):
        return optimizer
    try:
        import types
        step = optimizer.step
        if _is_ours(step) or _is_ours(getattr(step, "__func__", None)):
            return optimizer
        func = getattr(step, "__func__", None)
        if func is not None and getattr(step, "__self__", None) is optimizer:
            optimizer.step = types.MethodType(_c.PhaseCall(func, _c.OPTIMIZER), optimizer)
        else:
            optimizer.step = _c.PhaseCall(step, _c.OPTIMIZER)
    except Exception as e:
        _warn("wrap_optimizer: cannot wrap %s (%s)" % (type(optimizer).__name__, e))
    return optimizer


class _NullBlock(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _H2DProxy(object):
    """wrap_h2d(x): x whose .to() / .cuda() are timed as H2D. They are the
    object's own methods behind a C wrapper: no Python frame of TraceML's
    runs the copy, so a warning it gives (torch's C++ TORCH_WARN names the
    innermost Python frame) names the line that called it."""
    __slots__ = ("_obj",)

    def __init__(self, obj):
        self._obj = obj

    @property
    def to(self):
        return _c.PhaseCall(self._obj.to, _c.H2D)

    @property
    def cuda(self):
        return _c.PhaseCall(self._obj.cuda, _c.H2D)

    def __getattr__(self, name):
        return getattr(self._obj, name)


def wrap_ddp(model):
    """Times a DistributedDataParallel model's gradient all-reduce (each
    bucket: when it was launched, when it completed, its bytes) and its
    buffer broadcast (the wait in DDP's forward when the model has buffers),
    and returns the model. auto mode does it for every DDP model; a comm
    hook the user registers, before or after, keeps working inside
    TraceML's."""
    if _running():
        from . import _comm
        _comm.setup(_c, _warn, _patch_with)
        _comm.attach(model)
        try:
            _comm.time_buffer_sync(_patch_with)
        except Exception as e:
            _warn("cannot time DDP's buffer broadcast (%s)" % (e,))
    return model


def wrap_h2d(obj=None):
    """Host-to-device copies, three ways:

        with traceml.wrap_h2d():           # the block is timed as H2D
            x = x.to(device, non_blocking=True)

        x = traceml.wrap_h2d(x).to(device)        # that copy is timed as H2D

        to_device = traceml.wrap_h2d(to_device)   # every call is timed as H2D

    Everything inside is counted, whatever the devices (you say it is a copy).
    """
    on = _running()
    if obj is None:
        return _c.h2d_block() if on else _NullBlock()
    if not callable(obj) and (hasattr(obj, "to") or hasattr(obj, "cuda")):
        return _H2DProxy(obj) if _wrapper_allowed("wrap_h2d", obj, True, "", "patch_h2d") \
            else obj
    if not callable(obj):
        raise TypeError("wrap_h2d() takes a tensor (anything with .to()), a callable "
                        "or nothing (use it as `with traceml.wrap_h2d(): ...`), not %s"
                        % type(obj).__name__)
    if not on:
        return obj
    return _c.PhaseCall(obj, _c.H2D)


# --------------------------------------------------------------------------
# Results

def _rank():
    for name in ("RANK", "SLURM_PROCID"):
        v = _os.environ.get(name)
        if v is not None and v.strip().isdigit():
            return int(v)
    return 0


def _summary_text():
    """The summary JSON text from the engine (mid-run: the summary so far,
    asked of the aggregator; after the run: the final one), else the run
    folder's final_summary.json, else None."""
    text = None
    try:
        text = _c.summary_json()
    except Exception as e:
        _warn("summary request failed (%s)" % (e,))
    if text is None:
        d = _c.run_dir()
        if d:
            try:
                with open(_os.path.join(d, "final_summary.json"), "r", encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                text = None
    return text


def _summary_for(all_ranks, rank0_only, timeout_sec, poll_interval_sec):
    """The summary JSON text for final_summary() / summary(), or None.
    rank0_only=False is all_ranks=True (TraceML 0.5.0's keyword); the
    engine's request is bounded on its own (a few seconds), so
    timeout_sec and poll_interval_sec only need to be valid."""
    for name, v in (("timeout_sec", timeout_sec), ("poll_interval_sec", poll_interval_sec)):
        if v is not None and not float(v) >= 0:
            raise ValueError("traceml: %s=%r must be a number >= 0" % (name, v))
    if rank0_only is not None:
        all_ranks = all_ranks or not rank0_only
    if _c is None or (_rank() != 0 and not all_ranks):
        return None
    return _summary_text()


def _print_box(text):
    import json
    try:
        box = json.loads(text).get("text")
    except ValueError:
        box = None
    if box:
        _sys.stdout.write(box if box.endswith("\n") else box + "\n")


def final_summary(all_ranks=False, *, print_text=False, rank0_only=None, timeout_sec=None,
                  poll_interval_sec=None):
    """The run's summary as a dict (final_summary.json's shape): mid-run
    the summary so far ("status": "running"; nothing is written, the final
    artifacts are untouched), at the end the final one. None when there is
    none (TraceML not started or disabled, the aggregator unreachable). On
    ranks other than 0 it is None unless all_ranks (or rank0_only=False).
    print_text=True also prints the box."""
    text = _summary_for(all_ranks, rank0_only, timeout_sec, poll_interval_sec)
    if text is None:
        return None
    import json
    try:
        out = json.loads(text)
    except ValueError:
        return None
    if print_text:
        _print_box(text)
    return out


def summary(print_text=False, all_ranks=False, *, rank0_only=None, timeout_sec=None,
            poll_interval_sec=None):
    """A flat dict of the run's result with `traceml/`-prefixed keys (for
    W&B or MLflow), None values left out; None when there is no summary.
    Works mid-run and at the end, and takes the same keywords, like
    final_summary(). The flattening is
    the engine's (tml_summary_flatten, docs/python-api.md):

        traceml/primary/kind, traceml/primary/severity, ...
        traceml/meta/common_steps, traceml/meta/traceml_overhead_us_per_step, ...
        traceml/step_time/diagnosis, traceml/step_time/input_wait_ms,
        traceml/step_time/input_wait_share_percent, ...
        traceml/step_memory/..., traceml/system/..., traceml/process/...
    """
    text = _summary_for(all_ranks, rank0_only, timeout_sec, poll_interval_sec)
    if text is None:
        return None
    import json
    try:
        out = json.loads(_c.summary_flatten(text))
    except ValueError:
        return None
    if print_text:
        _print_box(text)
    return out
