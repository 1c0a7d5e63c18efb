"""The deep dive (docs/deep-dive.md): where a step's compute goes.

After warm-up, a short window of steps runs under torch.profiler (CPU
activity, and CUDA's when CUDA is available) with a record_function scope
per module of the traced models, pushed by forward pre/post hooks that
exist only during the window. At the window's last step the profiler's
events are reduced to rows of (module, operator, self time, calls) and
handed to the engine (_c.deep_dive), which ships them to the aggregator;
ranking, percentages and printing are the report's (src/report/).

Which module an operator belongs to: a forward operator, the innermost
module scope around it; a backward operator (run by the autograd engine),
the module of the forward operator whose sequence number its autograd
node carries (same forward thread), so a module's time is its forward and
its backward. What runs outside any module (the loss, the optimizer,
gradient accumulation) is reported under the module "".

Everything the window does happens inside the steps it flags
(_c.mark_deep_dive): the step hook (python/_traceml.c) calls this module
before each step begins and before it ends, so the profiler starts in the
gap before the first window step (charged to that step) and stops, with
the reduction, before the last one ends. Those steps leave the step
figures (src/diag/window.c) and the summary labels them. With several
ranks the step after the window is flagged too: each rank reduces its
own window, and the faster ones wait for the slowest at that step's
all-reduce (a 2-rank CPU run: 700 ms, in a step that was not the
window's).

Zero harm: no hook stays after the window, nothing of the model changes,
and any failure ends the deep dive with a line in traceml.log (through
the engine: the skip reason) and a warning, never an exception into the
training. A compiled model (torch.compile) is skipped: module hooks added
to it would make Dynamo recompile.
"""
import contextlib
import os
import re
import sys
import tempfile
import time

PREFIX = "traceml.module::"
_BACKWARD = "autograd::engine::evaluate_function: "
# auto asks the aggregator for the summary so far on every rank at once:
# cheap for a few ranks, a queue of whole summaries for thousands, so past
# this many the window needs --deep-dive
AUTO_MAX_RANKS = 64
_ROWS_MAX = 64         # the heaviest (module, operator) pairs sent (model/deepdive.h)


class DeepDive:
    """One process's deep dive: waits for its step, profiles `steps` steps,
    reports, then removes its step hook. mode: "on" (--deep-dive) or "auto"
    (when the verdict so far is COMPUTE_BOUND)."""

    def __init__(self, c, mode, start, steps, models, compiled, warn):
        self.c = c
        self.mode = mode
        self.start = start
        self.steps = steps
        self.models = models          # () -> the traced models
        self.compiled = compiled      # () -> True once torch.compile compiled
        self.warn = warn
        self.step = -1                # the step under way, counted at begins
        self.prof = None
        self.hooks = []
        self.t0 = 0
        self.first = 0
        self.settle = False           # the step after the window: flagged too

    # -- the step hook ----------------------------------------------------

    def __call__(self, end):
        try:
            if end:
                self._end()
            else:
                self._begin()
        except Exception as e:      # never into the training
            self._give_up("failed (%s: %s)" % (type(e).__name__, e))

    def _begin(self):
        self.step += 1
        if self.settle:
            self.c.mark_deep_dive()
            return self.off()
        if self.prof is not None:
            self.c.mark_deep_dive()
            return
        if self.step < self.start:
            return
        if self.step > self.start:      # asked too late (never reached the start)
            return self.off()
        if self.mode == "auto" and (_world_size() > AUTO_MAX_RANKS or not self._compute_bound()):
            return self.off()       # not asked, not needed: nothing to say
        why = self._unsafe()
        if why:
            return self._skip(why)
        self._open()

    def _end(self):
        if self.prof is None:
            return
        if self.step >= self.first + self.steps - 1:
            self._close()

    # -- the window -------------------------------------------------------

    def _unsafe(self):
        """Why the profiler cannot run safely here, or None."""
        torch = sys.modules.get("torch")
        if torch is None or not hasattr(torch, "profiler"):
            return "torch.profiler is not available"
        if self.compiled():
            return "the model is compiled (torch.compile): module hooks would add recompiles"
        if not any(True for _ in self.models()):
            return "no model is timed (wrap the step in traceml.trace_step(model))"
        try:
            if torch.autograd.profiler._is_profiler_enabled:
                return "another profiler is running"
        except AttributeError:
            pass
        return None

    def _compute_bound(self):
        """The verdict so far is COMPUTE_BOUND or COMPUTE_STRAGGLER (the
        summary of the steps before this one; asked once, in the gap before
        the window, which that step's figures leave out with it)."""
        import json
        text = self.c.summary_json()
        if not text:
            return False
        kind = (json.loads(text).get("primary_diagnosis") or {}).get("kind")
        return kind in ("COMPUTE_BOUND", "COMPUTE_STRAGGLER")

    def _open(self):
        torch = sys.modules["torch"]
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU]
        self.cuda = bool(torch.cuda.is_available() and torch.cuda.is_initialized())
        if self.cuda:
            acts.append(ProfilerActivity.CUDA)
        self.first = self.step
        self.c.mark_deep_dive()
        self.t0 = time.perf_counter_ns()
        self._hook_modules(torch)
        self.prof = profile(activities=acts)
        with quiet_profiler():
            self.prof.__enter__()

    def _hook_modules(self, torch):
        rf = torch.autograd.profiler.record_function
        for model in list(self.models()):
            model = getattr(model, "module", model) if _is_wrapper(model) else model
            mods = dict(model.named_modules())
            for path, mod in mods.items():
                if not path:
                    continue        # the model itself: its own ops are ""
                name = display_name(path, mods)
                scope = {}

                def pre(m, args, _n=name, _s=scope):
                    r = rf(PREFIX + _n)
                    r.__enter__()
                    _s.setdefault(id(m), []).append(r)

                def post(m, args, out, _s=scope):
                    stack = _s.get(id(m))
                    if stack:
                        stack.pop().__exit__(None, None, None)
                self.hooks.append(mod.register_forward_pre_hook(pre))
                self.hooks.append(mod.register_forward_hook(post))

    def _unhook(self):
        for h in self.hooks:
            try:
                h.remove()
            except Exception:
                pass
        self.hooks = []

    def _close(self):
        prof, self.prof = self.prof, None
        self._unhook()
        with quiet_profiler():
            prof.__exit__(None, None, None)
        rows = reduce_events(prof.events(), self.cuda, self.step - self.first + 1)
        wall = time.perf_counter_ns() - self.t0
        if _world_size() > 1:
            self.settle = True
        else:
            self.off()
        rc = self.c.deep_dive(self.first, self.step, wall, self.cuda, None, rows)
        if rc < 0:
            self.warn("the deep dive's result was not taken (%s)" % (self.c.strerror(rc),))

    # -- endings ----------------------------------------------------------

    def off(self):
        """No more calls: the step hook goes (a step pays nothing after)."""
        self.c._set_step_hook(None)

    def _skip(self, why):
        self.off()
        self.c.deep_dive(self.step, self.step, 0, False, why, [])

    def _give_up(self, why):
        prof, self.prof = self.prof, None
        self._unhook()
        if prof is not None:
            try:
                with quiet_profiler():
                    prof.__exit__(None, None, None)
            except Exception:
                pass
        self.off()
        try:
            self.c.deep_dive(self.first, max(self.step, self.first), 0, False, why, [])
        except Exception:
            pass
        self.warn("the deep dive %s; the training goes on without it" % (why,))

    def stop(self):
        """The run ends inside the window: it is dropped, said why."""
        if self.prof is not None:
            self._give_up("did not finish: the run ended inside its window")
        else:
            self.off()


# what torch's profiler (Kineto) writes on the process's stderr when it
# starts and stops ("USDT:... profiler_start"): TraceML's doing, not the
# training's, so it is not the training's stderr either
_KINETO_LINE = re.compile(rb"^[A-Z]+:\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ \w+\.cpp:\d+\] .*\n?",
                          re.M)


@contextlib.contextmanager
def quiet_profiler():
    """The process's stderr (fd 2) into a file while the profiler starts or
    stops; then what anything else wrote meanwhile goes on to stderr, in
    order, and Kineto's own lines do not. Where fd 2 cannot be moved, as
    is."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    tmp = tempfile.TemporaryFile()
    try:
        os.dup2(tmp.fileno(), 2)
        yield
    finally:
        try:
            sys.stderr.flush()      # what Python buffered meanwhile, in its place
        except (OSError, ValueError, AttributeError):
            pass
        os.dup2(saved, 2)
        os.close(saved)
        tmp.seek(0)
        rest = _KINETO_LINE.sub(b"", tmp.read())
        tmp.close()
        if rest:
            os.write(2, rest)


def display_name(path, mods):
    """A module's path as the report shows it: an index of a container
    (nn.Sequential, nn.ModuleList) named with its class, "Linear[2]" for
    "2", "layers.Block[0].attn" for "layers.0.attn": "26% in 2" says
    nothing. The dots stay, so the report ranks the same levels."""
    parts = path.split(".")
    for i, p in enumerate(parts):
        if p.isdigit():
            m = mods.get(".".join(path.split(".")[:i + 1]))
            if m is not None:
                parts[i] = "%s[%s]" % (type(m).__name__, p)
    return ".".join(parts)


def _world_size():
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def _is_wrapper(model):
    """DDP and DataParallel: their model's names, not "module.<name>"."""
    return type(model).__name__ in ("DistributedDataParallel", "DataParallel")


def _module_of(e):
    """The innermost module scope around event e, or None."""
    p = e.cpu_parent
    while p is not None:
        if p.name.startswith(PREFIX):
            return p.name[len(PREFIX):]
        p = p.cpu_parent
    return None


def reduce_events(events, cuda, steps=1):
    """The profiler's events as [(module, op, self_ns, calls)], the
    module of a backward operator being its forward operator's (see the
    module's doc). Self time is CPU time, or the device's with CUDA."""
    fwd = {}            # (thread, sequence_nr) -> module of a forward op
    for e in events:
        if e.sequence_nr >= 0 and not e.name.startswith(_BACKWARD):
            m = _module_of(e)
            if m is not None:
                fwd[(e.thread, e.sequence_nr)] = m
    calls = {}          # (module, op) -> [(start, self ns)]
    for e in events:
        if e.name.startswith(PREFIX) or e.name.startswith(_BACKWARD):
            continue        # scopes: their children carry the time
        if "CPU" not in str(getattr(e, "device_type", "CPU")):
            continue        # a kernel's own event: its CPU op carries its device time
        t = e.self_device_time_total if cuda else e.self_cpu_time_total
        if t <= 0:
            continue
        m = _module_of(e)
        if m is None:
            m = _backward_module(e, fwd)
        calls.setdefault((m or "", e.name), []).append((e.time_range.start, int(t * 1000)))
    rows = [(m, op, window_ns(c, steps), len(c)) for (m, op), c in calls.items()]
    rows.sort(key=lambda r: -r[2])
    return fold(rows)


def window_ns(calls, steps):
    """An operator's self time over the window: with 3 or more steps, each
    running it equally often, the median step's times the steps, so that a
    step in which another process took the core mid-operator (a shared
    machine: one preemption is a timeslice, milliseconds) does not stand
    for the window; else the sum."""
    if steps < 3 or len(calls) % steps:
        return sum(ns for _, ns in calls)
    k = len(calls) // steps
    calls = sorted(calls)
    per = sorted(sum(ns for _, ns in calls[i:i + k]) for i in range(0, len(calls), k))
    mid = (per[(steps - 1) // 2] + per[steps // 2]) // 2
    return mid * steps


OTHER = "(other operators)"     # TML_DD_OTHER (src/model/deepdive.h)


def fold(rows):
    """At most _ROWS_MAX rows, heaviest first, and every nanosecond kept:
    past the heaviest half, each module's remaining operators become one
    OTHER row of it (the lightest modules' together, under ""), so the
    report's percentages stay shares of everything the profiler saw."""
    if len(rows) <= _ROWS_MAX:
        return rows
    keep = rows[:_ROWS_MAX // 2]
    rest = {}
    for m, _op, ns, n in rows[_ROWS_MAX // 2:]:
        a = rest.setdefault(m, [0, 0])
        a[0] += ns
        a[1] += n
    folded = sorted(rest.items(), key=lambda kv: -kv[1][0])
    room = _ROWS_MAX - len(keep) - 1
    out = keep + [(m, OTHER, ns, n) for m, (ns, n) in folded[:room]]
    tail = folded[room:]
    if tail:
        out.append(("", OTHER, sum(v[0] for _, v in tail), sum(v[1] for _, v in tail)))
    return out


def _backward_module(e, fwd):
    """The module of the forward op whose autograd node ran e, or None."""
    p = e
    while p is not None:
        if p.name.startswith(_BACKWARD):
            return fwd.get((p.fwd_thread, p.sequence_nr))
        p = p.cpu_parent
    return None
