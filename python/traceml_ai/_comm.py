"""Communication timing: the glue that shows TraceML the step's collectives.

Two ways in, both ending in the engine's C calls (docs/diagnosis.md,
COMMUNICATION-BOUND):

- DDP's gradient buckets: a communication hook (register_comm_hook) that
  wraps whatever all-reduces the bucket -- DDP's default all-reduce, or the
  hook the user registered, before or after TraceML's -- and chains a C
  callback to its future: launched at t0, completed when the callback runs
  (on the process group's thread), the bucket's bytes. These are
  "overlapped" collectives (tml_comm_overlapped): backward goes on while
  they fly; the engine counts as exposed only their tail after the last
  launch.
- Explicit torch.distributed collectives (all_reduce, broadcast, barrier,
  all_gather*, reduce_scatter*, all_to_all_single): a blocking call is the
  COMM phase around it plus its bytes; async_op=True gets the same
  callback on its Work's future (overlapped), as FSDP's all-gathers and
  reduce-scatters do.

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
_HOOK_ATTR = "_traceml_comm_hook"
_ORIG = {}              # DDP's own register_comm_hook / register_builtin_comm_hook


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
    """The hook DDP calls, with the all-reduce it stands for (the default,
    or the user's own hook and state)."""
    __slots__ = ("state", "hook", "world")

    def __init__(self, state, hook, world):
        self.state, self.hook, self.world = state, hook, world


def _timed_hook(holder, bucket):
    global _in_hook, _hook_sent, _hook_n
    t0 = _c.now_ns()
    _hook_sent, _hook_n = 0, holder.world
    _in_hook += 1
    try:
        fut = holder.hook(holder.state, bucket)
    finally:
        _in_hook -= 1
    n = int(_hook_sent or _nbytes(bucket.buffer()) * _allreduce_share(holder.world))
    return fut.then(_functools.partial(_c._comm_done, t0, n))


def _default_hook():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    return default_hooks.allreduce_hook


def _install(model, state, hook):
    """Registers TraceML's hook on a DDP model, around (state, hook)."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    holder = _Holder(state, hook, _world(getattr(model, "process_group", None)))
    _ORIG.get("register_comm_hook", DDP.register_comm_hook)(model, holder, _timed_hook)
    object.__setattr__(model, _HOOK_ATTR, holder)


def attach(model):
    """Times `model`'s gradient buckets when it is a DistributedDataParallel
    (once per model; a hook the user registers later keeps working)."""
    if _c is None or getattr(model, _HOOK_ATTR, None) is not None:
        return
    try:
        from torch.nn.parallel import DistributedDataParallel as DDP
        if isinstance(model, DDP):
            _install(model, getattr(model, "process_group", None), _default_hook())
    except Exception as e:
        _warn("cannot time DDP's gradient all-reduce (%s); communication stays inside "
              "Backward" % (e,))


def _register_comm_hook(self, state, hook):
    """DDP.register_comm_hook: the user's hook runs inside TraceML's."""
    holder = getattr(self, _HOOK_ATTR, None)
    if holder is None:
        _install(self, state, hook)
    else:
        holder.state, holder.hook = state, hook


def _register_builtin_comm_hook(self, comm_hook_type):
    holder = getattr(self, _HOOK_ATTR, None)
    if holder is None:
        return _ORIG["register_builtin_comm_hook"](self, comm_hook_type)
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    name = getattr(comm_hook_type, "name", str(comm_hook_type))
    holder.state = getattr(self, "process_group", None)
    holder.hook = default_hooks.fp16_compress_hook if "FP16" in name else default_hooks.allreduce_hook
    return None


def _ddp_init(orig):
    @_functools.wraps(orig)
    def __init__(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        attach(self)
    __init__.__wrapped__ = orig
    return __init__


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

    @_functools.wraps(orig)
    def collective(*args, **kwargs):
        global _hook_sent
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


def setup(c, warn):
    global _c, _warn
    _c, _warn = c, warn


def install(c, warn, patch):
    """Called by init(): DDP's constructor and comm-hook registration, and
    the torch.distributed collectives, through the package's _patch
    bookkeeping (patch(owner, name, new))."""
    setup(c, warn)
    import torch.distributed as dist
    if not dist.is_available():
        return
    from torch.nn.parallel import DistributedDataParallel as DDP
    for name, new in (("register_comm_hook", _register_comm_hook),
                      ("_register_builtin_comm_hook", _register_builtin_comm_hook),
                      ("register_builtin_comm_hook", _register_builtin_comm_hook)):
        if name in DDP.__dict__:
            _ORIG[name.lstrip("_")] = DDP.__dict__[name]
            patch(DDP, name, new)
    patch(DDP, "__init__", _ddp_init(DDP.__dict__["__init__"]))
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
