"""NO DATA: TraceML is started but no step is ever traced. Expected:
NO DATA for step time and INSUFFICIENT STEP-TIME DATA as the verdict."""
import torch

import traceml_ai as traceml
import _common as c


def main():
    c.parse(steps=0, delay_ms=0, description=__doc__)
    traceml.init(mode="auto")
    model = c.mlp()
    with torch.no_grad():
        model(torch.randn(4, 64))           # work, but never inside trace_step


if __name__ == "__main__":
    main()
