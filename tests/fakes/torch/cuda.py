"""torch.cuda: no GPU (the GPU paths are tested with the fake libcuda)."""


def is_available():
    return False


def is_initialized():
    return False


def device_count():
    return 0
