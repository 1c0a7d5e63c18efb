"""torch.distributed.algorithms (tests/fakes/torch)."""
