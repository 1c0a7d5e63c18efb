"""The HTML report (final_summary.html) in headless Chromium.

`traceml run --html-report` on the quickstart and `traceml view X.json
--html` must write one self-contained page (no network: every script and
style inline) that renders without a console error, draws its charts and
shows the key numbers; screenshots go to build/test-artifacts/. A
10,000-step x 8-rank report (bench/html_report) must render too and stay
small. Chromium comes from Debian (scripts/deps); without it these tests
fail rather than skip.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import REPO, BUILD, TRACEML, EXAMPLES, base_env

ARTIFACTS = os.path.join(BUILD, "test-artifacts")
QUICKSTART = os.path.join(EXAMPLES, "quickstart.py")


def chromium():
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    pytest.fail("chromium is not installed (scripts/deps installs Debian's chromium)")


def open_page(path, screenshot=None):
    """Loads the page offline; returns (dom, console_errors)."""
    with tempfile.TemporaryDirectory() as ud:
        base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--user-data-dir=" + ud,
                "--window-size=1280,2600", "--enable-logging=stderr", "--v=0"]
        url = "file://" + os.path.abspath(path)
        p = subprocess.run(base + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
        console = [l for l in p.stderr.splitlines()
                   if "CONSOLE" in l and ("Uncaught" in l or "rror" in l)]
        if screenshot:
            os.makedirs(os.path.dirname(screenshot), exist_ok=True)
            subprocess.run(base + ["--screenshot=" + screenshot, url], capture_output=True,
                           timeout=120)
        return p.stdout, console


def body(dom):
    """The attributes the page's script sets on <body> when done."""
    m = re.search(r"<body([^>]*)>", dom)
    return m.group(1) if m else ""


def check_self_contained(html):
    assert "<script src" not in html and "<link" not in html
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', html)
    assert html.count("<script") == 3          # data, uPlot, report


@pytest.fixture(scope="module")
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
    dom, console = open_page(page, os.path.join(ARTIFACTS, "html_report_quickstart.png"))
    assert console == [], console
    assert 'data-rendered="1"' in body(dom), dom[-2000:]
    assert "data-errors" not in body(dom)
    charts = int(re.search(r'data-charts="(\d+)"', body(dom)).group(1))
    assert charts >= 4                          # steps, input wait, memory, system
    assert dom.count('class="uplot') >= 4
    # key numbers, as the summary says them, in what the page drew (not in
    # its scripts or the embedded box text)
    shown = re.sub(r"<script.*?</script>", "", dom, flags=re.S)
    shown = re.sub(r'<pre class="box">.*?</pre>', "", shown, flags=re.S)
    med = summary["step_time"]["median"]
    banner = re.search(r'id="verdict"[^>]*>(.*?)</div>', shown, re.S).group(1)
    assert "Verdict: INPUT-BOUND" in banner and "CRITICAL" in banner
    assert summary["primary_diagnosis"]["why"] in banner
    phases = re.search(r'<table class="phases">(.*?)</table>', shown, re.S).group(1)
    assert "%.1f ms" % med["step_time_ms"] in phases
    assert "%.1f ms" % med["input_wait_ms"] in phases and "cause" in phases
    assert "200 common steps" in shown
    assert 'id="system-none"' not in shown        # samples were drawn over time
    assert os.path.getsize(os.path.join(ARTIFACTS, "html_report_quickstart.png")) > 20000


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
    dom, console = open_page(tmp_path / "old.html")
    assert console == [] and 'data-rendered="1"' in body(dom) and "data-errors" not in body(dom)
    assert "no per-step series" in dom
    assert "BOX &lt;/script&gt;&lt;b&gt;x&lt;/b&gt;" in dom   # shown as text, not markup


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
    dom, console = open_page(page, os.path.join(ARTIFACTS, "html_report_10000x8.png"))
    assert console == [] and 'data-rendered="1"' in body(dom) and "data-errors" not in body(dom)
    assert dom.count("R7/N0") >= 2                    # per-rank bars and tables


def test_real_summary_with_series_matches_schema(run_dir):
    """The schema covers "series" (and by_clock, noise) of a real run."""
    import jsonschema
    schema = json.loads(open(os.path.join(REPO, "docs", "summary.schema.json")).read())
    doc = json.loads((run_dir / "final_summary.json").read_text())
    assert doc["series"] is not None and doc["series"]["system"] is not None
    assert doc["step_time"]["noise_ms"] is not None
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    assert not errors, [e.message for e in errors[:5]]
