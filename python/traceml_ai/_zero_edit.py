"""Zero-edit tracing: `traceml run train.py` on a script that never calls
traceml.init() (docs/zero-edit.md).

The launcher puts a sitecustomize on the training's PYTHONPATH that calls
start() in the script's own process (not in the launcher of the ranks, not
in workers), unless the script imports traceml_ai itself. Nothing happens until the script imports torch, so whatever it
sets up first (OMP_NUM_THREADS, CUDA_VISIBLE_DEVICES, its own
traceml.init()) still applies. Then TraceML starts as init(mode="auto")
would, with automatic step detection (python/_traceml.c): a step ends when
optimizer.step() returns. Until the first optimizer steps, the outermost
modules called are noted; those holding an optimizer's parameters get
their forward timed, and when several optimizers step in turn, the last of
each round ends the step.
"""
import sys

_LEARN_STEPS = 16      # optimizer steps watched before the hook goes away


class _AfterTorch(object):
    """A meta-path finder that lets torch import as usual and then starts
    TraceML; it removes itself at the first lookup of torch."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _start()

        spec.loader.exec_module = exec_module
        return spec


def start(script):
    """Called by the launcher's sitecustomize in the script's process. A
    script that imports traceml_ai instruments itself (its own mode and
    trace_step), so it is left alone."""
    try:
        with open(script, "rb") as f:
            if b"traceml_ai" in f.read():
                return
    except OSError:
        return
    if "torch" in sys.modules:
        _start()
    else:
        sys.meta_path.insert(0, _AfterTorch())


def _start():
    import traceml_ai as t
    try:
        t._start_detected()
    except Exception as e:         # TraceML never breaks training
        t._warn("automatic step detection could not start (%s)" % (e,))


def watch_optimizers(torch, install_forward, set_closer, have_optimizer, warn):
    """For the first optimizer steps: note the outermost modules called (a
    DDP wrapper rather than the model inside it), time the forward of those
    holding each optimizer's parameters, and learn which optimizer closes a
    round of several (a GAN's discriminator then generator: the generator's
    step ends the step). A loop without an optimizer (a hand-written
    update, no optimizer made): the module called a second time with
    gradients on is the model. Then every hook here goes away."""
    from torch.nn.modules import module as mod_mod
    from torch.optim import optimizer as opt_mod
    called, seen, order = {}, set(), []
    state = {"n": 0, "depth": 0, "calls": {}, "top": 0}

    make = opt_mod.Optimizer.__init__

    def made(self, *args, **kwargs):
        make(self, *args, **kwargs)
        if "have_opt" not in state:
            state["have_opt"] = True
            have_optimizer()

    def finish():
        for h in state.pop("hooks", ()):
            h.remove()
        if opt_mod.Optimizer.__init__ is made:
            opt_mod.Optimizer.__init__ = make
        called.clear()
        order[:] = []

    def pre(module, args):
        if state["depth"] == 0:
            called[id(module)] = module
            if "have_opt" not in state and torch.is_grad_enabled():
                state["top"] += 1
                k = state["calls"][id(module)] = state["calls"].get(id(module), 0) + 1
                if k == 2 and any(p.requires_grad for p in module.parameters()):
                    install_forward(module)
                if state["top"] >= 2 * _LEARN_STEPS:
                    finish()
        state["depth"] += 1

    def post(module, args, out):
        state["depth"] = max(0, state["depth"] - 1)

    def stepped(opt, args, kwargs):
        state["n"] += 1
        if id(opt) not in seen:
            seen.add(id(opt))
            try:
                params = {id(p) for g in opt.param_groups for p in g["params"]}
                for m in list(called.values()):
                    if any(id(p) in params for p in m.parameters()):
                        install_forward(m)
            except Exception as e:
                warn("cannot find the models of %s (%s); use traceml.trace_step(model)"
                     % (type(opt).__name__, e))
        if order and order[0] is opt and "closer" not in state:
            state["closer"] = order[-1]
            set_closer(order[-1])
        elif "closer" not in state:
            order.append(opt)
        if state["n"] >= _LEARN_STEPS:
            finish()

    made.__wrapped__ = make
    opt_mod.Optimizer.__init__ = made
    state["hooks"] = [mod_mod.register_module_forward_pre_hook(pre),
                      mod_mod.register_module_forward_hook(post, always_call=True),
                      opt_mod.register_optimizer_step_post_hook(stepped)]
