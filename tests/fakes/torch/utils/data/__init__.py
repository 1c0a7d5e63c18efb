"""torch.utils.data: a single-process DataLoader, whose iterator's
__next__ is _BaseDataLoaderIter's, as in torch (tests/fakes/torch)."""
from . import dataloader  # noqa: F401
from .dataloader import (BatchSampler, DataLoader, Dataset, IterableDataset,  # noqa: F401
                         RandomSampler, SequentialSampler, TensorDataset, default_collate)
