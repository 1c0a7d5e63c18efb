/*
 * assemble.h - turns a thread's events into step records.
 *
 * Runs in the shipper thread, never in the training loop. Pure: events in,
 * records out, so it is unit-tested on hand-written event sequences.
 */
#ifndef TML_ASSEMBLE_H
#define TML_ASSEMBLE_H

#include <stdint.h>
#include "model/record.h"
#include "core/ring.h"

/* The GPU-clock boundaries of one step, as event pool sequence numbers;
 * the shipper turns them into gpu_* durations once the events completed. */
#define TML_GPU_MAX_SPANS 32

typedef struct tml_gpu_span {
    int64_t b, e;            /* begin/end events, -1 missing */
    uint8_t phase;
    uint8_t inside;          /* 1: inside the bracket; 0: the fetch or copies before it */
} tml_gpu_span;

typedef struct tml_gpu_marks {
    int64_t step_b, step_e;  /* the bracket, -1 missing */
    uint32_t nspans;
    int overflow;            /* more spans than fit: no GPU figures */
    uint32_t cpu_spans[TML_PHASE_COUNT];   /* CPU spans per phase, to check each has its GPU pair */
    tml_gpu_span span[TML_GPU_MAX_SPANS];
} tml_gpu_marks;

/* 1 when the marks carry anything for the GPU clock to resolve. */
int tml__gpu_marks_any(const tml_gpu_marks *g);

#define TML_NEST_MAX 64
#define TML_PENDING_H2D 8
#define TML_COMM_MAX 64      /* collectives per step kept apart (more are merged) */

/* The exclusive time of a span [b, e] lasting `ns`: minus the exclusive
 * times of the earlier spans (b_i, e_i, x_i; i < n) inside it. Nested
 * phases are counted once: forward and backward in a closure optimizer's
 * step, a copy inside a forward. GPU spans use their events' sequence
 * numbers for b and e (recorded in program order). */
int64_t tml__span_exclusive(const int64_t *bs, const int64_t *es, const int64_t *xs, uint32_t n,
                            int64_t b, int64_t e, int64_t ns);
/* The length of the union of n intervals [b_i, e_i] (sorts them in place). */
int64_t tml__union_ns(int64_t *b, int64_t *e, uint32_t n);

typedef struct tml_assembler {
    int in_step;
    tml_step_record cur;
    int64_t inside_input_ns;     /* fetches inside the current bracket */
    int64_t lead_ns;             /* Untraced a detected step takes in (detected_start) */
    int lead_unless_forward;     /* ... only if it saw no forward */
    int64_t free_end_ns;         /* the end of the last span outside a bracket */
    int has_pending;             /* a fetch ended since the last bracket */
    int64_t pending_t0, pending_ns;
    int pending_loader;          /* ... and it counts from its loader's start */
    int64_t loader_t0;           /* a loader's start no fetch took yet, else -1 */
    int64_t last_end_ns;         /* -1 before the first step */
    uint64_t events_in_steps;    /* for the overhead estimate */
    uint64_t records_lost;       /* steps whose begin or end was dropped */
    /* GPU clock: the current step's marks; `gpu` holds those of the step
     * tml__asm_feed() just completed. */
    tml_gpu_marks gcur, gpu;
    int has_pending_gpu;
    tml_gpu_span pending_gpu;
    /* Copies to the GPU made between brackets (a prepared DataLoader's
     * device transfer, Lightning's batch_to_device) since the last compute
     * outside a bracket: carried into the next step's H2D. */
    int64_t pending_h2d_ns;
    uint32_t pending_h2d_n, pending_h2d_ngpu;
    tml_gpu_span pending_h2d_gpu[TML_PENDING_H2D];
    /* CUDA memory: the allocator's peaks seen so far (-1 none) and this
     * step's per-step peaks. */
    int64_t mem_seen_peak[2], mem_step_peak[2];
    /* The current step's spans (begin, end, exclusive time), so that a
     * span around others (optimizer.step(closure) around forward and
     * backward) is charged only its own time. */
    int64_t nest_b[TML_NEST_MAX], nest_e[TML_NEST_MAX], nest_x[TML_NEST_MAX];
    uint8_t nest_p[TML_NEST_MAX];
    uint32_t nnest;
    /* The current step's collectives (blocking COMM spans and overlapped
     * ones) for their union, and the overlapped ones' last launch and
     * latest completion for the exposed tail. */
    int64_t comm_b[TML_COMM_MAX], comm_e[TML_COMM_MAX];
    uint32_t ncomm;
    int64_t ov_launch, ov_end;   /* -1: no overlapped collective */
    /* Samples and tokens counted between brackets, for the next step;
     * the FLOPs of a sample (0 unknown) and how they were counted. */
    int64_t pending_samples, pending_tokens;
    int64_t flops_per_sample, peak_flops;
    uint32_t flops_how;
} tml_assembler;

/* Throughput (throughput.c): a TML_EV_SAMPLES or TML_EV_FLOPS event (any
 * other is ignored) into the step open, or the next; what waited for a
 * step that starts; a step's FLOPs at its end. */
void tml__asm_count(tml_assembler *a, const tml_event *e);
void tml__asm_take_counts(tml_assembler *a, tml_step_record *r);   /* a step's start */
void tml__asm_step_flops(const tml_assembler *a, tml_step_record *r);

void tml__asm_init(tml_assembler *a);
/* Feeds one event; returns 1 and fills *out when it completed a step. */
int tml__asm_feed(tml_assembler *a, const tml_event *e, tml_step_record *out);
/* The latest step end among n events, 0 if none; *longest: the longest
 * time between two step ends, from `prev` (the one before them, -1 none)
 * on, 0 when there were not two. */
int64_t tml__asm_last_end(const tml_event *ev, uint32_t n, int64_t prev, int64_t *longest);
/* The RSS of a step ending at `end`: `prev` was read at `from`, `now` at or
 * after `to` (the pass's last step end), -1 unread; `late`: the loop had
 * stopped before `now` was read. See rss.c. */
int64_t tml__rss_at(int64_t end, int64_t prev, int64_t now, int64_t from, int64_t to, int late);

#endif
