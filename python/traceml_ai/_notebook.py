"""Notebooks (docs/notebooks.md): `%load_ext traceml_ai`, then

    %%traceml [--run-name NAME] [--mode cli|summary|dashboard] [...]
    ...the training loop, unmodified...

traces the loop in the cell as `traceml run` traces a script (zero-edit
discovery: a step ends when optimizer.step() returns), shows a live card
in the cell's output while it runs, and displays the run's summary when
the cell ends: the card and the HTML report (the engine's HTML,
tml_summary_html), with the box as text/plain for text front ends. Each
cell is one run with its own run folder. `%traceml_compare A B` displays
`traceml compare` of two of them.

Glue only: the HTML is the engine's, the comparison the `traceml`
binary's. The live card is redrawn by a thread that asks the engine for
the summary so far (about 1 ms, once a second) and never touches the
training's objects.
"""
import argparse
import os
import shlex
import sys
import threading

_runs = {}              # run name -> run folder, this process's runs (compare's names)
_live = None            # the running cell's _Live


def in_kernel():
    """True inside a Jupyter kernel (Jupyter, VS Code, Colab, Kaggle)."""
    ip = _ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def _ipython():
    if "IPython" not in sys.modules:
        return None
    try:
        from IPython import get_ipython
        return get_ipython()
    except Exception:
        return None


def note_run(run_dir):
    if run_dir:
        _runs[os.path.basename(run_dir.rstrip("/"))] = run_dir


def _html(json_text, what):
    from . import _c
    try:
        return _c.summary_html(json_text, what)
    except Exception:
        return None


def _publish(bundle):
    """Shows a mime bundle in the cell: in place of the live card when the
    cell has one, else as a new output."""
    from IPython.display import display
    if _live is not None and _live.handle is not None:
        with _live.lock:        # the live card is drawn no more
            _live.done.set()
            _live.handle.update(bundle, raw=True)
    else:
        display(bundle, raw=True)


def show(json_text, box):
    """The final summary in the cell: the card and the report as HTML, the
    box as text."""
    from . import _c
    bundle = {"text/plain": box or "TraceML: the run's summary is in its run folder"}
    html = _html(json_text, _c.HTML_NOTEBOOK)
    if html:
        bundle["text/html"] = html
    _publish(bundle)


class _Live(object):
    """The cell's live card: a display updated in place every `interval`
    seconds from the summary so far (tml_summary_json). The thread runs
    in a copy of the cell's context, so its updates go to the cell's
    output (ipykernel keeps the parent message in a context variable)."""

    def __init__(self, interval):
        import contextvars
        from IPython.display import display
        self.interval = interval
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.handle = display({"text/plain": "TraceML: starting"}, raw=True, display_id=True)
        ctx = contextvars.copy_context()
        self.thread = threading.Thread(target=ctx.run, args=(self._loop,),
                                       name="traceml-notebook-live", daemon=True)
        self.thread.start()

    def _loop(self):
        import json
        import traceml_ai as t
        while not self.done.wait(self.interval):
            if not t._active:      # the cell ended the run itself (traceml.finish())
                return
            try:
                text = t._c.summary_json()
                if not text or self.done.is_set():
                    continue
                steps = json.loads(text).get("meta", {}).get("common_steps")
                html = _html(text, t._c.HTML_CARD)
                with self.lock:
                    if not html or self.done.is_set() or not t._active:
                        continue
                    self.handle.update({"text/plain": "TraceML: running, %s steps" % steps,
                                        "text/html": html}, raw=True)
            except Exception:
                pass    # the live card is a courtesy: it never breaks the cell

    def stop(self):
        self.done.set()
        self.thread.join()


def _show_dashboard(asked):
    """--mode dashboard: the engine serves the live dashboard (docs/live.md)
    on 127.0.0.1 while the run lasts; the cell links to it."""
    from IPython.display import display
    from . import _c
    port = _c.live_port()
    if port < 0:
        print("%%%%traceml: the dashboard's port %d is taken (--dashboard-port): the live "
              "card only" % asked, file=sys.stderr)
        return
    url = "http://127.0.0.1:%d/" % port
    display({"text/plain": "TraceML live dashboard: " + url,
             "text/html": "TraceML live dashboard: <a href=\"%s\" target=\"_blank\">%s</a>"
                          % (url, url)}, raw=True)


class _UsageError(ValueError):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _UsageError("%%traceml: " + message)


def _parser():
    p = _Parser(prog="%%traceml", add_help=False)
    p.add_argument("--run-name", "--name", "--session-id", dest="run_name")
    p.add_argument("--logs-dir")
    p.add_argument("--mode", choices=("cli", "summary", "dashboard"), default="cli")
    p.add_argument("--live-interval", type=float, default=1.0)
    p.add_argument("--dashboard-port", type=int, default=8765)
    p.add_argument("--window-steps", type=int)
    p.add_argument("--thresholds")
    p.add_argument("--interval", type=float)
    p.add_argument("--html-report", action="store_true")
    p.add_argument("--disable-traceml", action="store_true")
    return p


# option -> the engine's variable (src/base/env.c's table names them alike)
_ENV = (("window_steps", "TRACEML_WINDOW_STEPS"), ("thresholds", "TRACEML_THRESHOLDS"),
        ("interval", "TRACEML_INTERVAL"), ("html_report", "TRACEML_HTML_REPORT"),
        ("dashboard", "TRACEML_DASHBOARD_PORT"))


def _set_env(opts):
    """The run's settings as the engine reads them, for the cell's run
    only: the previous values, to put back."""
    saved = {}
    for attr, name in _ENV:
        v = getattr(opts, attr)
        if v is None or v is False:
            continue
        saved[name] = os.environ.get(name)
        os.environ[name] = "1" if v is True else str(v)
    return saved


def _restore_env(saved):
    for name, v in saved.items():
        if v is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = v


def _status(result):
    err = result.error_in_exec or result.error_before_exec
    if err is None:
        return "completed"
    return "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"


def _cell(ip, line, cell):
    """%%traceml: the cell as one run."""
    global _live
    import traceml_ai as t
    try:
        opts = _parser().parse_args(shlex.split(line))
    except (_UsageError, ValueError) as e:
        print(str(e), file=sys.stderr)
        return
    opts.dashboard = opts.dashboard_port if opts.mode == "dashboard" else None
    if t._active:
        print("%%traceml: a TraceML run is already going on in this kernel; "
              "traceml.finish() ends it", file=sys.stderr)
        return
    if opts.disable_traceml or t._env_disabled():
        ip.run_cell(cell, store_history=False)
        return
    saved = _set_env(opts)
    try:
        run_name = _free_name(opts, ip, t)
        try:
            import torch  # noqa: F401  (zero-edit tracing hooks into it)
        except ImportError:
            print("%%traceml: torch cannot be imported here; the cell runs without TraceML",
                  file=sys.stderr)
            ip.run_cell(cell, store_history=False)
            return
        t._start_detected(run_name, opts.logs_dir, source="notebook")
        if not t._active:
            ip.run_cell(cell, store_history=False)
            return
        if opts.run_name:   # %traceml_compare's name: the cell's latest run
            _runs[opts.run_name] = t._c.run_dir()
        if opts.dashboard is not None:
            _show_dashboard(opts.dashboard)
        _live = _Live(opts.live_interval) if opts.mode != "summary" else None
        status = "failed"
        try:
            status = _status(ip.run_cell(cell, store_history=False))
        finally:
            if _live is not None:
                _live.stop()
            try:
                t.finish(status, display=True)
            finally:
                _live = None
    finally:
        _restore_env(saved)


def _free_name(opts, ip, t):
    """The cell's run name: --run-name, else cell<N>_<time>. A cell run
    again keeps what the last run wrote: NAME_2, NAME_3, ... (the name
    then means the latest of them, for %traceml_compare)."""
    import time
    name = opts.run_name or "cell%s%s" % (getattr(ip, "execution_count", "") or "",
                                           time.strftime("_%Y%m%d_%H%M%S"))
    logs = opts.logs_dir or t._env("TRACEML_LOGS_DIR") or "logs"
    free, k = name, 2
    while os.path.exists(os.path.join(logs, free)) and k < 1000:
        free, k = "%s_%d" % (name, k), k + 1
    if free != name:
        print("TraceML: %s exists already: this run is %s" % (os.path.join(logs, name), free))
    return free


def _run_folder(name):
    if name in _runs:
        return _runs[name]
    if os.path.exists(name):
        return name
    raise _UsageError("%s is neither a run of this kernel (%s) nor a file or folder"
                      % (name, ", ".join(sorted(_runs)) or "none yet"))


def compare(a, b, options=(), display=None):
    """`traceml compare` of a and b (run names of this process, run
    folders or summaries); the comparison's dict, or None."""
    import json
    import subprocess
    if display is None:
        display = in_kernel()
    a, b = _run_folder(str(a)), _run_folder(str(b))
    options = list(options)
    out_base = None
    if "--output" not in options and not any(o.startswith("--output=") for o in options):
        out_base = os.path.join(os.path.dirname(os.path.abspath(b)), "compare_%s_vs_%s" % (
            os.path.basename(a.rstrip("/")), os.path.basename(b.rstrip("/"))))
        options += ["--output", out_base]
    from . import _glue
    p = subprocess.run([_glue.command, "compare", a, b] + options, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode == 2 or not p.stdout:
        raise _UsageError(p.stderr.strip() or "traceml compare failed (exit %d)" % p.returncode)
    if display:
        import html
        from IPython.display import display as show_it
        show_it({"text/plain": p.stdout,
                 "text/html": "<pre class=\"traceml-compare\">%s</pre>" % html.escape(p.stdout)},
                raw=True)
    else:
        sys.stdout.write(p.stdout)
    if p.stderr:
        sys.stderr.write(p.stderr)
    try:
        with open((out_base or _output_of(options)) + ".json", "r", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError, TypeError):
        return None


def _output_of(options):
    for i, o in enumerate(options):
        if o.startswith("--output="):
            return o.split("=", 1)[1]
        if o == "--output" and i + 1 < len(options):
            return options[i + 1]
    return None


def register(ip):
    """The magics of `%load_ext traceml_ai`."""

    def traceml(line, cell):
        _cell(ip, line, cell)

    def traceml_compare(line):
        args = shlex.split(line)
        if len(args) < 2:
            print("%traceml_compare: usage: %traceml_compare A B [traceml compare options]",
                  file=sys.stderr)
            return
        try:
            compare(args[0], args[1], args[2:])
        except _UsageError as e:
            print("%%traceml_compare: %s" % (e,), file=sys.stderr)

    traceml.__doc__ = __doc__
    traceml_compare.__doc__ = compare.__doc__
    ip.register_magic_function(traceml, "cell", "traceml")
    ip.register_magic_function(traceml_compare, "line", "traceml_compare")
