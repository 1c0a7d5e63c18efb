"""TraceML's diagnosis in MLflow: log_summary(step=None).

    import mlflow
    from traceml_ai.integrations.mlflow import log_summary

    with mlflow.start_run():
        for step, batch in enumerate(loader):
            ...train...
            if step % 500 == 0:
                log_summary(step=step)         # the diagnosis so far
        log_summary(step=step)                 # the final one

It logs `traceml.summary()` (the flat dict of `traceml/...` keys) to the
active run: numbers become metrics (mlflow.log_metrics) at `step`, strings
(the verdict, its severity, the clock) become tags (mlflow.set_tags), since
a tag may change from one call to the next and a param may not. MLflow's
"latest" value of a metric is the one at the highest step, so pass the
step; without one, the number of steps TraceML has counted is used, which
grows from call to call.

Metric and tag names keep MLflow's allowed characters (letters, digits,
`_ - . : /` and space; TraceML's keys already do); any other character
becomes `_`. Nothing here starts TraceML. When there is nothing to log it
returns None; when MLflow refuses the data, one warning line: a tracker
never breaks the training. Like mlflow.log_metrics itself, it starts a run
when none is active.

Mid-run the tag `traceml/status` is "running"; when TraceML stops in this
process (at exit), every run it was logged to that way gets the run's
final status, as the summary says it: "completed", "failed" (an uncaught
exception) or "interrupted" (Ctrl-C). Set with MlflowClient on the run's
id, so it works after `with mlflow.start_run()` ended the run.
"""
import re

import traceml_ai as _t

from .. import _glue

_BAD = re.compile(r"[^A-Za-z0-9_\-. :/]")
_MAX_TAG = 5000       # under every MLflow store's tag-value limit (8000 locally)
_STATUS = "traceml/status"
_running_in = {}      # (tracking URI, run id) whose traceml/status said "running"


def _split(data):
    metrics, tags = {}, {}
    for k, v in data.items():
        key = _BAD.sub("_", k)
        if isinstance(v, bool):
            tags[key] = "true" if v else "false"
        elif isinstance(v, (int, float)):
            metrics[key] = float(v)
        elif isinstance(v, str):
            tags[key] = v[:_MAX_TAG]
    return metrics, tags


def log_summary(step=None):
    """Logs traceml.summary() to the active MLflow run: numbers as metrics
    at `step` (default: the steps TraceML has counted so far), strings as
    tags. Returns the dict logged (TraceML's keys and values), or None when
    nothing was: no summary (TraceML not started, disabled, or on a rank
    other than 0) or an error (then one warning line)."""
    try:
        data = _t.summary()
        if not data:
            return None
        import mlflow
        metrics, tags = _split(data)
        if step is None:
            step = int(data.get("traceml/meta/common_steps") or 0)
        if metrics:
            mlflow.log_metrics(metrics, step=int(step))
        if tags:
            mlflow.set_tags(tags)
        _remember(mlflow, tags.get(_STATUS))
        return data
    except Exception as e:              # never break training
        _glue.warn("could not log TraceML's summary to MLflow (%s)" % _why(e))
        return None


def _why(e):
    return "%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0][:200])


def _remember(mlflow, status):
    """A run told "running" is told the final status at TraceML's stop."""
    run = mlflow.active_run()
    if status == "running" and run is not None:
        _running_in[(mlflow.get_tracking_uri(), run.info.run_id)] = True
        _glue.on_stop(_set_final_status)
    elif run is not None:               # logged after the end: already final
        _running_in.pop((mlflow.get_tracking_uri(), run.info.run_id), None)


def _set_final_status(status):
    from mlflow.tracking import MlflowClient
    for uri, run_id in list(_running_in):
        try:
            MlflowClient(tracking_uri=uri).set_tag(run_id, _STATUS, status)
        except Exception as e:          # never break the exit either
            _glue.warn("could not set %s=%s on MLflow run %s (%s)" % (_STATUS, status, run_id,
                                                                     _why(e)))
    _running_in.clear()
