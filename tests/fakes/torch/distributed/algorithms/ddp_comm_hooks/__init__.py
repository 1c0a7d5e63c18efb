"""torch.distributed.algorithms.ddp_comm_hooks (tests/fakes/torch)."""
