"""The package's warnings are Python warnings: category
traceml_ai.TraceMLWarning (a UserWarning), so a user filters, captures or
logs them as any other (docs/python-api.md, "Warnings"). On the real torch:
a script that provokes three (two keywords of init() with no meaning here,
from one line; a loss wrap_backward() cannot wrap, three times) under the
default filter, under a filter that silences them, under pytest.warns and
logging.captureWarnings, and under a filter that makes warnings errors
(which must not break the training).
"""
import re

from conftest import traceml_warnings

SCRIPT = r'''
import logging, sys, warnings
import torch
import traceml_ai as traceml

how = sys.argv[1]
if how == "ignore":
    warnings.filterwarnings("ignore", category=traceml.TraceMLWarning)
elif how == "error":
    warnings.simplefilter("error")
elif how == "log":
    logging.basicConfig(format="LOGGED %(name)s %(message)s", stream=sys.stdout)
    logging.captureWarnings(True)
assert issubclass(traceml.TraceMLWarning, UserWarning)
assert "TraceMLWarning" in traceml.__all__


def start():
    # (backward left to wrap_backward: auto mode's own would make it an error)
    kw = dict(mode="selective", patch_backward=False)
    traceml.init(ui_mode="cli", connect_timeout_sec=5, **kw)   # INIT LINE


if how == "pytest":
    import pytest
    with pytest.warns(traceml.TraceMLWarning, match="ui_mode") as got:
        start()
    print("CAUGHT", sorted(str(w.message).split("=")[0] for w in got))
else:
    start()
class Frozen(object):      # a backward() that cannot be replaced
    __slots__ = ()

    def backward(self):
        pass


model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    with traceml.trace_step(model):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        if step < 3:
            traceml.wrap_backward(Frozen())     # WRAP LINE
        loss.backward()
        opt.step()
        opt.zero_grad()
print("trained", step + 1)
'''

MESSAGES = ["init(connect_timeout_sec=5) has no meaning here (the engine connects in the "
            "background and never makes the training wait); ignored",
            "init(ui_mode='cli') has no meaning here (the live view is chosen by `traceml run "
            "--mode cli|dashboard`); ignored",
            "wrap_backward: cannot wrap Frozen (", ]


def line_of(marker):
    return next(i + 1 for i, ln in enumerate(SCRIPT.splitlines()) if marker in ln)


def run(plain_python, how):
    r = plain_python("warn_" + how, how, code=SCRIPT)
    assert r.rc == 0 and "trained 6" in r.stdout, r.explain()
    return r


def test_default_filter_shows_each_once_at_the_users_line(plain_python):
    """Each warning once, in Python's format, naming the script's line
    that led to it (not TraceML's own code); the two distinct ones from
    one line both show; the message is the text TraceML printed before."""
    r = run(plain_python, "default")
    got = traceml_warnings(r.stderr)
    assert len(got) == 3, r.explain()
    assert sorted(got[:2]) == MESSAGES[:2], got
    assert got[2].startswith(MESSAGES[2]), got
    heads = [ln for ln in r.stderr.splitlines() if "TraceMLWarning" in ln]
    where = [re.match(r"(.*):(\d+): TraceMLWarning: ", ln).groups() for ln in heads]
    assert all(f.endswith("warn_default.py") for f, _ in where), heads
    assert [int(n) for _, n in where] == [line_of("INIT LINE")] * 2 + [line_of("WRAP LINE")]
    assert "traceml: warning" not in r.stderr, r.stderr


def test_a_filter_silences_them(plain_python):
    r = run(plain_python, "ignore")
    assert traceml_warnings(r.stderr) == [] and "TraceMLWarning" not in r.stderr, r.explain()
    assert "has no meaning" not in r.stderr and "wrap_backward" not in r.stderr, r.stderr


def test_pytest_warns_and_logging_capture_them(plain_python):
    r = run(plain_python, "pytest")
    assert "CAUGHT ['init(connect_timeout_sec', 'init(ui_mode']" in r.stdout, r.explain()
    r = run(plain_python, "log")
    logged = [ln for ln in r.stdout.splitlines() if ln.startswith("LOGGED py.warnings ")]
    assert len(logged) == 3 and all("TraceMLWarning: " in ln for ln in logged), r.explain()
    assert traceml_warnings(r.stderr) == [], r.stderr


def test_an_error_filter_does_not_break_the_training(plain_python):
    """warnings.simplefilter("error") would raise into the training loop:
    TraceML never does; the warning is its old stderr line instead."""
    r = run(plain_python, "error")
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("traceml: warning: ")]
    assert len(lines) == 3 and sorted(traceml_warnings(r.stderr)[:2]) == MESSAGES[:2], r.explain()
