"""torch.nn.functional: every function gives a tensor like its input."""
import torch


def _like(x, *a, **k):
    return x._like() if isinstance(x, torch.Tensor) else torch.Tensor(1)


def _loss(*a, **k):
    return torch.Tensor(1)


relu = gelu = leaky_relu = dropout = softmax = log_softmax = _like
cross_entropy = mse_loss = nll_loss = binary_cross_entropy_with_logits = _loss
