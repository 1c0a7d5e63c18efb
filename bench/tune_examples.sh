#!/usr/bin/env bash
# `traceml tune` on the scenario suite's examples whose Next line advises a
# setting (docs/diagnosis.md §6, the "advice verified" column): a slow
# loader, a cheap-fetch loader, 2-rank DDP with a bandwidth-bound and with a
# latency-bound all-reduce, workers restarted every epoch, and intra-op
# threads set for a larger host; with
# `frameworks`, instead the framework rows whose loader is slow (HF Trainer,
# Accelerate and Lightning with gradient accumulation, rows 26, 28, 30).
# Each tune's table is printed and its folder kept under $OUT (default
# build/tune-examples/). About 15 minutes on 2 cores (six tunes of BUDGET;
# frameworks: three, whose trials of 60 accumulated steps need about 300s
# each to measure two worker counts: docs/diagnosis.md §6 used 300s).
#
#   scripts/venv --test && bench/tune_examples.sh [BUDGET [frameworks]]   # BUDGET per tune [150s]
set -eu
cd "$(dirname "$0")/.."
TRACEML=${TRACEML:-.venv/bin/traceml}
OUT=${OUT:-build/tune-examples}
BUDGET=${1:-150s}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
mkdir -p "$OUT"
tune() {
    echo "=== traceml tune $*"
    "$TRACEML" tune --logs-dir "$OUT" --budget "$BUDGET" "$@" 2>/dev/null
}
if [ "${2:-}" = frameworks ]; then
    tune --only loader examples/integrations/hf_trainer.py --steps 3000 --grad-accum 4 --delay-ms 20
    tune --only loader examples/integrations/hf_accelerate.py --steps 3000 --grad-accum 4 \
        --delay-ms 20 --batch-size 8
    tune --only loader examples/integrations/lightning_train.py --steps 3000 --accum 2 --delay-ms 20
    exit 0
fi
tune examples/diagnosis/input_bound.py --steps 2000 --delay-ms 20
tune examples/diagnosis/input_bound.py --steps 4000 --delay-ms 0
tune --nproc-per-node 2 examples/distributed/train_ddp.py --steps 2000 --grad-mb 16 --device-ms 5
tune --nproc-per-node 2 examples/distributed/train_ddp.py --steps 2000
tune --only loader examples/diagnosis/epoch_start.py --epochs 400 --steps-per-epoch 15 --delay-ms 300
tune examples/diagnosis/threads_oversubscribed.py --steps 3000
