"""Log TraceML's diagnosis to Weights & Biases.

    traceml run examples/trackers/wandb_example.py     # or plain python3
    WANDB_MODE=offline python3 examples/trackers/wandb_example.py

traceml_ai.integrations.wandb.log_summary() logs `traceml.summary()`, a
flat dict of `traceml/...` values (the verdict, step-time split, memory,
overhead), to the run, and writes it into run.summary for the runs table.
Mid-run it is the diagnosis so far (nothing is written on TraceML's side,
the final artifacts are untouched); at the end, every step is in it.
"""
import wandb

import traceml_ai as traceml
from traceml_ai.integrations.wandb import log_summary
from _train import setup

LOG_EVERY = 50


def main():
    run = wandb.init(project="traceml-demo", config={"batch_size": 16})
    traceml.init(mode="auto")
    loader, model, opt, loss_fn = setup()
    step = 0
    for step, (x, y) in enumerate(loader):
        with traceml.trace_step(model):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        run.log({"loss": loss.item()}, step=step)
        if step > 0 and step % LOG_EVERY == 0:
            log_summary(run, step=step)               # the diagnosis so far
    log_summary(run, step=step)                       # every step is in it
    run.finish()


if __name__ == "__main__":
    main()
