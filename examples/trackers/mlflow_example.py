"""Log TraceML's diagnosis to MLflow.

    traceml run examples/trackers/mlflow_example.py    # or plain python3

Numbers from `traceml.summary()` become MLflow metrics, labels (verdict,
clock, severity) become params, and the full summary is stored as an
artifact with `mlflow.log_dict`. Mid-run calls log the summary so far.
"""
import mlflow

import traceml_ai as traceml
from _train import setup

LOG_EVERY = 50


def split(summary):
    metrics = {k: float(v) for k, v in summary.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    params = {k: v for k, v in summary.items() if isinstance(v, str)}
    return metrics, params


def main():
    traceml.init(mode="auto")
    loader, model, opt, loss_fn = setup()
    with mlflow.start_run(run_name="traceml-demo"):
        for step, (x, y) in enumerate(loader):
            with traceml.trace_step(model):
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
            if step > 0 and step % LOG_EVERY == 0:
                live = traceml.summary()
                if live is not None:
                    mlflow.log_metrics(split(live)[0], step=step)
        final = traceml.summary(print_text=True)
        if final is not None:
            metrics, params = split(final)
            mlflow.log_metrics(metrics)
            mlflow.log_params(params)
        full = traceml.final_summary()
        if full is not None:
            mlflow.log_dict(full, "traceml/final_summary.json")


if __name__ == "__main__":
    main()
