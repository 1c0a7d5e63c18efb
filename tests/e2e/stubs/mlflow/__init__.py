"""A stub of `mlflow` for the tracker example tests: records what is logged."""
import contextlib

from _record import record


@contextlib.contextmanager
def start_run(**kwargs):
    record("mlflow", "start_run", **kwargs)
    yield None
    record("mlflow", "end_run")


def log_metrics(metrics, step=None):
    for k, v in metrics.items():
        if not isinstance(v, float):
            raise TypeError("metric %s is not a float: %r" % (k, v))
    record("mlflow", "log_metrics", dict(metrics), step=step)


def log_params(params):
    record("mlflow", "log_params", dict(params))


def log_dict(d, artifact_file):
    record("mlflow", "log_dict", d, artifact_file)
