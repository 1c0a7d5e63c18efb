# The zero-edit sitecustomize (docs/zero-edit.md): `traceml run` writes
# this file, embedded in the binary at build time, as
# logs/<run>/zero-edit/sitecustomize.py, first on the training's
# PYTHONPATH; it starts TraceML in the training script's process when the
# script does not, and there applies traceml tune's settings
# (TRACEML_TUNE_SETTINGS, _tune_apply.py). Imported under any other name
# (traceml_ai._sitecustomize) it does nothing.
def _traceml_zero_edit():
    import os, sys
    me = sys.modules.get('sitecustomize')
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    sys.modules.pop('sitecustomize', None)
    try:  # the one this file hides, if any, reported as Python's site.py does
        try:
            import sitecustomize
        except ImportError as e:
            if e.name != 'sitecustomize':
                raise
    except Exception as e:
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write('Error in sitecustomize; set PYTHONVERBOSE for traceback:\n'
                             '%s: %s\n' % (e.__class__.__name__, e))
    finally:
        sys.modules.setdefault('sitecustomize', me)
    def warn(msg):  # a TraceMLWarning when the package imports, else the line
        try:
            from traceml_ai import _warn
        except Exception:
            sys.stderr.write('traceml: warning: %s\n' % (msg,))
        else:
            _warn(msg)
    script = os.environ.get('TRACEML_SCRIPT')
    argv = getattr(sys, 'argv', None) or ['']
    spawned = '--multiprocessing-fork' in argv[1:]   # a multiprocessing spawn child
    if not script or not (spawned or (argv[0] and
            os.path.realpath(argv[0]) == os.path.realpath(script))):
        return
    if os.environ.get('TRACEML_TUNE_SETTINGS') is not None:
        # before zero-edit's start: torch's import runs their hooks in this
        # order, so TraceML's own patches (DDP's constructor) wrap the tuned ones
        try:
            from traceml_ai import _tune_apply
            _tune_apply.start()
        except Exception as e:
            warn('TRACEML_TUNE_SETTINGS: not applied (%s)' % (e,))
    try:
        from traceml_ai import _zero_edit
        _zero_edit.start(script, spawned)
    except Exception as e:
        warn('zero-edit tracing could not start (%s)' % (e,))


if __name__ == 'sitecustomize':
    _traceml_zero_edit()
del _traceml_zero_edit
