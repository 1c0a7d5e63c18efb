"""What a notebook's live card costs (docs/notebooks.md): one redraw is
tml_summary_json() (the summary so far) and tml_summary_html(CARD), once a
second on a thread of its own. Prints a table of medians over repeated
redraws after N steps, beside the summary's size.

    .venv/bin/python bench/notebook_live.py [--steps 300 1000] [--repeats 50]
"""
import argparse
import statistics
import tempfile
import time

import traceml_ai._traceml as c


def redraws(steps, repeats):
    c.init("live_%d" % steps, tempfile.mkdtemp(), c.PHASES_ALL, False)
    for _ in range(steps):
        c.step_begin()
        c.step_end()
    js, html = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        text = c.summary_json()
        t1 = time.perf_counter()
        c.summary_html(text, c.HTML_CARD)
        t2 = time.perf_counter()
        js.append((t1 - t0) * 1e3)
        html.append((t2 - t1) * 1e3)
    c.shutdown()
    return statistics.median(js), statistics.median(html), len(text)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, nargs="+", default=[300, 1000])
    p.add_argument("--repeats", type=int, default=50)
    a = p.parse_args()
    print("| steps | summary_json ms | card html ms | redraw ms | share of a second | summary bytes |")
    print("|---|---|---|---|---|---|")
    for n in a.steps:
        j, h, size = redraws(n, a.repeats)
        print("| %d | %.3f | %.3f | %.3f | %.2f%% | %d |" % (n, j, h, j + h, (j + h) / 10.0, size))


if __name__ == "__main__":
    main()
