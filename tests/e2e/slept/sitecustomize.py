"""What the training really slept (tests/README.md, "References that cannot
move"): put this folder on a script's PYTHONPATH and set TRACEML_TEST_SLEPT
to a folder; every time.sleep() of every Python process of the training
is then timed, and appended as "<asked ms> <slept ms>" to <folder>/<pid>
(<folder>/<RANK>.<pid> in a distributed rank).
An accuracy test compares TraceML's figure with these durations -- what
the scheduler really gave the script on this machine, now -- instead of
the delay the script asked for (a loaded machine overshoots it).

Hands over to any sitecustomize this one hides, as zero-edit tracing's own
does."""


def _install():
    import os
    import sys
    import time

    me = sys.modules.get("sitecustomize")
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401  (the one this file hides, if any)
    except ImportError:
        pass
    finally:
        sys.modules.setdefault("sitecustomize", me)
    folder = os.environ.get("TRACEML_TEST_SLEPT")
    if not folder:
        return
    sleep, clock = time.sleep, time.perf_counter
    rank = os.environ.get("RANK")
    name = "%s.%d" % (rank, os.getpid()) if rank else str(os.getpid())

    def timed_sleep(seconds):
        t0 = clock()
        sleep(seconds)
        t1 = clock()
        try:
            with open(os.path.join(folder, name), "a") as f:
                f.write("%.6f %.6f\n" % (1000.0 * seconds, 1000.0 * (t1 - t0)))
        except (OSError, TypeError):
            pass

    time.sleep = timed_sleep


_install()
del _install
