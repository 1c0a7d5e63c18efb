"""torch.nn.modules.module: nn.Module as torch 2.x calls it.

__call__ is _wrapped_call_impl, which calls the instance's
_compiled_call_impl when set (where Module.compile() puts the compiled
call, and TraceML its timed one) and _call_impl otherwise; _call_impl runs
the global and the module's forward hooks around forward();
__getstate__ leaves _compiled_call_impl out, as torch does.
"""
from collections import OrderedDict

_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_backward_pre_hooks = OrderedDict()
_global_backward_hooks = OrderedDict()


class RemovableHandle(object):
    _next = [0]

    def __init__(self, table):
        self.table, self.id = table, RemovableHandle._next[0]
        RemovableHandle._next[0] += 1

    def remove(self):
        self.table.pop(self.id, None)


def _register(table, hook):
    h = RemovableHandle(table)
    table[h.id] = hook
    return h


def register_module_forward_pre_hook(hook):
    return _register(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook, always_call=False):
    return _register(_global_forward_hooks, hook)


_TABLES = ("_parameters", "_buffers", "_modules", "_forward_hooks", "_forward_pre_hooks",
           "_backward_hooks", "_backward_pre_hooks")


class Module(object):
    _compiled_call_impl = None

    def __init__(self, *args, **kwargs):
        for name in _TABLES:
            object.__setattr__(self, name, OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        from .layers import Parameter
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError("'%s' object has no attribute '%s'" % (type(self).__name__, name))

    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def _call_impl(self, *args, **kwargs):
        for hook in list(_global_forward_pre_hooks.values()) + list(self._forward_pre_hooks.values()):
            r = hook(self, args)
            if r is not None:
                args = r if isinstance(r, tuple) else (r,)
        out = self.forward(*args, **kwargs)
        for hook in list(_global_forward_hooks.values()) + list(self._forward_hooks.values()):
            r = hook(self, args, out)
            if r is not None:
                out = r
        return out

    def _wrapped_call_impl(self, *args, **kwargs):
        if self._compiled_call_impl is not None:
            return self._compiled_call_impl(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    __call__ = _wrapped_call_impl

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_compiled_call_impl", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def register_forward_hook(self, hook):
        return _register(self._forward_hooks, hook)

    def register_forward_pre_hook(self, hook):
        return _register(self._forward_pre_hooks, hook)

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                for item in m.named_modules(prefix + ("." if prefix else "") + name):
                    yield item

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def children(self):
        return iter([m for m in self._modules.values() if m is not None])

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        for mname, m in (self.named_modules() if recurse else [("", self)]):
            for name, p in m._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (mname + "." if mname else "") + name, p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def state_dict(self):
        return OrderedDict(self.named_parameters())

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            p.grad = None

    def to(self, *args, **kwargs):
        return self

    def cuda(self, *args, **kwargs):
        return self

    def cpu(self):
        return self

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self
