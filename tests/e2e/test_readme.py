"""README.md's example box is what today's TraceML prints for a real run.

The box comes from a real run of examples/quickstart.py, kept as
docs/readme/quickstart.json (scripts/readme-box makes both). Here the
kept summary is re-rendered with the installed `traceml`, as the README's
box was: when the box's layout changes, this test fails until
`scripts/readme-box` (a new run) or `scripts/readme-box --render` (the
same run in today's layout) is run.
"""
import json
import os
import re
import subprocess

from conftest import REPO, TRACEML, base_env

QUICK = True      # no torch: the quick tier (conftest.py)

KEPT = os.path.join(REPO, "docs", "readme", "quickstart.json")


def readme_box():
    text = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    m = re.search(r"re-renders it\) -->\n```\n(.*?)```\n", text, re.S)
    assert m, "README.md has no box after its scripts/readme-box comment"
    return m.group(1)


def test_readme_box_is_todays_rendering_of_a_real_run(tmp_path):
    run_dir = tmp_path / "logs" / "quickstart"
    run_dir.mkdir(parents=True)
    with open(KEPT, encoding="utf-8") as f:
        summary = json.load(f)
    (run_dir / "final_summary.json").write_text(json.dumps(summary), encoding="utf-8")
    p = subprocess.run([TRACEML, "view", "--re-render", "logs/quickstart/final_summary.json"],
                       cwd=str(tmp_path), env=base_env(COLUMNS=120), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    box = readme_box()
    assert box == p.stdout, ("README.md's box is not what this TraceML prints for "
                             "docs/readme/quickstart.json: run scripts/readme-box --render")


def test_readme_box_is_whole_and_from_the_quickstart():
    lines = readme_box().splitlines()
    assert lines[0].startswith("+---") and lines[-1].startswith("+---"), lines[-1]
    assert {len(l) for l in lines} == {120}, "not the piped run's 120 columns"
    assert any(l.startswith("| Full evidence: ") for l in lines)   # not cut short
    with open(KEPT, encoding="utf-8") as f:
        meta = json.load(f)["meta"]
    # a whole run of the quick start's script, not a made-up summary
    assert meta["run_name"] == "quickstart" and meta["partial"] is None, meta
    assert meta["workload"]["script"].endswith("examples/quickstart.py"), meta["workload"]
    assert meta["common_steps"] == 300 and meta["ranks_reported"] == 1, meta
