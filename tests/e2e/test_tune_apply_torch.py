"""TRACEML_TUNE_SETTINGS on the real torch (test_tune_apply.py has the rest,
on the fake one): an unmodified script through `traceml run`."""
import textwrap

import pytest

from test_tune_apply import TRAIN


@pytest.mark.parametrize("settings, want", [("num_workers=1,threads=1", "seen 1 1"),
                                            (None, "seen 0 2")])
def test_the_settings_reach_an_unmodified_script(traceml_run, tmp_path, settings, want):
    """The loader forks its one worker (which sets its own one thread), and
    the script's torch.set_num_threads(2) gives way to the tuned count;
    without the variable the script's own values stay."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(TRAIN))
    env = {"TRACEML_TUNE_SETTINGS": settings} if settings else {}
    r = traceml_run(str(script), env=env)
    assert r.rc == 0, r.explain()
    assert want in r.stdout, r.explain()
    assert "TRACEML_TUNE_SETTINGS" not in r.stderr, r.explain()
