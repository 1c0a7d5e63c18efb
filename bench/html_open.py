"""How long the HTML report takes to open in a browser (headless Chromium).

    ./build/bench/html_report /tmp/hb            # writes report_<steps>x<ranks>.html
    /usr/bin/python3 bench/html_open.py /tmp/hb/*.html [--repeats 3]

For each page: Chromium loads it from disk (no network) and the page's own
script records performance.now() when it has drawn everything (the
data-render-ms attribute: from navigation start through HTML parsing,
JSON.parse of the summary, uPlot and every chart and table). Prints the
median over repeats and the file size; also the wall time of the whole
headless browser run (process start included) for scale.
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
    m = re.search(r'data-render-ms="([0-9.]+)"', p.stdout)
    return (float(m.group(1)) if m else float("nan")), wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    print("%-28s %10s %16s %16s" % ("page", "KB", "render ms (med)", "browser ms (med)"))
    for page in a.pages:
        r = [open_once(page) for _ in range(a.repeats)]
        print("%-28s %10.0f %16.0f %16.0f" % (os.path.basename(page), os.path.getsize(page) / 1024,
                                            statistics.median(x[0] for x in r),
                                            statistics.median(x[1] for x in r)))


if __name__ == "__main__":
    main()
