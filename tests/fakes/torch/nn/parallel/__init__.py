"""torch.nn.parallel: DistributedDataParallel with torch 2.13's constructor
signature and its comm-hook registration (register_comm_hook's checks, log
name and _comm_hooks, the reducer that takes one hook), so that what
`traceml tune` sets on it is tested without processes; it computes
nothing and communicates nothing (tests/fakes/torch)."""
import inspect

import torch
import torch.distributed as dist

from ..modules.module import Module


class _Logger(object):
    def __init__(self):
        self.comm_hook_name, self.error = None, None

    def _set_comm_hook_name(self, name):
        self.comm_hook_name = name

    def set_error_and_log(self, msg):
        self.error = msg


class _Reducer(object):
    """Holds the one comm hook (state, hook), as the C++ reducer does;
    run(bucket) is what a ready bucket does with it."""

    def __init__(self, process_group):
        self.comm_hook, self.process_group = None, process_group

    def run(self, bucket):
        if self.comm_hook is None:
            return ("allreduce", bucket)
        state, hook = self.comm_hook
        return hook(state, bucket)


class DistributedDataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=None,
                 init_sync=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None,
                 mixed_precision=None, device_mesh=None, skip_all_reduce_unused_params=False,
                 bucket_cap_mb_list=None, batched_grad_copy=False, forward_sync_buffers=None):
        super().__init__()
        self.module = module
        self.bucket_cap_mb = bucket_cap_mb      # torch keeps bucket_bytes_cap
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.find_unused_parameters = find_unused_parameters
        self.process_group = process_group or "default-group"
        self.reducer = _Reducer(self.process_group)
        self.logger = _Logger()
        self._comm_hooks = []
        if mixed_precision is not None:     # DDP registers its own upcasting hook
            self.register_comm_hook("upcast-state", _reducer_allreduce_and_upcast_hook)

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)

    def _log_and_throw(self, err_type, err_msg):
        self.logger.set_error_and_log("%s: %s" % (err_type, err_msg))
        raise err_type(err_msg)

    def _check_comm_hook(self, hook):
        if not callable(hook):
            self._log_and_throw(TypeError, "Communication hook must be callable.")
        sig = inspect.signature(hook)
        if (sig.parameters["bucket"].annotation != inspect._empty and
                sig.parameters["bucket"].annotation != dist.GradBucket):
            self._log_and_throw(ValueError,
                                "Communication hook: bucket annotation should be dist.GradBucket.")
        if hook.__name__ in ["bf16_compress_hook", "bf16_compress_wrapper_hook"]:
            if not torch.cuda.is_available():
                self._log_and_throw(TypeError, "BF16 all reduce communication hook required "
                                    "CUDA 11+ and NCCL 2.10+ or XPU and XCCL")

    def register_comm_hook(self, state, hook):
        self._check_comm_hook(hook)
        self.logger._set_comm_hook_name(hook.__qualname__)
        self._comm_hooks.append((hook, state))
        dist._register_comm_hook(self.reducer, state, hook)

    def _register_builtin_comm_hook(self, comm_hook_type):
        self.logger._set_comm_hook_name(str(comm_hook_type))
        dist._register_builtin_comm_hook(self.reducer, comm_hook_type)


def _reducer_allreduce_and_upcast_hook(state, bucket):
    return ("upcast", bucket)
