"""torch.multiprocessing.spawn (tests/fakes/torch)."""


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    for i in range(nprocs):     # in this process, one after the other
        fn(i, *args)


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    return start_processes(fn, args, nprocs, join, daemon, start_method)
