"""Communication, measured for real: DDP on gloo across two hosts (network
namespaces joined by a veth pair, tests/e2e/test_distributed.py), the link
shaped with tc's token bucket filter, and explicit torch.distributed
collectives on one host.

Known causes, known verdicts (docs/diagnosis.md, COMMUNICATION-BOUND):
- a bandwidth-limited link with a model whose gradients take longer to
  send than backward takes to compute: COMMUNICATION-BOUND, every rank's
  exposed communication over the threshold, and the bandwidth TraceML
  infers from bytes over time at the shaped rate (at most 20% above it,
  and on a busy host less, by what waiting for a core adds in flight);
- an unshaped link with one rank's forward slowed: COMPUTE STRAGGLER
  naming that rank -- its peer's wait in the all-reduce is not taken for a
  slow network;
- an unshaped link, nothing injected: neither.
"""
import os
import subprocess

import pytest

from conftest import (REPO, TIMEOUT, TRACEML, base_env, free_port_pair,
                      host_saturated, ranks_finished)
from test_distributed import launch, run_two_nodes, two_node_variant

RATE_MBIT = 50           # the shaped link, each direction
GRAD_MB = 1.0            # the gradients DDP all-reduces each step


def kinds(s):
    return [i["kind"] for i in s["step_time"]["issues"]]


def per_rank(s):
    return s["step_time"]["per_rank"]


def no_comm_bound(s):
    """No COMMUNICATION-BOUND, but what a saturated host earns: both ranks
    share this machine's cores, and beside two busy loops a rank waiting
    for a core holds the all-reduce up (both tests failed so in the busy
    run of 361822e); the Next line then names the host CPU first."""
    comm = [i for i in s["step_time"]["issues"] if i["kind"] == "COMMUNICATION_BOUND"]
    if comm and host_saturated(s):
        assert "HIGH CPU" in comm[0]["next"], comm[0]
    else:
        assert not comm, kinds(s)


def needs_netns():
    if two_node_variant() != "netns":
        pytest.skip("network namespaces cannot be made here (needs root and iproute2)")


@pytest.mark.solo
def test_shaped_link_is_communication_bound(tmp_path):
    needs_netns()
    variant, p0, p1, logs0 = run_two_nodes(
        tmp_path, args=["--grad-mb", GRAD_MB, "--steps", 30], name="slowlink",
        shape="%dmbit" % RATE_MBIT)
    s = ranks_finished(p0, logs0 / "slowlink", steps=30)
    ranks_finished(p1, s)
    prim = s["primary_diagnosis"]
    assert prim["kind"] == "COMMUNICATION_BOUND", (prim, kinds(s))
    assert prim["severity"] == "CRITICAL"
    assert "STRAGGLER" not in " ".join(kinds(s))
    rate = RATE_MBIT * 1e6 / 8
    for r in per_rank(s):
        share = r["communication_ms"] / r["step_time_ms"]
        assert share >= 0.20, (r["label"], share)
        bw = r["communication_bytes_per_s"]
        # never above the shaped link (20% for the bucket's burst); below
        # it only by what a busy host adds to the time in flight (gloo's
        # threads waiting for a core), never by a factor: bytes are checked
        # exactly below, so a misplaced interval would show here
        assert 0.5 * rate <= bw <= 1.2 * rate, (r["label"], bw / 1e6, rate / 1e6)
        # what DDP sent: 2(n-1)/n of the gradients, n = 2
        assert abs(r["communication_bytes_per_step"] - GRAD_MB * 1e6) < 0.05 * GRAD_MB * 1e6, r
    assert "├─ Communication" in p0.out and "◀ cause" in p0.out
    assert "MB/s" in prim["why"]


@pytest.mark.solo
def test_slow_rank_on_fast_link_is_a_straggler_not_the_network(tmp_path):
    """A step of 100 ms of compute, as the healthy run below. With the
    default 15 ms, the slow rank's own all-reduce (gloo's 1-4 ms on the veth
    pair) had TCP stalls of 15-50 ms in a few steps of 30, which both ranks
    waited out: 10-13% of its 65 ms step, over the threshold -- rightly, a
    real cost, but not the cause this test injects. At 100 ms it is
    1.4-1.9 ms a step (3 runs, kernel 6.18)."""
    needs_netns()
    variant, p0, p1, logs0 = run_two_nodes(
        tmp_path, args=["--slow-compute-rank", 1, "--delay-ms", 40, "--device-ms", 100,
                        "--steps", 30],
        name="slowrank")
    s = ranks_finished(p0, logs0 / "slowrank", steps=30)
    ranks_finished(p1, s)
    prim = s["primary_diagnosis"]
    assert prim["kind"] == "COMPUTE_STRAGGLER", (prim, kinds(s))
    assert "R1/N1" in prim["why"], prim["why"]
    no_comm_bound(s)
    # the fast rank waits for the slow one in its all-reduce: its exposed
    # communication holds the wait (about the injected 40 ms), the slow
    # rank's does not
    fast, slow = per_rank(s)[0], per_rank(s)[1]
    assert fast["communication_ms"] - slow["communication_ms"] > 0.8 * 40, (fast, slow)


@pytest.mark.solo
def test_healthy_two_nodes_no_false_alarm(tmp_path):
    """A step of 60 ms of compute: the small model's all-reduce (a few ms of
    gloo latency on this machine) stays far below the 10% threshold."""
    needs_netns()
    variant, p0, p1, logs0 = run_two_nodes(tmp_path, args=["--steps", 30, "--device-ms", 60],
                                           name="healthy")
    s = ranks_finished(p0, logs0 / "healthy", steps=30)
    ranks_finished(p1, s)
    no_comm_bound(s)
    assert "STRAGGLER" not in " ".join(kinds(s)), kinds(s)
    for r in per_rank(s):
        assert r["communication_ms"] is not None and r["communication_bytes_per_step"] > 0


def test_explicit_collectives_and_user_comm_hook(tmp_path):
    """One host, 2 ranks: a blocking dist.all_reduce in every step (the COMM
    phase), and the user's own fp16 comm hook registered on the DDP model
    keeps working inside TraceML's (training still converges on the same
    numbers as without TraceML), its bytes what the hook sends."""
    logs = tmp_path / "logs"
    args = ["--all-reduce-loss", "--comm-hook", "fp16", "--grad-mb", 1, "--steps", 25,
            "--print-loss"]
    p = launch(logs, "explicit", 2, args, port=free_port_pair())
    s = ranks_finished(p, logs / "explicit", steps=25)
    for r in per_rank(s):
        assert r["communication_ms"] is not None and r["communication_ms"] > 0, r
        assert r["collectives_per_step"] >= 2, r     # buckets + the loss
        # the hook sends fp16: half of the 1 MB of fp32 gradients (and the
        # small MLP's), one rank of two sending 2(n-1)/n = 1x of it
        assert 0.5e6 <= r["communication_bytes_per_step"] <= 0.56e6, r
    # the same run without TraceML: the same losses (the hook still ran)
    q = launch(tmp_path / "logs2", "explicit2", 2, args, port=free_port_pair(),
               extra=["--disable-traceml"])
    ranks_finished(q, None)
    losses = [l for l in p.out.splitlines() if l.startswith("loss ")]
    assert losses and losses == [l for l in q.out.splitlines() if l.startswith("loss ")]


def test_fsdp_collectives_are_communication(tmp_path):
    """FSDP2 on gloo: its all-gathers and reduce-scatters
    (dist.all_gather_single / reduce_scatter_single in torch 2.13) are
    timed as Communication with their bytes, on every rank."""
    logs = tmp_path / "logs"
    script = os.path.join(REPO, "examples", "distributed", "train_fsdp.py")
    p = subprocess.run([TRACEML, "run", "--logs-dir", str(logs), "--run-name", "fsdp",
                        "--nproc-per-node", "2", "--master-port", str(free_port_pair()),
                        script, "--steps", "25"],
                       cwd=REPO, env=base_env(), capture_output=True, text=True, timeout=TIMEOUT)
    s = ranks_finished(p, logs / "fsdp", steps=25)
    for r in per_rank(s):
        assert r["collectives_per_step"] >= 4, r          # gathers forward and backward, scatters
        assert r["communication_bytes_per_step"] > 0, r
        assert r["communication_ms"] is not None and r["communication_total_ms"] > 0, r
    assert "├─ Communication" in p.stdout
