"""torch.nn.parallel: DDP needs torch.distributed, which the fake has not."""


class DistributedDataParallel(object):
    def __init__(self, *args, **kwargs):
        raise RuntimeError("the fake torch has no torch.distributed")
