"""DDP's default comm hooks, by name: each returns what it stands for,
(its name, the process group, the bucket), communicating nothing
(tests/fakes/torch)."""


def allreduce_hook(process_group, bucket):
    return ("allreduce_hook", process_group, bucket)


def fp16_compress_hook(process_group, bucket):
    return ("fp16_compress_hook", process_group, bucket)


def bf16_compress_hook(process_group, bucket):
    return ("bf16_compress_hook", process_group, bucket)
