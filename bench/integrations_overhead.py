"""What each framework integration costs per step beyond trace_step.

    OMP_NUM_THREADS=1 .venv/bin/python bench/integrations_overhead.py [--repeats 9] [--steps 20000]

An integration's per-step work is its callbacks (opening and closing the
step, learning whether the optimizer stepped) and the timed calls it adds;
the framework's loop around them is the same with or without TraceML.
So each path is measured in one process, TraceML running (in-process
aggregator), as the framework itself calls the hooks, on an empty step:

  trace_step    `with traceml.trace_step(model): pass`      (the baseline)
  huggingface   CallbackHandler.on_step_begin / on_step_end with
                TraceMLCallback, minus the same calls on a handler without it
  lightning     on_train_batch_start, training_step, on_before_optimizer_step,
                on_train_batch_end of TraceMLCallback, minus those of a plain
                Callback (training_step unwrapped)
  accelerate    `with integrations.accelerate.trace_step(accelerator, model)`
  deepspeed     a traced DeepSpeedEngine's forward, backward and step (the
                engine's own work stubbed out), minus the untraced methods
  ignite        an ignite Engine's per-iteration events (GET_BATCH_STARTED,
                _COMPLETED, ITERATION_STARTED, _COMPLETED) around an
                optimizer step of no parameters, with TraceMLHandler
                attached, minus the same on an Engine without it
  monai         the same with MONAI's TraceMLHandler and MONAI's
                FORWARD_COMPLETED, LOSS_COMPLETED, BACKWARD_COMPLETED

Blocks of --steps steps of the path and of its reference alternate
(--repeats pairs); time is the thread's CPU time; reported per path: the
median of the paired differences (us/step), the 90th percentile, and the
integration's extra cost beyond trace_step's (target: <= +5 us/step,
issue "Framework integrations for real"). Ray Train adds no per-step
hook: its workers trace with zero-edit's automatic steps or trace_step,
whose costs are in docs/performance.md (bench/zero_edit_probe.py).
"""
import argparse
import os
import statistics
import sys
import tempfile
import time


def timed(fn, steps):
    t0 = time.thread_time_ns()
    fn(steps)
    return (time.thread_time_ns() - t0) / steps / 1000.0


def paired(on, off, steps, repeats):
    """Paired per-step differences on - off (us), alternating blocks."""
    on(steps // 10)
    off(steps // 10)                      # warm-up
    diffs = []
    for k in range(repeats):
        if k % 2:
            b = timed(off, steps)
            a = timed(on, steps)
        else:
            a = timed(on, steps)
            b = timed(off, steps)
        diffs.append(a - b)
    return diffs


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def baseline(model):
    import traceml_ai as traceml
    ts = traceml.trace_step

    def on(n):
        for _ in range(n):
            with ts(model):
                pass

    def off(n):
        for _ in range(n):
            pass
    return on, off


def huggingface(model):
    from transformers import TrainerControl, TrainerState, TrainingArguments
    from transformers.trainer_callback import CallbackHandler
    from traceml_ai.integrations.huggingface import TraceMLCallback

    args = TrainingArguments(output_dir=tempfile.mkdtemp(), report_to=[], use_cpu=True)
    state, control = TrainerState(), TrainerControl()
    with_cb = CallbackHandler([TraceMLCallback()], model, None, None, None)
    without = CallbackHandler([], model, None, None, None)

    def loop(h):
        def run(n):
            for _ in range(n):
                h.on_step_begin(args, state, control)
                h.on_step_end(args, state, control)
        return run
    return loop(with_cb), loop(without)


def lightning(model):
    import torch
    import lightning.pytorch as pl
    from traceml_ai.integrations.lightning import TraceMLCallback

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = model

        def training_step(self, batch, idx):
            return None

    module = Module()
    cb, plain = TraceMLCallback(), pl.Callback()
    cb.setup(None, module, "fit")
    cb._training = True
    plain_step = module.training_step
    cb.on_train_start(None, module)
    traced_step = module.training_step
    batch, opt = torch.zeros(1), None

    def loop(c, step):
        def run(n):
            for i in range(n):
                c.on_train_batch_start(None, module, batch, i)
                step(batch, i)
                c.on_before_optimizer_step(None, module, opt)
                c.on_train_batch_end(None, module, None, batch, i)
        return run
    return loop(cb, traced_step), loop(plain, plain_step)


def accelerate(model):
    import traceml_ai as traceml
    from accelerate import Accelerator
    from traceml_ai.integrations.accelerate import trace_step

    acc = Accelerator(cpu=True)
    m = acc.prepare(model)
    ts = traceml.trace_step

    def on(n):
        for _ in range(n):
            with trace_step(acc, m):
                pass

    def off(n):
        for _ in range(n):
            with ts(model):
                pass
    return on, off


def deepspeed(model):
    from traceml_ai.integrations.deepspeed import trace_engine

    class Engine(object):
        """What trace_engine wraps of a DeepSpeedEngine, doing nothing:
        the wrappers' cost alone."""

        def __init__(self):
            self.module = model
            self.global_steps = 0

        def forward(self, x):
            return x

        def backward(self, loss):
            return None

        def step(self):
            self.global_steps += 1

    traced, plain = trace_engine(Engine()), Engine()
    assert "step" in vars(traced), "trace_engine did not wrap the stand-in"

    def loop(e):
        def run(n):
            for _ in range(n):
                e.backward(e.forward(None))
                e.step()
        return run
    return loop(traced), loop(plain)


def _ignite_engines(handler, extra_events=()):
    """Two ignite Engines, one with `handler` attached, and a run(n) for
    each that fires an iteration's events as Engine._run_once_on_dataset
    does, with an optimizer step (of no parameters: torch's step hooks,
    TraceML's optimizer phase) inside the iteration."""
    import torch
    from ignite.engine import Engine, Events

    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    network = getattr(handler, "_bench_model", None)     # MONAI's handler reads it
    engines = []
    for attach in (True, False):
        e = Engine(lambda engine, batch: None)
        if extra_events:
            e.register_events(*extra_events)
        e.network = network
        if attach:
            handler.attach(e)
        e._fire_event(Events.STARTED)
        engines.append(e)
    middle = list(extra_events)

    def loop(e):
        fire = e._fire_event

        def run(n):
            for _ in range(n):
                fire(Events.GET_BATCH_STARTED)
                fire(Events.GET_BATCH_COMPLETED)
                fire(Events.ITERATION_STARTED)
                for ev in middle:
                    fire(ev)
                opt.step()
                fire(Events.ITERATION_COMPLETED)
        return run
    return loop(engines[0]), loop(engines[1])


def ignite(model):
    from traceml_ai.integrations.ignite import TraceMLHandler
    return _ignite_engines(TraceMLHandler(model))


def monai(model):
    from monai.engines.utils import IterationEvents
    from traceml_ai.integrations.monai import TraceMLHandler

    h = TraceMLHandler()
    h._bench_model = model
    return _ignite_engines(h, (IterationEvents.FORWARD_COMPLETED, IterationEvents.LOSS_COMPLETED,
                               IterationEvents.BACKWARD_COMPLETED))


PATHS = {"huggingface": huggingface, "lightning": lightning, "accelerate": accelerate,
         "deepspeed": deepspeed, "ignite": ignite, "monai": monai}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--only", default="", help="comma-separated paths")
    args = ap.parse_args()
    os.environ.setdefault("TRACEML_LOGS_DIR", tempfile.mkdtemp(prefix="tml-bench-"))
    import torch
    import traceml_ai as traceml
    torch.set_num_threads(1)
    traceml.init(mode="auto")
    model = torch.nn.Linear(4, 4)
    base = paired(*baseline(model), args.steps, args.repeats)
    b = statistics.median(base)
    rows = [("trace_step (baseline)", base, None)]
    only = [p for p in args.only.split(",") if p]
    for name, make in PATHS.items():
        if only and name not in only:
            continue
        try:
            on, off = make(model)
        except Exception as e:
            print("%s: skipped (%s)" % (name, e), file=sys.stderr)
            continue
        d = paired(on, off, args.steps, args.repeats)
        # accelerate's reference is trace_step itself: its difference is already the extra
        extra = statistics.median(d) - (0.0 if name == "accelerate" else b)
        rows.append((name, d, extra))
    print("\n%-24s %12s %10s %22s" % ("path", "median us", "p90 us", "beyond trace_step us"))
    for name, d, extra in rows:
        print("%-24s %12.2f %10.2f %22s" % (name, statistics.median(d), pct(d, 0.9),
                                           "-" if extra is None else "%+.2f" % extra))
    print("\n%d pairs of %d-step blocks; thread CPU time; torch %s" % (
        args.repeats, args.steps, torch.__version__))


if __name__ == "__main__":
    main()
