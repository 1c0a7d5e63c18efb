"""torch.utils.data.dataloader (tests/fakes/torch)."""
import torch


class Dataset(object):
    pass


class IterableDataset(Dataset):
    pass


class TensorDataset(Dataset):
    def __init__(self, *tensors):
        self.tensors = tensors

    def __len__(self):
        return self.tensors[0].shape[0]

    def __getitem__(self, i):
        lead = (len(i),) if isinstance(i, (list, tuple)) else ()    # a batch of indices
        return tuple(torch.Tensor(*(lead + tuple(t.shape[1:]))) for t in self.tensors)


class SequentialSampler(object):
    def __init__(self, data_source, *args, **kwargs):
        self.n = len(data_source)

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


RandomSampler = SequentialSampler


class BatchSampler(object):
    def __init__(self, sampler, batch_size, drop_last):
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def default_collate(samples):
    first = samples[0]
    if isinstance(first, (tuple, list)):
        return type(first)(torch.Tensor(len(samples), *getattr(x, "shape", ())) for x in first)
    return torch.Tensor(len(samples), *getattr(first, "shape", ()))


class DataLoader(object):
    """torch 2.13's signature, and its checks of the arguments that only
    go with workers (ValueError as torch raises them)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True, **kwargs):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; "
                             "use num_workers=0 to disable multiprocessing.")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.")
        elif num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if multiprocessing_context is not None and num_workers == 0:
            raise ValueError("multiprocessing_context can only be used with "
                             "multi-process loading (num_workers > 0)")
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler = sampler
        self.num_workers, self.pin_memory = num_workers, pin_memory
        self.persistent_workers, self.prefetch_factor = persistent_workers, prefetch_factor
        self.multiprocessing_context = multiprocessing_context
        self.collate_fn = collate_fn or default_collate
        self.convert = collate_fn or (lambda sample: sample)    # batch_size=None

    def __iter__(self):
        return _SingleProcessDataLoaderIter(self)

    def __len__(self):
        if self.sampler is not None and self.batch_size is None:
            return len(self.sampler)
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class _BaseDataLoaderIter(object):
    def __init__(self, loader):
        self._loader = loader
        self._index = 0
        self._source = None
        if isinstance(loader.dataset, IterableDataset):
            self._source = iter(loader.dataset)
        elif loader.sampler is not None and loader.batch_size is None:     # index batches
            self._source = (loader.dataset[b] for b in loader.sampler)

    def __iter__(self):
        return self

    def __next__(self):
        return self._next_data()

    def __len__(self):
        return len(self._loader)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def _next_data(self):
        ld = self._loader
        if self._source is not None:
            if ld.batch_size is None:
                return ld.convert(next(self._source))
            batch = [x for _, x in zip(range(ld.batch_size), self._source)]
        else:
            n = len(ld.dataset)
            batch = [ld.dataset[i] for i in range(self._index, min(n, self._index + ld.batch_size))]
            self._index += len(batch)
        if not batch or (ld.drop_last and len(batch) < (ld.batch_size or 1)):
            raise StopIteration
        return ld.collate_fn(batch)
