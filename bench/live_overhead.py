"""Per-step cost of the live views, against summary mode.

    OMP_NUM_THREADS=1 .venv/bin/python bench/live_overhead.py [--repeats 5] [--steps 4000]

The same ~1 ms CPU training step (tiny MLP, DataLoader, SGD, auto mode) runs
under `traceml run` in three ways, interleaved and repeated, each in a fresh
process:

  summary     --mode summary (the default)
  dashboard   --mode dashboard, with a client connected the whole time: an
              SSE reader on /events (everything the page receives) and a
              /metrics scrape every 0.5 s (what Prometheus would do)
  cli         --mode cli in a pseudo-terminal that the benchmark reads, so
              the full-screen view draws as it would on a real terminal

Each worker times its own loop (perf_counter_ns per iteration, after a
warm-up) and writes the median and mean microseconds per step to a file.
The table shows the median over repeats and the added cost against
summary mode as the median of the paired per-repeat differences; the
aggregator's snapshot time comes from the run's traceml.log.
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.environ.get("TRACEML_VENV", os.path.join(REPO, ".venv"))
TRACEML = os.environ.get("TRACEML_BIN", os.path.join(VENV, "bin", "traceml"))


def worker(args):
    import torch
    from torch import nn
    from torch.utils.data import BatchSampler, DataLoader, SequentialSampler, TensorDataset
    import traceml_ai as traceml

    torch.set_num_threads(1)
    traceml.init(mode="auto")
    torch.manual_seed(0)
    batch, dim, width = 32, 64, 256
    total = args.steps + args.warmup
    ds = TensorDataset(torch.randn(total * batch, dim), torch.randint(0, 10, (total * batch,)))
    loader = DataLoader(ds, sampler=BatchSampler(SequentialSampler(ds), batch, False),
                        batch_size=None)
    model = nn.Sequential(nn.Linear(dim, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    times = []
    t_prev = time.perf_counter_ns()
    for i, (xb, yb) in enumerate(loader):
        with traceml.trace_step(model):
            loss = loss_fn(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if i % 500 == 0:
            print("step %d loss %.4f" % (i, loss.item()), flush=True)
        t = time.perf_counter_ns()
        times.append(t - t_prev)
        t_prev = t
    t = sorted(times[args.warmup:])
    out = {"median_us": statistics.median(t) / 1000.0, "mean_us": sum(t) / len(t) / 1000.0}
    with open(os.environ["BENCH_OUT"], "w") as f:
        json.dump(out, f)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Client(threading.Thread):
    """An SSE reader on /events plus a /metrics scraper, until stopped."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.stop, self.events, self.scrapes = port, False, 0, 0

    def run(self):
        deadline = time.time() + 20
        sock = None
        while not self.stop and time.time() < deadline and sock is None:
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=0.5)
            except OSError:
                time.sleep(0.05)
        if sock is None:
            return
        sock.sendall(b"GET /events HTTP/1.1\r\nHost: bench\r\n\r\n")
        sock.settimeout(0.5)
        next_scrape = 0
        while not self.stop:
            try:
                data = sock.recv(1 << 16)
                if not data:
                    break
                self.events += data.count(b"event: live")
            except socket.timeout:
                pass
            except OSError:
                break
            if time.time() >= next_scrape:
                next_scrape = time.time() + 0.5
                try:
                    urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port,
                                           timeout=2).read()
                    self.scrapes += 1
                except OSError:
                    pass
        sock.close()


def run_variant(variant, args, tmp):
    out = os.path.join(tmp, "result.json")
    logs = os.path.join(tmp, "logs")
    env = dict(os.environ, BENCH_OUT=out, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    cmd = [TRACEML, "run", "--logs-dir", logs, "--run-name", "b"]
    client = None
    if variant == "dashboard":
        port = free_port()
        cmd += ["--mode", "dashboard", "--dashboard-port", str(port)]
        client = Client(port)
    elif variant == "cli":
        cmd += ["--mode", "cli"]
    cmd += [os.path.abspath(__file__), "--worker", "--steps", str(args.steps),
            "--warmup", str(args.warmup)]
    if variant == "cli":
        import pty
        master, slave = pty.openpty()
        os.set_blocking(master, False)
        env["TERM"] = "xterm-256color"
        p = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=tmp)
        os.close(slave)
        drawn = 0
        while p.poll() is None:   # be the terminal: read everything it draws
            try:
                drawn += len(os.read(master, 1 << 16))
            except (BlockingIOError, OSError):
                time.sleep(0.01)
        os.close(master)
        extra = {"drawn_bytes": drawn}
    else:
        if client:
            client.start()
        p = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True)
        extra = {}
        if client:
            client.stop = True
            client.join(5)
            extra = {"events": client.events, "scrapes": client.scrapes}
    with open(out) as f:
        res = json.load(f)
    res.update(extra)
    log = open(os.path.join(logs, "b", "traceml.log")).read()
    m = re.search(r"live: (\d+) snapshots, median ([\d.]+) ms, max ([\d.]+) ms", log)
    if m:
        res["snapshots"] = int(m.group(1))
        res["snapshot_ms"] = float(m.group(2))
        res["snapshot_max_ms"] = float(m.group(3))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--warmup", type=int, default=200)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    variants = ["summary", "dashboard", "cli"]
    res = {v: [] for v in variants}
    for r in range(args.repeats):
        for v in variants:
            with tempfile.TemporaryDirectory() as tmp:
                x = run_variant(v, args, tmp)
            res[v].append(x)
            print("repeat %d %-9s %s" % (r, v, json.dumps(x)), file=sys.stderr, flush=True)
    base = [x["median_us"] for x in res["summary"]]
    print("| variant | µs/step (median) | added µs (paired median) | added µs (min..max) "
          "| snapshot ms (median / max) |")
    print("|---|---:|---:|---:|---:|")
    for v in variants:
        med = [x["median_us"] for x in res[v]]
        diff = [a - b for a, b in zip(med, base)]
        snap = [x["snapshot_ms"] for x in res[v] if "snapshot_ms" in x]
        smax = [x["snapshot_max_ms"] for x in res[v] if "snapshot_max_ms" in x]
        print("| %s | %.1f | %+.1f | %+.1f..%+.1f | %s |" % (
            v, statistics.median(med), statistics.median(diff), min(diff), max(diff),
            "%.2f / %.2f" % (statistics.median(snap), max(smax)) if snap else "–"))
    ev = [x.get("events", 0) for x in res["dashboard"]]
    print("\n(dashboard client: %d SSE updates and %d /metrics scrapes per run, median; "
          "%d repeats of %d steps)" % (statistics.median(ev),
                                       statistics.median([x.get("scrapes", 0) for x in res["dashboard"]]),
                                       args.repeats, args.steps))


if __name__ == "__main__":
    main()
