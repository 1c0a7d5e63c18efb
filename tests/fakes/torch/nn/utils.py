"""torch.nn.utils."""


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    return 0.0
