"""torch.backends (tests/fakes/torch): cudnn's benchmark flag."""
from . import cudnn  # noqa: F401
