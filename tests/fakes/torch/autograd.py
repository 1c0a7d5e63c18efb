"""torch.autograd: backward() computes nothing (tests/fakes/torch)."""


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None):
    return None
