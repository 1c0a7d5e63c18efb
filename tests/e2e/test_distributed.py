"""Distributed runs, for real: DDP on gloo (CPU) launched by `traceml run
--nproc-per-node N` through torch.distributed.run, several nodes (two
network namespaces joined by a veth pair, or two launches on loopback when
namespaces cannot be created), Slurm's srun shape, `-- torchrun`, and the
faults of docs/distributed.md (a rank SIGKILLed mid-run, a node that
cannot reach the aggregator).

The scenarios inject a known cause (examples/distributed/train_ddp.py):
one rank's loader slowed, one rank's forward slowed, every loader slowed,
nothing; the verdict must name the cause and the rank.
"""
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import (PYTHON, REPO, TIMEOUT, TRACEML, base_env, check_healthy, covers,
                      free_port_pair, machine_contended, ranks_finished)

SCRIPT = os.path.join(REPO, "examples", "distributed", "train_ddp.py")


def launch(logs, name, nproc, args=(), nnodes=1, node_rank=0, extra=(), env=None,
           prefix=(), port=None, wait=True):
    cmd = list(prefix) + [TRACEML, "run", "--logs-dir", str(logs), "--run-name", name,
                          "--nproc-per-node", str(nproc)]
    if nnodes > 1:
        cmd += ["--nnodes", str(nnodes), "--node-rank", str(node_rank)]
    if port:
        cmd += ["--master-port", str(port)]
    cmd += [str(e) for e in extra] + [SCRIPT] + [str(a) for a in args]
    p = subprocess.Popen(cmd, cwd=REPO, env=base_env(**(env or {})), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    if not wait:
        return p
    return finish(p)


def finish(p, timeout=TIMEOUT):
    out, err = p.communicate(timeout=timeout)
    p.out, p.err = out, err
    return p


def summary(logs, name):
    path = os.path.join(str(logs), name, "final_summary.json")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def explain(p):
    return "rc=%s\n--- stdout\n%s\n--- stderr\n%s" % (p.returncode, p.out[-4000:],
                                                      p.err[-4000:])


def rank_label(s, idx):
    return s["step_time"]["per_rank"][idx]["label"]


SCENARIOS = [
    # (name, ranks, script args, expected kind, culprit rank or None); on two
    # ranks the 0.5.0 demos have the input straggler, every rank's slow
    # input and the healthy run (test_demos_050.py), and the compute
    # straggler on rank 1: here it is on rank 0. On four (two ranks a core
    # here): a straggler among many, and a healthy run that must not find
    # one (every rank's slow input is the demos' on two)
    ("compute_straggler", 2, ["--slow-compute-rank", 0], "COMPUTE_STRAGGLER", 0),
    ("input_straggler", 4, ["--slow-input-rank", 2], "INPUT_STRAGGLER", 2),
    ("compute_straggler", 4, ["--slow-compute-rank", 3], "COMPUTE_STRAGGLER", 3),
    ("healthy", 4, [], None, None),
]

STRAGGLERS = ("INPUT_STRAGGLER", "H2D_STRAGGLER", "COMPUTE_STRAGGLER", "STRAGGLER")


@pytest.mark.parametrize("name,ranks,args,kind,culprit", SCENARIOS,
                         ids=["%s-%d" % (s[0], s[1]) for s in SCENARIOS])
def test_ddp_scenario(tmp_path, name, ranks, args, kind, culprit):
    p = launch(tmp_path / "logs", "ddp", ranks, args, port=free_port_pair())
    s = ranks_finished(p, tmp_path / "logs" / "ddp", steps=40)
    meta = s["meta"]
    assert meta["world_size"] == ranks and meta["ranks_reported"] == ranks, meta
    assert meta["missing_ranks"] == [] and meta["lost_ranks"] == []
    assert meta["common_steps"] >= 30, meta
    kinds = [i["kind"] for i in s["step_time"]["issues"]]
    prim = s["primary_diagnosis"]
    header = "ddp · %d/%d ranks" % (ranks, ranks)
    assert header in p.out, p.out[:600]
    assert "STEP TIMING (Median R" in p.out
    if kind is None:
        assert not any(k in STRAGGLERS for k in kinds), kinds
        assert prim["kind"] not in STRAGGLERS
        return
    assert prim["kind"] == kind, (prim, kinds)
    label = "R%d/N0" % culprit
    assert prim["severity"] == "CRITICAL", prim
    assert label in prim["why"], prim["why"]
    st = s["step_time"]["straggler"]
    assert st["culprit"]["rank"] == culprit, st
    # per-step evidence: the same rank was the culprit in most window steps
    assert st["culprit_steps"] >= 0.8 * meta["window_steps"], st
    assert "%s was the straggler in" % label in p.out


def test_residual_straggler_names_the_part(tmp_path):
    """Rank 1 alone computes matmuls for 40 ms in the step after
    optimizer.step(), in no phase (a rank-only metric, extra work): its
    peer waits for it at the next all-reduce. Every phase of the slow rank
    is compared with its peer's: a COMPUTE STRAGGLER whose Why names
    Residual and how much more it took (within 10% of what rank 1 measured
    it spent), not a STRAGGLER that no traced phase explains."""
    p = launch(tmp_path / "logs", "ddp", 2, ["--steps", 60, "--slow-residual-rank", 1,
                                             "--delay-ms", 40])
    s = ranks_finished(p, tmp_path / "logs" / "ddp", steps=60)
    prim = s["primary_diagnosis"]
    assert (prim["kind"], prim["severity"]) == ("COMPUTE_STRAGGLER", "CRITICAL"), prim
    st = s["step_time"]["straggler"]
    assert st["culprit"]["rank"] == 1 and st["component"] == "compute", st
    assert st["coverage_percent"]["residual"] >= 80, st
    m = re.match(r"R1/N0's Residual took ([0-9.]+) ms more than R0/N0's", prim["why"])
    assert m, prim["why"]
    spent = re.search(r"rank 1 residual work ([0-9.]+) ms/step", p.out)
    assert spent, p.out[-2000:]
    ref = float(spent.group(1))
    assert covers(float(m.group(1)), ref), "Residual excess %s ms, spent %.3f ms" % (
        m.group(1), ref)


def test_one_host_communication_advice(tmp_path):
    """2 ranks on this host all-reduce 16 MB of gradients a step over
    loopback gloo against 5 ms of compute: COMMUNICATION-BOUND, and its
    Next fits the topology: no network is involved, gloo reduces on the
    cores the training needs; never "check the link between the nodes".
    And it names what `traceml tune` measures as a gain there (docs/
    diagnosis.md section 6, row 51): gradient_as_bucket_view, not a comm
    hook, whose casts take the same cores (no gain)."""
    p = launch(tmp_path / "logs", "ddp", 2, ["--steps", 40, "--grad-mb", 16, "--device-ms", 5])
    s = ranks_finished(p, tmp_path / "logs" / "ddp", steps=40)
    issue = [i for i in s["step_time"]["issues"] if i["kind"] == "COMMUNICATION_BOUND"]
    if not issue and machine_contended(s):
        # beside other processes' load (tests/README.md's busy loops) the
        # ranks' wait for a core explains the exposed communication: CPU
        # CONTENTION, whose Next is the machine's, not the transfer's
        cont = [i for i in s["step_time"]["issues"] if i["kind"] == "CPU_CONTENTION"]
        assert cont and "Give the training its cores" in cont[0]["next"], s["step_time"]["issues"]
        return
    assert issue, [i["kind"] for i in s["step_time"]["issues"]]
    assert "Every rank is on this host and trains on its CPU" in issue[0]["next"], issue[0]
    assert "link between the nodes" not in issue[0]["next"], issue[0]
    assert "gradient_as_bucket_view=True" in issue[0]["next"], issue[0]
    assert "send less" not in issue[0]["next"], issue[0]


def test_rank_only_work_between_steps(tmp_path, slept):
    """Rank 0 alone spends 100 ms between steps every 5 steps (a rank-0-only
    evaluation): 20 ms per step outside its steps, which rank 1 waits out
    in its all-reduce. The verdict names who, how much per step and what it
    costs the other, within 10% (of what rank 0 really slept); not
    UNTRACED-HEAVY, not a plain STRAGGLER."""
    p = launch(tmp_path / "logs", "ddp", 2, ["--steps", 60, "--rank-eval", 0, "--eval-every", 5,
                                             "--delay-ms", 100], env=slept.env())
    s = ranks_finished(p, tmp_path / "logs" / "ddp", steps=60)
    prim = s["primary_diagnosis"]
    assert prim["kind"] == "OUTSIDE_STEP_STRAGGLER", prim
    st = s["step_time"]["straggler"]
    assert st["culprit"]["rank"] == 0 and st["component"] == "outside_step", st
    per_step = slept.mean(100) / 5
    assert abs(st["visible_cost_ms"] - per_step) <= 2.0, st       # what rank 1 waits
    per_rank = {r["rank"]: r for r in s["step_time"]["per_rank"]}
    outside = per_rank[0]["untraced_ms"]
    assert abs(outside - per_step) <= 2.0, per_rank[0]            # what rank 0 does
    assert "R0/N0 spends" in prim["why"] and "outside the step" in prim["why"], prim
    assert "rank-0-only evaluation" in prim["next"], prim


@pytest.mark.solo
def test_rank_only_work_inside_communication_bound(tmp_path, slept):
    """nanoGPT's shape: rank 0 alone evaluates every 10 steps (80 ms, 8 ms
    a step on average) in a run whose all-reduce of 16 MB is exposed on
    every rank. Rank 1 waits out rank 0's evaluation in its all-reduce: a
    straggler score near 0.08, under straggler_warn, so the verdict is the
    transport's (COMMUNICATION-BOUND; CPU CONTENTION where other processes
    take the cores, as the other tests of a parallel run do) -- and it says
    how much of rank 1's wait is rank 0's time between steps, within 2 ms
    of what rank 0 really slept per step, and the OUTSIDE-STEP STRAGGLER
    naming R0 follows (or leads, where the score crosses it). Under a
    parallel run's load rank 1's exposed communication grows and its wait
    for rank 0 falls under a fifth of it (rightly named no more): solo."""
    p = launch(tmp_path / "logs", "ddp", 2, ["--steps", 60, "--rank-eval", 0, "--eval-every", 10,
                                             "--delay-ms", 80, "--grad-mb", 16,
                                             "--device-ms", 60], env=slept.env())
    s = ranks_finished(p, tmp_path / "logs" / "ddp", steps=60)
    issues = {i["kind"]: i for i in s["step_time"]["issues"]}
    comm = "CPU_CONTENTION" if "CPU_CONTENTION" in issues else "COMMUNICATION_BOUND"
    assert comm in issues and "OUTSIDE_STEP_STRAGGLER" in issues, list(issues)
    st = s["step_time"]["straggler"]
    assert st["culprit"]["rank"] == 0 and st["component"] == "outside_step", st
    per_step = slept.mean(80) / 10
    assert abs(st["visible_cost_ms"] - per_step) <= 2.0, st
    assert re.search(r"Of R1/N0's, [0-9.]+ ms per step is its wait for R0/N0, not the transfer: "
                     r"its time between steps", issues[comm]["why"]), issues
    assert "R0/N0 spends" in issues["OUTSIDE_STEP_STRAGGLER"]["why"], issues


@pytest.mark.parametrize("traced", ["inner", "wrapper"])
def test_wait_in_ddp_buffer_broadcast(tmp_path, slept, traced):
    """A model with buffers (BatchNorm): DDP's forward broadcasts them from
    rank 0 before the module's own forward, so the fast rank waits for the
    slow one there, not in the gradient all-reduce. Rank 1's loader sleeps
    60 ms: INPUT STRAGGLER naming R1 (not INPUT-BOUND over the median),
    whether the step names the module inside DDP (trace_step(model.module),
    as TraceML 0.5.0's examples do: the broadcast runs around its forward)
    or the DDP wrapper (it runs inside: Communication, not Forward); R1's
    Input Wait exceeds R0's by what it really slept, within 10%."""
    args = ["--batchnorm", "--slow-input-rank", 1] + (["--trace-inner"] if traced == "inner" else [])
    p = launch(tmp_path / "logs", "bn", 2, args, env=slept.env())
    s = ranks_finished(p, tmp_path / "logs" / "bn", steps=40)
    prim = s["primary_diagnosis"]
    assert prim["kind"] == "INPUT_STRAGGLER" and prim["severity"] == "CRITICAL", prim
    assert "R1/N0" in prim["why"], prim
    st = s["step_time"]["straggler"]
    assert st["culprit"]["rank"] == 1 and st["component"] == "input_wait", st
    ranks = {r["rank"]: r for r in s["step_time"]["per_rank"]}
    excess = ranks[1]["input_wait_ms"] - ranks[0]["input_wait_ms"]
    ref = slept.mean(60)
    assert abs(excess - ref) <= 0.1 * ref, (excess, ref)
    # rank 0's wait is the broadcast's: Communication, neither Residual nor Forward
    assert ranks[0]["communication_ms"] >= 0.8 * ref, ranks[0]
    assert ranks[0]["residual_ms"] < 0.2 * ref and ranks[0]["forward_ms"] < 0.6 * ref, ranks[0]


def test_ddp_batchnorm_healthy(tmp_path):
    """The same model with buffers, nothing injected, the inner module
    traced: the broadcast each step is no false alarm (60 ms of compute a
    step, as row 42 of docs/diagnosis.md)."""
    p = launch(tmp_path / "logs", "bn", 2, ["--batchnorm", "--trace-inner", "--device-ms", 60])
    s = ranks_finished(p, tmp_path / "logs" / "bn", steps=40)
    kinds = [i["kind"] for i in s["step_time"]["issues"]]
    assert not any(k in STRAGGLERS for k in kinds) and "RESIDUAL_HEAVY" not in kinds, kinds
    check_healthy(s)
    for r in s["step_time"]["per_rank"]:
        assert r["communication_ms"] is not None and r["communication_ms"] > 0, r


COMM_PATCHES = r'''
import json, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
import traceml_ai as traceml
names = ("_broadcast_coalesced", "all_reduce", "broadcast", "_register_comm_hook")
before = {n: getattr(dist, n) for n in names}
init = DDP.__dict__["__init__"]
traceml.init(mode="auto")
print("PATCHED " + json.dumps([n for n in names if getattr(dist, n) is not before[n]]
                              + (["DDP.__init__"] if DDP.__dict__["__init__"] is not init else [])))
'''


@pytest.mark.parametrize("comm", ["1", "0"])
def test_comm_off_leaves_ddp_alone(plain_python, comm):
    """TRACEML_COMM=0: nothing of torch.distributed or DDP is touched (the
    buffer broadcast included); by default all of it is timed."""
    r = plain_python("patches", code=COMM_PATCHES, env={"TRACEML_COMM": comm})
    assert r.rc == 0, r.explain()
    line = [l for l in r.stdout.splitlines() if l.startswith("PATCHED ")][0]
    patched = json.loads(line[len("PATCHED "):])
    if comm == "0":
        assert patched == [], patched
    else:
        assert patched == ["_broadcast_coalesced", "all_reduce", "broadcast",
                           "_register_comm_hook", "DDP.__init__"], patched


def test_sigkilled_rank(tmp_path):
    """A rank SIGKILLed mid-run: torchrun tears the group down, the summary
    is written within 10 s of the death, names the lost rank, and the exit
    code is the training's (torchrun's: 1)."""
    logs = tmp_path / "logs"
    p = launch(logs, "kill", 2, ["--kill-rank", 1, "--kill-at-step", 12, "--steps", 200],
               port=free_port_pair(), wait=False)
    # the death: the moment rank 1 printed its last words
    out_lines = []
    death = None
    for line in p.stdout:
        out_lines.append(line)
        if "SIGKILL at step" in line and death is None:
            death = time.monotonic()
    p.wait(timeout=TIMEOUT)
    done = time.monotonic()
    p.out, p.err = "".join(out_lines), p.stderr.read()
    assert death is not None, explain(p)
    assert p.returncode == 1, explain(p)
    assert done - death < 10.0, "summary %.1f s after the death" % (done - death)
    s = summary(logs, "kill")
    assert s["status"] == "failed" and s["exit_code"] == 1
    lost = s["meta"]["lost_ranks"]
    assert [r["rank"] for r in lost] == [1], lost
    assert lost[0]["last_step"] is not None and lost[0]["last_step"] < 12
    assert "Lost (no goodbye): R1/N0 after step" in p.out, p.out[-3000:]
    m = json.load(open(os.path.join(str(logs), "kill", "manifest.json")))
    assert m["status"] == "failed" and m["exit_code"] == 1


def test_rank_aborts_at_exit(tmp_path):
    """Rank 1 dies in std::terminate at interpreter exit, after its last
    step and TraceML's goodbye, as PyTorch's gloo exit race ends a rank
    (train_ddp.py --abort-at-exit-rank): the exit code stays torchrun's 1,
    and the summary says what happened: every rank finished its steps,
    then R1/N0 aborted at exit (status failed, meta.exit_signals), in the
    box and in the box `view --re-render` draws again; ranks_finished, what
    every multi-rank test goes through, accepts exactly this."""
    logs = tmp_path / "logs"
    p = launch(logs, "ab", 2, ["--steps", 20, "--abort-at-exit-rank", 1], port=free_port_pair())
    assert p.returncode == 1, explain(p)
    s = ranks_finished(p, logs / "ab", ranks=2, steps=20)
    assert (s["status"], s["exit_code"]) == ("failed", 1), s["status"]
    assert s["meta"]["exit_signals"] == [{"rank": 1, "node": 0, "signal": 6}], s["meta"]
    ended = ("Ended: FAILED with exit code 1 after the training: every rank finished its steps "
             "and said goodbye, then R1/N0 aborted at exit (SIGABRT)")
    assert ended in " ".join(p.out.replace("|", " ").split()), p.out[:1500]
    v = subprocess.run([TRACEML, "view", "--re-render", str(logs / "ab" / "final_summary.json")],
                       cwd=REPO,
                       env=base_env(), capture_output=True, text=True, timeout=60)
    assert v.returncode == 0 and ended in " ".join(v.stdout.replace("|", " ").split()), (
        v.stdout[:1500], v.stderr)
    m = json.load(open(os.path.join(str(logs), "ab", "manifest.json")))
    assert (m["status"], m["exit_code"]) == ("failed", 1), m


def two_node_variant():
    """'netns' when two network namespaces can be made here, else 'loopback'."""
    if os.environ.get("TRACEML_TEST_NO_NETNS") or not shutil.which("ip"):
        return "loopback"
    name = "tmlchk%d" % os.getpid()
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True)
    if r.returncode != 0:
        return "loopback"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return "netns"


class Hosts(object):
    """Two hosts: namespaces A (10.77.x.1) and B (10.77.x.2) on a veth pair."""

    def __init__(self):
        tag = os.getpid() % 250 + 1
        self.a, self.b = "tmlA%d" % os.getpid(), "tmlB%d" % os.getpid()
        self.addr_a, self.addr_b = "10.77.%d.1" % tag, "10.77.%d.2" % tag
        self.va, self.vb = "tva%d" % os.getpid(), "tvb%d" % os.getpid()
        sh = [
            "ip netns add %s" % self.a, "ip netns add %s" % self.b,
            "ip link add %s type veth peer name %s" % (self.va, self.vb),
            "ip link set %s netns %s" % (self.va, self.a),
            "ip link set %s netns %s" % (self.vb, self.b),
            "ip -n %s addr add %s/24 dev %s" % (self.a, self.addr_a, self.va),
            "ip -n %s addr add %s/24 dev %s" % (self.b, self.addr_b, self.vb),
            "ip -n %s link set %s up" % (self.a, self.va),
            "ip -n %s link set %s up" % (self.b, self.vb),
            "ip -n %s link set lo up" % self.a, "ip -n %s link set lo up" % self.b,
        ]
        for c in sh:
            subprocess.run(c.split(), check=True, capture_output=True)

    def prefix(self, host):
        return ["ip", "netns", "exec", self.a if host == 0 else self.b]

    def shape(self, rate):
        """Limits both directions of the link to `rate` (tc's syntax,
        "100mbit") with a token bucket filter (tbf): this kernel has no
        netem, so a delay cannot be added, a bandwidth limit can."""
        for host in (0, 1):
            subprocess.run(self.prefix(host) + ["tc", "qdisc", "add", "dev", self.ifname(host),
                                                "root", "tbf", "rate", rate, "burst", "32kbit",
                                                "latency", "400ms"],
                           check=True, capture_output=True)

    def ifname(self, host):
        return self.va if host == 0 else self.vb

    def close(self):
        for n in (self.a, self.b):
            subprocess.run(["ip", "netns", "del", n], capture_output=True)


def run_two_nodes(tmp_path, node1_extra=(), args=(), name="mn", shape=None, node0_extra=()):
    """Node 0 and node 1, one rank each, straggler injected by args, the
    link limited to `shape` (tc's rate syntax; namespaces only). Returns
    (variant, node0 process, node1 process, logs of node 0)."""
    variant = two_node_variant()
    port = free_port_pair()
    secret = "e2e-%d-secret" % os.getpid()
    if variant == "netns":
        hosts = Hosts()
        try:
            if shape:
                hosts.shape(shape)
            # separate logs dirs, like hosts without a shared file system:
            # the secret reaches node 1 through the environment
            procs = []
            for k in (0, 1):
                env = {"TRACEML_SECRET": secret, "GLOO_SOCKET_IFNAME": hosts.ifname(k)}
                procs.append(launch(tmp_path / ("logs%d" % k), name, 1, args, nnodes=2,
                                    node_rank=k, port=port, env=env,
                                    extra=["--master-addr", hosts.addr_a] +
                                    (list(node1_extra) if k else list(node0_extra)),
                                    prefix=hosts.prefix(k), wait=False))
            p0, p1 = [finish(p) for p in procs]
        finally:
            hosts.close()
        logs0 = tmp_path / "logs0"
    else:
        # one host, a shared logs dir: the secret goes through the file
        procs = [launch(tmp_path / "logs", name, 1, args, nnodes=2, node_rank=k, port=port,
                        extra=list(node1_extra) if k else list(node0_extra), wait=False)
                 for k in (0, 1)]
        p0, p1 = [finish(p) for p in procs]
        logs0 = tmp_path / "logs"
    return variant, p0, p1, logs0


def test_two_nodes_straggler_on_node1(tmp_path, capsys):
    variant, p0, p1, logs0 = run_two_nodes(tmp_path, args=["--slow-input-rank", 1])
    with capsys.disabled():
        print("\n  two-node variant: %s" % variant)
    s = ranks_finished(p0, logs0 / "mn", steps=40)
    ranks_finished(p1, s)
    assert s["meta"]["nodes"] == 2 and s["meta"]["nodes_reported"] == 2, s["meta"]
    assert s["meta"]["ranks_reported"] == 2
    prim = s["primary_diagnosis"]
    assert prim["kind"] == "INPUT_STRAGGLER", prim
    assert "R1/N1" in prim["why"], prim["why"]
    assert "mn · 2/2 ranks · 2/2 nodes ·" in p0.out
    # only node 0 prints the summary
    assert "TraceML Run Summary" not in p1.out
    assert "printed on node 0" in p1.err
    assert not os.path.exists(os.path.join(str(logs0), "mn", "secret"))


def test_node_cannot_reach_aggregator(tmp_path):
    """Node 1's ranks are pointed at a port nobody listens on: they train
    anyway, and node 0's summary says rank 1 never reported."""
    dead = free_port_pair()
    variant, p0, p1, logs0 = run_two_nodes(tmp_path, node1_extra=["--aggregator-port", dead],
                                           name="cut")
    s = ranks_finished(p0, logs0 / "cut", ranks=1, missing=[1], steps=40)
    ranks_finished(p1, s, ranks=1, missing=[1])
    assert s["meta"]["missing_ranks"] == [1], (variant, s["meta"])
    assert s["meta"]["ranks_reported"] == 1
    # node 0's training exited 0: not called a crash
    assert "Never reported: R1 (the training exited 0: not a crash)" in p0.out, p0.out
    assert "cut · 1/2 ranks" in p0.out


def test_srun_shape(tmp_path):
    """`srun -n 2 traceml run train.py`, simulated: two launchers with
    Slurm's environment; task 0 hosts the aggregator and prints."""
    port = free_port_pair()
    logs = tmp_path / "logs"
    procs = []
    for k in (0, 1):
        env = {"SLURM_PROCID": k, "SLURM_LOCALID": k, "SLURM_NTASKS": 2,
               "SLURM_STEP_NUM_TASKS": 2, "SLURM_STEP_ID": 0, "SLURM_JOB_ID": 4242,
               "SLURM_NODEID": 0, "SLURM_NNODES": 1, "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": port}
        cmd = [TRACEML, "run", "--logs-dir", str(logs), SCRIPT, "--slow-input-rank", 0]
        procs.append(subprocess.Popen([str(c) for c in cmd], cwd=REPO, env=base_env(**env),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    p0, p1 = [finish(p) for p in procs]
    runs = sorted(os.listdir(str(logs)))
    assert "train_ddp-slurm4242.0" in runs and "train_ddp-slurm4242.0.task1" in runs, runs
    s = ranks_finished(p0, logs / "train_ddp-slurm4242.0", steps=40)
    ranks_finished(p1, s)
    assert s["meta"]["world_size"] == 2 and s["meta"]["ranks_reported"] == 2
    assert s["primary_diagnosis"]["kind"] == "INPUT_STRAGGLER"
    assert "R0/N0" in s["primary_diagnosis"]["why"]
    assert "TraceML Run Summary" in p0.out and "TraceML Run Summary" not in p1.out


def test_dashdash_torchrun(tmp_path):
    """`traceml run -- python -m torch.distributed.run ...` runs the command
    as given; every rank reports to the one aggregator."""
    port = free_port_pair()
    logs = tmp_path / "logs"
    cmd = [TRACEML, "run", "--logs-dir", str(logs), "--run-name", "dd", "--",
           PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--redirects", "2", "--tee", "2", "--master_port", str(port), SCRIPT,
           "--slow-compute-rank", "1"]
    p = subprocess.run(cmd, cwd=REPO, env=base_env(), capture_output=True,
                       text=True, timeout=TIMEOUT)
    s = ranks_finished(p, logs / "dd", steps=40)
    assert s["meta"]["world_size"] == 2 and s["meta"]["ranks_reported"] == 2
    assert s["primary_diagnosis"]["kind"] == "COMPUTE_STRAGGLER"
    assert "R1/N0" in s["primary_diagnosis"]["why"]


@pytest.mark.parametrize("argv,msg", [
    (["--nnodes", "2", "--node-rank", "1", SCRIPT], "needs --run-name"),
    (["--nproc-per-node", "2", "--", "/bin/true"], "take a SCRIPT"),
    (["--nnodes", "2", "--node-rank", "2", "--run-name", "x", SCRIPT], "below --nnodes"),
    (["--nproc-per-node", "0", SCRIPT], "--nproc-per-node"),
])
def test_bad_distributed_usage(tmp_path, argv, msg):
    p = subprocess.run([TRACEML, "run", "--logs-dir", str(tmp_path / "logs")] + argv,
                       cwd=REPO, env=base_env(), capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert msg in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not os.path.exists(str(tmp_path / "logs"))


def test_rank_from_torch_distributed(tmp_path):
    """Ranks started by torch.multiprocessing.spawn have no RANK in their
    environment: their identity comes from torch.distributed."""
    logs = tmp_path / "logs"
    spawn = os.path.join(REPO, "examples", "distributed", "spawn_ddp.py")
    p = subprocess.run([TRACEML, "run", "--logs-dir", str(logs), "--run-name", "spawned",
                        spawn, "--steps", "30", "--delay-ms", "20",
                        "--port", str(free_port_pair())],
                       cwd=REPO, env=base_env(), capture_output=True, text=True,
                       timeout=TIMEOUT)
    s = ranks_finished(p, logs / "spawned", ranks=2, steps=30)
    assert s["primary_diagnosis"]["label"] == "INPUT STRAGGLER", s["primary_diagnosis"]
    assert "R1/N0" in s["primary_diagnosis"]["why"]


@pytest.mark.parametrize("how", ["spawn", "torchrun"])
def test_watch_reports_every_rank(tmp_path, how):
    """`traceml watch` on real ranks (torch.multiprocessing.spawn, or
    --nproc-per-node through torchrun): each rank's process is reported,
    the spawning parent is no rank (no CONFLICT), and no step is kept."""
    logs = tmp_path / "logs"
    spawn = os.path.join(REPO, "examples", "distributed", "spawn_ddp.py")
    ddp = os.path.join(REPO, "tests", "fixtures", "v05", "tiny.py")
    cmd = ([spawn, "--steps", "30", "--delay-ms", "20", "--port", str(free_port_pair())]
           if how == "spawn" else ["--nproc-per-node", "2", ddp])
    p = subprocess.run([TRACEML, "watch", "--interval", "0.2", "--logs-dir", str(logs),
                        "--run-name", "w"] + cmd, cwd=str(tmp_path),
                       env=base_env(STEPS="40", DELAY_MS="5"), capture_output=True,
                       text=True, timeout=TIMEOUT)
    s = ranks_finished(p, logs / "w", ranks=2)
    assert "TraceML Watch Summary" in p.stdout and "CONFLICT" not in p.stdout, p.stdout
    assert s["meta"]["profile"] == "watch", s["meta"]
    assert s["meta"]["common_steps"] == 0
    assert sorted(r["rank"] for r in s["process"]["per_rank"]) == [0, 1]
    assert all(r["rss_bytes"] for r in s["process"]["per_rank"]), s["process"]["per_rank"]
