"""The C API end to end: examples/c/toy_train.c (a training loop in plain C
linked with libtraceml) under `traceml run -- PROGRAM`, started directly with
no launcher, and against `traceml serve`."""
import os
import re
import signal
import subprocess
import time

from conftest import BUILD, TRACEML, base_env, covers, primary, step_metric_ms

QUICK = True      # no real torch: the quick tier (conftest.py)

TOY = os.path.join(BUILD, "examples", "toy_train")


def load(path):
    import json
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_toy_under_launcher(tmp_path, slept):
    logs = tmp_path / "logs"
    p = subprocess.run([TRACEML, "run", "--logs-dir", str(logs), "--run-name", "ctoy", "--",
                        TOY, "--steps", "150", "--load-ms", "6"],
                       env=base_env(**slept.env_c("toy_train")), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "final w=3.000" in p.stdout
    assert "Verdict: INPUT-BOUND (CRITICAL)" in p.stdout
    s = load(logs / "ctoy" / "final_summary.json")
    assert primary(s)["label"] == "INPUT-BOUND"
    assert s["meta"]["common_steps"] == 150
    wait, ref = step_metric_ms(s, "input_wait"), slept.mean(6)
    assert covers(wait, ref), "Input Wait %s ms, slept %.3f ms" % (wait, ref)
    assert load(logs / "ctoy" / "manifest.json")["status"] == "completed"
    # what TraceML cost: in the step, and in the background (shipper and
    # sampler threads, the aggregator process) as a share of one core
    meta = s["meta"]
    assert meta["traceml_overhead_us_per_step"] > 0, meta
    bg = meta["traceml_background_cpu_percent"]
    assert bg is not None and 0 < bg < 50, bg
    assert "TraceML cost: " in p.stdout and " in step, " in p.stdout, p.stdout
    # throughput from the C API: 256 samples a step, their FLOPs as given
    t = s["throughput"]
    assert (t["samples_per_step"], t["tokens_per_step"]) == (256, None), t
    assert t["flops_per_step"] == 256 * 12000 and t["flops_counted_by"] == "given", t


def test_toy_without_launcher(tmp_path):
    p = subprocess.run([TOY, "--steps", "50", "--load-ms", "2"], cwd=str(tmp_path),
                       env=base_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "TraceML Run Summary" in p.stdout
    runs = os.listdir(tmp_path / "logs")
    assert len(runs) == 1 and runs[0].startswith("toy_train_"), runs
    s = load(tmp_path / "logs" / runs[0] / "final_summary.json")
    assert s["meta"]["common_steps"] == 50
    assert s["text"] in p.stdout
    assert load(tmp_path / "logs" / runs[0] / "manifest.json")["status"] == "completed"


def test_toy_against_serve(tmp_path):
    logs = tmp_path / "logs"
    out_path = tmp_path / "serve.out"
    with open(out_path, "w") as out:
        srv = subprocess.Popen([TRACEML, "serve", "--logs-dir", str(logs), "--run-name",
                                "served"], env=base_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        env = {}
        deadline = time.time() + 20
        while time.time() < deadline and "TRACEML_SECRET" not in env:
            time.sleep(0.1)
            for line in out_path.read_text().splitlines():
                if line.startswith("export "):
                    env.update(re.findall(r"(TRACEML_[A-Z_]+)=(\S+)", line))
        assert "TRACEML_ADDR" in env and "TRACEML_SECRET" in env, out_path.read_text()
        p = subprocess.run([TOY, "--steps", "40", "--load-ms", "1"], env=base_env(**env),
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert "TraceML Run Summary" not in p.stdout   # the aggregator prints it
        time.sleep(0.5)
        srv.send_signal(signal.SIGINT)
        srv.wait(timeout=30)
        assert "TraceML Run Summary" in out_path.read_text()
        s = load(logs / "served" / "final_summary.json")
        assert s["meta"]["common_steps"] == 40
    finally:
        if srv.poll() is None:
            srv.kill()


def test_long_run_in_bounded_memory(tmp_path):
    """20,000 steps: past the 16,384 records a rank keeps in the aggregator's
    memory (its first 64 and last 12,288; docs/design.md). The summary still
    counts every step, analyses the last 10,000, charts the whole run;
    telemetry.sqlite and the trace export still have every step."""
    import sqlite3
    logs = tmp_path / "logs"
    p = subprocess.run([TRACEML, "run", "--logs-dir", str(logs), "--run-name", "long", "--",
                        TOY, "--steps", "20000", "--load-ms", "0"],
                       env=base_env(), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    s = load(logs / "long" / "final_summary.json")
    assert s["meta"]["common_steps"] == 20000
    w = s["step_time"]["window"]
    assert (w["window_steps"], w["first_step"], w["last_step"]) == (10000, 10000, 19999), w
    se = s["series"]
    assert (se["first_step"], se["last_step"]) == (0, 19999), se
    assert len(se["step"]) <= 600 and se["ranks"][0]["step_time_ms"][0] is not None
    db = sqlite3.connect(str(logs / "long" / "telemetry.sqlite"))
    assert db.execute("SELECT count(*), min(step), max(step) FROM steps").fetchone() == (20000, 0, 19999)
    db.close()
    e = subprocess.run([TRACEML, "export", "--chrome-trace", str(logs / "long")],
                       env=base_env(), capture_output=True, text=True, timeout=120)
    assert e.returncode == 0 and "20000 steps" in e.stderr, e.stderr


# Keeps opening local connections that say OPEN and then nothing (the
# aggregator answers CHALLENGE and waits), about 2,000 a second, each
# closed when RING newer ones are open, until the file STOP exists.
FLOOD = r'''
import os, socket, struct, sys, time
host, port = os.environ["TRACEML_ADDR"].rsplit(":", 1)
stop, ring, opened = sys.argv[1], [], 0
open_frame = struct.pack("<IHHI", 0x314c4d54, 5, 11, 4) + struct.pack("<I", 0)
while not os.path.exists(stop):
    for _ in range(20):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect((host, int(port)))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            continue
        ring.append(s)
        opened += 1
        if len(ring) > 900:
            ring.pop(0).close()
    time.sleep(0.01)
    for s in ring[-20:]:
        try:
            s.send(open_frame)
        except OSError:
            pass
print("flood: %d connections" % opened, file=sys.stderr)
'''


def test_ranks_join_through_a_stalling_flood(tmp_path):
    """Under the common 1024-descriptor limit, local connections that send
    OPEN and stall fill the aggregator while 10 ranks of the C engine
    start: every rank is in the summary. (A rank crowded out of its
    handshake retries, test_server's test_crowded_out_rank_is_not_rejected;
    it used to be told REJECT and give up for the run.)"""
    (tmp_path / "flood.py").write_text(FLOOD)
    stop = tmp_path / "stop"
    ranks = " ".join(
        "RANK=%d WORLD_SIZE=10 %s --steps 300 --load-ms 10 >/dev/null & pids=\"$pids $!\";"
        % (r, TOY) for r in range(10))
    inner = ("%s flood.py %s & flood=$!; sleep 1; pids=; %s for p in $pids; do wait $p; done; "
             "touch %s; wait $flood" % (os.environ.get("PYTHON", "python3"), stop, ranks, stop))
    cmd = "ulimit -n 1024; exec %s run --logs-dir logs --run-name flood -- sh -c '%s'" % (
        TRACEML, inner)
    p = subprocess.run(["sh", "-c", cmd], cwd=str(tmp_path), env=base_env(),
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    assert "flood: " in p.stderr, p.stderr          # it ran
    s = load(tmp_path / "logs" / "flood" / "final_summary.json")
    log = (tmp_path / "logs" / "flood" / "traceml.log").read_text()
    assert s["meta"]["ranks_reported"] == 10, (s["meta"]["missing_ranks"], log[-3000:])
    assert "refused" in log or "crowded out" in log, log[-3000:]   # the flood was felt
