"""TraceML's diagnosis in Weights & Biases: log_summary(run=None, step=None).

    import wandb
    from traceml_ai.integrations.wandb import log_summary

    run = wandb.init(project="my-project")
    for step, batch in enumerate(loader):
        ...train...
        if step % 500 == 0:
            log_summary(run, step=step)       # the diagnosis so far
    log_summary(run)                           # the final one, also in run.summary
    run.finish()

It logs `traceml.summary()`: the flat dict of `traceml/...` keys (verdict,
step-time split, memory, overhead; None values left out), which W&B takes
as is: numbers become charts, strings (the verdict, severities) land in the
run's history and summary. Every call also writes the dict into
run.summary, so the runs table shows the latest diagnosis: after the last
call, the final one.

Nothing here starts TraceML or W&B. When there is nothing to log (TraceML
not running, no W&B run) it returns None; when W&B refuses the data, one
warning line: a tracker never breaks the training.
"""
import traceml_ai as _t

from .. import _glue


def log_summary(run=None, step=None):
    """Logs traceml.summary() to `run` (default: wandb.run, the current
    run) at `step` (default: W&B's own step counter), and writes it into
    run.summary. Returns the dict logged, or None when nothing was: no
    summary (TraceML not started, disabled, or on a rank other than 0), no
    W&B run, or an error (then one warning line)."""
    try:
        if run is None:
            import wandb
            run = wandb.run
        if run is None:
            _glue.warn("wandb.log_summary: no W&B run (call wandb.init() first); "
                     "TraceML's summary was not logged")
            return None
        data = _t.summary()
        if not data:
            return None
        if step is None:
            run.log(data)
        else:
            run.log(data, step=step)
        run.summary.update(data)
        return data
    except Exception as e:              # never break training
        _glue.warn("could not log TraceML's summary to W&B (%s: %s)"
                 % (type(e).__name__, (str(e).strip().splitlines() or [""])[0][:200]))
        return None
