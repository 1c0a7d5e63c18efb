"""A minimal Chrome DevTools Protocol client over --remote-debugging-pipe,
enough to load a page in Debian's headless Chromium, evaluate JavaScript,
collect console errors and exceptions, and take a screenshot. No network
port is opened: Chromium reads commands on fd 3 and answers on fd 4, each
message a JSON text ended by a NUL byte.

charts() reads back what dygraphs drew on a TraceML page (the report or
the dashboard, both expose their Dygraph objects as
window.__traceml.charts): per chart, its rows, labels, y range, canvases
and how many pixels of each series' colour its canvases hold."""
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time


# Runs in the page. Colours are normalised through a 1x1 canvas (so "#e4572e"
# and "hsl(...)" both work); a pixel counts for a series when it is within 8
# of its colour in each channel and at least half opaque (the stacked chart
# fills with alpha 0.8; the canvases start transparent).
CHART_PROBE = r"""(function () {
  var charts = (window.__traceml && window.__traceml.charts) || {};
  var one = document.createElement("canvas");
  one.width = one.height = 1;
  var c1 = one.getContext("2d");
  function rgb(c) {
    c1.clearRect(0, 0, 1, 1); c1.fillStyle = "#000"; c1.fillStyle = c; c1.fillRect(0, 0, 1, 1);
    var d = c1.getImageData(0, 0, 1, 1).data; return [d[0], d[1], d[2]];
  }
  var out = {};
  Object.keys(charts).forEach(function (name) {
    var g = charts[name];
    if (!g) { out[name] = null; return; }
    var labels = g.getLabels().slice(1), cols = g.getColors().map(rgb);
    var px = labels.map(function () { return 0; }), canv = [];
    g.graphDiv.querySelectorAll("canvas").forEach(function (cv) {
      canv.push([cv.width, cv.height]);
      if (!cv.width || !cv.height) return;
      var d = cv.getContext("2d").getImageData(0, 0, cv.width, cv.height).data;
      for (var i = 0; i < d.length; i += 4) {
        if (d[i + 3] < 128) continue;
        for (var k = 0; k < cols.length; k++) {
          var c = cols[k];
          if (Math.abs(d[i] - c[0]) <= 8 && Math.abs(d[i + 1] - c[1]) <= 8 && Math.abs(d[i + 2] - c[2]) <= 8) { px[k]++; break; }
        }
      }
    });
    var box = g.graphDiv.closest(".chart");
    var pixels = {};
    labels.forEach(function (l, k) { pixels[l] = px[k]; });
    out[name] = { id: box ? box.id : null, rows: g.numRows(), labels: labels, yrange: g.yAxisRange(),
                  stacked: !!g.getOption("stackedGraph"), canvases: canv, pixels: pixels };
  });
  return out;
})()"""


def chromium_path():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


class Browser(object):
    def __init__(self, width=1400, height=1100):
        exe = chromium_path()
        if not exe:
            raise RuntimeError("chromium not found (apt-get install chromium; scripts/deps)")
        self.profile = tempfile.mkdtemp(prefix="traceml-chromium-")
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def child_fds():
            # out of the way first, so that neither end can be clobbered
            a = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-extensions",
                "--disable-dev-shm-usage", "--mute-audio", "--hide-scrollbars",
                "--remote-debugging-pipe", "--user-data-dir=" + self.profile,
                "--window-size=%d,%d" % (width, height), "about:blank"]
        self.log_path = os.path.join(self.profile, "chromium.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(args, preexec_fn=child_fds,
                                         pass_fds=(3, 4),   # kept open after preexec_fn
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        self.call("Runtime.enable", session=True)
        self.call("Page.enable", session=True)
        self.call("Log.enable", session=True)

    def _read_message(self, timeout):
        deadline = time.time() + timeout
        while b"\0" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("no answer from chromium")
            r, _, _ = select.select([self.from_chrome], [], [], left)
            if r:
                chunk = os.read(self.from_chrome, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe: %s" % self.stderr_tail())
                self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg.decode("utf-8"))

    def call(self, method, params=None, session=False, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        data = json.dumps(msg).encode("utf-8") + b"\0"
        os.write(self.to_chrome, data)
        while True:
            m = self._read_message(timeout)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def navigate(self, url):
        return self.call("Page.navigate", {"url": url}, session=True)

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                      session=True)
        if "exceptionDetails" in r:
            raise RuntimeError("evaluate(%s): %s" % (expression, r["exceptionDetails"]))
        return r["result"].get("value")

    def charts(self):
        """What dygraphs drew: {name: {id, rows, labels, yrange, stacked,
        canvases: [[w, h]], pixels: {series label: count}}} (CHART_PROBE)."""
        return self.evaluate(CHART_PROBE)

    def errors(self):
        """Console errors, uncaught exceptions and failed loads seen so far."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append("exception: %s" % json.dumps(p.get("exceptionDetails", {}))[:500])
            elif m == "Runtime.consoleAPICalled" and p.get("type") == "error":
                out.append("console.error: %s" % json.dumps(p.get("args", []))[:500])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: %s" % p["entry"].get("text", "")[:500])
        return out

    def screenshot(self, path):
        r = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                      session=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))

    def stderr_tail(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-2000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.to_chrome, self.from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)
