"""Live views of a run on several nodes (docs/live.md, docs/distributed.md):
node 0's `traceml run --mode dashboard` (and `--mode cli`) shows the ranks
of every node, since the followers' ranks ship their telemetry straight to
node 0's aggregator; a follower given a live mode trains as usual and says
on stderr that the live view is on node 0.

Two hosts are two network namespaces joined by a veth pair (Hosts of
test_distributed.py); where namespaces cannot be made, two launches on
loopback with a shared logs dir stand in for them. /api/live is read from
inside node 0's namespace (the dashboard binds node 0's loopback) by one
poller process, which stamps every new snapshot with CLOCK_MONOTONIC: the
ranks stamp their steps with the same clock (telemetry.sqlite start_ns),
and namespaces share it, so the test can tell how long after rank 1's first
step its label R1/N1 was in /api/live.
"""
import json
import os
import shutil
import sqlite3
import subprocess
from types import SimpleNamespace

import pytest

from conftest import PYTHON, REPO, TRACEML, base_env, free_port_pair, ranks_finished
from test_distributed import Hosts, explain, finish, launch, two_node_variant
from test_live import Tmux, wait_for

INTERVAL = 0.5
# R1/N1 must be in /api/live at most two intervals after its first step
# ended (the snapshot interval plus the rank's shipping, <= 80 ms, fit in
# one), plus SLACK for the poller's own period (0.05 s) and a loaded 2-core
# machine.
SLACK = 0.5
STEPS = 160          # ~25 ms a step on 2 cores: several seconds of live run

POLLER = r"""
import json, sys, time, urllib.request
url, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
seen, last_seq = False, None
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            d = json.loads(r.read())
    except Exception as e:
        if seen and "refused" in str(e).lower():
            break                       # the run is over: its server is gone
        time.sleep(0.05)
        continue
    seen = True
    if d.get("seq") != last_seq:
        last_seq = d.get("seq")
        nodes = sorted({g["node"] for g in d.get("gauges") or []
                        if g["name"].startswith("traceml_system_") and "node" in g})
        print(json.dumps({"t": time.monotonic(), "seq": d.get("seq"),
                          "status": d.get("status"), "world_size": d.get("world_size"),
                          "system_nodes": nodes,
                          "ranks": [[x["label"], x["steps_received"], x.get("host")]
                                    for x in d.get("ranks") or []]}), flush=True)
        if d.get("status") != "running":
            break
    time.sleep(0.05)
"""


class TwoNodes(object):
    """Node 0 and node 1 of one run, one rank each, started without waiting;
    `prefix(k)` runs a command on node k (its namespace, or here)."""

    def __init__(self, tmp_path, name, extra0=(), extra1=(), steps=STEPS):
        self.variant = two_node_variant()
        self.hosts = Hosts() if self.variant == "netns" else None
        port = free_port_pair()
        self.procs = []
        try:
            for k in (0, 1):
                env = {}
                extra = ["--interval", INTERVAL] + list(extra1 if k else extra0)
                if self.hosts:
                    # separate logs dirs, as on hosts without a shared file
                    # system: the secret comes through the environment
                    env = {"TRACEML_SECRET": "e2e-%d-live" % os.getpid(),
                           "GLOO_SOCKET_IFNAME": self.hosts.ifname(k)}
                    extra += ["--master-addr", self.hosts.addr_a]
                    logs = tmp_path / ("logs%d" % k)
                else:
                    logs = tmp_path / "logs"
                self.procs.append(launch(logs, name, 1, ["--steps", steps], nnodes=2,
                                         node_rank=k, port=port, env=env, extra=extra,
                                         prefix=self.prefix(k), wait=False))
            self.logs0 = tmp_path / ("logs0" if self.hosts else "logs")
        except Exception:
            self.close()
            raise

    def prefix(self, k):
        return self.hosts.prefix(k) if self.hosts else []

    def finish(self):
        return [finish(p) for p in self.procs]

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
        if self.hosts:
            self.hosts.close()
            self.hosts = None


def first_step_end_s(db, rank):
    """CLOCK_MONOTONIC seconds at which `rank`'s first step ended (its
    bracket: start_ns + traced_ns)."""
    con = sqlite3.connect(str(db))
    try:
        row = con.execute("SELECT start_ns + traced_ns FROM steps WHERE rank = ? "
                          "ORDER BY step LIMIT 1", (rank,)).fetchone()
    finally:
        con.close()
    assert row and row[0], "no step of rank %d in %s" % (rank, db)
    return row[0] / 1e9


def first_seen(snaps, label):
    """(poll time, snapshot) of the first snapshot listing `label` with steps."""
    for s in snaps:
        if any(r[0] == label and r[1] > 0 for r in s["ranks"]):
            return s["t"], s
    return None, None


@pytest.mark.solo
def test_dashboard_on_node0_shows_node1(tmp_path, capsys):
    dash = free_port_pair()
    nodes = TwoNodes(tmp_path, "mnlive", extra0=["--mode", "dashboard", "--dashboard-port", dash],
                     extra1=["--mode", "dashboard"])
    try:
        # one poller inside node 0's namespace: the dashboard binds its loopback
        poll = subprocess.Popen(
            nodes.prefix(0) + [PYTHON, "-c", POLLER, "http://127.0.0.1:%d/api/live" % dash, "90"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base_env())
        p0, p1 = nodes.finish()
        try:
            pout, perr = poll.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            poll.kill()
            pout, perr = poll.communicate()
    finally:
        nodes.close()
    s = ranks_finished(p0, nodes.logs0 / "mnlive", steps=STEPS)
    ranks_finished(p1, s)
    snaps = [json.loads(l) for l in pout.splitlines() if l.startswith("{")]
    assert snaps, "no /api/live answer from node 0:\n%s\n%s" % (perr[-2000:], explain(p0))
    assert "traceml: live dashboard: http://127.0.0.1:%d/" % dash in p0.err, p0.err
    # the follower trains, says in one line where the live view is, and
    # serves none itself
    notes = [l for l in p1.err.splitlines() if "live view" in l]
    assert len(notes) == 1 and "no live view here; --mode dashboard on node 0" in notes[0], p1.err
    assert "live dashboard:" not in p1.err

    t1, s1 = first_seen(snaps, "R1/N1")
    assert t1 is not None, "R1/N1 never in node 0's /api/live:\n%s" % "\n".join(
        json.dumps(s) for s in snaps[-5:])
    assert s1["world_size"] == 2
    done = snaps[-1]
    assert sorted(r[0] for r in done["ranks"]) == ["R0/N0", "R1/N1"], done
    assert dict((r[0], r[1]) for r in done["ranks"])["R1/N1"] >= STEPS // 2, done
    # node 1's system figures (its ranks sample their host) are there too
    assert any(1 in s["system_nodes"] and 0 in s["system_nodes"] for s in snaps), snaps[-1]

    # how soon: within two intervals of rank 1's first step
    lag = t1 - first_step_end_s(nodes.logs0 / "mnlive" / "telemetry.sqlite", 1)
    with capsys.disabled():
        print("\n  two-node variant: %s; R1/N1 in /api/live %.2f s after its first step "
              "(allowed %.2f s)" % (nodes.variant, lag, 2 * INTERVAL + SLACK))
    assert -0.1 <= lag <= 2 * INTERVAL + SLACK, lag


@pytest.mark.skipif(not shutil.which("tmux"), reason="tmux not installed (scripts/deps)")
@pytest.mark.solo
def test_terminal_view_on_node0_shows_node1(tmp_path):
    """--mode cli on node 0 in tmux (inside node 0's namespace): the RANKS
    panel lists R1/N1 with its node's CPU, the system panel names its node."""
    variant = two_node_variant()
    hosts = Hosts() if variant == "netns" else None
    port, secret = free_port_pair(), "e2e-%d-cli" % os.getpid()
    logs = [tmp_path / ("logs%d" % k if hosts else "logs") for k in (0, 1)]
    common = ["--run-name", "mncli", "--nproc-per-node", "1", "--nnodes", "2",
              "--master-port", str(port), "--interval", str(INTERVAL)]
    if hosts:
        common += ["--master-addr", hosts.addr_a]
    done = tmp_path / "exit_code"
    env0 = base_env(LANG="C.UTF-8", LC_ALL="C.UTF-8", TERM="xterm-256color",
                    PATH=os.environ.get("PATH", "/usr/bin:/bin"))
    extra = {}
    if hosts:
        extra = {"TRACEML_SECRET": secret, "GLOO_SOCKET_IFNAME": hosts.ifname(0)}
    env0.update(extra)
    cmd = "cd %s && %s %s run --mode cli --logs-dir %s --node-rank 0 %s %s --steps 1000; " \
          "echo $? > %s; sleep 600" % (REPO, " ".join(hosts.prefix(0)) if hosts else "",
                                       TRACEML, logs[0], " ".join(common),
                                       os.path.join(REPO, "examples", "distributed",
                                                    "train_ddp.py"), done)
    t = Tmux("mncli", cmd, env0)
    p1 = None
    try:
        env1 = {"TRACEML_SECRET": secret, "GLOO_SOCKET_IFNAME": hosts.ifname(1)} if hosts else {}
        p1 = subprocess.Popen(
            (hosts.prefix(1) if hosts else []) +
            [TRACEML, "run", "--mode", "cli", "--logs-dir", str(logs[1]), "--node-rank", "1"] +
            common + [os.path.join(REPO, "examples", "distributed", "train_ddp.py"),
                      "--steps", "1000"],
            cwd=REPO, env=base_env(**env1), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)

        def ranks_panel():
            s = t.screen()
            return s if ("RANKS" in s and "R1/N1" in s and "node CPU" in s and
                         "SYSTEM N0 | PROCESS R0/N0" in s) else None
        s = wait_for(ranks_panel, 60, step=0.2)
        assert s, "node 0's terminal view never listed R1/N1:\n" + t.screen()
        row = [l for l in s.splitlines() if "R1/N1" in l][0]
        assert "%" in row, row          # node 1's CPU, as its ranks sampled it
        finish(p1, timeout=120)
        assert "no live view here; --mode cli on node 0" in p1.err, p1.err
        assert wait_for(lambda: done.exists(), 60), t.history()[-3000:]
        node0 = SimpleNamespace(rc=int(done.read_text()), stdout="", stderr=t.history())
        s = ranks_finished(node0, logs[0] / "mncli", steps=1000)
        ranks_finished(p1, s)
        assert "mncli \u00b7 2/2 ranks \u00b7 2/2 nodes" in t.history()
    finally:
        t.kill()
        if p1 and p1.poll() is None:
            p1.kill()
            p1.communicate()
        if hosts:
            hosts.close()
