"""torch.distributed: not available in the fake (communication is tested
on the real torch, with gloo); only what DDP's comm-hook registration goes
through (tests/fakes/torch/nn/parallel)."""
import enum


def is_available():
    return False


def is_initialized():
    return False


class GradBucket(object):
    pass


class BuiltinCommHookType(enum.Enum):
    ALLREDUCE = 1
    FP16_COMPRESS = 2


_ONCE = "register_comm_hook or register_builtin_comm_hook can only be called once."


def _register_comm_hook(reducer, state, hook):
    if reducer.comm_hook is not None:
        raise RuntimeError(_ONCE)
    reducer.comm_hook = (state, hook)


def _register_builtin_comm_hook(reducer, comm_hook_type):
    if reducer.comm_hook is not None:
        raise RuntimeError(_ONCE)
    reducer.comm_hook = (reducer.process_group,
                         lambda state, bucket: ("builtin " + comm_hook_type.name, bucket))
