"""torch.nn: Module with torch 2.x's call path, a few layers and losses
that compute nothing (tests/fakes/torch)."""
from . import functional, modules, parallel, utils  # noqa: F401
from .modules.module import Module
from .modules.layers import (BCEWithLogitsLoss, CrossEntropyLoss, Dropout, Identity,  # noqa: F401
                             LeakyReLU, Linear, MSELoss, ModuleList, Parameter, ReLU,
                             Sequential)
