#!/usr/bin/env bash
# `traceml tune` on a shared machine (issue 45, point 3): with the default
# 5-minute budget, beside two busy loops (bounded, killed at the end) and
# quiet: a loader whose samples wait 5 ms (examples/diagnosis/waiting_loader.py,
# almost no CPU: workers beyond the cores pay) and the slow loader of
# examples/diagnosis/input_bound.py. Prints each tune's table (the tune
# folders under $OUT, default build/tune-shared/). About 15 minutes.
#
#   bench/tune_shared.sh [BUDGET]        # [300s]; TRACEML=... to pick the build
set -eu
cd "$(dirname "$0")/.."
TRACEML=${TRACEML:-.venv/bin/traceml}
OUT=${OUT:-build/tune-shared}
BUDGET=${1:-300s}
mkdir -p "$OUT"
pids=""
busy() {
    for _ in 1 2; do timeout 900 sh -c 'while :; do :; done' & pids="$pids $!"; done
}
quiet() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    pids=""
}
trap quiet EXIT
tune() {
    echo "=== $1: traceml tune ${*:2}"
    "$TRACEML" tune --logs-dir "$OUT" --budget "$BUDGET" "${@:2}" 2>&1 |
        grep -v "^traceml tune: t[0-9]"
}
busy
tune "two busy loops" examples/diagnosis/waiting_loader.py --steps 2000
tune "two busy loops" examples/diagnosis/input_bound.py --steps 2000 --delay-ms 20
quiet
tune "quiet" examples/diagnosis/waiting_loader.py --steps 2000
