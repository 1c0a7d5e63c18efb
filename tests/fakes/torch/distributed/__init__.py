"""torch.distributed: not available in the fake (communication is tested
on the real torch, with gloo)."""


def is_available():
    return False


def is_initialized():
    return False
