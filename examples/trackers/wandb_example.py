"""Log TraceML's diagnosis to Weights & Biases.

    traceml run examples/trackers/wandb_example.py     # or plain python3

`traceml.summary()` returns a flat dict of `traceml/...` scalars (the
verdict, step-time split, memory, overhead; None values left out) that
`wandb.log` takes as is. It works mid-run (the summary so far; nothing is
written and the final artifacts are untouched) and at the end.
"""
import wandb

import traceml_ai as traceml
from _train import setup

LOG_EVERY = 50


def main():
    run = wandb.init(project="traceml-demo", config={"batch_size": 16})
    traceml.init(mode="auto")
    loader, model, opt, loss_fn = setup()
    for step, (x, y) in enumerate(loader):
        with traceml.trace_step(model):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        if step > 0 and step % LOG_EVERY == 0:
            live = traceml.summary()                  # the diagnosis so far
            if live is not None:
                wandb.log(live, step=step)
    final = traceml.summary(print_text=True)          # every step is in it
    if final is not None:
        wandb.log(final)
        run.summary.update(final)                     # shows in the runs table
    run.finish()


if __name__ == "__main__":
    main()
