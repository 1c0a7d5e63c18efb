/*
 * record.h - the step record: the unit of telemetry that flows from a rank
 * to the aggregator (markers -> ring -> step record -> wire -> aggregator).
 *
 * Durations are nanoseconds. -1 means "not measured" (missing), never zero.
 */
#ifndef TML_RECORD_H
#define TML_RECORD_H

#include <stdint.h>
#include "traceml/traceml.h"

#define TML_MISSING (-1)

/* The phases of a step of a process that does not communicate (one rank):
 * what synthetic records (tests, benchmarks) observe. */
#define TML_STEP_PHASES (TML_PHASES_ALL & ~TML_PHASE_BIT(TML_PHASE_COMM))

/* record flags */
#define TML_STEP_ABORTED 0x1u   /* an exception left the bracket */
#define TML_STEP_DETECTED 0x2u  /* found by automatic step detection, not marked */
#define TML_STEP_EPOCH_START 0x4u  /* its batch came from a fresh loader whose workers start */
/* its Input Wait counts from the loader's start (tml_mark_loader_start), and
 * its gap_ns is the time before that: the script's own, between epochs */
#define TML_STEP_LOADER_START 0x8u
/* it ran under the deep dive's profiler (tml_mark_deep_dive): left out of
 * the window like warm-up (docs/deep-dive.md) */
#define TML_STEP_DEEP_DIVE 0x10u

typedef struct tml_step_record {
    uint64_t step;          /* step index on this rank, from 0 */
    int64_t start_ns;       /* CPU monotonic clock at the bracket's start */
    /* Bracket duration minus any input fetch inside it (CPU clock). */
    int64_t traced_ns;
    /* CPU-clock time per phase, summed over the step's outermost spans.
     * phase_ns[TML_PHASE_INPUT] is the fetch just before the bracket plus
     * any fetch inside it. 0 when the phase was not observed in this step;
     * see `observed`. */
    int64_t phase_ns[TML_PHASE_COUNT];
    /* GPU clock (CUDA events), -1 when this step has no GPU figures. */
    int64_t gpu_traced_ns;
    int64_t gpu_phase_ns[TML_PHASE_COUNT];
    /* Time between the previous bracket's end and this step's start (the
     * start of its fetch, else of its bracket) that no bracket or fetch
     * covers: validation, checkpoints, logging outside the step. -1 for a
     * rank's first step. */
    int64_t gap_ns;
    /* Per-step memory, -1 when not sampled. */
    int64_t rss_bytes;
    int64_t cuda_allocated_peak_bytes;
    int64_t cuda_reserved_peak_bytes;
    /* Communication (CPU clock), when TML_PHASE_COMM is observed: the time
     * some collective of the step was in flight (the union of their
     * intervals, overlapped with compute or not), the bytes this rank sent
     * (NCCL's bus-bandwidth count) and how many collectives ran. The part
     * the step waited for is phase_ns[TML_PHASE_COMM]. */
    int64_t comm_ns;
    int64_t comm_bytes;
    uint32_t comm_count;
    /* Throughput (tml_step_samples): the samples and tokens the step
     * consumed, 0 when not counted; its floating-point operations
     * (samples times tml_set_flops' figure), 0 unknown, the device's peak
     * FLOP/s for them (0 unknown: a CPU, a GPU not in the table) and how
     * they were counted (TML_FLOPS_*). */
    int64_t samples, tokens, flops, peak_flops;
    uint32_t flops_how;
    uint32_t observed;      /* TML_PHASE_BIT of each phase seen in this step */
    uint32_t flags;         /* TML_STEP_* */
} tml_step_record;

/* What a record may hold. A duration beyond TML_RECORD_MAX_NS (11.6
 * days; the reports read figures up to 1e9 ms back, report/reload.h) or
 * negative (-1, missing, is fine but for traced_ns), a byte count beyond
 * TML_RECORD_MAX_BYTES, samples, tokens or FLOPs beyond theirs, a start
 * beyond TML_RECORD_MAX_NS * 4096 (146 years of monotonic clock): no
 * rank measures that. */
#define TML_RECORD_MAX_NS 1000000000000000LL
#define TML_RECORD_MAX_BYTES 1000000000000000000LL
#define TML_RECORD_MAX_SAMPLES 1000000000000LL   /* samples or tokens in a step */
#define TML_RECORD_MAX_FLOPS 1000000000000000000LL
/* 1 when every figure of r is one a rank can measure (above), else 0: the
 * aggregator drops such a record (a corrupt or hostile sender) rather
 * than let 1e18 ns reach the windows, the sums and the reports. (run.c) */
int tml__record_possible(const tml_step_record *r);

/* Who a connection speaks for (the handshake's payload). */
/* The most ranks (and nodes) a run may claim: a rank's claim above it is
 * not believed (a stray WORLD_SIZE must not size the summary). */
#define TML_MAX_WORLD_SIZE 65536

typedef struct tml_rank_info {
    int32_t rank;           /* global rank, 0 for a single process */
    int32_t local_rank;
    int32_t world_size;     /* at most TML_MAX_WORLD_SIZE is believed */
    int32_t node_rank;
    int32_t nnodes;
    int32_t pid;
    uint32_t instrumented;  /* TML_PHASE_BIT mask of instrumented phases */
    char host[64];
    /* The input pipeline as the user configured it, so the diagnosis can
     * name it ("DataLoader(num_workers=0) on 16 cores"). Zero-initialised
     * means unknown. */
    uint32_t loader_known;      /* 1 when loader_workers / _pin_memory are set */
    int32_t loader_workers;
    int32_t loader_pin_memory;
    int32_t cpu_count;          /* logical cores this process may use, 0 unknown */
    /* Models timed though the step did not name them (tml_set_auto_models):
     * class names, comma-separated; "" none. */
    char auto_models[TML_AUTO_MODELS_MAX];
    /* Which process image: a random number drawn when TraceML starts in
     * the process (a process that re-executes itself draws a new one), so
     * a restart under the same pid is told from a reconnection; 0 unknown. */
    uint64_t instance;
} tml_rank_info;

/* A rank's own counters, sent in its goodbye (and kept current). */
typedef struct tml_rank_stats {
    uint64_t events_dropped;    /* ring full */
    uint64_t records_dropped;   /* could not be delivered */
    uint64_t records_sent;
    int64_t overhead_ns_per_step;  /* measured in-loop cost, -1 unknown */
    int64_t shipper_cpu_ns;        /* background threads' CPU time (shipper + sampler) */
} tml_rank_stats;

#endif
