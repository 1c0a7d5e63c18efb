"""The HTML report (final_summary.html) in headless Chromium.

`traceml run --html-report` on the quickstart and `traceml view X.json
--html` must write one self-contained page (no network: every script and
style inline, dygraphs included) that renders without a console error,
draws its charts and shows the key numbers; screenshots go to
build/test-artifacts/. "Draws its charts" is read back from the canvases
(tests/e2e/live/cdp.py, CHART_PROBE): each chart has rows, canvases of
its size and pixels in its series' colours; the per-step chart is stacked
from 0 with the dominant phase as the largest band; the legend shows the
values under the mouse and the rank picker redraws. A 10,000-step x
8-rank report (bench/html_report) must render too and stay small.
Chromium comes from Debian (scripts/deps); without it these tests fail
rather than skip.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
from decimal import ROUND_HALF_UP, Decimal

import pytest

from conftest import REPO, BUILD, TRACEML, EXAMPLES, base_env

# its tests share one fixture's runs: all on one pytest worker (tests/run), and the
# fixture session-scoped there, so the worker's other tests in between do not
# make it again
pytestmark = pytest.mark.xdist_group("html")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "live"))
import cdp  # noqa: E402

ARTIFACTS = os.path.join(BUILD, "test-artifacts")
QUICKSTART = os.path.join(EXAMPLES, "quickstart.py")


def chromium():
    p = cdp.chromium_path()
    if not p:
        pytest.fail("chromium is not installed (scripts/deps installs Debian's chromium)")
    return p


class Page(object):
    """The page loaded offline (file://) in headless Chromium: dom (the
    rendered HTML), errors (console errors, exceptions, failed loads),
    charts (cdp.CHART_PROBE) and the browser, still open, for more."""

    def __init__(self, path, screenshot=None, width=1280):
        chromium()
        self.browser = cdp.Browser(width=width, height=2600)
        self.browser.navigate("file://" + os.path.abspath(str(path)))
        deadline = time.time() + 60
        while time.time() < deadline and self.browser.evaluate(
                "document.body ? document.body.getAttribute('data-rendered') : null") != "1":
            time.sleep(0.1)
        self.dom = self.browser.evaluate("document.documentElement.outerHTML")
        self.charts = self.browser.charts()
        if screenshot:
            os.makedirs(os.path.dirname(screenshot), exist_ok=True)
            self.browser.screenshot(screenshot)
        self.errors = self.browser.errors()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.browser.close()


def body(dom):
    """The attributes the page's script sets on <body> when done."""
    m = re.search(r"<body([^>]*)>", dom)
    return m.group(1) if m else ""


def check_self_contained(html):
    assert "<script src" not in html and "<link" not in html
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', html)
    assert html.count("<script") == 3          # data, dygraphs, report
    # "</script" only where those three close (dygraphs' own code has
    # "</div>" and "</span>" in strings: harmless inside a script element)
    assert len(re.findall(r"(?i)</script", html)) == 3
    assert 'content="TraceML ' in html and ", dygraphs 2." in html


def check_drawn(chart, min_rows=2):
    """A chart dygraphs really drew: rows, canvases of its size, series pixels."""
    assert chart is not None
    assert chart["rows"] >= min_rows, chart
    assert any(w >= 300 and h >= 150 for w, h in chart["canvases"]), chart
    assert sum(chart["pixels"].values()) >= 300, chart    # series lines or fills, not just the grid


def check_stacked(chart, dominant):
    """The per-step chart: stacked phases from 0, the dominant phase the
    largest band (not a sliver at the bottom of a zoomed-in y axis)."""
    check_drawn(chart)
    assert chart["id"] == "chart-steps" and chart["stacked"], chart
    assert chart["labels"] == ["Residual", "Optimizer", "Backward", "Forward", "H2D", "Input Wait"]
    assert chart["yrange"][0] == 0 and chart["yrange"][1] > 0, chart
    px = chart["pixels"]
    assert px[dominant] == max(px.values()) and px[dominant] > 0.4 * sum(px.values()), px


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory):
    logs = tmp_path_factory.mktemp("html") / "logs"
    p = subprocess.run([TRACEML, "run", "--html-report", "--interval", "0.5", "--logs-dir",
                        str(logs), "--run-name", "html", QUICKSTART], cwd=REPO,
                       env=base_env(QUICKSTART_STEPS="200"), capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return logs / "html"


def test_run_html_report_renders(run_dir):
    page = run_dir / "final_summary.html"
    assert page.exists()
    html = page.read_text(encoding="utf-8")
    check_self_contained(html)
    summary = json.loads((run_dir / "final_summary.json").read_text(encoding="utf-8"))
    # the page embeds exactly the summary
    m = re.search(r'<script type="application/json" id="traceml-summary">\n(.*?)</script>', html, re.S)
    assert json.loads(m.group(1)) == summary
    with Page(page, os.path.join(ARTIFACTS, "html_report_quickstart.png")) as pg:
        dom = pg.dom
        assert pg.errors == [], pg.errors
        assert 'data-rendered="1"' in body(dom), dom[-2000:]
        assert "data-errors" not in body(dom)
        # four charts drawn: steps (stacked from 0, Input Wait the largest
        # band on this input-bound run), input wait, memory, system
        assert re.search(r'data-charts="(\d+)"', body(dom)).group(1) == "4"
        ch = pg.charts
        assert sorted(c["id"] for c in ch.values()) == [
            "chart-input", "chart-memory", "chart-steps", "chart-system"]
        check_stacked(ch["steps"], "Input Wait")
        for name in ("input", "memory", "system"):
            check_drawn(ch[name])
        assert ch["memory"]["labels"][0] == "RSS" and ch["memory"]["pixels"]["RSS"] > 0
        assert ch["input"]["yrange"][0] == 0
        # the legend: every series by name; under the mouse, the step and values
        b = pg.browser
        leg = b.evaluate("document.querySelector('#chart-steps .chart-legend').textContent")
        assert all(l in leg for l in ch["steps"]["labels"]) and "step " not in leg, leg
        b.evaluate("document.getElementById('chart-steps').scrollIntoView()")
        r = b.evaluate("(function () { var r = document.querySelector('#chart-steps canvas')"
                       ".getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()")
        b.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": r[0] + r[2] * 0.5,
                                            "y": r[1] + r[3] * 0.5}, session=True)
        leg = wait_for_legend(b, "#chart-steps")
        assert re.search(r"^step \d+", leg) and re.search(r"Input Wait \d+\.\d\d ms", leg), leg
        assert b.errors() == [], b.errors()
    # key numbers, as the summary says them, in what the page drew (not in
    # its scripts or the embedded box text)
    shown = re.sub(r"<script.*?</script>", "", dom, flags=re.S)
    shown = re.sub(r'<pre class="box">.*?</pre>', "", shown, flags=re.S)
    med = summary["step_time"]["median"]
    banner = re.search(r'id="verdict"[^>]*>(.*?)</div>', shown, re.S).group(1)
    assert "Verdict: INPUT-BOUND" in banner and "CRITICAL" in banner
    assert summary["primary_diagnosis"]["why"] in banner
    # what the box names under the verdict, the banner too (HIGH CPU on a
    # busy host; nothing on a quiet one)
    for i, a in enumerate(summary["also"]):
        assert 'id="also-%d"' % i in banner and a["why"] in banner, (a, banner)
    phases = re.search(r'<table class="phases">(.*?)</table>', shown, re.S).group(1)
    assert js_ms(med["step_time_ms"]) in phases
    assert js_ms(med["input_wait_ms"]) in phases and "cause" in phases
    assert "200 common steps" in shown
    assert 'id="system-none"' not in shown        # samples were drawn over time
    assert os.path.getsize(os.path.join(ARTIFACTS, "html_report_quickstart.png")) > 20000


def js_ms(v):
    """v as the page writes it, v.toFixed(1) + " ms": JavaScript rounds
    the float's exact value half up (12.25 is "12.3"), Python's %.1f half
    to even ("12.2")."""
    return "%s ms" % Decimal(v).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)


def wait_for_legend(b, box, timeout=5):
    """The legend's text once it shows the values under the mouse."""
    deadline = time.time() + timeout
    while True:
        leg = b.evaluate("document.querySelector('%s .chart-legend').textContent" % box)
        if leg.startswith("step ") or time.time() > deadline:
            return leg
        time.sleep(0.1)


def test_view_html_from_the_summary_alone(run_dir, tmp_path):
    src = tmp_path / "copied.json"
    shutil.copy(run_dir / "final_summary.json", src)      # no run folder around it
    p = subprocess.run([TRACEML, "view", str(src), "--html"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    out = tmp_path / "copied.html"
    assert out.exists() and str(out) in p.stdout
    # the same page as --html-report wrote
    assert out.read_text() == (run_dir / "final_summary.html").read_text()
    p = subprocess.run([TRACEML, "view", str(src), "--html", str(tmp_path / "x.html")],
                       capture_output=True, text=True)
    assert p.returncode == 0 and (tmp_path / "x.html").exists()
    p = subprocess.run([TRACEML, "view", "--html=" + str(tmp_path / "y.html"), str(src)],
                       capture_output=True, text=True)
    assert p.returncode == 0 and (tmp_path / "y.html").exists()


def test_view_html_without_series(tmp_path):
    """An older summary (no "series"): the page still renders and says so."""
    doc = {"schema_version": 1, "status": "completed", "meta": {"run_name": "old"},
           "primary_diagnosis": {"label": "BALANCED", "severity": "INFO", "why": "fine"},
           "step_time": {"median": {"step_time_ms": 10.0}}, "text": "BOX </script><b>x</b>"}
    (tmp_path / "old.json").write_text(json.dumps(doc))
    p = subprocess.run([TRACEML, "view", "old.json", "--html"], cwd=str(tmp_path),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "old.html").read_text()
    assert "</script><b>" not in html                  # escaped inside the data block
    with Page(tmp_path / "old.html") as pg:
        dom = pg.dom
        assert pg.errors == [] and 'data-rendered="1"' in body(dom) and "data-errors" not in body(dom)
        assert 'data-charts="0"' in body(dom) and pg.charts == {}
    assert "no per-step series" in dom
    assert "BOX &lt;/script&gt;&lt;b&gt;x&lt;/b&gt;" in dom   # shown as text, not markup


# what `traceml tune` writes into tune.html's data block beside the
# baseline trial's summary (tune.json, docs/tune.md)
TUNE = {
    "schema_version": 1, "command": "train.py --epochs 1",
    "baseline": {"verdict": "INPUT_BOUND", "label": "INPUT-BOUND", "step_time_ms": 42.1,
                 "steps_per_s": 23.75, "runs": 3, "step_time_ms_per_run": [42.0, 42.2, 42.1]},
    "trials_run": 9, "repeats": 3, "warmup_steps": 10, "measured_steps": 50,
    "elapsed_s": 96.0, "budget_s": 300.0,
    "trials": [
        {"settings": "num_workers=1", "direction": "DataLoader workers", "runs": 3,
         "failures": 0, "step_time_ms": 20.5, "steps_per_s": 48.8, "change_percent": -51.3,
         "ci_percent": [-52.0, -50.6], "step_time_ms_per_run": [20.4, 20.5, 20.6],
         "result": "gain", "why": None, "over": None},
        {"settings": "num_workers=2", "direction": "DataLoader workers", "runs": 2,
         "failures": 0, "step_time_ms": 38.0, "steps_per_s": 26.3, "change_percent": -9.7,
         "ci_percent": [-61.2, 110.4], "step_time_ms_per_run": [30.1, 45.9],
         "result": "inconclusive", "why": None, "over": None, "more_rounds": 3},
        {"settings": "threads=1", "direction": "intra-op threads", "runs": 3,
         "failures": 0, "step_time_ms": 50.5, "steps_per_s": 19.8, "change_percent": 20.0,
         "ci_percent": [12.5, 28.0], "step_time_ms_per_run": [50.1, 50.5, 50.9],
         "result": "loss", "why": None, "over": None},
        {"settings": "prefetch_factor=4", "direction": "DataLoader settings", "runs": 0,
         "failures": 0, "step_time_ms": None, "steps_per_s": None, "change_percent": None,
         "ci_percent": [None, None], "step_time_ms_per_run": [], "result": "not tried",
         "why": "the budget", "over": None}],
    "combination": None, "apply": "num_workers=1",
    "code": ["DataLoader(..., num_workers=1)"], "note": None}


# each row of tune.html's interval chart: what it says and where it draws it
CHART_ROWS = """Array.from(document.querySelectorAll('#tune-chart g.tune-ci')).map(function (g) {
  var w = g.querySelector('line.whisker'), d = g.querySelector('circle.change');
  return {settings: g.getAttribute('data-settings'), cls: g.getAttribute('class'),
          change: +g.getAttribute('data-change'), lo: +g.getAttribute('data-lo'),
          hi: +g.getAttribute('data-hi'), x1: +w.getAttribute('x1'), x2: +w.getAttribute('x2'),
          dot: +d.getAttribute('cx')};
})"""


def test_tune_section_renders(run_dir, tmp_path):
    """tune.html is the baseline trial's report with "tune" in its data
    block: the page shows the tune first (each setting, its change and
    interval, a chart of the intervals, the recommendation and its line of
    code), then the run, whose "interrupted" is said as tune's stop."""
    doc = json.loads((run_dir / "final_summary.json").read_text())
    doc["tune"] = TUNE
    doc["status"] = "interrupted"       # tune stops its trials with a SIGINT,
    doc["meta"]["stopped_by"] = "tune"  # and its trials know it (TRACEML_TUNE_TRIAL)
    (tmp_path / "tuned.json").write_text(json.dumps(doc))
    p = subprocess.run([TRACEML, "view", "tuned.json", "--html"], cwd=str(tmp_path),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    with Page(tmp_path / "tuned.html", os.path.join(ARTIFACTS, "html_report_tune.png")) as pg:
        assert pg.errors == [] and 'data-rendered="1"' in body(pg.dom), pg.errors
        tune = pg.browser.evaluate("document.getElementById('tune').innerText")
        rows = pg.browser.evaluate("Array.from(document.querySelectorAll('table.tune tr'))"
                                   ".map(function (r) { return r.className + '|' + r.innerText; })")
        first = pg.browser.evaluate("document.querySelector('h1').innerText")
        header = pg.browser.evaluate("document.getElementById('run-header').innerText")
        chart = pg.browser.evaluate(CHART_ROWS)
        zero = pg.browser.evaluate("+document.getElementById('tune-chart-zero')"
                                   ".getAttribute('x1')")
    # the baseline trial's status says what it is: tune stopped it
    steps = doc["meta"]["common_steps"]
    assert "stopped by tune after %d steps (a trial)" % steps in header, header
    assert "interrupted" not in header, header
    # the interval chart: one row a measured setting, tune.json's figures,
    # drawn where they belong against the baseline's 0
    measured = [t for t in TUNE["trials"] if t["runs"]]
    assert [c["settings"] for c in chart] == [t["settings"] for t in measured], chart
    for c, t in zip(chart, measured):
        assert [c["change"], c["lo"], c["hi"]] == [t["change_percent"]] + t["ci_percent"], c
        assert c["x1"] < c["dot"] < c["x2"], c
        assert t["result"] in c["cls"], c
        side = {"gain": c["x2"] < zero, "loss": zero < c["x1"],
                "inconclusive": c["x1"] < zero < c["x2"]}
        assert side[t["result"]], (c, zero)
    widths = {c["settings"]: c["x2"] - c["x1"] for c in chart}
    assert widths["num_workers=2"] > 10 * widths["num_workers=1"], widths   # one axis for all
    assert first == "TraceML Tune"
    assert "train.py --epochs 1" in tune and "9 trials" in tune, tune
    assert "Recommended: num_workers=1" in tune and "DataLoader(..., num_workers=1)" in tune, tune
    gain = [r for r in rows if r.startswith("gain|")]
    assert len(gain) == 1 and "num_workers=1" in gain[0] and "-51.3%" in gain[0], rows
    assert "-52.0% .. -50.6%" in gain[0], rows
    assert any("not tried (the budget)" in r for r in rows), rows
    assert "TraceML Run Summary" in pg.dom      # the baseline's run below


def test_view_html_bad_input(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    p = subprocess.run([TRACEML, "view", "bad.json", "--html"], cwd=str(tmp_path),
                       capture_output=True, text=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "bad.html").exists()


def test_large_report_is_small_and_renders(tmp_path):
    bench = os.path.join(BUILD, "bench", "html_report")
    p = subprocess.run([bench, str(tmp_path), "1"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    page = tmp_path / "report_10000x8.html"
    size = os.path.getsize(page)
    assert size < 1_000_000, size                    # bounded by the series' decimation
    doc = json.loads((tmp_path / "report_10000x8.json").read_text())
    ser = doc["series"]
    assert len(ser["ranks"]) == 8 and len(ser["step"]) <= 600
    assert all(len(r["step_time_ms"]) == len(ser["step"]) for r in ser["ranks"])
    with Page(page, os.path.join(ARTIFACTS, "html_report_10000x8.png")) as pg:
        dom = pg.dom
        assert pg.errors == [] and 'data-rendered="1"' in body(dom) and "data-errors" not in body(dom)
        assert dom.count("R7/N0") >= 2                    # per-rank bars and tables
        # steps, input wait (all 8 ranks), memory; the bench samples no system
        assert 'data-charts="3"' in body(dom) and 'id="system-none"' in dom
        ch = pg.charts
        check_stacked(ch["steps"], "Backward")             # the bench's largest phase
        check_drawn(ch["input"])
        assert len(ch["input"]["labels"]) == 8 and ch["input"]["rows"] == len(ser["step"])
        check_drawn(ch["memory"])
        # the rank picker redraws the per-step charts for the chosen rank
        b = pg.browser
        assert b.evaluate("document.getElementById('rank-select').options.length") == 8
        first_input = "window.__traceml.charts.steps.getValue(0, 6)"   # Input Wait, first row
        picked = int(b.evaluate("document.getElementById('rank-select').value"))
        assert picked != 0 and b.evaluate(first_input) == ser["ranks"][picked]["input_wait_ms"][0]
        b.evaluate("(function () { var s = document.getElementById('rank-select'); s.value = '0';"
                   " s.dispatchEvent(new Event('change')); })()")
        assert b.evaluate(first_input) == ser["ranks"][0]["input_wait_ms"][0]
        after = b.charts()
        check_stacked(after["steps"], "Backward")
        check_drawn(after["memory"])
        assert b.evaluate("document.body.getAttribute('data-charts')") == "3"
        assert b.errors() == [], b.errors()
    # one truth: the phase table shows the median rank's times beside that
    # rank's own shares, as the box does (not the median-over-ranks shares)
    shown = re.sub(r"<script.*?</script>", "", dom, flags=re.S)
    shown = re.sub(r'<pre class="box">.*?</pre>', "", shown, flags=re.S)
    phases = re.search(r'<table class="phases">(.*?)</table>', shown, re.S).group(1)
    med = doc["step_time"]["median"]
    box = {l.split("─ ")[1].split()[0]: l for l in doc["text"].splitlines() if "─ " in l}
    for key, label in (("input_wait", "Input"), ("forward", "Forward"),
                       ("backward", "Backward"), ("optimizer", "Optimizer")):
        share = med["shares_percent"][key]
        assert abs(share - 100.0 * med[key + "_ms"] / med["step_time_ms"]) < 0.01
        cell = "%.0f%%" % share
        assert ">%s<" % cell in phases, (key, cell, phases[:2000])
        assert cell in box[label].split("||")[0], (key, cell, box[label])


def test_real_summary_with_series_matches_schema(run_dir):
    """The schema covers "series" (and by_clock, noise) of a real run."""
    import jsonschema
    schema = json.loads(open(os.path.join(REPO, "docs", "summary.schema.json")).read())
    doc = json.loads((run_dir / "final_summary.json").read_text())
    assert doc["series"] is not None and doc["series"]["system"] is not None
    assert doc["step_time"]["noise_ms"] is not None
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    assert not errors, [e.message for e in errors[:5]]


def view_html(tmp_path, doc, name):
    """`traceml view NAME.json --html` of doc: the page's path."""
    (tmp_path / (name + ".json")).write_text(json.dumps(doc))
    p = subprocess.run([TRACEML, "view", name + ".json", "--html"], cwd=str(tmp_path),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return tmp_path / (name + ".html")


def test_memory_axis_from_zero_in_its_unit(run_dir, tmp_path):
    """A flat RSS of 335 MB that drifts by 4 MB must look flat: the memory
    chart's y axis starts at 0 (web/report.js, memUnit), so the drift is a
    sliver of the chart's height, not all of it; the axis is labelled
    with the unit its ticks are in (MB), not "bytes"."""
    doc = json.loads((run_dir / "final_summary.json").read_text())
    r = doc["series"]["ranks"][0]
    n = len(doc["series"]["step"])
    r["rss_bytes"] = [335e6 + 4e6 * i / (n - 1) for i in range(n)]
    r["peak_allocated_bytes"] = r["peak_reserved_bytes"] = None
    with Page(view_html(tmp_path, doc, "drift")) as pg:
        assert pg.errors == [], pg.errors
        mem = pg.charts["memory"]
        check_drawn(mem)
        lo, hi = mem["yrange"]
        assert lo == 0, mem["yrange"]
        assert 4e6 / (hi - lo) < 0.1, mem["yrange"]      # the drift: under a tenth of the height
        b = pg.browser
        ylabel = b.evaluate("document.querySelector('#chart-memory .dygraph-ylabel').textContent")
        ticks = b.evaluate("Array.from(document.querySelectorAll('#chart-memory "
                           ".dygraph-axis-label-y')).map(function (e) { return e.textContent; })")
    assert ylabel == "MB", ylabel
    assert ticks and all(re.match(r"^\d+(\.\d+)?$", t) for t in ticks), ticks
    assert any(float(t) >= 300 for t in ticks), ticks       # in MB, not bytes


def test_evidence_says_each_sentence_once(run_dir):
    """Each Evidence block says its diagnosis once (it is also the
    section's first issue: not repeated below it)."""
    summary = json.loads((run_dir / "final_summary.json").read_text())
    with Page(run_dir / "final_summary.html") as pg:
        ev = pg.browser.evaluate("document.getElementById('evidence').innerText")
    said = 0
    for sec in ("step_time", "step_memory", "system", "process"):
        d = summary[sec]["diagnosis"]
        assert ev.count(d["why"]) == 1, (sec, d["why"], ev[:3000])
        if d.get("next"):
            assert ev.count(d["next"]) == 1, (sec, d["next"])
            said += 1
    assert said >= 1          # INPUT-BOUND has a Next: the case that was repeated


RANK_TABLE_PROBE = r"""(function () {
  var box = document.getElementById('rank-table'), t = box.querySelector('table');
  var ths = t.querySelectorAll('th'), last = ths[ths.length - 1];
  box.scrollLeft = box.scrollWidth;
  var b = box.getBoundingClientRect(), l = last.getBoundingClientRect();
  var first = t.querySelector('tbody tr td').getBoundingClientRect();
  return { overflow: getComputedStyle(box).overflowX, scroll: box.scrollWidth, client: box.clientWidth,
           scrolled: box.scrollLeft, last: last.textContent, lastLeft: l.left, lastRight: l.right,
           boxLeft: b.left, boxRight: b.right, firstLeft: first.left, ncols: ths.length,
           viewport: document.documentElement.clientWidth };
})()"""


def test_rank_table_every_column_reachable(run_dir, tmp_path):
    """The per-rank table of a 16-rank run over 2 nodes that communicated
    (all 15 columns): at 1400 px every column is on screen; at 800 px the
    table scrolls sideways in its box, and scrolled to the end its last
    column is inside the box, the rank column still in view."""
    doc = json.loads((run_dir / "final_summary.json").read_text())
    one = doc["step_time"]["per_rank"][0]
    ranks = []
    for i in range(16):
        r = dict(one, rank=i, node=i // 8, local_rank=i % 8, label="R%d/N%d" % (i, i // 8),
                 communication_ms=12.345 + i, communication_bytes_per_s=1.23e9,
                 culprit_steps=100 + i)
        ranks.append(r)
    doc["step_time"]["per_rank"] = ranks
    doc["meta"]["world_size"] = doc["meta"]["ranks_reported"] = 16
    page = view_html(tmp_path, doc, "ranks16")
    for width in (1400, 800):
        shot = os.path.join(ARTIFACTS, "html_report_ranks16_%d.png" % width)
        with Page(page, shot, width=width) as pg:
            assert pg.errors == [], pg.errors
            t = pg.browser.evaluate(RANK_TABLE_PROBE)
        assert t["ncols"] == 15 and t["last"] == "Culprit steps", t
        assert t["overflow"] in ("auto", "scroll"), t
        assert t["boxRight"] <= t["viewport"] + 1, t                 # the box itself fits the page
        assert t["lastLeft"] >= t["boxLeft"] - 1 and t["lastRight"] <= t["boxRight"] + 1, t
        assert t["firstLeft"] >= t["boxLeft"] - 1, t                  # the rank column stays
        if width == 1400:
            assert t["scroll"] <= t["client"] and t["scrolled"] == 0, t   # no scrolling needed
        else:
            assert t["scroll"] > t["client"] and t["scrolled"] > 0, t


def test_machine_line_under_the_verdict(run_dir, tmp_path):
    """The box's Machine row is under the page's verdict too, when the
    machine was contended (contention.machine, which the engine writes with
    the box's words: test_shared_machine.py); a quiet run's page has none."""
    doc = json.loads((run_dir / "final_summary.json").read_text())
    said = ("other processes used 83% of the 2 cores; the training waited for a core 50% "
            "of its time.")
    doc["contention"].update(cores=2, host_cpu_percent=99.0, training_cpu_percent=16.0,
                             other_cpu_percent=83.0, runq_wait_percent=50.0, machine=said)
    with Page(view_html(tmp_path, doc, "busy")) as pg:
        assert pg.errors == [], pg.errors
        line = pg.browser.evaluate("(document.getElementById('machine') || {}).textContent || null")
    assert line == "Machine: " + said, line
    doc["contention"].update(other_cpu_percent=2.0, runq_wait_percent=0.1, machine=None)
    with Page(view_html(tmp_path, doc, "quiet")) as pg:
        assert pg.errors == [], pg.errors
        assert pg.browser.evaluate("document.getElementById('machine')") is None


def test_deep_dive_table_and_bars(run_dir, tmp_path):
    """A summary with a deep dive (docs/deep-dive.md) shows its modules
    as a table with a bar each (the bar's width is the module's share)
    and its operators; one without shows no such section."""
    doc = json.loads((run_dir / "final_summary.json").read_text())
    assert "deep_dive" not in doc or doc["deep_dive"] is not None
    doc.pop("deep_dive", None)
    with Page(view_html(tmp_path, doc, "plain")) as pg:
        assert pg.errors == [], pg.errors
        assert pg.browser.evaluate("document.getElementById('deep-dive')") is None
    item = {"ms": 1.0, "percent": 0.0, "calls": 3}
    doc["deep_dive"] = {
        "status": "ran", "reason": None, "steps_excluded": 3, "rank": 0, "ranks": 1,
        "first_step": 20, "last_step": 22, "window_ms": 45.0, "profiled_ms": 10.0,
        "activities": "cpu", "module_level": 1,
        "modules": [dict(item, name="heavy_block", ms=8.1, percent=81.0, top_operator="aten::mm"),
                    dict(item, name="", ms=1.3, percent=13.0, top_operator="aten::add_"),
                    dict(item, name="stem", ms=0.6, percent=6.0, top_operator="aten::addmm")],
        "operators": [dict(item, name="aten::mm", ms=5.0, percent=50.0)],
        "spread": None}
    with Page(view_html(tmp_path, doc, "deep"), os.path.join(ARTIFACTS, "deep_dive.png")) as pg:
        assert pg.errors == [], pg.errors
        rows = pg.browser.evaluate(
            "Array.from(document.querySelectorAll('#deep-dive-modules tbody tr')).map(function (r) {"
            " var c = r.querySelectorAll('td'); return [c[0].textContent, c[2].textContent,"
            " c[3].textContent, c[4].querySelector('span').style.width]; })")
        heading = pg.browser.evaluate("document.querySelector('#deep-dive h2').textContent")
    assert rows == [["heavy_block", "81%", "aten::mm", "81%"], ["(outside modules)", "13%",
                                                                  "aten::add_", "13%"],
                    ["stem", "6%", "aten::addmm", "6%"]], rows
    assert "steps 20\u201322, left out" in heading, heading
