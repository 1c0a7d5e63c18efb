"""A fake torch for TraceML's quick test tier (tests/README.md).

It has exactly what traceml_ai patches and calls -- nn.Module's call path
(__call__, _compiled_call_impl, _call_impl), Tensor.backward / .to / .cuda
/ .copy_, torch.autograd.backward, the optimizer-step hooks, the DataLoader
(its constructor's checks too) and its iterator, torch.cuda,
torch.compiler, torch.multiprocessing, set_num_threads, cudnn.benchmark,
DDP's constructor and comm-hook registration (what `traceml tune` sets) --
and the little a training loop touches (randn, Linear, SGD, cross_entropy,
a DataLoader), computing nothing: a Tensor is a shape. It imports in
milliseconds where the real one takes seconds, so the glue's behaviour
(init modes, disabled paths, manual wrappers, configuration, errors) is
tested in well under a second a test. Put its folder first on PYTHONPATH
(tests/fakes/), ahead of a real torch.

What takes time in a script is what the script sleeps: the phases TraceML
times are the script's own waits.
"""
import contextlib as _contextlib

__version__ = "2.13.0+fake"

float32, float16, bfloat16, int64, long = "float32", "float16", "bfloat16", "int64", "int64"
_grad = [True]


class device(object):
    def __init__(self, kind="cpu", index=None):
        self.type = str(kind).split(":")[0]

    def __str__(self):
        return self.type


def _device_of(args, kwargs, default):
    for a in list(args) + [kwargs.get("device")]:
        if isinstance(a, device):
            return a.type
        if isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda", "meta"):
            return a.split(":")[0]
    return default


class Tensor(object):
    """A shape and a device; every operation gives a tensor of the same."""

    def __init__(self, *shape, requires_grad=False, device="cpu"):
        self.shape = tuple(int(s) for s in shape) if shape else (1,)
        self.requires_grad = requires_grad
        self.device = _dev(device)
        self.grad = None

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def nbytes(self):
        return 4 * self.numel()

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        return len(self.shape)

    def _like(self):
        return Tensor(*self.shape, device=self.device.type)

    def to(self, *args, **kwargs):
        t = self._like()
        t.device = _dev(_device_of(args, kwargs, self.device.type))
        return t

    def cuda(self, *args, **kwargs):
        t = self._like()
        t.device = _dev("cuda")
        return t

    def cpu(self):
        return self.to("cpu")

    def copy_(self, src, non_blocking=False):
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def item(self):
        return 0.0

    def tolist(self):
        return [0.0] * self.numel()

    def __getitem__(self, key):
        return self._like()

    def __len__(self):
        return self.shape[0]

    def __iter__(self):
        return iter([self._like() for _ in range(self.shape[0])])

    def __float__(self):
        return 0.0

    def __getattr__(self, name):
        # sum, mean, detach, view, relu_, zero_, add_, ...: a tensor again
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *a, **k: self._like()

    def _op(self, *other):
        return self._like()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _op
    __truediv__ = __rtruediv__ = __pow__ = __neg__ = __matmul__ = _op
    __iadd__ = __isub__ = __imul__ = _op
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = _op
    __hash__ = object.__hash__


def _dev(d):
    return d if isinstance(d, device) else device(d)


def _shape(size):
    return size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size


def randn(*size, **kwargs):
    return Tensor(*_shape(size), device=kwargs.get("device", "cpu"))


def randint(low, high=None, size=(1,), **kwargs):
    return Tensor(*size)


def zeros(*size, **kwargs):
    return Tensor(*_shape(size))


ones = empty = rand = zeros


def tensor(data, **kwargs):
    return Tensor(len(data) if hasattr(data, "__len__") else 1)


def manual_seed(seed):
    return None


_threads = [4]


def set_num_threads(n):
    if int(n) < 1:
        raise RuntimeError("set_num_threads expects a positive integer")
    _threads[0] = int(n)


def get_num_threads():
    return _threads[0]


class Generator(object):
    def manual_seed(self, seed):
        return self


def is_grad_enabled():
    return _grad[-1]


@_contextlib.contextmanager
def _grad_mode(on):
    _grad.append(on)
    try:
        yield
    finally:
        _grad.pop()


def no_grad():
    return _grad_mode(False)


inference_mode = no_grad


def enable_grad():
    return _grad_mode(True)


def set_grad_enabled(on):
    return _grad_mode(bool(on))


from . import (autograd, backends, compiler, cuda, distributed, multiprocessing, nn,  # noqa: E402
               optim, utils)
