"""Communication timing: the glue that shows TraceML the step's collectives.

Two ways in, both ending in the engine's C calls (docs/diagnosis.md,
COMMUNICATION-BOUND):

- DDP's gradient buckets: a communication hook that wraps whatever
  all-reduces the bucket -- DDP's default all-reduce, or the hook the user
  registered -- and chains a C callback to its future: launched at t0,
  completed when the callback runs (on the process group's thread), the
  bucket's bytes. TraceML takes part below DDP's register_comm_hook (at
  torch.distributed._register_comm_hook), so DDP checks the user's hook,
  names it in its logs and refuses a second one exactly as without
  TraceML; a hook's result that is no Future goes back to DDP as is. These are
  "overlapped" collectives (tml_comm_overlapped): backward goes on while
  they fly; the engine counts as exposed only their tail after the last
  launch.
- Explicit torch.distributed collectives (all_reduce, broadcast, barrier,
  all_gather*, reduce_scatter*, all_to_all_single): a blocking call is the
  COMM phase around it plus its bytes; async_op=True gets the same
  callback on its Work's future (overlapped), as FSDP's all-gathers and
  reduce-scatters do.
- torch.distributed._broadcast_coalesced, the C++ collective DDP's forward
  calls to broadcast the model's buffers from rank 0 (BatchNorm's running
  statistics) before the module's own forward: blocking, so it is where a
  rank waits for a slower one when the model has buffers. Timed as a
  blocking collective wherever it runs, whichever module the step names
  (the DDP wrapper, whose Forward it then leaves, or the module inside,
  around whose forward it runs).

Bytes are what one rank sends by NCCL's bus-bandwidth count (an
all-reduce of B bytes over n ranks: 2(n-1)/n B), so bytes over time is a
link bandwidth whatever the world size. A bucket's bytes are what the
collectives its hook calls send (half the gradient for the fp16 hook), or
the bucket's gradient size for a hook that calls none through
torch.distributed (a process group's own methods).

Nothing here runs per step beyond the hook itself (one call per bucket) and
the wrapped collectives; everything is fail-open: a failure leaves the
collective untimed, never broken.
"""

import functools as _functools

_c = None
_warn = None
_in_hook = 0            # > 0 while a bucket's hook runs: its collectives are the bucket's
_hook_sent = 0          # bytes those collectives send
_hook_n = 1             # the bucket's world size
_ORIG = {}              # torch.distributed's own _register_comm_hook / _register_builtin_comm_hook


def _world(group=None):
    import torch.distributed as dist
    try:
        return dist.get_world_size(group)
    except Exception:
        return 1


def _allreduce_share(n):
    """What one rank sends of an all-reduced buffer among n ranks (ring)."""
    return 2.0 * (n - 1) / n if n > 1 else 0.0


def _nbytes(t):
    try:
        return t.nbytes
    except Exception:
        return 0


class _Holder(object):
    """The hook DDP's reducer calls, with the all-reduce it stands for:
    DDP's default, or the hook and state the user registered (user)."""
    __slots__ = ("state", "hook", "world", "user")

    def __init__(self, state, hook, world, user):
        self.state, self.hook, self.world, self.user = state, hook, world, user


def _timed_hook(holder, bucket):
    global _in_hook, _hook_sent, _hook_n
    t0 = _c.now_ns()
    _hook_sent, _hook_n = 0, holder.world
    _in_hook += 1
    try:
        fut = holder.hook(holder.state, bucket)
    finally:
        _in_hook -= 1
    if not isinstance(fut, _Future):
        return fut          # DDP reports it as it would without TraceML
    n = int(_hook_sent or _nbytes(bucket.buffer()) * _allreduce_share(holder.world))
    return fut.then(_functools.partial(_c._comm_done, t0, n))


# Every DDP reducer that has a comm hook: its _Holder, or None when the
# hook is not TraceML's (a builtin registered first, or one that was there
# before TraceML started). Weak: the reducer dies with its model.
_HOLDERS = None
_Future = None


def _group_world(state):
    import torch.distributed as dist
    return _world(state if isinstance(state, dist.ProcessGroup) else None)


def _register_comm_hook(reducer, state, hook):
    """torch.distributed._register_comm_hook, which DDP.register_comm_hook
    calls after its own checks: the hook runs inside TraceML's. The user's
    first hook replaces TraceML's default; a second one goes to torch, which
    refuses it as it would without TraceML ("can only be called once")."""
    holder = _HOLDERS.get(reducer, False)
    if holder is False and callable(hook):
        holder = _Holder(state, hook, _group_world(state), True)
        _ORIG["_register_comm_hook"](reducer, holder, _timed_hook)
        _HOLDERS[reducer] = holder
    elif holder and not holder.user:
        holder.state, holder.hook = state, hook
        holder.world, holder.user = _group_world(state), True
    else:
        _ORIG["_register_comm_hook"](reducer, state, hook)


def _register_builtin_comm_hook(reducer, comm_hook_type):
    """torch.distributed._register_builtin_comm_hook: over TraceML's default
    hook, the Python hook of the same computation; else torch's own (an
    untimed C++ hook, or the error a second registration gets)."""
    holder = _HOLDERS.get(reducer, False)
    name = getattr(comm_hook_type, "name", str(comm_hook_type))
    if holder and not holder.user and name in ("ALLREDUCE", "FP16_COMPRESS"):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        holder.hook = default_hooks.fp16_compress_hook if name == "FP16_COMPRESS" \
            else default_hooks.allreduce_hook
        holder.user = True
        return None
    r = _ORIG["_register_builtin_comm_hook"](reducer, comm_hook_type)
    _HOLDERS.setdefault(reducer, None)
    return r


def attach(model):
    """Times `model`'s gradient buckets when it is a DistributedDataParallel
    without a comm hook: DDP's default all-reduce, through TraceML's hook
    (once per model; a hook the user registers later replaces it)."""
    if _c is None or _HOLDERS is None:
        return
    try:
        from torch.nn.parallel import DistributedDataParallel as DDP
        reducer = getattr(model, "reducer", None) if isinstance(model, DDP) else None
        if reducer is None or reducer in _HOLDERS:
            return
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        pg = getattr(model, "process_group", None)
        holder = _Holder(pg, default_hooks.allreduce_hook, _world(pg), False)
        try:
            _ORIG["_register_comm_hook"](reducer, holder, _timed_hook)
        except RuntimeError:        # a hook from before TraceML: it stays, untimed
            holder = None
        _HOLDERS[reducer] = holder
    except Exception as e:
        _warn("cannot time DDP's gradient all-reduce (%s); communication stays inside "
              "Backward" % (e,))


def _ddp_made(self, *args, **kwargs):
    attach(self)


def _ddp_init(orig):
    """DDP's constructor, then attach(): a C callable (KIND_AFTER), so that
    DDP's own warnings (a deprecated argument, at stacklevel=2) name the
    script's line, not TraceML's."""
    return _c.PhaseCall(orig, 0, _c.KIND_AFTER, _ddp_made)


# The collectives, with how many bytes one rank sends (n: world size; a:
# the tensor arguments -- anything else raises, and the caller then counts
# nothing); where async_op and group sit among the arguments comes from the
# signature.
def _sent_allreduce(a, n):
    return a[0].nbytes * _allreduce_share(n)


def _sent_tensor(a, n):
    return a[0].nbytes * (n - 1) / n


def _sent_gather_into(a, n):     # (output, input): the output is n inputs
    return a[0].nbytes * (n - 1) / n


def _sent_scatter_tensor(a, n):  # (output, input): the input is n outputs
    return a[1].nbytes * (n - 1) / n


def _sent_list_gather(a, n):     # (tensor_list, tensor)
    return a[1].nbytes * (n - 1)


def _sent_list_scatter(a, n):    # (output, input_list)
    return sum(t.nbytes for t in a[1]) * (n - 1) / n


def _sent_broadcast(a, n):
    return a[0].nbytes


def _sent_none(a, n):
    return 0


_COLLECTIVES = (
    ("all_reduce", ("tensor",), _sent_allreduce),
    ("broadcast", ("tensor",), _sent_broadcast),
    ("barrier", (), _sent_none),
    ("all_gather_into_tensor", ("output_tensor", "input_tensor"), _sent_gather_into),
    ("all_gather_single", ("output_tensor", "input_tensor"), _sent_gather_into),     # FSDP2
    ("reduce_scatter_single", ("output", "input"), _sent_scatter_tensor),            # FSDP2
    ("all_gather", ("tensor_list", "tensor"), _sent_list_gather),
    ("reduce_scatter_tensor", ("output", "input"), _sent_scatter_tensor),
    ("reduce_scatter", ("output", "input_list"), _sent_list_scatter),
    ("all_to_all_single", ("output", "input"), _sent_scatter_tensor),
    ("reduce", ("tensor",), _sent_tensor),
)


def _wrap_collective(orig, names, sent):
    import inspect
    params = list(inspect.signature(orig).parameters)
    at = params.index("async_op") if "async_op" in params else None
    gat = params.index("group") if "group" in params else None
    idx = [params.index(n) for n in names]
    lead = idx == list(range(len(idx)))      # the tensors come first: args is enough

    def tensors(args, kwargs):
        if lead and len(args) >= len(idx):
            return args
        return [kwargs[n] if n in kwargs else args[i] for n, i in zip(names, idx)]

    import torch
    compiling = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling

    @_functools.wraps(orig)
    def collective(*args, **kwargs):
        global _hook_sent
        if compiling():     # torch.compile traces the collective itself
            return orig(*args, **kwargs)
        if _in_hook:        # a bucket's: timed by the hook, its bytes counted here
            try:
                _hook_sent += sent(tensors(args, kwargs), _hook_n)
            except Exception:
                pass
            return orig(*args, **kwargs)
        if _c is None:
            return orig(*args, **kwargs)
        try:
            async_op = kwargs["async_op"] if "async_op" in kwargs else (
                at is not None and len(args) > at and args[at])
            group = kwargs["group"] if "group" in kwargs else (
                args[gat] if gat is not None and len(args) > gat else None)
            n = _world(group)
        except Exception:
            return orig(*args, **kwargs)
        try:
            nbytes = int(sent(tensors(args, kwargs), n)) if n > 1 else 0
        except Exception:
            nbytes = 0
        if async_op:
            t0 = _c.now_ns()
            work = orig(*args, **kwargs)
            try:
                work.get_future().then(_functools.partial(_c._comm_done, t0, nbytes))
            except Exception:
                pass
            return work
        _c.phase_begin(_c.COMM)
        try:
            return orig(*args, **kwargs)
        finally:
            _c.phase_end(_c.COMM)
            _c.comm_bytes(nbytes)
    collective.__wrapped__ = orig
    return collective


def setup(c, warn, patch):
    """The bucket hook's registration (torch.distributed's two functions
    DDP registers hooks through), for attach(); once."""
    global _c, _warn, _HOLDERS, _Future
    _c, _warn = c, warn
    if _HOLDERS is not None:
        return
    import weakref
    import torch
    import torch.distributed as dist
    _Future = torch._C.Future
    for name, new in (("_register_comm_hook", _register_comm_hook),
                      ("_register_builtin_comm_hook", _register_builtin_comm_hook)):
        _ORIG[name] = getattr(dist, name)
        patch(dist, name, new)
    _HOLDERS = weakref.WeakKeyDictionary()


def install(c, warn, patch):
    """Called by init(): DDP's constructor, the comm-hook registration and
    the torch.distributed collectives, through the package's _patch
    bookkeeping (patch(owner, name, new))."""
    import torch.distributed as dist
    if not dist.is_available():
        return
    setup(c, warn, patch)
    from torch.nn.parallel import DistributedDataParallel as DDP
    init = DDP.__dict__["__init__"]
    if not isinstance(init, c.PhaseCall):
        patch(DDP, "__init__", _ddp_init(init))
    for name, names, sent in _COLLECTIVES:
        orig = getattr(dist, name, None)
        if orig is None or getattr(orig, "_traceml_collective", False):
            continue
        try:
            w = _wrap_collective(orig, names, sent)
        except Exception:
            continue
        w._traceml_collective = True
        patch(dist, name, w)
    time_buffer_sync(patch)


def time_buffer_sync(patch):
    """DDP's buffer broadcast, torch.distributed._broadcast_coalesced (a C++
    function DDP's forward calls), timed as a blocking collective with its
    bytes by a C wrapper (python/_traceml.c, KIND_COMM): no Python frame,
    so torch.compile, which runs DDP's forward outside its graphs, has
    nothing new to see. Once; also for wrap_ddp() in manual mode: the wait
    there is that DDP model's communication."""
    import torch.distributed as dist
    orig = getattr(dist, "_broadcast_coalesced", None)
    if orig is None or isinstance(orig, _c.PhaseCall):
        return
    patch(dist, "_broadcast_coalesced", _c.PhaseCall(orig, _c.COMM, _c.KIND_COMM))
