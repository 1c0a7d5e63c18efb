#!/usr/bin/env bash
# gpu_check.sh - TraceML's GPU paths against a real GPU (prepared for a
# machine with an NVIDIA GPU, a driver and a CUDA build of PyTorch; never
# run by the test suite, which uses the fake libraries instead).
#
#   bench/gpu_check.sh [OUT_DIR]          # default: gpu_check_out/
#
# 1. builds the project (make -j) and installs it into the environment of
#    $TRACEML_PYTHON (default python3, which must have a CUDA torch):
#    pip install . there, then `python -m traceml_ai run ...`;
# 2. runs bench/gpu_check_train.py through `traceml run` twice, input-bound
#    (a DataLoader that sleeps) and H2D-bound (big pageable host batches),
#    with the script timing every phase itself with torch.cuda.Event;
# 3. compares TraceML's GPU-clock phase figures (final_summary.json) with
#    the script's own event timings (target: within 10%), and TraceML's NVML
#    averages with nvidia-smi sampled alongside;
# 4. runs the same under DDP on NCCL (one rank, --nproc-per-node 1): the
#    communication hook on CUDA futures (comm row, bytes, no crash, no hang);
# 5. runs gpu_train (the C API example) against the real libcuda/NVML;
# 6. writes everything to OUT_DIR/report.md (copy it into docs/gpu-check.md).
#
# Exit code 0 when every comparison is within its tolerance.
set -u
cd "$(dirname "$0")/.."
OUT=${1:-gpu_check_out}
PY=${TRACEML_PYTHON:-python3}
mkdir -p "$OUT"
REPORT="$OUT/report.md"
fail=0

echo "== build" | tee "$OUT/build.log"
make -j"$(nproc)" >>"$OUT/build.log" 2>&1 || { echo "build failed (see $OUT/build.log)"; exit 1; }
"$PY" -m pip install -q --no-deps --force-reinstall . >>"$OUT/build.log" 2>&1 ||
    { echo "pip install failed (see $OUT/build.log)"; exit 1; }

nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv >"$OUT/gpu.csv" 2>&1
"$PY" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))' \
    >"$OUT/torch.txt" 2>&1 || { echo "no CUDA PyTorch: $(cat "$OUT/torch.txt")"; exit 1; }

{
    echo "# GPU check"
    echo
    echo "Date: $(date -u +%FT%TZ) · GPU: $(tail -1 "$OUT/gpu.csv") · torch: $(cat "$OUT/torch.txt")"
    echo
} >"$REPORT"

run_variant() {   # name, extra args
    local name=$1; shift
    # nvidia-smi alongside, once a second, for the NVML comparison
    nvidia-smi --query-gpu=utilization.gpu,memory.used,temperature.gpu,power.draw \
        --format=csv,noheader,nounits -i 0 -l 1 >"$OUT/$name.smi.csv" 2>/dev/null &
    local smi=$!
    "$PY" -m traceml_ai run --logs-dir "$OUT/logs" --run-name "$name" --interval 1 \
        bench/gpu_check_train.py --out "$OUT/$name.events.json" "$@" >"$OUT/$name.stdout" 2>"$OUT/$name.stderr"
    local rc=$?
    kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
    [ $rc -eq 0 ] || { echo "$name: training failed (rc $rc)"; fail=1; return; }
    "$PY" - "$OUT" "$name" >>"$REPORT" <<'EOF' || fail=1
import json, sys
out, name = sys.argv[1], sys.argv[2]
s = json.load(open("%s/logs/%s/final_summary.json" % (out, name)))
ev = json.load(open("%s/%s.events.json" % (out, name)))
med = s["step_time"]["median"]
print("## %s\n" % name)
print("Verdict: %s (%s), clock: %s, window steps: %s\n" % (
    s["primary_diagnosis"]["label"], s["primary_diagnosis"]["severity"],
    s["meta"]["clock"], s["meta"]["window_steps"]))
print("| phase | TraceML GPU clock (ms) | torch.cuda.Event (ms) | diff |")
print("|---|---:|---:|---:|")
bad = 0
for key, mine in (("input_wait", "input_ms"), ("h2d", "h2d_ms"), ("forward", "forward_ms"),
                  ("backward", "backward_ms"), ("optimizer", "optimizer_ms"),
                  ("step_time", "step_ms")):
    t, e = med.get(key + "_ms"), ev.get(mine)
    if t is None or e is None:
        print("| %s | %s | %s | n/a |" % (key, t, e))
        continue
    d = (t - e) / e if e else 0.0
    ok = abs(d) <= 0.10 or abs(t - e) <= 0.2       # 10%, or 0.2 ms for tiny phases
    bad += not ok
    print("| %s | %.3f | %.3f | %+.1f%%%s |" % (key, t, e, 100 * d, "" if ok else " ✗"))
rows = [l.split(",") for l in open("%s/%s.smi.csv" % (out, name)) if l.strip()]
def avg(i):
    v = [float(r[i]) for r in rows if len(r) > i and r[i].strip() not in ("", "[N/A]")]
    return sum(v) / len(v) if v else None
sysavg = s["system"]["average"]
print("\n| NVML | TraceML avg | nvidia-smi avg |")
print("|---|---:|---:|")
for label, key, i, scale in (("GPU util %", "gpu_util_percent", 0, 1), ("memory used MiB", "gpu_memory_used_bytes", 1, 1 / 1048576.0),
                             ("temperature C", "gpu_temperature_c", 2, 1), ("power W", "gpu_power_w", 3, 1)):
    t = sysavg.get(key)
    print("| %s | %s | %s |" % (label, "n/a" if t is None else "%.1f" % (t * scale), avg(i)))
print("\nSTEP MEMORY: %s · SYSTEM: %s · PROCESS: %s\n" % (
    s["step_memory"]["diagnosis"]["label"], s["system"]["diagnosis"]["label"],
    s["process"]["diagnosis"]["label"]))
print("```\n%s```\n" % s["text"])
sys.exit(1 if bad or s["meta"]["clock"] != "gpu" else 0)
EOF
}

run_variant input_bound --steps 300 --loader-sleep-ms 20
run_variant h2d_bound --steps 300 --batch-mb 256

echo "== DDP on NCCL, one rank: communication through the comm hook" >>"$REPORT"
"$PY" -m traceml_ai run --logs-dir "$OUT/logs" --run-name nccl --nproc-per-node 1 \
    bench/gpu_check_train.py --ddp --steps 200 --out "$OUT/nccl.events.json" \
    >"$OUT/nccl.stdout" 2>"$OUT/nccl.stderr" || fail=1
"$PY" - "$OUT" >>"$REPORT" <<'EOF' || fail=1
import json, sys
s = json.load(open("%s/logs/nccl/final_summary.json" % sys.argv[1]))
m = s["step_time"]["median"]
print("\nclock %s; communication exposed %s ms, in flight %s ms, %s collectives/step, backward %s ms\n" % (
    s["meta"]["clock"], m.get("communication_ms"), m.get("communication_total_ms"),
    m.get("collectives_per_step"), m.get("backward_ms")))
sys.exit(0 if m.get("collectives_per_step") else 1)
EOF

echo "== C API example on the real driver" >>"$REPORT"
"$PY" -m traceml_ai run --logs-dir "$OUT/logs" --run-name capi -- build/examples/gpu_train --steps 120 --h2d-ms 3 \
    >"$OUT/capi.stdout" 2>&1 || fail=1
grep -E "Verdict|GPU Clock|CPU Clock" "$OUT/capi.stdout" | sed 's/^/    /' >>"$REPORT"

echo "report: $REPORT (fail=$fail)"
exit $fail
