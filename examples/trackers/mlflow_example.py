"""Log TraceML's diagnosis to MLflow.

    traceml run examples/trackers/mlflow_example.py    # or plain python3
    MLFLOW_TRACKING_URI=sqlite:///mlflow.db python3 examples/trackers/mlflow_example.py

traceml_ai.integrations.mlflow.log_summary() logs `traceml.summary()`:
numbers become metrics at the given step, strings (the verdict, severities)
become tags. Mid-run it is the diagnosis so far; at the end, every step is
in it, and the full summary is stored as an artifact with mlflow.log_dict.
"""
import mlflow

import traceml_ai as traceml
from traceml_ai.integrations.mlflow import log_summary
from _train import setup

LOG_EVERY = 50


def main():
    traceml.init(mode="auto")
    loader, model, opt, loss_fn = setup()
    with mlflow.start_run(run_name="traceml-demo"):
        step = 0
        for step, (x, y) in enumerate(loader):
            with traceml.trace_step(model):
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
            if step > 0 and step % LOG_EVERY == 0:
                mlflow.log_metric("loss", loss.item(), step=step)
                log_summary(step=step)                 # the diagnosis so far
        log_summary(step=step)                         # every step is in it
        full = traceml.final_summary()
        if full is not None:
            mlflow.log_dict(full, "traceml/final_summary.json")


if __name__ == "__main__":
    main()
