"""Ray Train: every Ray worker reports as one rank of ONE TraceML run.

    from traceml_ai.integrations.ray import TraceMLTorchTrainer
    trainer = TraceMLTorchTrainer(train_loop_per_worker, scaling_config=...)
    trainer.fit()

TraceMLTorchTrainer is ray.train.torch.TorchTrainer with the same
constructor; only fit() differs:

- On the driver it finds an aggregator: the one of `traceml run` or of a
  `traceml serve` already exported (TRACEML_ADDR set), else it starts
  `traceml serve` itself for the length of fit() and stops it with SIGINT
  afterwards (also when fit() raises), so the aggregator finalizes, prints
  the summary box and writes logs/<run>/final_summary.json.
- The aggregator's address, run id and secret travel to the workers inside
  the wrapped training function, not through the environment: the raylet
  starts worker processes, which do not reliably inherit the driver's
  environment.
- In each worker, before the user's loop: the TraceML environment, RANK /
  WORLD_SIZE / LOCAL_RANK / NODE_RANK from ray.train.get_context(), then
  TraceML with automatic step detection (one step per optimizer.step(); a
  loop using traceml.trace_step(model) gets its own marked steps instead).
  After the loop, in a finally, the worker shuts TraceML down itself: Ray
  kills or reuses worker processes, so atexit handlers may never run, and
  a rank's shutdown is what sends its last records.

With ray missing or older than 2.7 (ray.train.get_context()), one warning
line and fit() is TorchTrainer's own. Failures of this glue are warnings;
the training always runs.
"""
import os
import signal
import subprocess
import sys
import threading
import time

import traceml_ai as _t

from .. import _glue
from ray.train.torch import TorchTrainer as _TorchTrainer

from . import _common

__all__ = ["TraceMLTorchTrainer", "TraceMLRayConfig"]

_MIN_RAY = "2.7"
# what a worker is given: the aggregator's coordinates and the settings the
# engine reads from the environment (the thresholds, the window, the interval)
_PASSED = ("TRACEML_ADDR", "TRACEML_RUN_ID", "TRACEML_SECRET", "TRACEML_RUN_NAME",
           "TRACEML_RUN_DIR", "TRACEML_LOGS_DIR", "TRACEML_DISABLED", "TRACEML_INTERVAL",
           "TRACEML_THRESHOLDS", "TRACEML_WINDOW_STEPS", "TRACEML_NNODES")
_SERVE_START_S = 60.0       # how long `traceml serve` may take to print its address
_SERVE_STOP_S = 120.0       # how long it may take to finalize after SIGINT


# --------------------------------------------------------------------------
# Worker side

def _worker_start(env):
    """Sets the worker's identity and the run's coordinates in this
    process's environment (the engine reads them at init) and starts
    TraceML with automatic step detection. False when it did not start."""
    import ray.train
    ctx = ray.train.get_context()
    ident = {"RANK": ctx.get_world_rank(), "WORLD_SIZE": ctx.get_world_size(),
             "LOCAL_RANK": ctx.get_local_rank()}
    try:
        ident["NODE_RANK"] = ctx.get_node_rank()
    except Exception:
        pass
    env = dict(env)
    init = env.pop("init", None)
    for k in _PASSED:       # stale values the raylet may have inherited go too
        os.environ.pop(k, None)
    os.environ.update({k: str(v) for k, v in env.items()})
    os.environ.update({k: str(v) for k, v in ident.items()})
    if _glue.config() is not None:
        # started in this process before (a reused worker, or the loop's
        # module called init() at import): its identity may be stale
        _glue.warn("TraceML was already started in this Ray worker; its rank may be wrong")
        return bool(_glue.active())
    import torch  # noqa: F401  (automatic step detection needs torch loaded)
    if init:            # TraceMLRayConfig(init_mode=...) other than "auto"
        _t.init(**init)
    else:
        _glue.start_detected()
    return bool(_glue.active())


def _worker_stop(failed):
    """What traceml_ai._at_exit does at interpreter exit, done now: the
    hooks are cut loose from the engine and the rank says goodbye with its
    last records."""
    if failed:
        _glue.stop("failed", 1)
    else:
        _glue.stop()


def _run_traced(fn, args, env):
    try:
        started = _worker_start(env)
    except Exception as e:          # never break training
        _glue.warn("could not start TraceML in the Ray worker (%s); it trains untraced" % (e,))
        started = False
    ok = False
    try:
        out = fn(*args)
        ok = True
        return out
    finally:
        if started:
            _worker_stop(not ok)


def _wrap(fn, env):
    """fn with TraceML around it in each worker, taking the same arguments
    (Ray passes train_loop_config only to a function with one required
    parameter, so the wrapper must keep fn's count)."""
    try:
        from ray.train._internal.utils import count_required_parameters
        takes_config = count_required_parameters(fn) == 1
    except Exception:
        import inspect
        params = inspect.signature(fn).parameters.values()
        takes_config = sum(1 for p in params if p.default is p.empty and p.kind not in (
            p.VAR_KEYWORD, p.KEYWORD_ONLY)) == 1

    if takes_config:
        def train_loop_per_worker(config):
            return _run_traced(fn, (config,), env)
    else:
        def train_loop_per_worker():
            return _run_traced(fn, (), env)
    train_loop_per_worker.__name__ = getattr(fn, "__name__", "train_loop_per_worker")
    train_loop_per_worker.__doc__ = getattr(fn, "__doc__", None)
    return train_loop_per_worker


# --------------------------------------------------------------------------
# Driver side: the aggregator

def _traceml_binary():
    return _glue.command


def _default_run_name():
    stem = os.path.splitext(os.path.basename(sys.argv[0] if sys.argv and sys.argv[0] else ""))[0]
    ok = "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in stem).strip(".")
    return "%s_%s" % (ok or "ray_train", time.strftime("%Y%m%d_%H%M%S"))


def _pdeathsig():
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl
    except Exception:
        return None


_prctl = _pdeathsig()


def _die_with_parent():
    """In the aggregator's child: SIGINT when the driver dies (even by
    SIGKILL), so it finalizes instead of lingering. Only a C call made
    ready before the fork: the driver has threads."""
    if _prctl is not None:
        _prctl(1, 2)        # PR_SET_PDEATHSIG, SIGINT


class _Server(object):
    """`traceml serve` for the length of one fit(): started, its export
    line parsed, its later output (the summary box) copied to stdout, then
    stopped with SIGINT and waited for. It runs in a session of its own, so
    a Ctrl-C in the terminal reaches the driver only: the aggregator is
    stopped after fit() has wound down and still sees the ranks' last
    records."""

    def __init__(self):
        self.proc = None
        self.env = None
        self.pump = None

    def start(self, cfg):
        logs = os.path.abspath(cfg.logs_dir or _glue.env("TRACEML_LOGS_DIR") or "logs")
        name = cfg.session_id or _glue.env("TRACEML_RUN_NAME") or _default_run_name()
        cmd = [_traceml_binary(), "serve", "--run-name", name, "--logs-dir", logs]
        if cfg.bind_host:
            cmd += ["--bind", cfg.bind_host]
        if cfg.port:
            cmd += ["--port", str(cfg.port)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     start_new_session=True, preexec_fn=_die_with_parent)
        found = []
        got = threading.Event()

        def pump():
            # the lines up to the export line tell a shell user what to do
            # (hidden); after it, the summary box at the end (copied)
            out = self.proc.stdout
            for line in iter(out.readline, b""):
                text = line.decode("utf-8", "replace")
                if not got.is_set():
                    if text.startswith("export "):
                        found.append(text.strip())
                        got.set()
                    continue
                if text.startswith("Stop with Ctrl-C"):
                    continue
                try:
                    sys.stdout.write(text)
                    sys.stdout.flush()
                except Exception:
                    pass
            got.set()

        self.pump = threading.Thread(target=pump, name="traceml-serve-output", daemon=True)
        self.pump.start()
        got.wait(_SERVE_START_S)
        line = found[0] if found else ""
        env = {}
        for word in line[len("export "):].split():
            k, sep, v = word.partition("=")
            if sep and k.startswith("TRACEML_"):
                env[k] = v
        if "TRACEML_ADDR" not in env:
            rc = self.proc.poll()
            self.stop(quiet=True)
            raise RuntimeError("`traceml serve` %s" % (
                "exited with status %s" % rc if rc is not None else
                "printed no address within %d s" % _SERVE_START_S))
        env["TRACEML_LOGS_DIR"] = logs
        self.env = env
        return env

    def stop(self, quiet=False):
        p, self.proc = self.proc, None
        if p is None:
            return
        try:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
            try:
                p.wait(_SERVE_STOP_S)
            except subprocess.TimeoutExpired:
                _glue.warn("`traceml serve` did not finish within %d s; killed" % _SERVE_STOP_S)
                p.kill()
                p.wait()
        finally:
            if self.pump is not None:
                self.pump.join(10.0)
            if p.returncode not in (0, None) and not quiet:
                _glue.warn("`traceml serve` exited with status %s" % p.returncode)


# --------------------------------------------------------------------------
# The trainer

class TraceMLRayConfig(object):
    """TraceML 0.5.0's settings of the Ray integration, given as
    TraceMLTorchTrainer(..., traceml_config=TraceMLRayConfig(...)).
    logs_dir and session_id: the run folder (logs_dir/session_id/) of the
    aggregator fit() starts; bind_host and port: where it listens
    (`traceml serve --bind/--port`); sampler_interval_sec: the workers'
    sampling interval; init_mode and patch_*: the workers' traceml.init()
    ("auto", the default: automatic step detection). mode other than
    "summary", profile, history_retention and stop_timeout_sec have no
    meaning here: a warning line each when set."""

    _IGNORED = {"mode": "summary", "profile": "run", "history_retention": "30m",
                "stop_timeout_sec": 5.0}

    def __init__(self, mode="summary", profile="run", init_mode="auto", patch_dataloader=None,
                 patch_forward=None, patch_backward=None, patch_h2d=None, logs_dir=None,
                 session_id="", sampler_interval_sec=None, history_retention="30m",
                 bind_host=None, port=0, stop_timeout_sec=5.0):
        self.mode, self.profile, self.init_mode = mode, profile, init_mode
        self.patch_dataloader, self.patch_forward = patch_dataloader, patch_forward
        self.patch_backward, self.patch_h2d = patch_backward, patch_h2d
        self.logs_dir, self.session_id = logs_dir, session_id
        self.sampler_interval_sec, self.history_retention = sampler_interval_sec, history_retention
        self.bind_host, self.port, self.stop_timeout_sec = bind_host, port, stop_timeout_sec

    def _worker_env(self, env):
        """The workers' part of it, added to what they are given."""
        for name, default in sorted(self._IGNORED.items()):
            if getattr(self, name) != default:
                _glue.warn("TraceMLRayConfig(%s=%r) has no meaning here; ignored"
                         % (name, getattr(self, name)))
        env = dict(env)
        if self.sampler_interval_sec is not None:
            env["TRACEML_INTERVAL"] = repr(float(self.sampler_interval_sec))
        if self.init_mode != "auto":
            env["init"] = {"mode": self.init_mode, "patch_dataloader": self.patch_dataloader,
                           "patch_forward": self.patch_forward,
                           "patch_backward": self.patch_backward, "patch_h2d": self.patch_h2d}
        return env


class TraceMLTorchTrainer(_TorchTrainer):
    """ray.train.torch.TorchTrainer whose workers report to one TraceML
    run (see the module's docstring). Same constructor arguments, and
    TraceML 0.5.0's traceml_config=TraceMLRayConfig(...)."""

    def __init__(self, *args, **kwargs):
        self._traceml_config = kwargs.pop("traceml_config", None) or TraceMLRayConfig()
        super(TraceMLTorchTrainer, self).__init__(*args, **kwargs)

    def fit(self):
        if not _common.supported("Ray Train", "ray", _MIN_RAY) or _glue.env_disabled():
            return super(TraceMLTorchTrainer, self).fit()
        server = None
        try:
            if _glue.env("TRACEML_ADDR"):
                env = {k: os.environ[k] for k in _PASSED if os.environ.get(k)}
            else:
                server = _Server()
                env = server.start(self._traceml_config)
            env = self._traceml_config._worker_env(env)
            # V2 trainers keep the loop in train_loop_per_worker, which
            # fit() serializes for the workers; V1 (Tune) rebuilds the
            # trainer in an actor from its constructor's arguments
            attr = next(a for a in ("train_loop_per_worker", "_train_loop_per_worker")
                        if callable(getattr(self, a, None)))
            orig = getattr(self, attr)
            wrapped = _wrap(orig, env)
            setattr(self, attr, wrapped)
            params = getattr(self, "_param_dict", None)
            if isinstance(params, dict) and params.get("train_loop_per_worker") is orig:
                params["train_loop_per_worker"] = wrapped
            else:
                params = None
        except Exception as e:          # never break training
            _glue.warn("could not set up TraceML for Ray Train (%s); training runs untraced"
                     % (e,))
            if server is not None:
                server.stop()
            return super(TraceMLTorchTrainer, self).fit()
        try:
            return super(TraceMLTorchTrainer, self).fit()
        finally:
            setattr(self, attr, orig)
            if params is not None:
                params["train_loop_per_worker"] = orig
            if server is not None:
                server.stop()
