"""How long the HTML report takes to open in a browser (headless Chromium).

    ./build/bench/html_report /tmp/hb            # writes report_<steps>x<ranks>.html
    .venv/bin/python bench/html_open.py /tmp/hb/*.html [--repeats 3]

For each page: Chromium loads it from disk (no network) and the page's own
script records performance.now() when it has drawn everything (the
data-render-ms attribute: from navigation start through HTML parsing,
JSON.parse of the summary, dygraphs and every chart and table) and how
many charts dygraphs drew (data-charts). Prints the median over repeats,
the charts drawn and the file size; also the wall time of the whole
headless browser run (process start included) for scale. A page that did
not finish drawing (no data-render-ms, or an uncaught error: data-errors)
makes the script exit 1.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    raise SystemExit("chromium not found (apt-get install chromium; see scripts/deps)")


def open_once(path):
    with tempfile.TemporaryDirectory() as ud:
        cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--user-data-dir=" + ud, "--window-size=1280,2000",
               "--dump-dom", "file://" + os.path.abspath(path)]
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        wall = (time.monotonic() - t0) * 1000
    b = re.search(r"<body([^>]*)>", p.stdout)      # the attributes the page sets when done
    b = b.group(1) if b else ""
    m = re.search(r'data-render-ms="([0-9.]+)"', b)
    c = re.search(r'data-charts="([0-9]+)"', b)
    ok = m is not None and c is not None and "data-errors" not in b
    return (float(m.group(1)) if m else float("nan")), wall, (int(c.group(1)) if c else -1), ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    print("%-28s %10s %7s %16s %16s" % ("page", "KB", "charts", "render ms (med)",
                                         "browser ms (med)"))
    failed = 0
    for page in a.pages:
        r = [open_once(page) for _ in range(a.repeats)]
        failed += sum(not x[3] for x in r)
        print("%-28s %10.0f %7d %16.0f %16.0f" % (os.path.basename(page), os.path.getsize(page) / 1024,
                                                min(x[2] for x in r),
                                                statistics.median(x[0] for x in r),
                                                statistics.median(x[1] for x in r)))
    if failed:
        raise SystemExit("%d page load(s) did not finish drawing (no data-render-ms, or data-errors)"
                         % failed)


if __name__ == "__main__":
    main()
