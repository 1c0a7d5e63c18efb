"""TraceML 0.5.0's public-artifact smoke tests, ported (issue 47, item 1).

0.5.0's sdist has tests/runtime/test_final_summary_smoke.py: three runs
through its launcher that check what a user's tooling reads in
final_summary.json and manifest.json. Here each runs through the
`traceml` command instead of 0.5.0's launcher module, on the same scripts:
the single-rank MLP the test writes, and 0.5.0's own
examples/distributed/ddp_minimal.py, taken from the sdist fetched at test
time (conftest.fetch_050; skipped, saying why, only when the registry
cannot be reached), unmodified, with the same traceml.yaml (`mode`,
`history_enabled` and a `guard:` declaration).

The assertions are 0.5.0's, with two differences this project documents
(docs/compat.md, docs/summary-json.md): schema_version is ours (1, not
0.5.0's "1.9"), and step_time.global.window.steps_analyzed counts the
steps analysed after the warm-up step this project excludes (0.5.0
analysed every step), so the test checks it against completed_step and
meta.warmup_steps_excluded.
"""
import json
import os
import subprocess
import tarfile
from datetime import datetime

import pytest

from conftest import free_port, PYTHON, TRACEML, base_env, fetch_050, gloo_exit_abort

TIMEOUT_S = 240
FINALIZE_TIMEOUT_SEC = "60"

TRAIN_SCRIPT = """\
import torch
from torch import nn

import traceml_ai as traceml


class TinyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 4)
        )

    def forward(self, x):
        return self.net(x)


def main():
    torch.manual_seed(0)
    traceml.init()

    model = TinyMLP()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()

    for _ in range(80):
        x = torch.randn(16, 32)
        y = torch.randint(0, 4, (16,))
        with traceml.trace_step(model):
            optimizer.zero_grad(set_to_none=True)
            criterion(model(x), y).backward()
            optimizer.step()

    traceml.summary(print_text=False)


if __name__ == "__main__":
    main()
"""

GUARD_YAML = """\
mode: summary
history_enabled: true
guard:
  schema_version: 1
  workload:
    name: %s
    parameters:
      model: linear-classifier
      data_version: synthetic-v1
  measurement:
    start_step: 1
    completed_steps: 20
"""

CONTRACT = {
    "schema_version": 1,
    "workload": {"name": None,
                 "parameters": {"data_version": "synthetic-v1", "model": "linear-classifier"}},
    "measurement": {"start_step": 1, "completed_steps": 20},
}


def two_ports():
    a = free_port()
    b = free_port()
    while b == a:
        b = free_port()
    return str(a), str(b)


@pytest.fixture(scope="module")
def ddp_minimal(tmp_path_factory):
    """0.5.0's examples/distributed/ddp_minimal.py, from its sdist."""
    sdist = fetch_050(tmp_path_factory, sdist=True)
    out = tmp_path_factory.mktemp("ddp_minimal") / "ddp_minimal.py"
    with tarfile.open(sdist) as t:
        member = next(m for m in t.getmembers()
                      if m.name.endswith("/examples/distributed/ddp_minimal.py"))
        out.write_bytes(t.extractfile(member).read())
    return str(out)


def load(path):
    with open(str(path), encoding="utf-8") as f:
        return json.load(f)


def contract(name):
    c = json.loads(json.dumps(CONTRACT))
    c["workload"]["name"] = name
    return c


def test_final_summary_json_smoke(tmp_path):
    script = tmp_path / "smoke_train.py"
    script.write_text(TRAIN_SCRIPT, encoding="utf-8")
    logs = tmp_path / "logs"
    r = subprocess.run([TRACEML, "run", str(script), "--run-name", "smoke-test", "--logs-dir",
                        str(logs), "--aggregator-port", str(free_port()), "--finalize-timeout-sec",
                        FINALIZE_TIMEOUT_SEC], cwd=str(tmp_path), env=base_env(),
                       capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    root = logs / "smoke-test"
    assert (root / "final_summary.json").is_file()
    assert (root / "final_summary.txt").is_file()
    payload = load(root / "final_summary.json")
    for key in ("schema_version", "system", "process", "step_time", "step_memory"):
        assert key in payload, key
    average = payload["step_time"]["global"]["average"]
    for metric in ("traced_step_time_ms", "compute_ms", "forward_ms", "backward_ms",
                   "optimizer_ms"):
        assert average[metric] is not None and average[metric] > 0.0, (metric, average)
    manifest = load(root / "manifest.json")
    assert manifest["telemetry_status"] == "complete"
    ended = manifest["lifecycle"]["training_ended_at"]
    assert payload["duration_s"] > 0.0
    assert datetime.fromisoformat(payload["generated_at"]) >= datetime.fromisoformat(ended)
    # not guarded: no declaration, no outcomes
    assert manifest["guard"] is None
    assert payload["run_context"]["declaration"] is None
    assert not (root / "nodes").exists()


def test_two_rank_ddp_final_summary_smoke(tmp_path, ddp_minimal):
    logs = tmp_path / "logs"
    (tmp_path / "traceml.yaml").write_text(GUARD_YAML % "ddp-minimal-smoke", encoding="utf-8")
    agg, master = two_ports()
    r = subprocess.run([TRACEML, "run", ddp_minimal, "--mode", "summary", "--run-name",
                        "ddp-smoke-test", "--logs-dir", str(logs), "--nproc-per-node", "2",
                        "--master-port", master, "--aggregator-port", agg,
                        "--finalize-timeout-sec", FINALIZE_TIMEOUT_SEC, "--args", "--steps", "20"],
                       cwd=str(tmp_path), env=base_env(OMP_NUM_THREADS="1"),
                       capture_output=True, text=True, timeout=TIMEOUT_S)
    root = logs / "ddp-smoke-test"
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    payload = load(root / "final_summary.json")
    assert payload["schema_version"] == 1
    step_time = payload["step_time"]
    assert step_time["metadata"]["global_ranks_seen"] == 2
    assert step_time["metadata"]["global_ranks_used"] == 2
    assert set(step_time["groups"]["rows"]) == {"0", "1"}
    window = step_time["global"]["window"]
    assert window["completed_step"] == 20
    assert window["steps_analyzed"] == 20 - payload["meta"]["warmup_steps_excluded"]

    manifest = load(root / "manifest.json")
    assert manifest["status"] == "completed"
    assert manifest["telemetry_status"] == "complete"
    assert manifest["launch"]["nproc_per_node"] == 2
    assert manifest["guard"]["contract"] == contract("ddp-minimal-smoke")
    assert manifest["guard"]["training"] == {
        "status": "completed", "nodes_expected": 1, "nodes_observed": 1, "reasons": [],
        "nodes": [{"node_rank": 0, "exit_code": 0}],
    }
    assert payload["run_context"] == {
        "run": {"status": "completed", "profile": "run"},
        "declaration": manifest["guard"]["contract"],
        "execution": {
            "expected_nodes": 1, "processes_per_node": 2, "expected_world_size": 2,
            "launcher_completion": {"status": "completed", "nodes_observed": 1,
                                    "reason_codes": []},
        },
    }


def test_two_node_ddp_guard_outcomes_smoke(tmp_path, ddp_minimal):
    logs = tmp_path / "logs"
    (tmp_path / "traceml.yaml").write_text(GUARD_YAML % "multi-node-ddp-smoke",
                                           encoding="utf-8")
    agg, master = two_ports()
    base = [TRACEML, "run", ddp_minimal, "--mode", "summary", "--run-name",
            "multi-node-ddp-smoke-test", "--logs-dir", str(logs), "--nnodes", "2",
            "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", master,
            "--aggregator-host", "127.0.0.1", "--aggregator-port", agg,
            "--finalize-timeout-sec", FINALIZE_TIMEOUT_SEC]
    procs = [subprocess.Popen(base + ["--node-rank", str(k), "--args", "--steps", "20"],
                              cwd=str(tmp_path), env=base_env(OMP_NUM_THREADS="1"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(2)]
    try:
        # node 1 first: where its rank dies of PyTorch's gloo exit abort
        # (docs/distributed.md), its torchrun agent leaves without a word
        # and node 0's waits out torchelastic's exit barrier (300 s)
        out1 = procs[1].communicate(timeout=TIMEOUT_S)
        if gloo_exit_abort(procs[1].returncode, out1[1]):
            pytest.skip("node 1's rank died of PyTorch's gloo exit abort: node 0's torchrun "
                        "waits out its exit barrier (docs/distributed.md)")
        assert procs[1].returncode == 0, "node 1: %s%s" % (out1[0][-3000:], out1[1][-3000:])
        outs = [procs[0].communicate(timeout=TIMEOUT_S), out1]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    root = logs / "multi-node-ddp-smoke-test"
    for k, (p, (out, err)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, "node %d: %s%s" % (k, out[-3000:], err[-3000:])
        assert (root / "nodes" / ("node_%d" % k) / "guard_outcome.json").is_file()
    manifest = load(root / "manifest.json")
    assert manifest["status"] == "completed"
    assert manifest["telemetry_status"] == "complete"
    assert manifest["guard"]["training"] == {
        "status": "completed", "nodes_expected": 2, "nodes_observed": 2, "reasons": [],
        "nodes": [{"node_rank": 0, "exit_code": 0}, {"node_rank": 1, "exit_code": 0}],
    }
    payload = load(root / "final_summary.json")
    assert payload["run_context"] == {
        "run": {"status": "completed", "profile": "run"},
        "declaration": manifest["guard"]["contract"],
        "execution": {
            "expected_nodes": 2, "processes_per_node": 1, "expected_world_size": 2,
            "launcher_completion": {"status": "completed", "nodes_observed": 2,
                                    "reason_codes": []},
        },
    }


def test_guard_outcome_of_a_failed_node(tmp_path):
    """A guarded run whose training fails: its outcome says so, and so do
    the manifest and the summary's launcher_completion (0.5.0's
    node_training_failed)."""
    script = tmp_path / "fails.py"
    script.write_text("import sys, torch\n"
                      "model = torch.nn.Linear(8, 2)\n"
                      "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                      "for _ in range(30):\n"
                      "    model(torch.randn(4, 8)).sum().backward()\n"
                      "    opt.step(); opt.zero_grad()\n"
                      "sys.exit(3)\n")
    (tmp_path / "traceml.yaml").write_text(GUARD_YAML % "fails", encoding="utf-8")
    logs = tmp_path / "logs"
    # (no --run-name: the generated one names the outcome's run)
    r = subprocess.run([TRACEML, "run", "--logs-dir", str(logs), str(script)],
                       cwd=str(tmp_path), env=base_env(), capture_output=True, text=True,
                       timeout=TIMEOUT_S)
    assert r.returncode == 3, r.stderr[-3000:]
    assert "traceml: note:" not in r.stderr, r.stderr
    (root,) = list(logs.iterdir())
    outcome = load(root / "nodes" / "node_0" / "guard_outcome.json")
    assert outcome["training"] == {"status": "failed", "exit_code": 3}
    assert outcome["run_name"] == root.name
    assert outcome["contract_digest"].startswith("sha256:")
    manifest = load(root / "manifest.json")
    assert manifest["guard"]["training"]["status"] == "incomplete"
    assert manifest["guard"]["training"]["reasons"] == ["node_training_failed"]
    lc = load(root / "final_summary.json")["run_context"]["execution"]["launcher_completion"]
    assert lc == {"status": "incomplete", "nodes_observed": 1,
                  "reason_codes": ["node_training_failed"]}
    # compare holds it as 0.5.0 did: such a run gates nothing (INCONCLUSIVE, 3)
    summary = str(root / "final_summary.json")
    c = subprocess.run([TRACEML, "compare", summary, summary, "--output",
                        str(tmp_path / "cmp"), "--max-step-time-regression-pct", "5"],
                       cwd=str(tmp_path), env=base_env(), capture_output=True, text=True,
                       timeout=TIMEOUT_S)
    assert c.returncode == 3, c.stdout + c.stderr
    assert load(str(tmp_path / "cmp") + ".json")["launch_incomplete"] is True


# 0.5.0's sdk/summary_projection.py: the keys summary() gives trackers
KEYS_050 = (["schema_version", "duration_s", "primary/kind", "primary/status",
             "primary/severity", "primary/section", "step_time/diagnosis_clock"] +
            ["%s/%s" % (s, k) for s in ("system", "process", "step_time", "step_memory")
             for k in ("status", "severity")] +
            ["step_time/" + m for m in ("step_time_ms", "traced_step_time_ms",
                                        "step_time_cpu_ms", "h2d_ms",
                                        "compute_ms", "residual_ms", "forward_ms",
                                        "backward_ms", "optimizer_ms")] +
            ["system/cpu_percent", "system/ram_percent", "process/cpu_percent",
             "process/ram_percent"])


def test_summary_tracker_keys_050(tmp_path):
    """summary()'s keys of 0.5.0 (a W&B or MLflow dashboard built on them):
    every one a CPU run has, with 0.5.0's value style; the GPU-only ones
    (step_time_gpu_ms, gpu_*, peak_*_bytes, gpu_mem_reserved_percent) and,
    without a DataLoader, input_wait_ms and dataloader_fetch_cpu_ms are
    null, left out as 0.5.0 left out its nulls."""
    script = tmp_path / "trackers.py"
    script.write_text(TRAIN_SCRIPT.replace(
        "    traceml.summary(print_text=False)\n",
        "    import json, os, sys\n"
        "    json.dump(dict(traceml.summary(print_text=False),\n"
        "                   session=os.environ.get('TRACEML_SESSION_ID')), open(sys.argv[1], 'w'))\n"),
        encoding="utf-8")
    out = tmp_path / "summary.json"
    r = subprocess.run([TRACEML, "run", str(script), "--run-name", "t", "--logs-dir",
                        str(tmp_path / "logs"), "--", str(out)],
                       cwd=str(tmp_path), env=base_env(), capture_output=True, text=True,
                       timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stderr[-3000:]
    got = load(out)
    assert got.pop("session") == "t"     # 0.5.0's TRACEML_SESSION_ID: the run's name
    missing = [k for k in KEYS_050 if "traceml/" + k not in got]
    assert not missing, (missing, sorted(got))
    for k in ("primary/severity", "step_time/severity", "system/severity",
              "process/severity", "step_memory/severity"):
        assert got["traceml/" + k] in ("crit", "warn", "info"), (k, got["traceml/" + k])
    assert got["traceml/step_time/diagnosis_clock"] == "cpu"
    for sec in ("step_time", "step_memory", "system", "process"):   # the label, as 0.5.0's
        assert got["traceml/%s/status" % sec] == got["traceml/%s/diagnosis" % sec]
    st = lambda k: got["traceml/step_time/" + k]
    # no Input Wait: the traced step is the whole step
    assert "traceml/step_time/input_wait_ms" not in got
    assert st("traced_step_time_ms") == pytest.approx(st("step_time_ms"), abs=1e-3)
    assert 0 < got["traceml/process/ram_percent"] < 100
    for k in ("step_time_gpu_ms", "traced_step_time_gpu_ms"):
        assert "traceml/step_time/" + k not in got


def test_direct_launch_with_serve(tmp_path):
    """0.5.0's public-api.md "Direct Launch with traceml serve": the
    aggregator in one terminal, `python train.py` (a script with its own
    traceml.init()) in another with TRACEML_AGGREGATOR_HOST/PORT: the
    serve's run gets the rank, the script writes no run of its own; the
    serve's advert is gone after Ctrl-C (issue 47, item 4)."""
    import signal
    import time
    script = tmp_path / "smoke_train.py"
    script.write_text(TRAIN_SCRIPT, encoding="utf-8")
    port = str(free_port())
    env = base_env(XDG_RUNTIME_DIR=str(tmp_path / "xdg"))
    os.makedirs(str(tmp_path / "xdg"), mode=0o700)
    serve = subprocess.Popen([TRACEML, "serve", "--aggregator-host", "127.0.0.1",
                              "--aggregator-port", port, "--session-id", "direct",
                              "--logs-dir", str(tmp_path / "logs")], cwd=str(tmp_path), env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = serve.stdout.readline()
        assert "listening on 127.0.0.1:%s" % port in first, first + serve.stderr.read()
        advert = tmp_path / "xdg" / "traceml" / ("serve-%s.json" % port)
        assert advert.is_file() and (advert.stat().st_mode & 0o077) == 0
        train_env = dict(env, TRACEML_AGGREGATOR_HOST="127.0.0.1", TRACEML_AGGREGATOR_PORT=port,
                         TRACEML_LOGS_DIR=str(tmp_path / "own"))
        r = subprocess.run([PYTHON, str(script)], cwd=str(tmp_path), env=train_env,
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        assert r.returncode == 0, r.stderr[-3000:]
        time.sleep(0.5)
    finally:
        serve.send_signal(signal.SIGINT)
        out, err = serve.communicate(timeout=60)
    assert serve.returncode == 0, out + err
    assert not advert.exists()
    assert not (tmp_path / "own").exists()      # the script did not trace itself
    s = load(tmp_path / "logs" / "direct" / "final_summary.json")
    assert s["meta"]["ranks_reported"] == 1, s["meta"]
    assert s["meta"]["common_steps"] == 80, s["meta"]
