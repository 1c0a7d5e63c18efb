"""Resources end to end (issue 3): system/process sampling, step memory and
the GPU paths.

GPU runs go through examples/c/gpu_train.c (a C training loop that sets a
CUDA stream and reports CUDA memory) with the fake libcuda.so.1 and
libnvidia-ml.so.1 the build makes (build/fakes), selected by TRACEML_LIBCUDA
and TRACEML_LIBNVML; each scenario injects a known cause and checks it in
the summary. CPU runs are real PyTorch trainings.
"""
import json
import os
import sqlite3
import subprocess

import pytest

from conftest import (BUILD, DIAG, PYTHON, TRACEML, base_env, covers, free_port_pair, primary,
                      ranks_finished, step_metric_ms)

GPU_TRAIN = os.path.join(BUILD, "examples", "gpu_train")
FAKES = os.path.join(BUILD, "fakes")
MIB = 1024.0 * 1024.0


def fake_env(**extra):
    env = {"TRACEML_LIBCUDA": os.path.join(FAKES, "libcuda.so.1"),
           "TRACEML_LIBNVML": os.path.join(FAKES, "libnvidia-ml.so.1")}
    env.update(extra)
    return env


def gpu_run(tmp_path, name, args, env=None, interval="0.1", slept=None):
    logs = tmp_path / "logs"
    p = subprocess.run([TRACEML, "run", "--logs-dir", str(logs), "--run-name", name,
                        "--interval", interval, "--", GPU_TRAIN] + [str(a) for a in args],
                       env=base_env(**dict(env if env is not None else fake_env(),
                                           **(slept.env_c("gpu_train") if slept else {}))),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    with open(logs / name / "final_summary.json", encoding="utf-8") as f:
        return p, json.load(f), str(logs / name)


def labels(s, section):
    return [i["label"] for i in s[section]["issues"]]


@pytest.mark.quick
def test_fake_gpu_h2d_bound_on_gpu_clock(tmp_path, slept):
    p, s, _ = gpu_run(tmp_path, "h2d", ["--steps", 80, "--load-ms", 0.2, "--h2d-ms", 4,
                                        "--fwd-ms", 2, "--bwd-ms", 3, "--opt-ms", 1],
                      slept=slept)
    assert s["meta"]["clock"] == "gpu"
    assert "GPU Clock" in p.stdout
    assert (primary(s)["label"], primary(s)["severity"]) == ("H2D-BOUND", "CRITICAL")
    h2d, ref = step_metric_ms(s, "h2d"), slept.mean(4)
    assert covers(h2d, ref), "GPU-clock H2D %s ms, slept %.3f ms" % (h2d, ref)
    gpu = s["step_time"]["by_clock"]["gpu"] if "by_clock" in s["step_time"] else None
    assert gpu is None or covers(gpu["h2d_ms"], ref)
    assert s["meta"]["gpus_observed"] == 1


@pytest.mark.quick
def test_fake_gpu_low_util_verdict(tmp_path):
    # nothing in the step stands out (input 7%, H2D 7%, compute ~86%) and
    # the GPU is 25% busy: the run's verdict is LOW GPU UTILIZATION. Sleeps
    # of milliseconds, so that a busy host's late wake-ups (+0.5 ms on a
    # 0.6 ms H2D was 11%: H2D-BOUND) keep the shares under 10%
    p, s, _ = gpu_run(tmp_path, "lowutil", ["--steps", 80, "--load-ms", 2, "--h2d-ms", 2,
                                            "--fwd-ms", 8, "--bwd-ms", 12, "--opt-ms", 5])
    assert s["meta"]["clock"] == "gpu"
    assert s["step_time"]["diagnosis"]["label"] == "BALANCED", json.dumps(s["step_time"]["diagnosis"])
    assert primary(s)["label"] == "LOW GPU UTILIZATION", json.dumps(primary(s))
    assert "LOW GPU UTIL" in labels(s, "system")
    assert s["system"]["average"]["gpu_util_percent"] == 25.0
    # (the panel's label may be a graver finding on a busy host, e.g. HIGH CPU)
    assert "GPU util                         25%" in p.stdout


def test_fake_gpu_two_ranks_memory_imbalance(tmp_path):
    """Two ranks (torchrun --no-python), rank 1 holding 13 GB reserved of
    26 GB against rank 0's 10 GB: IMBALANCE (CRITICAL, 30% at 50%
    pressure) compared with the other rank (a median that counted the
    larger of two ranks compared it with itself and never fired), and
    named under the verdict (Also:)."""
    logs = tmp_path / "logs"
    p = subprocess.run([TRACEML, "run", "--logs-dir", str(logs), "--run-name", "imb",
                        "--interval", "0.1", "--", PYTHON, "-m", "torch.distributed.run",
                        "--nproc_per_node", "2", "--master_port", str(free_port_pair()),
                        "--no-python", GPU_TRAIN, "--steps", "80", "--reserved-mb", "10000",
                        "--allocated-mb", "9000", "--rank1-reserved-mb", "13000",
                        "--device-mb", "26000"],
                       env=base_env(**fake_env()), capture_output=True, text=True, timeout=180)
    s = ranks_finished(p, logs / "imb", ranks=2, steps=80)
    mem = s["step_memory"]["diagnosis"]
    assert (mem["label"], mem["severity"]) == ("IMBALANCE", "CRITICAL"), json.dumps(mem)
    assert mem["evidence"]["resource"]["rank"] == 1
    assert abs(mem["evidence"]["resource"]["value"] - 30.0) < 1.0, mem
    assert "the other rank's" in mem["why"], mem["why"]
    assert "IMBALANCE" in [a["kind"] for a in s["also"]], s["also"]
    assert "Also: IMBALANCE (CRITICAL)" in p.stdout


@pytest.mark.quick
def test_fake_gpu_hot_full_device(tmp_path):
    env = fake_env(FAKE_NVML_TEMP="90", FAKE_NVML_MEM_USED_MB="15000", FAKE_NVML_MEM_TOTAL_MB="16000")
    p, s, _ = gpu_run(tmp_path, "hot", ["--steps", 80, "--reserved-mb", 15600, "--allocated-mb", 15000,
                                        "--device-mb", 16000], env=env)
    sys_l = labels(s, "system")
    assert "VERY HIGH GPU MEM" in sys_l and "HIGH GPU TEMP" in sys_l, sys_l
    assert "HIGH GPU MEM" not in sys_l            # superseded by VERY HIGH
    mem = s["step_memory"]["diagnosis"]
    assert (mem["label"], mem["severity"]) == ("HIGH PRESSURE", "CRITICAL"), json.dumps(mem)
    assert abs(mem["evidence"]["resource"]["value"] - 97.5) < 0.1
    assert "VERY HIGH PROCESS GPU MEMORY" in labels(s, "process")
    assert "STEP MEMORY: HIGH PRESSURE" in p.stdout
    assert "GPU temperature                  90C" in p.stdout


@pytest.mark.quick
def test_fake_gpu_memory_creep(tmp_path):
    p, s, run_dir = gpu_run(tmp_path, "creep", ["--steps", 120, "--reserved-mb", 2000,
                                                "--creep-mb", 12, "--device-mb", 16000])
    mem = s["step_memory"]["diagnosis"]
    assert mem["label"] == "MEMORY CREEP", json.dumps(mem)
    res = mem["evidence"]["resource"]
    assert abs(res["growth_bytes_per_step"] - 12 * MIB) <= 0.10 * 12 * MIB, res
    assert res["projected_full_step"] is not None and res["projected_full_step"] > 119
    assert s["step_memory"]["series"] == "cuda_reserved"
    # per-step peaks are in telemetry.sqlite
    db = sqlite3.connect(os.path.join(run_dir, "telemetry.sqlite"))
    n = db.execute("SELECT COUNT(*) FROM steps WHERE cuda_reserved_peak_bytes IS NOT NULL").fetchone()[0]
    assert n == 120


@pytest.mark.quick
def test_fake_gpu_not_ready_retries_and_visible_uuid(tmp_path):
    env = fake_env(FAKE_CUDA_NOT_READY="25", CUDA_VISIBLE_DEVICES="GPU-fake-1")
    p, s, run_dir = gpu_run(tmp_path, "retry", ["--steps", 60], env=env)
    assert s["meta"]["clock"] == "gpu"          # the GPU lagged 25 ms: retried, resolved
    assert s["system"]["average"]["gpu_util_percent"] == 26.0   # device 1: util + 1
    db = sqlite3.connect(os.path.join(run_dir, "telemetry.sqlite"))
    gpus = {r[0] for r in db.execute("SELECT DISTINCT gpu FROM samples WHERE metric LIKE 'gpu.%'")}
    assert gpus == {1}


def test_fake_gpu_shared_with_another_process(tmp_path):
    """Issue 45: the summary's contention says whether another process
    used the training's GPU. The fake NVML lists the compute processes on
    the GPU (FAKE_NVML_PIDS; "self" is the rank): with pid 1 beside the
    rank the GPU was shared; with the rank alone, or nobody, it was not; a
    list without the rank (another pid namespace, as in a container) is
    unknown, never a guess. The box is the same either way."""
    runs = {}
    for name, pids in (("shared", "self,1"), ("alone", "self"), ("nobody", None),
                       ("foreign", "1,2")):
        env = fake_env(**({"FAKE_NVML_PIDS": pids} if pids else {}))
        runs[name] = gpu_run(tmp_path, name, ["--steps", 30], env=env)
    expect = {"shared": True, "alone": False, "nobody": False, "foreign": None}
    for name, (p, s, run_dir) in runs.items():
        assert s["contention"]["gpu_shared"] is expect[name], (name, s["contention"])
        db = sqlite3.connect(os.path.join(run_dir, "telemetry.sqlite"))
        seen = [r[0] for r in db.execute(
            "SELECT value FROM samples WHERE metric = 'gpu.other_processes'")]
        db.close()
        if expect[name] is None:
            assert seen == [], (name, seen)        # unknown: no sample at all
        else:
            assert seen and set(seen) == {1.0 if expect[name] else 0.0}, (name, seen)
        assert "gpu shared" not in p.stdout.lower(), p.stdout
    # compare reads it back: the machine rows show the GPU shared on one side only
    c = subprocess.run([TRACEML, "compare", runs["alone"][2], runs["shared"][2]],
                       capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    row = [l for l in c.stdout.splitlines() if "GPU shared" in l]
    assert row and "no" in row[0] and "yes" in row[0], c.stdout + c.stderr


@pytest.mark.quick
def test_fake_gpu_missing_pieces_fail_open(tmp_path):
    # no CUDA driver: CPU clock; temperature and power NOT_SUPPORTED: n/a, not 0
    env = fake_env(TRACEML_LIBCUDA="/nonexistent/libcuda.so.1", FAKE_NVML_NOT_SUPPORTED="temp,power")
    p, s, _ = gpu_run(tmp_path, "nocuda", ["--steps", 60], env=env)
    assert "GPU clock off" in p.stderr
    assert s["meta"]["clock"] == "cpu" and "CPU Clock" in p.stdout
    avg = s["system"]["average"]
    assert avg["gpu_temperature_c"] is None and avg["gpu_power_w"] is None
    assert avg["gpu_util_percent"] == 25.0
    assert "GPU temperature                  n/a" in p.stdout
    # no NVML either: every GPU figure n/a, no GPU rule fires
    env = fake_env(TRACEML_LIBNVML="/nonexistent/libnvidia-ml.so.1")
    p, s, _ = gpu_run(tmp_path, "nonvml", ["--steps", 60], env=env)
    assert s["system"]["average"]["gpu_util_percent"] is None
    assert primary(s)["label"] != "LOW GPU UTILIZATION"
    assert s["meta"]["clock"] == "gpu"


def test_cpu_memory_creep_rate(traceml_run):
    # 300 steps (about 0.6 s): a run's RSS after its last reading in the
    # loop is missing, and were the loop's end not seen, the 80 ms of steps
    # flat at that reading would move the slope by 7% at most
    mib = 4.0
    r = traceml_run(os.path.join(DIAG, "memory_creep.py"), "--steps", 300, "--mib-per-step", mib,
                    env={"TRACEML_THRESHOLDS": "creep_mb=256"})
    assert r.rc == 0, r.explain()
    s = r.summary()
    mem = s["step_memory"]["diagnosis"]
    assert mem["label"] == "MEMORY CREEP", json.dumps(mem)
    assert s["step_memory"]["series"] == "rss"
    rate = mem["evidence"]["resource"]["growth_bytes_per_step"]
    assert abs(rate - mib * MIB) <= 0.10 * mib * MIB, "growth %.2f MiB/step, injected %.1f" % (
        rate / MIB, mib)
    assert "STEP MEMORY: MEMORY CREEP" in r.stdout


def test_memory_trend_named_under_the_verdict(traceml_run):
    """8 MiB kept per step (inside the step: the verdict is the step's own),
    below the 1 GiB creep gate: MEMORY RISING (INFO), projecting host RAM
    full at some step, is named under the verdict in the box and in the
    JSON's also[] (SPEC 4.4), never the verdict itself."""
    r = traceml_run(os.path.join(DIAG, "memory_creep.py"), "--steps", 100, "--mib-per-step", 8)
    assert r.rc == 0, r.explain()
    s = r.summary()
    assert s["primary_diagnosis"]["section"] == "step_time", json.dumps(s["primary_diagnosis"])
    trend = [a for a in s["also"] if a["kind"] in ("MEMORY_RISING", "MEMORY_CREEP")]
    assert trend, json.dumps(s["also"])
    res = trend[0]["evidence"]["resource"]
    assert res["projected_full_step"] is not None and res["projected_full_step"] > 99, res
    assert abs(res["growth_bytes_per_step"] - 8 * MIB) <= 0.10 * 8 * MIB, res
    line = "Also: %s (%s): " % (trend[0]["label"], trend[0]["severity"])
    box = r.stdout[r.stdout.index("Verdict:"):r.stdout.index("STEP TIMING")]
    assert line in box, box


def test_cpu_healthy_balanced_no_gpu_util(traceml_run):
    r = traceml_run(os.path.join(DIAG, "healthy.py"), "--steps", 120,
                    launcher_args=["--interval", "0.2"])
    assert r.rc == 0, r.explain()
    s = r.summary()
    assert s["step_memory"]["diagnosis"]["label"] == "BALANCED", json.dumps(s["step_memory"]["diagnosis"])
    assert primary(s)["label"] != "LOW GPU UTILIZATION"
    assert "LOW GPU UTIL" not in labels(s, "system")
    assert s["system"]["average"]["gpu_util_percent"] is None
    assert s["system"]["window"]["samples"] > 0
    assert s["system"]["average"]["cpu_percent"] is not None
    assert s["system"]["average"]["ram_total_bytes"] > 0
    assert s["process"]["average"]["cpu_capacity_percent"] is not None
    assert s["process"]["average"]["rss_bytes"] > 0
    assert "GPU util                         n/a" in r.stdout
    db = sqlite3.connect(os.path.join(r.run_dir, "telemetry.sqlite"))
    metrics = {m for (m,) in db.execute("SELECT DISTINCT metric FROM samples")}
    assert {"host.cpu_percent", "host.ram_used_bytes", "process.rss_bytes",
            "process.cpu_capacity_percent"} <= metrics, metrics
    n = db.execute("SELECT COUNT(*) FROM steps WHERE rss_bytes IS NOT NULL").fetchone()[0]
    assert n == 120
