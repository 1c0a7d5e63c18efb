"""torch.backends.cudnn: the flags a script sets (tests/fakes/torch)."""
benchmark = False
deterministic = False
enabled = True
