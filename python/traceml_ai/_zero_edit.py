"""Zero-edit tracing: `traceml run train.py` on a script that never calls
traceml.init() (docs/zero-edit.md).

The launcher puts a sitecustomize on the training's PYTHONPATH that calls
start() in the script's own process and in the processes it spawns with
multiprocessing (not in torchrun, not in forked DataLoader workers). How
TraceML then starts depends on the script and the process:

- the script's process, when the script has no `import traceml_ai` (or
  `import traceml`) statement: TraceML starts as init(mode="auto") would,
  right after the script imports torch, with automatic step detection
  (python/_traceml.c: a step ends when optimizer.step() returns);
- a script that imports TraceML instruments itself (its own init() mode,
  its trace_step): nothing starts unless it reaches TraceML without an
  init() -- a wrap_*() or trace_step() call, or an optimizer step -- and
  then TraceML starts there, in auto mode;
- a process spawned by multiprocessing (torch.multiprocessing.spawn's
  ranks, but also spawned DataLoader workers): only a process that joins
  a process group (torch.distributed.init_process_group) is a rank, and
  TraceML starts when it has joined, knowing its rank.

Nothing here is visible to the training: no global module hooks (which
torch.compile would trace and warn about), no environment changes; the
models are found when the first backward runs and when an optimizer not
seen before steps, by looking at what the running frames hold (discover).
"""
import ast
import os
import sys

_IMPORTS = ("traceml_ai", "traceml")


def imports_traceml(source):
    """True when the script's code (not its comments or strings) imports
    TraceML anywhere, at top level or inside a function."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if any(n.split(".")[0] in _IMPORTS for n in names):
            return True
    return False


class _AfterTorch(object):
    """A meta-path finder that lets torch (or the module `name`) import as
    usual and then calls `then()` (`then(module)` for another module). It
    stays until the module is really executed: a find_spec("torch") that
    only looks (importlib.util.find_spec, as many libraries do before
    importing) does not use it up."""

    def __init__(self, then, name="torch"):
        self.then = then
        self.name = name
        self.busy = False

    def find_spec(self, name, path=None, target=None):
        if name != self.name or self.busy:
            return None
        self.busy = True
        try:
            import importlib.util
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run, finder = spec.loader.exec_module, self

        def exec_module(module):
            run(module)
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
                if finder.name == "torch":
                    finder.then()
                else:
                    finder.then(module)

        spec.loader.exec_module = exec_module
        return spec


def _after_torch(then):
    if "torch" in sys.modules:
        then()
    else:
        sys.meta_path.insert(0, _AfterTorch(then))


def start(script, spawned=False):
    """Called by the launcher's sitecustomize (docs/zero-edit.md)."""
    import traceml_ai as t
    if t._env("TRACEML_PROFILE") == "watch":   # traceml watch: no step tracing
        if spawned:
            _after_torch(lambda: _on_process_group(t._start_watch))
        else:
            t._start_watch()
        return
    try:
        with open(script, "rb") as f:
            selfinst = imports_traceml(f.read())
    except OSError:
        return
    if selfinst:
        _after_torch(t._arm_deferred)
    elif spawned:
        _after_torch(_on_process_group)
        _after_torch(lambda: t._arm_deferred(_start_child))
    else:
        _after_torch(_start)
        for module, hook in _FRAMEWORKS:
            if module not in sys.modules:
                sys.meta_path.insert(0, _AfterTorch(hook, module))


def _framework(name, attach):
    """A hook for the module that defines a framework's Trainer: its
    trainers get TraceML's callback (their steps are the framework's, as
    TraceML 0.5.0's launcher made them), if TraceML runs."""
    def hook(module):
        import traceml_ai as t
        if not t._active:
            return
        try:
            attach(module)
        except Exception as e:         # TraceML never breaks training
            t._warn("the %s integration could not attach (%s)" % (name, e))
    return hook


def _huggingface(module):
    from .integrations import huggingface
    if huggingface._enabled():
        _common_attach(module.Trainer, huggingface._attach)


def _lightning(callback_module):
    def attach(module):
        import importlib
        cb = importlib.import_module("traceml_ai.integrations." + callback_module).TraceMLCallback
        from .integrations import _common, _lightning_impl
        if not cb._MISSING and _common.supported("Lightning", cb._DIST, cb._MINIMUM):
            _lightning_impl.init(module.Trainer, cb)
    return attach


def _common_attach(trainer_cls, attach):
    from .integrations import _common
    _common.attach_to_every(trainer_cls, attach)


def _rfdetr(training):
    """RF-DETR trains through a Lightning Trainer of its own factory: its
    steps are marked by TraceML's callback (integrations/rfdetr.py), as
    TraceML 0.5.0's launcher did, instead of found automatically (Lightning
    runs training_step inside optimizer.step(closure), where automatic
    detection sees no forward)."""
    try:
        from .integrations import rfdetr
        rfdetr._auto(training)
    except Exception as e:         # TraceML never breaks training
        import traceml_ai as t
        t._warn("the RF-DETR integration could not attach (%s)" % (e,))


def _start():
    import traceml_ai as t
    try:
        t._start_detected()
    except Exception as e:         # TraceML never breaks training
        t._warn("automatic step detection could not start (%s)" % (e,))


def _on_process_group(then=None):
    """A spawned process: TraceML starts (then(), else as zero-edit tracing
    does) once it joined a process group."""
    import functools
    import traceml_ai as t
    dist = sys.modules.get("torch.distributed")
    orig = getattr(dist, "init_process_group", None)
    if orig is None:
        return

    @functools.wraps(orig)
    def init_process_group(*args, **kwargs):
        r = orig(*args, **kwargs)
        (then or _start)()
        return r

    t._patch_with(dist, "init_process_group", init_process_group)


def _start_child():
    """The first optimizer step of a spawned process that joined no process
    group: one that a traced parent started to train on its own (Hogwild,
    pytorch/examples mnist_hogwild) is traced as the next rank, the number
    its parent gave it (process_start_wrapper); any other stays untraced."""
    import multiprocessing
    import traceml_ai as t
    k = getattr(multiprocessing.current_process(), "_traceml_rank", None)
    if not isinstance(k, int) or k < 0:
        return
    t._c.set_rank(k, k + 1)   # the run's world size is the largest claim
    _start()


def process_start_wrapper(orig, not_a_rank):
    """multiprocessing's Process.start in a traced process: a process that
    may train (any but a DataLoader's worker) is numbered in start order,
    a number its spawned child reads as its rank if it trains without a
    process group (_start_child); the parent, unless it steps itself, is
    their launcher, not a rank."""
    import functools
    import itertools
    started = itertools.count()

    @functools.wraps(orig)
    def start(self):
        target = getattr(self, "_target", None)
        if getattr(target, "__module__", None) != "torch.utils.data._utils.worker":
            try:
                self._traceml_rank = next(started)
                not_a_rank(_start_method(self) == "fork")
            except Exception:     # TraceML never breaks training
                pass
        return orig(self)
    start._traceml_launcher = True
    return start


def _start_method(process):
    """How process will be started ("fork", "spawn", "forkserver"), read
    without fixing the default context as get_start_method() would."""
    import multiprocessing
    method = getattr(process, "_start_method", None)
    if method is None:
        method = multiprocessing.get_start_method(allow_none=True)
    if method is None:
        default = getattr(multiprocessing.context, "_default_context", None)
        method = getattr(getattr(default, "_default_context", None), "_name", None)
    return method


def launcher_wrapper(orig, not_a_rank):
    """torch.multiprocessing.spawn / start_processes in a traced process:
    one that made no step of its own is the ranks' launcher, not a rank."""
    import functools

    @functools.wraps(orig)
    def start_processes(*args, **kwargs):
        not_a_rank()
        return orig(*args, **kwargs)
    return start_processes


# --------------------------------------------------------------------------
# Finding the models

def discover(opt, install_forward, have_optimizer, warn):
    """Times the forward of the models an optimizer updates (opt), or of
    every module with trainable parameters (opt is None: the first
    backward, before any optimizer stepped). Called by the engine's glue
    (python/_traceml.c) once per optimizer and once at the first backward.

    The models are the modules the running frames hold -- locals of every
    frame on the stack, the script's globals, and one attribute down (a
    trainer's self.model) -- that hold those parameters; a wrapper and the
    module inside it (DDP) are both timed, their nested forwards counting
    once, so whichever the loop calls is timed. A compiled module
    (torch.compile(model)) is timed from outside and nothing inside it is
    touched; nor is a module with hooks once torch.compile compiled
    something (called from a compiled function, its new timing would make
    Dynamo compile that function again). Only when the frames hold none are
    the process's objects searched (gc), for the outermost modules holding
    the parameters."""
    try:
        torch = sys.modules["torch"]
        found, saw_opt = _holders(opt, torch, sys._getframe(1))
        for m in _timeable(found, torch):
            install_forward(m)
        if saw_opt:
            have_optimizer()
        del found
    except Exception as e:
        warn("cannot find the models to time (%s); wrap the step in "
             "traceml.trace_step(model)" % (e,))


def find_extra(opt, timed, install_forward, announce, warn):
    """The models a step runs that trace_step() was not given (a GAN
    traced as trace_step(D): the generator), found when an optimizer not
    seen before steps inside a trace_step(model) bracket (auto or
    selective mode with patch_forward; python/_traceml.c calls it): the
    modules the running frames hold that hold opt's parameters, as
    discover() finds them, less those that are, wrap or sit inside a
    model already timed (`timed`: the DDP wrapper of trace_step(model.
    module), a compiled model's original). Their forward is timed from
    then on, and announce(model) names each in the summary ("also timed:
    Generator")."""
    try:
        torch = sys.modules["torch"]
        found, _ = _holders(opt, torch, sys._getframe(1))
        known = list(timed)
        near = {id(t) for t in known}
        inside = set()
        for t in known:
            inside.update(id(x) for x in t.modules())
        extra = [m for m in found if id(m) not in inside and
                 not any(id(x) in near for x in m.modules())]
        inner = set()
        for m in extra:
            inner.update(id(x) for x in m.modules() if x is not m)
        extra = [m for m in extra if id(m) not in inner]
        for m in _timeable(extra, torch):
            install_forward(m)
            announce(m)
        del found, extra, known
    except Exception as e:
        warn("cannot find the other models of the step (%s); pass them to "
             "traceml.trace_step(model, other)" % (e,))


def model_name(m):
    """The class name a user knows a model by: through a DDP/FSDP wrapper
    (.module) and a torch.compile'd one (._orig_mod)."""
    module_t = sys.modules["torch"].nn.Module
    for _ in range(4):
        inner = m._modules.get("_orig_mod") or m._modules.get("module")
        if not isinstance(inner, module_t):
            break
        m = inner
    return type(m).__name__


def _holders(opt, torch, frame):
    """The modules the running frames (from `frame` up) hold that hold
    opt's parameters (opt None: any trainable parameter), else the
    outermost such modules of the process (gc); and whether the frames
    hold an optimizer."""
    module_t, optim_t = torch.nn.Module, torch.optim.Optimizer
    if opt is not None:
        wanted = {id(p) for g in opt.param_groups for p in g["params"]}

        def holds(m):
            return any(id(p) in wanted for p in m.parameters())
    else:
        def holds(m):
            return any(p.requires_grad for p in m.parameters())
    found, saw_opt = [], False
    seen = set()
    for obj in _reachable(frame, module_t):
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        kind = type(obj)        # never isinstance(): see _gc_modules
        if issubclass(kind, module_t):
            if holds(obj):
                found.append(obj)
        elif issubclass(kind, optim_t):
            saw_opt = True
    if not found:
        found = _outermost([o for o in _gc_modules(module_t) if holds(o)])
    return found, saw_opt


def _timeable(mods, torch):
    """mods less what sits inside a compiled one of them, and less the
    modules with hooks once torch.compile compiled something."""
    compiled = _compiled_before(torch)
    return [m for m in _outside_compiled(mods, torch)
            if not (compiled and _has_hooks(m, torch))]


def _reachable(frame, module_t):
    import types
    skip = (type, types.ModuleType, types.FunctionType, types.MethodType,
            types.BuiltinFunctionType, module_t, str, bytes, int, float)
    spaces = []
    while frame is not None:
        spaces.append(frame_locals(frame))
        frame = frame.f_back
    main = sys.modules.get("__main__")
    if main is not None:
        spaces.append(vars(main))
    for space in spaces:
        for v in list(space.values()):
            yield v
            try:        # never through a __getattr__: a proxy stays unasked
                attrs = None if issubclass(type(v), skip) else object.__getattribute__(v, "__dict__")
            except Exception:
                attrs = None
            if type(attrs) is dict:
                for a in list(attrs.values()):
                    yield a


def frame_locals(frame):
    """A copy of a running frame's locals that leaves nothing behind.

    Up to Python 3.12, frame.f_locals of a function's frame is a snapshot
    dict that the frame keeps until it ends: read in a `def train():`
    loop, it would keep every tensor the loop had then (a buffer it
    deletes later, step 0's outputs) alive for the whole run. So the
    snapshot is copied and emptied again -- unless someone else holds it
    (a `locals()` the code kept): the frame's fast locals are untouched,
    and whoever reads f_locals or locals() next gets it refilled, as
    before. A module's or class body's frame has its namespace there, not
    a snapshot; from 3.13 on f_locals is a view (PEP 667) that holds
    nothing: both are only copied."""
    space = frame.f_locals
    got = dict(space)
    if (sys.version_info < (3, 13) and type(space) is dict and
            frame.f_code.co_flags & _CO_OPTIMIZED and sys.getrefcount(space) <= 3):
        space.clear()       # held by the frame, `space` and getrefcount's argument
    return got


_CO_OPTIMIZED = 0x1


def _gc_modules(module_t):
    """The modules among the process's objects, asked by type alone:
    isinstance() would read __class__ of every object, which a lazy or
    deprecated object (torch.distributed.reduce_op) answers with a
    warning in the training's stderr."""
    import gc
    return [o for o in gc.get_objects() if issubclass(type(o), module_t)]


def _outermost(mods):
    inner = set()
    for m in mods:
        inner.update(id(c) for c in m._modules.values() if c is not None)
    return [m for m in mods if id(m) not in inner]


def hide_from_dynamo(*fns):
    """fns run while a compiled function runs -- an optimizer hook in the
    part of a compiled step Dynamo runs as is, a finder called from the
    backward that broke a graph, a timed model's descriptor: Dynamo looks
    at every frame that starts there, each one a frame more in its
    counters than without TraceML. Their code (and what they call) is
    marked for Dynamo's frame evaluation to run as is; Dynamo inlining
    them into a graph (they ask torch.compiler.is_compiling() first) is
    not affected. Through torch's C module, so torch._dynamo is not
    imported for it; a torch without it is left alone."""
    try:
        ef = sys.modules["torch"]._C._dynamo.eval_frame
        skip = ef._FrameExecStrategy(ef._FrameAction.SKIP, ef._FrameAction.SKIP)
        for fn in fns:
            ef.set_code_exec_strategy(fn.__code__, skip)
    except Exception:
        pass


def compiled_before(torch):
    """True once torch.compile compiled something (python/_traceml.c asks
    it for a compiled whole train step)."""
    return _compiled_before(torch)


def _compiled_before(torch):
    try:
        return sys.modules["torch._dynamo.utils"].counters["stats"]["unique_graphs"] > 0
    except Exception:
        return False


def _has_hooks(m, torch):
    g = torch.nn.modules.module
    return bool(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or
                getattr(m, "_backward_pre_hooks", None) or g._global_forward_hooks or
                g._global_forward_pre_hooks)


def _outside_compiled(mods, torch):
    """mods without what sits inside a compiled module found with them."""
    try:
        from torch._dynamo.eval_frame import OptimizedModule
    except Exception:
        return mods
    inside = set()
    for m in mods:
        if isinstance(m, OptimizedModule):
            inside.update(id(x) for x in m._orig_mod.modules())
    return [m for m in mods if id(m) not in inside]


# the modules that define the Trainers whose steps TraceML's callbacks mark
# under zero-edit tracing (docs/zero-edit.md, "Frameworks")
_FRAMEWORKS = (
    ("rfdetr.training", _rfdetr),
    ("transformers.trainer", _framework("Hugging Face", _huggingface)),
    ("lightning.pytorch", _framework("Lightning", _lightning("lightning"))),
    ("pytorch_lightning", _framework("Lightning", _lightning("pytorch_lightning"))),
)

