"""A stub of `wandb` for the tracker example tests: records what is logged."""
from _record import record


class _Summary(dict):
    def update(self, d=None, **kw):
        record("wandb", "summary.update", dict(d or {}, **kw))
        super().update(d or {}, **kw)


class _Run(object):
    def __init__(self):
        self.summary = _Summary()

    def log(self, data, step=None):
        log(data, step=step)

    def finish(self):
        record("wandb", "finish")


def init(**kwargs):
    record("wandb", "init", **kwargs)
    return _Run()


def log(data, step=None, commit=None):
    record("wandb", "log", dict(data), step=step)
