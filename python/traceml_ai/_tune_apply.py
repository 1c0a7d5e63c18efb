"""The settings `traceml tune` tries and `traceml run --apply` applies, in
the training's own processes (docs/zero-edit.md, "Settings applied by
traceml tune / --apply").

The launcher passes them as TRACEML_TUNE_SETTINGS=key=value,... and the
zero-edit sitecustomize calls start() in each process it starts TraceML in
(the script's, each rank under torchrun, the processes multiprocessing
spawns), whether or not the script imports TraceML itself. The script is
not edited: the settings go where the script's own values go, when torch
is imported (never earlier, so nothing here imports torch):

- DataLoader(num_workers, pin_memory, persistent_workers, prefetch_factor):
  DataLoader.__init__ gets the tuned values over the script's;
- threads: torch.set_num_threads(n) at import, and the script's own later
  calls set n (torch's own calls, a DataLoader worker's 1, go through);
- DistributedDataParallel(bucket_cap_mb, gradient_as_bucket_view): as the
  DataLoader's;
- comm_hook: fp16/bf16 gradient compression, registered when the DDP model
  is built, through an indirection the script's own hook replaces (_Held);
- cudnn_benchmark: torch.backends.cudnn.benchmark at import.

The patches are plain class (and torch module) attributes, outside the
package's own patch list: TraceML's stop() leaves them, the settings hold
for the process's life. A value that does not parse applies nothing: one
warning, the training runs as written. Unset, this module is not even
imported.
"""
import functools
import os
import re
import sys

_INT = re.compile(r"[0-9]+\Z")
_NUMBER = re.compile(r"([0-9]+(\.[0-9]*)?|\.[0-9]+)\Z")


def _warn(msg):
    """The package's TraceMLWarning, once per message (a setting DDP
    refuses is said once, not for every model built)."""
    from . import _warn as warn
    warn("TRACEML_TUNE_SETTINGS: %s" % msg)


# --------------------------------------------------------------------------
# Parsing: each parser takes the value's text and returns the value, or
# raises ValueError saying what it should be.

def _int_from(low):
    def parse(text):
        if not _INT.match(text) or int(text) < low:
            raise ValueError("an integer >= %d" % low)
        return int(text)
    return parse


def _flag(text):
    if text not in ("0", "1"):
        raise ValueError("0 or 1")
    return text == "1"


def _megabytes(text):
    if not _NUMBER.match(text) or float(text) <= 0:
        raise ValueError("a number > 0")
    mb = float(text)
    return int(mb) if mb.is_integer() else mb


def _hook_name(text):
    if text not in ("fp16", "bf16", "none"):
        raise ValueError("fp16, bf16 or none")
    return text


SETTINGS = {
    "num_workers": _int_from(0),
    "pin_memory": _flag,
    "persistent_workers": _flag,
    "prefetch_factor": _int_from(1),
    "threads": _int_from(1),
    "bucket_cap_mb": _megabytes,
    "gradient_as_bucket_view": _flag,
    "comm_hook": _hook_name,
    "cudnn_benchmark": _flag,
}


def parse(text):
    """{key: value} of TRACEML_TUNE_SETTINGS's text; ValueError saying
    what is wrong with it."""
    if not text.strip():
        raise ValueError("empty")
    out = {}
    for item in text.split(","):
        if not item.strip():
            raise ValueError("an empty item between commas")
        key, eq, value = (s.strip() for s in item.partition("="))
        if not eq or not key:
            raise ValueError("%r is not key=value" % item.strip())
        if key not in SETTINGS:
            raise ValueError("unknown setting %r (known: %s)" % (key, ", ".join(SETTINGS)))
        if key in out:
            raise ValueError("%s is given twice" % key)
        if not value:
            raise ValueError("%s has no value" % key)
        try:
            out[key] = SETTINGS[key](value)
        except ValueError as e:
            raise ValueError("%s=%s: the value must be %s" % (key, value, e))
    return out


# --------------------------------------------------------------------------
# Applying

_started = False


def start():
    """Called by the zero-edit sitecustomize: parses the settings and
    applies them once torch is imported (once per process)."""
    global _started
    text = os.environ.get("TRACEML_TUNE_SETTINGS")
    if text is None or _started:
        return
    _started = True
    try:
        settings = parse(text)
    except ValueError as e:
        _warn("%s; nothing applied, the training runs unchanged" % (e,))
        return
    from ._zero_edit import _after_torch
    _after_torch(lambda: apply(settings))


_LOADER = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")
_DDP = ("bucket_cap_mb", "gradient_as_bucket_view", "comm_hook")


def apply(settings):
    """Installs the settings into the imported torch: each group on its
    own, a failure leaving that group unapplied (a warning), never the
    training broken."""
    torch = sys.modules["torch"]
    for keys, install in ((_LOADER, _patch_loader), (("threads",), _set_threads),
                          (_DDP, _patch_ddp), (("cudnn_benchmark",), _set_cudnn)):
        mine = {k: settings[k] for k in keys if k in settings}
        if not mine:
            continue
        try:
            install(torch, mine)
        except Exception as e:
            _warn("%s not applied (%s)" % (", ".join(sorted(mine)), e))


def _with_arguments(orig, change):
    """orig (an __init__) called with its arguments changed by
    change(arguments) (the inspect.BoundArguments mapping, wherever the
    script passed them: by position or by name). A call that does not bind
    goes to orig as it is, for torch's own error."""
    import inspect
    sig = inspect.signature(orig)

    @functools.wraps(orig)
    def __init__(self, *args, **kwargs):
        try:
            bound = sig.bind(self, *args, **kwargs)
            change(bound.arguments)
            args, kwargs = bound.args[1:], bound.kwargs
        except Exception:
            pass
        return orig(self, *args, **kwargs)
    return __init__


def _loader_arguments(s):
    """The DataLoader's arguments with the loader settings s: those that
    only go with workers where the loader has workers."""
    def change(a):
        forced = "num_workers" in s and not _iterable(a.get("dataset"))
        if forced:
            a["num_workers"] = s["num_workers"]
        if "pin_memory" in s:
            a["pin_memory"] = s["pin_memory"]
        if a.get("num_workers", 0) > 0:
            for k in ("persistent_workers", "prefetch_factor"):
                if k in s:
                    a[k] = s[k]
        elif forced:
            # no workers now: what only workers take would make DataLoader
            # raise (a ValueError for each), so the script's goes
            for k in ("prefetch_factor", "persistent_workers", "multiprocessing_context"):
                a.pop(k, None)
    return change


def _iterable(dataset):
    """An IterableDataset yields all its items in every worker unless it
    splits them itself (get_worker_info): another worker count would change
    the data the training sees, so its loaders keep their own (once said)."""
    import torch.utils.data as data
    if not isinstance(dataset, getattr(data, "IterableDataset", ())):
        return False
    if not _iterable.said:
        _iterable.said = True
        _warn("num_workers not applied to a DataLoader of an IterableDataset (another "
              "worker count could change the items it yields)")
    return True


_iterable.said = False


def _patch_loader(torch, s):
    cls = torch.utils.data.DataLoader
    cls.__init__ = _with_arguments(cls.__dict__["__init__"], _loader_arguments(s))


def _set_threads(torch, s):
    """The tuned count wins over the script's torch.set_num_threads(k)
    (documented); torch's own calls keep theirs: a DataLoader worker, the
    pin-memory thread set 1."""
    n, orig = s["threads"], torch.set_num_threads

    @functools.wraps(orig)
    def set_num_threads(*args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__") or ""
        if caller.split(".")[0] == "torch":
            return orig(*args, **kwargs)
        return orig(n)

    orig(n)
    torch.set_num_threads = set_num_threads


def _set_cudnn(torch, s):
    import torch.backends.cudnn
    torch.backends.cudnn.benchmark = s["cudnn_benchmark"]


# --------------------------------------------------------------------------
# DDP: the bucket keywords, and the compression hook

def _patch_ddp(torch, s):
    cls = torch.nn.parallel.DistributedDataParallel
    kw = {k: s[k] for k in ("bucket_cap_mb", "gradient_as_bucket_view") if k in s}
    init = _with_arguments(cls.__dict__["__init__"], lambda a: a.update(kw))
    hook = s.get("comm_hook", "none")
    if hook == "none":          # DDP's default all-reduce: nothing to register
        if kw:
            cls.__init__ = init
        return
    register = cls.__dict__["register_comm_hook"]
    builtin = cls.__dict__["_register_builtin_comm_hook"]

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        _register_tuned(self, hook, register)

    cls.__init__ = __init__
    cls.register_comm_hook = _script_hook(register)
    cls._register_builtin_comm_hook = _script_builtin_hook(builtin)


class _Held(object):
    """The hook DDP's reducer calls for a model with a tuned comm_hook
    (_tuned_hook(held, bucket)): the compression hook, until the script
    registers its own (replaced: the script's hook and state)."""
    __slots__ = ("state", "hook", "replaced")

    def __init__(self, state, hook):
        self.state, self.hook, self.replaced = state, hook, False


_TUNED = None       # DDP model -> its _Held (weak: dies with the model)


def _tuned_hook_named(target):
    """The function registered with DDP: named as the compression hook
    (DDP's log names it, and checks bf16's requirements by that name),
    with the `bucket` parameter DDP's check asks for."""
    def hook(held, bucket):
        return held.hook(held.state, bucket)
    hook.__name__, hook.__qualname__ = target.__name__, target.__qualname__
    return hook


def _register_tuned(ddp, name, register):
    """Registers the compression hook as the model is built: the first
    hook DDP's reducer takes (it takes one), TraceML's timing around it
    when TraceML is running (_comm.py). A model that already has one (DDP's
    own, for mixed_precision) keeps it."""
    global _TUNED
    try:
        if getattr(ddp, "_comm_hooks", None):
            _warn("comm_hook=%s not applied: the model has a communication hook already" % name)
            return
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        target = getattr(default_hooks, name + "_compress_hook")
        held = _Held(None, target)      # state None: the default process group
        register(ddp, held, _tuned_hook_named(target))
        if _TUNED is None:
            import weakref
            _TUNED = weakref.WeakKeyDictionary()
        _TUNED[ddp] = held
    except Exception as e:
        _warn("comm_hook=%s not applied (%s: %s)" % (name, type(e).__name__, e))


def _live(ddp):
    """The model's tuned hook while the script has not replaced it."""
    held = _TUNED.get(ddp) if _TUNED is not None else None
    return held if held is not None and not held.replaced else None


def _script_hook(register):
    """DDP.register_comm_hook: on a model whose reducer holds the tuned
    hook, the script's hook replaces it, after DDP's own checks and log
    line, so the script's wins with no error; a second one goes to DDP,
    which refuses it as it would without TraceML ("can only be called
    once")."""
    @functools.wraps(register)
    def register_comm_hook(self, state, hook):
        held = _live(self)
        if held is None:
            return register(self, state, hook)
        self._check_comm_hook(hook)
        self.logger._set_comm_hook_name(hook.__qualname__)
        held.state, held.hook, held.replaced = state, hook, True
    return register_comm_hook


# DDP's C++ built-in hooks, as the Python hooks that compute the same
_BUILTIN = {"ALLREDUCE": "allreduce_hook", "FP16_COMPRESS": "fp16_compress_hook"}


def _script_builtin_hook(builtin):
    @functools.wraps(builtin)
    def _register_builtin_comm_hook(self, comm_hook_type):
        held = _live(self)
        name = getattr(comm_hook_type, "name", None)
        if held is None or name not in _BUILTIN:
            return builtin(self, comm_hook_type)
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        self.logger._set_comm_hook_name(str(comm_hook_type))
        held.state, held.hook = self.process_group, getattr(default_hooks, _BUILTIN[name])
        held.replaced = True
    return _register_builtin_comm_hook
