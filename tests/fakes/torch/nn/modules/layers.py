"""A few layers and losses: their forward gives a tensor of the right
shape and computes nothing."""
import torch

from .module import Module


class Parameter(torch.Tensor):
    def __init__(self, data=None, requires_grad=True):
        shape = data.shape if isinstance(data, torch.Tensor) else (1,)
        torch.Tensor.__init__(self, *shape, requires_grad=requires_grad)


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, **kwargs):
        Module.__init__(self)
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(torch.Tensor(out_features, in_features))
        if bias:
            self.bias = Parameter(torch.Tensor(out_features))

    def forward(self, x):
        return torch.Tensor(*(tuple(x.shape[:-1]) + (self.out_features,)))


class _Same(Module):
    def __init__(self, *args, **kwargs):
        Module.__init__(self)

    def forward(self, x, *args, **kwargs):
        return x._like() if isinstance(x, torch.Tensor) else x


class ReLU(_Same):
    pass


class LeakyReLU(_Same):
    pass


class Dropout(_Same):
    pass


class Identity(_Same):
    pass


class _Loss(Module):
    def __init__(self, *args, **kwargs):
        Module.__init__(self)

    def forward(self, *args, **kwargs):
        return torch.Tensor(1)


class CrossEntropyLoss(_Loss):
    pass


class MSELoss(_Loss):
    pass


class BCEWithLogitsLoss(_Loss):
    pass


class Sequential(Module):
    def __init__(self, *mods):
        Module.__init__(self)
        for i, m in enumerate(mods):
            self._modules[str(i)] = m

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(Sequential):
    def forward(self, *args):
        raise NotImplementedError
