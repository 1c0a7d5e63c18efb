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

from conftest import REPO, TRACEML, EXAMPLES, DIAG, BusyLoops, base_env

# its tests share one fixture's runs: all on one pytest worker (tests/run), and the
# fixture session-scoped there, so the worker's other tests in between do not
# make it again
pytestmark = pytest.mark.xdist_group("compare")

QUICKSTART = os.path.join(EXAMPLES, "quickstart.py")
STEPS = 40
DELAY_MS = "40"


RUNS_A_SIDE = 3
GUARD = """guard:
  schema_version: 1
  workload:
    name: quickstart
    parameters:
      batch: {batch}
  measurement:
    start_step: 5
    completed_steps: 20
"""


def one_run(logs, name, script, env, cwd=REPO):
    env = dict(env, QUICKSTART_STEPS=str(STEPS))
    p = subprocess.run([TRACEML, "run", "--logs-dir", str(logs), "--run-name", name, script],
                       cwd=str(cwd), env=base_env(**env), capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    path = str(logs / name / "final_summary.json")
    assert os.path.exists(path)
    return path


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    """name -> path of final_summary.json. "before0..2" and "again0..2" are
    the same script, "slower0..2" 60 ms more per batch, run interleaved
    (before, again, slower, before, ...) as a CI job would."""
    tmp = tmp_path_factory.mktemp("compare")
    logs = tmp / "logs"
    out = {}
    same = {"QUICKSTART_DELAY_MS": DELAY_MS}
    for i in range(RUNS_A_SIDE):
        out["before%d" % i] = one_run(logs, "before%d" % i, QUICKSTART, same)
        out["again%d" % i] = one_run(logs, "again%d" % i, QUICKSTART, same)
        out["slower%d" % i] = one_run(logs, "slower%d" % i, QUICKSTART,
                                      {"QUICKSTART_DELAY_MS": "100"})
    out["before"], out["again"], out["slower"] = out["before0"], out["again0"], out["slower0"]
    out["fixed"] = one_run(logs, "fixed", QUICKSTART,
                           {"QUICKSTART_FIXED": "1", "QUICKSTART_DELAY_MS": DELAY_MS})
    out["nodata"] = one_run(logs, "nodata", os.path.join(DIAG, "no_data.py"), {})
    # the same script under two traceml.yaml guard: declarations
    for batch in (32, 64):
        d = tmp / ("guard%d" % batch)
        d.mkdir()
        (d / "traceml.yaml").write_text(GUARD.format(batch=batch))
        out["guard%d" % batch] = one_run(logs, "guard%d" % batch, QUICKSTART, same, cwd=d)
    # beside two busy loops (bounded, killed whatever happens)
    with BusyLoops():
        out["busy"] = one_run(logs, "busy", QUICKSTART, same)
    return out


def side(runs, name):
    return [runs["%s%d" % (name, i)] for i in range(RUNS_A_SIDE)]


def compare_n(tmp_path, a, b, *extra):
    base = str(tmp_path / "cmpn")
    p = subprocess.run([TRACEML, "compare", "--baseline"] + a + ["--candidate"] + b +
                       ["--output", base] + list(extra),
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=60)
    return p, base


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
    # the 40 ms sleep a batch is gone (-41% on a host whose other processes
    # held 90% of the cores, -89% on a quiet one)
    assert js["step_time_change_percent"] < -20
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
    """One run a side: the block test, which knows only the steps' noise.
    Beside other load it must not call the machine's drift a change
    (issue 45: REGRESSION +24.9% 1 time in 3): INCONCLUSIVE then."""
    p, base = compare(tmp_path, runs["before"], runs["again"], "--fail-on-regression")
    js, txt = load(base)
    assert js["primary_diagnosis"]["changed"] is False
    assert js["noise_ms"] is not None and js["noise_ms"] >= 0
    assert "Step-to-step noise" in txt
    t = js["test"]
    assert t["method"] == "mann-whitney-u" and t["blocks_a"] >= 5 and t["blocks_b"] >= 5, t
    assert "gate" in js["why"]
    # the machine each run shared is in the box, side by side
    assert "Other processes CPU" in txt and "Run-queue wait" in txt
    assert "Script" in txt and "quickstart.py" in txt
    if js["verdict"] == "INCONCLUSIVE":
        assert js["contention_differs"] or js["loaded_single_run"] or \
            (t["past_gate"] and not t["significant"]), txt
        assert js["next"], txt
    elif js["verdict"] != "EQUIVALENT":
        # a quiet machine and a change both significant and past the gate:
        # rare, and then the runs really differed
        assert not js["loaded_single_run"] and t["significant"] and t["past_gate"], txt
    assert p.returncode == (1 if js["verdict"] == "REGRESSION" else 0), txt


def test_same_script_runs_a_side_are_equivalent(runs, tmp_path):
    """Several interleaved runs a side: the run is the unit of the test."""
    p, base = compare_n(tmp_path, side(runs, "before"), side(runs, "again"),
                        "--max-step-time-regression-pct", "3")
    js, txt = load(base)
    t = js["test"]
    assert t["method"] == "welch-t-log" and t["runs_a"] == t["runs_b"] == RUNS_A_SIDE, t
    assert t["mdc_percent"] is not None and t["mdc_percent"] >= 0
    assert len(js["runs"]["a"]) == RUNS_A_SIDE and len(js["runs"]["b"]) == RUNS_A_SIDE
    assert "A (3 runs): " in txt and "can detect a change of" in txt, txt
    assert js["verdict"] in ("EQUIVALENT", "INCONCLUSIVE"), txt
    if js["verdict"] == "INCONCLUSIVE":
        # what the runs measured says why: the sides' loads differed, or
        # these runs could not see 5 gates (the machine too noisy)
        assert js["contention_differs"] or t["mdc_percent"] > 15 or t["past_gate"], txt
        assert p.returncode == 3 and js["next"], txt
    else:
        assert p.returncode == 0, txt


def test_slowdown_runs_a_side_is_a_regression(runs, tmp_path):
    p, base = compare_n(tmp_path, side(runs, "before"), side(runs, "slower"),
                        "--max-step-time-regression-pct", "10")
    js, txt = load(base)
    t = js["test"]
    if t["mdc_percent"] > t["change_percent"] and not t["significant"]:
        # what the runs measured: their run-to-run noise hides even this
        # change (a host whose other processes held ~90% of the cores: MDC
        # 83% against +44%); the honest answer is undecided, with the way out
        assert js["verdict"] == "INCONCLUSIVE" and p.returncode == 3, txt
        assert "runs a side" in js["next"], txt
        return
    assert js["verdict"] == "REGRESSION", txt
    assert p.returncode == 4, txt                       # 0.5.0's exit status
    assert js["test"]["significant"] and js["test"]["past_gate"], js["test"]
    assert "Welch t on log run medians" in js["why"]
    p, _ = compare_n(tmp_path, side(runs, "before"), side(runs, "slower"),
                     "--fail-on-regression")
    assert p.returncode == 1, p.stdout
    p, base = compare_n(tmp_path, side(runs, "slower"), side(runs, "before"),
                        "--max-step-time-regression-pct", "10")
    assert p.returncode == 0 and load(base)[0]["verdict"] == "IMPROVEMENT"


def test_quiet_against_busy_is_inconclusive(runs, tmp_path):
    """One side beside two busy loops: the machine's load, not the code's
    change (issue 45: REGRESSION "+124.2%, significant")."""
    with open(runs["busy"], encoding="utf-8") as f:
        busy = json.load(f)["contention"]
    with open(runs["before"], encoding="utf-8") as f:
        quiet = json.load(f)["contention"]
    p, base = compare(tmp_path, runs["before"], runs["busy"],
                      "--max-step-time-regression-pct", "3")
    js, txt = load(base)
    machine = {r["metric"]: r for r in js["sections"]["machine"]}
    assert machine["other_cpu_percent"]["b"] == pytest.approx(busy["other_cpu_percent"], abs=0.01)
    differs = abs(busy["other_cpu_percent"] - quiet["other_cpu_percent"]) >= 25 or \
        abs(busy["runq_wait_percent"] - quiet["runq_wait_percent"]) >= 10
    # what the runs measured decides the expectation: the busy loops took
    # the cores on this machine (else it was already as loaded)
    if not differs:
        pytest.skip("the machine was as loaded without the busy loops: %s vs %s"
                    % (quiet, busy))
    if js["verdict"] == "IMPROVEMENT":
        # the run beside the busy loops came out the faster (the "quiet"
        # one ran beside a parallel suite): a step time that moved against
        # the load is decisive (docs/compare.md), and the Why says so
        assert "B ran on the more loaded machine and was still faster." in js["why"], txt
        assert p.returncode == 0 and js["contention_differs"] is False, txt
        return
    assert js["verdict"] == "INCONCLUSIVE", txt
    assert p.returncode == 3, txt
    assert js["contention_differs"] is True
    assert "differently loaded machines" in js["why"] and "other processes used" in js["why"]
    assert "interleaved runs a side" in js["next"], js["next"]


def test_differing_guard_is_inconclusive(runs, tmp_path):
    with open(runs["guard32"], encoding="utf-8") as f:
        wl = json.load(f)["meta"]["workload"]
    assert wl["guard"]["workload"]["parameters"]["batch"] == 32, wl
    assert wl["script"].endswith("quickstart.py") and wl["world_size"] == 1, wl
    p, base = compare(tmp_path, runs["guard32"], runs["guard64"],
                      "--max-step-time-regression-pct", "3")
    js, txt = load(base)
    assert js["verdict"] == "INCONCLUSIVE" and p.returncode == 3, txt
    assert js["guard_differs"] is True
    assert "declared workloads (traceml.yaml guard:) differ" in js["why"]
    assert "Guard A: " in txt and "Guard B: " in txt


def most_alike(runs, a, b):
    """The pair of runs (one of side a, one of side b) whose machines were
    loaded most alike, as a user picks two runs to compare one to one."""
    def load_of(path):
        with open(path, encoding="utf-8") as f:
            c = json.load(f).get("contention") or {}
        return c.get("other_cpu_percent") or 0, c.get("runq_wait_percent") or 0

    pairs = [(x, y) for x in side(runs, a) for y in side(runs, b)]
    return min(pairs, key=lambda xy: sum(abs(u - v) for u, v in
                                         zip(load_of(xy[0]), load_of(xy[1]))))


def test_slower_variant_is_a_regression_and_fails_the_gate(runs, tmp_path):
    before, slower = most_alike(runs, "before", "slower")
    p, base = compare(tmp_path, before, slower)
    assert p.returncode == 0                   # no gate asked for
    js, txt = load(base)
    if js["contention_differs"]:
        # even the most alike pair ran on differently loaded machines (the
        # suite's other worker beside one of them): the honest answer is
        # undecided (test_quiet_against_busy_is_inconclusive checks its wording)
        assert js["verdict"] == "INCONCLUSIVE", txt
        return
    assert js["verdict"] == "REGRESSION", txt
    assert js["step_time_change_percent"] > 30
    assert js["test"]["significant"] and js["test"]["past_gate"], js["test"]
    assert "significant (Mann-Whitney p = " in js["why"], js["why"]
    p, _ = compare(tmp_path, before, slower, "--fail-on-regression")
    assert p.returncode == 1
    p, _ = compare(tmp_path, before, slower, "--max-step-time-regression-pct", "10")
    assert p.returncode == 4
    assert "Verdict: REGRESSION" in p.stdout
    # the other way round it is an improvement
    p, base = compare(tmp_path, slower, before, "--fail-on-regression")
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
