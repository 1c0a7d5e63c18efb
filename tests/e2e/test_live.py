"""The live views with a real training (docs/live.md):

- the terminal view (--mode cli) under tmux: panels drawn while training
  runs, a resize, `q` hides the view, the final summary at the end;
- the plain fallback when the terminal cannot draw (not a tty, TERM=dumb);
- the dashboard (--mode dashboard) in Debian's headless Chromium: the page
  loads, live updates arrive, the dygraphs charts are drawn (read back from
  their canvases) and follow the stream, no console errors, a screenshot under
  build/test-artifacts/; /metrics scraped and parsed; malformed, oversized
  and slow requests refused while training goes on.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from conftest import free_port, BUILD, PYTHON, REPO, TRACEML, base_env

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "live"))
import cdp  # noqa: E402

TRAIN = os.path.join(REPO, "tests", "e2e", "live", "live_train.py")
ARTIFACTS = os.path.join(BUILD, "test-artifacts")
SPARK = set("\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588")


def wait_for(pred, timeout, step=0.25):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(step)
    return last


# ---------------------------------------------------------------- terminal

class Tmux(object):
    def __init__(self, name, cmd, env, width=150, height=45):
        self.name = name
        self.sock = "traceml-test-%d" % os.getpid()
        envs = []
        for k, v in env.items():
            envs += ["-e", "%s=%s" % (k, v)]
        subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null", "new-session", "-d",
                        "-s", name, "-x", str(width), "-y", str(height)] + envs + [cmd],
                       check=True, env=env)

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.sock] + list(args), capture_output=True,
                              text=True)

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", self.name).stdout

    def history(self):
        return self.tmux("capture-pane", "-p", "-S", "-5000", "-t", self.name).stdout

    def kill(self):
        self.tmux("kill-server")


@pytest.mark.skipif(not shutil.which("tmux"), reason="tmux not installed (scripts/deps)")
@pytest.mark.solo
def test_terminal_view_under_tmux(tmp_path):
    logs = tmp_path / "logs"
    done = tmp_path / "exit_code"
    env = base_env(LANG="C.UTF-8", LC_ALL="C.UTF-8", TERM="xterm-256color",
                   PATH=os.environ.get("PATH", "/usr/bin:/bin"))
    cmd = ("cd %s && %s run --mode cli --interval 0.25 --logs-dir %s --run-name live_cli "
           "%s --steps 1600; echo $? > %s; sleep 600") % (REPO, TRACEML, logs, TRAIN, done)
    t = Tmux("live", cmd, env)
    try:
        # panels while the training runs; before the first steps arrive the
        # header says it waits (never "0 ranks", "step 0" or "rank -1")
        early = []

        def panels():
            s = t.screen()
            if "rank -1" in s or "\u00b7 0 ranks" in s:
                early.append(s)
            # (the first frames may hold too few steps for a verdict, or a
            # saturated host another one: wait for the input-bound frame)
            return s if ("Why: Input Wait took" in s and "train step" in s and
                         any(ch in SPARK for ch in s)) else None
        s = wait_for(panels, 90)
        assert s, "the view never showed the panels:\n" + t.screen()
        assert not early, "a first frame without data:\n" + early[0]
        for needle in ("TraceML live", "live_cli", "STEP TIMING", "Input Wait", "Forward",
                       "STEP MEMORY", "SYSTEM | PROCESS", "TRAINING OUTPUT", "q: hide view",
                       "Why: Input Wait took", "Next:"):
            assert needle in s, "%r not on screen:\n%s" % (needle, s)
        assert not done.exists(), "the training ended before the checks; make it longer"
        # the training is still running: the step counter moves
        step1 = int(re.search(r"step (\d+) \u00b7", s).group(1))
        time.sleep(1.0)
        step2 = int(re.search(r"step (\d+) \u00b7", t.screen()).group(1))
        assert step2 > step1

        # a resize: redrawn at the new size, panels stacked
        t.tmux("resize-window", "-t", "live", "-x", "90", "-y", "40")

        def narrow():
            s = t.screen()
            lines = s.splitlines()
            return s if (lines and max(len(l) for l in lines) <= 90 and "STEP TIMING" in s and
                         "TRAINING OUTPUT" in s and "STEP MEMORY" not in
                         (lines[5] if len(lines) > 5 else "")) else None
        s = wait_for(narrow, 10)
        assert s, "not redrawn after the resize:\n" + t.screen()
        assert "Verdict: INPUT-BOUND" in s

        # 80x24: Next wrapped, not cut; the resource sections in three lines
        t.tmux("resize-window", "-t", "live", "-x", "80", "-y", "24")

        def small():
            s = t.screen()
            lines = s.splitlines()
            return s if (lines and max(len(l) for l in lines) <= 80 and "STEP TIMING" in s and
                         "MEMORY | SYSTEM | PROCESS" in s) else None
        small_screen = wait_for(small, 10)
        assert small_screen, "80x24 lacks the timing or resource panels:\n" + t.screen()
        assert "Next: " in small_screen and "Why: " in small_screen
        t.tmux("resize-window", "-t", "live", "-x", "150", "-y", "45")

        # q hides the view; the training goes on and its output flows by
        t.tmux("send-keys", "-t", "live", "q")
        s = wait_for(lambda: "live view hidden" in t.history() and
                     re.search(r"^train step \d+", t.screen(), re.M) and t.screen(), 15)
        assert s, "q did not hide the view:\n" + t.history()[-3000:]
        assert "STEP TIMING" not in t.screen()

        # the end: the final summary as in summary mode, the exit code
        assert wait_for(lambda: done.exists(), 120), t.history()[-3000:]
        assert done.read_text().strip() == "0"
        h = t.history()
        assert "LIVE TRAINING DONE" in h
        assert "TraceML Run Summary" in h and "Verdict: INPUT-BOUND (CRITICAL)" in h, h[-4000:]
        run_dir = logs / "live_cli"
        out = (run_dir / "training_output.log").read_text()
        assert "train step 0 loss" in out and "stderr line at step 0" in out
        summary = json.loads((run_dir / "final_summary.json").read_text())
        assert summary["primary_diagnosis"]["kind"] == "INPUT_BOUND"
        assert summary["meta"]["common_steps"] == 1600
        # the Next line at 80 columns was wrapped to its end, not cut: its
        # sentence ends on screen (which Next it was is the host's: a
        # saturated host gets the HIGH CPU one, so not the final's words)
        after = small_screen.split("Next: ", 1)[1].splitlines()[:8]
        assert any(re.search(r"\.\s*[\u2502|]?\s*$", l) for l in after), small_screen
    finally:
        t.kill()


def test_terminal_view_plain_fallback(tmp_path):
    """Not a terminal (and TERM=dumb): plain lines, the training's output
    untouched, the summary at the end."""
    logs = tmp_path / "logs"
    proc = subprocess.run([TRACEML, "run", "--mode", "cli", "--interval", "0.3", "--logs-dir",
                           str(logs), "--run-name", "plain", TRAIN, "--steps", "400"],
                          cwd=REPO, env=base_env(TERM="dumb"), capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [l for l in proc.stdout.splitlines() if l.startswith("[traceml] ")]
    assert len(lines) >= 2, proc.stdout[-3000:]
    assert any("INPUT-BOUND (CRITICAL)" in l and " input " in l for l in lines), lines
    assert "train step 380 loss" in proc.stdout and "LIVE TRAINING DONE" in proc.stdout
    assert "stderr line at step 300" in proc.stderr
    assert "TraceML Run Summary" in proc.stdout
    assert proc.stdout.index("LIVE TRAINING DONE") < proc.stdout.index("TraceML Run Summary")
    assert not (logs / "plain" / "training_output.log").exists()   # nothing captured


# --------------------------------------------------------------- dashboard

def http_get(port, path, timeout=5):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
        return r.status, r.headers, r.read().decode("utf-8")


def raw(port, data, timeout=5, shut=True):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    if shut:
        s.shutdown(socket.SHUT_WR)
    out = b""
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            out += c
    except socket.timeout:
        pass
    s.close()
    return out.decode("latin-1")


PROM_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\})? (\S+)$')
PROM_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text):
    """{name: [(labels dict, value)]}; asserts the text format line by line,
    and that every family has a # HELP with text right before its # TYPE."""
    families, typed, helped = {}, set(), None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped, _, words = line[7:].partition(" ")
            assert words.strip(), "HELP without text: %r" % line
            continue
        if line.startswith("# TYPE "):
            name, kind = line[7:].split(" ")
            assert kind in ("gauge", "counter"), line
            assert helped == name, "no # HELP before %r" % line
            helped = None
            typed.add(name)
            continue
        m = PROM_LINE.match(line)
        assert m, "not Prometheus text: %r" % line
        assert m.group(1) in typed, "sample before its # TYPE: %r" % line
        labels = dict(PROM_LABEL.findall(m.group(3) or ""))
        value = float(m.group(4))
        assert value == value, "NaN in %r" % line
        families.setdefault(m.group(1), []).append((labels, value))
    return families


def steps_received(port):
    try:
        _, _, body = http_get(port, "/api/live")
    except urllib.error.HTTPError as e:
        if e.code == 503:        # "no data yet": the first snapshot is not made
            return 0
        raise
    d = json.loads(body)
    return max([r["steps_received"] for r in d["ranks"]] or [0])


@pytest.mark.skipif(not cdp.chromium_path(), reason="chromium not installed (scripts/deps)")
@pytest.mark.solo
def test_dashboard_in_chromium(tmp_path):
    port = free_port()
    logs = tmp_path / "logs"
    proc = subprocess.Popen([TRACEML, "run", "--mode", "dashboard", "--dashboard-port", str(port),
                             "--interval", "0.5", "--logs-dir", str(logs), "--run-name", "dash",
                             "--html-report", TRAIN, "--steps", "2400"],
                            cwd=REPO, env=base_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    browser = None
    try:
        # the launcher says where the dashboard is
        line = proc.stderr.readline()
        while line and "live dashboard" not in line:
            line = proc.stderr.readline()
        assert "live dashboard: http://127.0.0.1:%d/" % port in line, line
        ssh = proc.stderr.readline()
        assert "ssh -N -L %d:127.0.0.1:%d" % (port, port) in ssh, ssh
        assert wait_for(lambda: steps_received(port) >= 150, 60), "no steps arrived"

        # /metrics: Prometheus text, per-rank step time and phases, verdict
        st, hdr, body = http_get(port, "/metrics")
        assert st == 200 and hdr["Content-Type"].startswith("text/plain; version=0.0.4")
        fam = parse_prometheus(body)
        assert fam["traceml_up"][0][1] == 1
        verdicts = fam["traceml_verdict"]
        assert len(verdicts) == 1 and verdicts[0][0]["kind"] == "INPUT_BOUND", verdicts
        assert verdicts[0][0]["run"] == "dash"
        step = [v for l, v in fam["traceml_step_time_seconds"] if l["rank"] == "0"]
        assert step and 0.005 < step[0] < 0.5, step
        phases = {l["phase"]: v for l, v in fam["traceml_phase_seconds"] if l["rank"] == "0"}
        assert 0.005 < phases["input_wait"] < 0.05 and phases["forward"] > 0, phases
        assert fam["traceml_rank_rss_bytes"][0][1] > 1e6
        assert fam["traceml_steps_received_total"][0][1] >= 150

        # /api/summary: the final_summary.json shape over the live window
        _, _, body = http_get(port, "/api/summary")
        s = json.loads(body)
        assert s["meta"]["window_steps"] <= 100 and s["primary_diagnosis"]["kind"] == "INPUT_BOUND"

        # bad requests are refused; the server and the training carry on
        before = steps_received(port)
        assert raw(port, b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03garbage").startswith("HTTP/1.1 400")
        assert raw(port, b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").startswith("HTTP/1.1 414")
        assert raw(port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"b" * 20000 + b"\r\n\r\n").startswith("HTTP/1.1 431")
        assert raw(port, b"POST /api/live HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}").startswith("HTTP/1.1 405")
        assert raw(port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999\r\n\r\n").startswith("HTTP/1.1 413")
        assert raw(port, b"GET /nothing HTTP/1.0\r\n\r\n").startswith("HTTP/1.1 404")
        # a silent client and a stream client that never reads
        silent = socket.create_connection(("127.0.0.1", port))
        deaf = socket.socket()
        deaf.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        deaf.connect(("127.0.0.1", port))
        deaf.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert wait_for(lambda: steps_received(port) > before + 50, 30), "training stalled"
        status, _, _ = http_get(port, "/healthz")
        assert status == 200

        # the page in headless Chromium: loads, live updates arrive
        os.makedirs(ARTIFACTS, exist_ok=True)
        browser = cdp.Browser()
        browser.navigate("http://127.0.0.1:%d/" % port)
        updates = wait_for(lambda: (browser.evaluate(
            "window.__traceml ? window.__traceml.updates : 0") or 0) >= 3, 30)
        assert updates, "no live updates in the page; errors: %s" % browser.errors()
        first = browser.evaluate("window.__traceml.last.seq")
        assert wait_for(lambda: browser.evaluate("window.__traceml.last.seq") > first, 10)
        label = browser.evaluate("document.getElementById('v-label').textContent")
        assert label == "INPUT-BOUND", label
        # the charts dygraphs drew (cdp.CHART_PROBE reads the canvases back):
        # rows, canvases of their size, pixels in their series' colours
        charts = browser.charts()
        for name, box in (("stack", "c-stack"), ("input", "c-input"), ("mem", "c-mem"),
                          ("ranks", "c-ranks")):
            c = charts.get(name)
            assert c and c["id"] == box and c["rows"] >= 20, (name, c)
            assert any(w >= 300 and h >= 150 for w, h in c["canvases"]), (name, c)
            assert sum(c["pixels"].values()) >= 300, (name, c)
        stack = charts["stack"]      # stacked from 0, Input Wait the largest band
        assert stack["stacked"] and stack["yrange"][0] == 0, stack
        assert stack["labels"] == ["Residual", "Optimizer", "Backward", "Forward", "H2D", "Input Wait"]
        px = stack["pixels"]
        assert px["Input Wait"] == max(px.values()) and px["Input Wait"] > 0.4 * sum(px.values()), px
        assert charts["input"]["labels"] == ["Input Wait", "Step Time"]
        assert charts["mem"]["pixels"]["RSS (MB)"] > 0
        # memory from 0 (a flat RSS must not fill the chart's height)
        assert charts["mem"]["yrange"][0] == 0, charts["mem"]
        # host CPU % and process RAM over time, one point per update
        # (RSS on a second axis: the probe counts its line's pixels too)
        assert wait_for(lambda: (browser.charts().get("cpuram") or {}).get("rows", 0) >= 3, 10)
        cr = browser.charts()["cpuram"]
        assert cr["id"] == "c-cpuram" and cr["labels"] == ["Host CPU", "Process RSS"], cr
        assert any(w >= 300 and h >= 150 for w, h in cr["canvases"]), cr
        assert cr["pixels"]["Host CPU"] > 0 and cr["pixels"]["Process RSS"] > 0, cr
        assert cr["yrange"][0] == 0, cr
        assert "No" not in browser.evaluate("document.getElementById('cpuram-label').textContent")
        # the System and process table in words and units, no raw keys
        sys_rows = browser.evaluate("Array.from(document.getElementById('t-sys').rows)"
                                    ".map(function (r) { return r.innerText; })")
        text = "\n".join(sys_rows)
        assert not re.search(r"\b(system|process|traceml)_[a-z_]+", text), text
        cpu = [r for r in sys_rows if r.startswith("Host CPU\t")]
        rss = [r for r in sys_rows if r.startswith("Process RSS\t")]
        assert cpu and re.search(r"\t\d+%\tnode 0$", cpu[0]), sys_rows
        assert rss and re.search(r"\t\d+\.\d (MB|GB)\trank 0$", rss[0]), sys_rows
        assert charts["ranks"]["labels"] == ["R0/N0"]
        if charts.get("gpu"):                           # only where GPU utilisation is sampled
            assert charts["gpu"]["rows"] >= 1
        else:
            assert "No GPU utilisation sampled" in browser.evaluate(
                "document.getElementById('gpu-label').textContent")
        # the charts follow the stream: newer steps arrive in the same chart
        last = "(function () { var g = window.__traceml.charts.stack;" \
               " return g.getValue(g.numRows() - 1, 0); })()"
        newest = browser.evaluate(last)
        assert wait_for(lambda: browser.evaluate(last) > newest, 10), "the step chart did not move"
        # the legend: names; under the mouse, the step and each phase's value
        leg = "document.querySelector('#c-stack .legend').textContent"
        assert "Input Wait" in browser.evaluate(leg) and "step " not in browser.evaluate(leg)
        r = browser.evaluate("(function () { var r = document.querySelector('#c-stack canvas')"
                             ".getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()")
        browser.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": r[0] + r[2] * 0.7,
                                                  "y": r[1] + r[3] * 0.5}, session=True)
        shown = wait_for(lambda: re.search(r"^step \d+.*Input Wait \d+\.\d+ ms",
                                           browser.evaluate(leg)), 5)
        assert shown, browser.evaluate(leg)
        assert browser.evaluate("document.getElementById('conn').className") == "conn ok"
        rows = browser.evaluate("document.getElementById('t-ranks').rows.length")
        assert rows >= 2
        assert browser.evaluate("window.__traceml.errors.length") == 0, browser.evaluate(
            "window.__traceml.errors")
        time.sleep(0.5)
        shot = os.path.join(ARTIFACTS, "dashboard.png")
        browser.screenshot(shot)
        assert os.path.getsize(shot) > 10000
        assert browser.errors() == [], browser.errors()
        silent.close()
        deaf.close()

        # one palette (web/phases.js): each phase the same colour here as in
        # the run's HTML report, read from the charts both pages drew
        phase_colours = ("(function () { var g = window.__traceml.charts.%s, c = g.getColors(), o = {};"
                         " g.getLabels().slice(1).forEach(function (l, i) { o[l] = c[i]; }); return o; })()")
        live_colours = browser.evaluate(phase_colours % "stack")

        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-3000:]
        assert "TraceML Run Summary" in out and "LIVE TRAINING DONE" in out
        report = cdp.Browser()
        try:
            report.navigate("file://" + str(logs / "dash" / "final_summary.html"))
            assert wait_for(lambda: report.evaluate(
                "document.body && document.body.getAttribute('data-rendered')") == "1", 30)
            report_colours = report.evaluate(phase_colours % "steps")
        finally:
            report.close()
        assert len(live_colours) == 6 and live_colours == report_colours, (live_colours,
                                                                            report_colours)
        log = (logs / "dash" / "traceml.log").read_text()
        assert "refused a request" in log and "400 Bad Request" in log
    finally:
        if browser:
            browser.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_dashboard_port_busy_training_goes_on(tmp_path):
    """A taken dashboard port costs the dashboard, never the run."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        proc = subprocess.run([TRACEML, "run", "--mode", "dashboard", "--dashboard-port",
                               str(port), "--logs-dir", str(tmp_path / "logs"), "--run-name",
                               "busy", TRAIN, "--steps", "60"],
                              cwd=REPO, env=base_env(), capture_output=True, text=True,
                              timeout=240)
    finally:
        s.close()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "dashboard could not listen on 127.0.0.1:%d" % port in proc.stderr
    assert "TraceML Run Summary" in proc.stdout


def test_serve_dashboard_flags(tmp_path):
    """`traceml serve --dashboard-port P` serves the same endpoints."""
    port = free_port()
    proc = subprocess.Popen([TRACEML, "serve", "--logs-dir", str(tmp_path / "logs"),
                             "--run-name", "srv", "--dashboard-port", str(port)],
                            cwd=REPO, env=base_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        exports = ""
        for _ in range(5):
            line = proc.stdout.readline()
            exports += line
            if "Live dashboard" in line:
                break
        assert "Live dashboard: http://127.0.0.1:%d/" % port in exports, exports
        env_line = [l for l in exports.splitlines() if l.startswith("export ")][0]
        env = base_env()
        for kv in env_line[len("export "):].split():
            k, v = kv.split("=", 1)
            env[k] = v
        subprocess.run([PYTHON, TRAIN, "--steps", "150", "--delay-ms", "2"], cwd=REPO,
                       env=env, check=True, capture_output=True, timeout=240)
        def all_steps():
            f = parse_prometheus(http_get(port, "/metrics")[2])
            got = f.get("traceml_steps_received_total", [({}, 0)])[0][1]
            return f if got == 150 and "traceml_step_time_seconds" in f else None
        fam = wait_for(all_steps, 15)
        assert fam, "the 150 steps never showed in /metrics"
        assert any(n.startswith("traceml_system_") for n in fam), sorted(fam)
        # the page: a strict Content-Security-Policy (its own files, no
        # inline script, no eval, no frames) and no MIME sniffing
        st, hdr, _ = http_get(port, "/")
        assert st == 200
        csp = [d.strip() for d in hdr["Content-Security-Policy"].split(";")]
        for d in ("default-src 'none'", "script-src 'self'", "style-src 'self'",
                  "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"):
            assert d in csp, csp
        assert not any("unsafe-eval" in d or d.startswith("script-src") and "unsafe" in d
                       for d in csp), csp
        assert hdr["X-Content-Type-Options"] == "nosniff"
    finally:
        proc.send_signal(2)
        out, _ = proc.communicate(timeout=60)
    assert "TraceML Run Summary" in out
