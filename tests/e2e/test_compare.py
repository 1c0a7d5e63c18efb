"""`traceml compare` on real pairs of runs (SPEC 6, docs/compare.md).

The quickstart (examples/quickstart.py, a DataLoader that sleeps per batch,
40 ms here) is run under `traceml run`: as is (twice), fixed
(QUICKSTART_FIXED=1: batches cached up front) and deliberately slower
(QUICKSTART_DELAY_MS=100). The sleep dominates the step on purpose: on this
2-core machine separate processes of the same ~11 ms quickstart step differ
by up to 9% (bench/compare_stats.py, docs/performance.md), which no
two-run comparison can tell from a change; at ~41 ms that is ~2%, inside the
3% gate, so "the same script twice" is EQUIVALENT — unless the machine's
load changed between the two runs (a CI run: 43.9 -> 47.0 ms with the
second run on a saturated host), which the compare's host rows must then
show (HIGH CPU on the slower run's side).
The verdicts must be IMPROVEMENT with INPUT-BOUND -> another verdict,
EQUIVALENT, and REGRESSION (exit 1 under --fail-on-regression). Bad files
give one line and exit 2; a valid run without steps gives INCONCLUSIVE.
"""
import json
import os
import subprocess

import pytest

from conftest import REPO, TRACEML, EXAMPLES, DIAG, base_env

# its tests share one fixture's runs: all on one pytest worker (tests/run), and the
# fixture session-scoped there, so the worker's other tests in between do not
# make it again
pytestmark = pytest.mark.xdist_group("compare")

QUICKSTART = os.path.join(EXAMPLES, "quickstart.py")
STEPS = 80
DELAY_MS = "40"


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    """name -> path of final_summary.json."""
    logs = tmp_path_factory.mktemp("compare") / "logs"
    out = {}
    variants = [
        ("before", QUICKSTART, {"QUICKSTART_DELAY_MS": DELAY_MS}),
        ("again", QUICKSTART, {"QUICKSTART_DELAY_MS": DELAY_MS}),
        ("fixed", QUICKSTART, {"QUICKSTART_FIXED": "1", "QUICKSTART_DELAY_MS": DELAY_MS}),
        ("slower", QUICKSTART, {"QUICKSTART_DELAY_MS": "100"}),
        ("nodata", os.path.join(DIAG, "no_data.py"), {}),
    ]
    for name, script, env in variants:
        env = dict(env, QUICKSTART_STEPS=str(STEPS))
        p = subprocess.run([TRACEML, "run", "--logs-dir", str(logs), "--run-name", name, script],
                           cwd=REPO, env=base_env(**env), capture_output=True, text=True,
                           timeout=240)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        out[name] = str(logs / name / "final_summary.json")
        assert os.path.exists(out[name])
    return out


def compare(tmp_path, a, b, *extra):
    base = str(tmp_path / "cmp")
    p = subprocess.run([TRACEML, "compare", a, b, "--output", base] + list(extra),
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=60)
    return p, base


def load(base):
    with open(base + ".json", encoding="utf-8") as f:
        js = json.load(f)
    with open(base + ".txt", encoding="utf-8") as f:
        txt = f.read()
    return js, txt


def test_fixing_the_loader_is_an_improvement(runs, tmp_path):
    p, base = compare(tmp_path, runs["before"], runs["fixed"], "--fail-on-regression")
    assert p.returncode == 0, p.stderr
    js, txt = load(base)
    assert js["verdict"] == "IMPROVEMENT", txt
    assert js["primary_diagnosis"]["a"] == "INPUT-BOUND"
    assert js["primary_diagnosis"]["b"] != "INPUT-BOUND"
    assert js["primary_diagnosis"]["changed"] is True
    assert js["clock"] == "cpu"
    assert js["step_time_change_percent"] < -50
    # the printed box is the .txt and the JSON's text
    assert p.stdout == txt == js["text"]
    for line in ("| TraceML Compare", "| A: before", "| B: fixed", "| Delta: B - A",
                 "| Primary diagnosis: INPUT-BOUND -> ", "| Verdict: IMPROVEMENT",
                 "| Why: CPU Step Time decreased by", "Step Time (CPU comparison clock)",
                 "Step Memory", "Process", "System"):
        assert line in txt, line
    rows = {r["metric"]: r for r in js["sections"]["step_time"]}
    assert rows["input_wait_ms"]["delta"] < -5          # the 10 ms sleep is gone
    assert rows["step_time_ms"]["a"] == pytest.approx(js["step_time_a_ms"], abs=1e-3)


def test_same_script_twice_is_equivalent(runs, tmp_path):
    p, base = compare(tmp_path, runs["before"], runs["again"], "--fail-on-regression")
    js, txt = load(base)
    assert js["primary_diagnosis"]["changed"] is False
    assert js["noise_ms"] is not None and js["noise_ms"] >= 0
    assert "Step-to-step noise" in txt
    # the statistical test ran on the runs' block medians and says what held
    t = js["test"]
    assert t["method"] == "mann-whitney-u" and t["blocks_a"] >= 5 and t["blocks_b"] >= 5, t
    assert "gate" in js["why"]
    if js["verdict"] != "EQUIVALENT":
        # the machine's load changed between the runs (other jobs; the
        # suite's own tests beside them): a real difference in step time,
        # the machine's and not the script's, which the host rows show. The
        # slower run was the one on a saturated host (HIGH CPU), and the
        # change held both the rank test and the gate.
        host = {r["metric"]: r for r in js["sections"]["system"]}["system_diagnosis"]
        slower = {"REGRESSION": "b", "IMPROVEMENT": "a"}[js["verdict"]]
        assert host["changed"] and host[slower] == "HIGH CPU", txt
        assert t["significant"] and t["past_gate"], t
        assert p.returncode == (1 if js["verdict"] == "REGRESSION" else 0), txt
        return
    assert p.returncode == 0, txt
    assert not (t["significant"] and t["past_gate"]), t


def test_slower_variant_is_a_regression_and_fails_the_gate(runs, tmp_path):
    p, base = compare(tmp_path, runs["before"], runs["slower"])
    assert p.returncode == 0                   # no gate asked for
    js, txt = load(base)
    assert js["verdict"] == "REGRESSION", txt
    assert js["step_time_change_percent"] > 30
    assert js["test"]["significant"] and js["test"]["past_gate"], js["test"]
    assert "significant (Mann-Whitney p = " in js["why"], js["why"]
    p, _ = compare(tmp_path, runs["before"], runs["slower"], "--fail-on-regression")
    assert p.returncode == 1
    assert "Verdict: REGRESSION" in p.stdout
    # the other way round it is an improvement
    p, base = compare(tmp_path, runs["slower"], runs["before"], "--fail-on-regression")
    assert p.returncode == 0 and load(base)[0]["verdict"] == "IMPROVEMENT"


def test_run_folders_are_accepted(runs, tmp_path):
    p, base = compare(tmp_path, os.path.dirname(runs["before"]), os.path.dirname(runs["fixed"]))
    assert p.returncode == 0, p.stderr
    assert load(base)[0]["verdict"] == "IMPROVEMENT"


def test_no_steps_is_inconclusive(runs, tmp_path):
    p, base = compare(tmp_path, runs["before"], runs["nodata"], "--fail-on-regression")
    assert p.returncode == 0, p.stderr
    js, txt = load(base)
    assert js["verdict"] == "INCONCLUSIVE", txt
    assert "no step-time window" in js["why"]
    assert js["clock"] is None or js["step_time_change_percent"] is None


def one_error_line(p):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("traceml: error: ")
    return lines[0]


def test_bad_files_one_line_exit_2(runs, tmp_path):
    good = runs["before"]
    with open(good, encoding="utf-8") as f:
        text = f.read()
    doc = json.loads(text)
    cases = {
        "notjson.json": ("this is not json\n", "not valid JSON"),
        "truncated.json": (text[: len(text) // 2], "truncated"),
        "empty.json": ("", "empty"),
        "future.json": (json.dumps(dict(doc, schema_version=2)), "schema_version"),
        "noschema.json": (json.dumps({"text": "x"}), "schema_version"),
        "array.json": ("[1, 2]", "not a JSON object"),
        "nosteps.json": (json.dumps({"schema_version": 1}), "step_time"),
    }
    for name, (content, needle) in cases.items():
        (tmp_path / name).write_text(content)
        for args in ([name, good], [good, name]):
            p = subprocess.run([TRACEML, "compare"] + args + ["-o", "out"], cwd=str(tmp_path),
                               capture_output=True, text=True)
            line = one_error_line(p)
            assert name in line and needle in line, line
            assert p.stdout == ""
    assert not (tmp_path / "out.json").exists()
    for args in ([], [good], [good, good, good], [good, good, "--bogus"], [good, good, "--output"]):
        one_error_line(subprocess.run([TRACEML, "compare"] + args, cwd=str(tmp_path),
                                      capture_output=True, text=True))
    p = subprocess.run([TRACEML, "compare", "missing.json", good], cwd=str(tmp_path),
                       capture_output=True, text=True)
    assert "No such file" in one_error_line(p)


def test_help_lists_compare(tmp_path):
    p = subprocess.run([TRACEML, "help"], capture_output=True, text=True)
    assert "compare" in p.stdout and "export" in p.stdout
    p = subprocess.run([TRACEML, "help", "compare"], capture_output=True, text=True)
    assert p.returncode == 0 and "--fail-on-regression" in p.stdout
