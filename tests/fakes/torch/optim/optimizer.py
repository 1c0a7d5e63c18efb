"""torch.optim.optimizer: every subclass's step() runs the global pre and
post hooks, iterating the live tables as torch does (a hook that registers
another while they run raises, as with the real torch)."""
import functools
import itertools
from collections import OrderedDict

_global_optimizer_pre_hooks = OrderedDict()
_global_optimizer_post_hooks = OrderedDict()


class _Handle(object):
    _next = [0]

    def __init__(self, table):
        self.table, self.id = table, _Handle._next[0]
        _Handle._next[0] += 1

    def remove(self):
        self.table.pop(self.id, None)


def _register(table, hook):
    h = _Handle(table)
    table[h.id] = hook
    return h


def register_optimizer_step_pre_hook(hook):
    return _register(_global_optimizer_pre_hooks, hook)


def register_optimizer_step_post_hook(hook):
    return _register(_global_optimizer_post_hooks, hook)


def _hooked(step):
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        for pre in itertools.chain(_global_optimizer_pre_hooks.values(),
                                   self._optimizer_step_pre_hooks.values()):
            r = pre(self, args, kwargs)
            if r is not None:
                args, kwargs = r
        out = step(self, *args, **kwargs)
        for post in itertools.chain(_global_optimizer_post_hooks.values(),
                                    self._optimizer_step_post_hooks.values()):
            post(self, args, kwargs)
        return out
    return wrapper


class Optimizer(object):
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _hooked(cls.__dict__["step"])

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        params = list(params)
        groups = params if params and isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = []
        for g in groups:
            g = dict(g)
            g["params"] = list(g["params"])
            for k, v in self.defaults.items():
                g.setdefault(k, v)
            self.param_groups.append(g)
        self.state = {}
        self._optimizer_step_pre_hooks = OrderedDict()
        self._optimizer_step_post_hooks = OrderedDict()

    def zero_grad(self, set_to_none=True):
        for g in self.param_groups:
            for p in g["params"]:
                p.grad = None

    def state_dict(self):
        return {"state": {}, "param_groups": [{k: v for k, v in g.items() if k != "params"}
                                              for g in self.param_groups]}


class SGD(Optimizer):
    def __init__(self, params, lr=0.01, momentum=0.0, **kwargs):
        Optimizer.__init__(self, params, dict(lr=lr, momentum=momentum, **kwargs))

    def step(self, closure=None):
        return closure() if closure is not None else None


class Adam(SGD):
    def __init__(self, params, lr=1e-3, **kwargs):
        Optimizer.__init__(self, params, dict(lr=lr, **kwargs))

    def step(self, closure=None):
        return closure() if closure is not None else None


class AdamW(Adam):
    def step(self, closure=None):
        return closure() if closure is not None else None


class LBFGS(SGD):
    def step(self, closure):
        return closure()
