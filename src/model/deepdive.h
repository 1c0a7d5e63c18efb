/*
 * deepdive.h - one rank's deep-dive window: a few steps after warm-up run
 * under torch.profiler, reduced by the rank (python/traceml_ai/_deep_dive.py)
 * to rows of (module, operator, self time, calls), or the reason none ran.
 *
 * The rank hands it to the engine (tml_deep_dive()), the shipper to its sink,
 * the wire carries it as one DEEP_DIVE frame (docs/wire.md), and the
 * aggregator keeps the latest per rank (tml_rank.deep_dive) for the report,
 * which ranks the modules and operators (report/deepdive.c). Bounded: at
 * most TML_DD_MAX_ROWS rows (the package sends its heaviest 64), names cut
 * to TML_DD_NAME - 1 bytes; the aggregator keeps a copy sized to its rows
 * (~13 KB for 64), for at most TML_DD_KEEP_RANKS ranks (~14 MB at most
 * whatever the rank count; later ranks' windows are dropped and logged).
 *
 * Ownership: tml__dd_new() (room for TML_DD_MAX_ROWS rows) and
 * tml__dd_copy() (room for d's rows) allocate, tml__dd_free() frees; a
 * window is plain data (no pointers).
 */
#ifndef TML_DEEPDIVE_H
#define TML_DEEPDIVE_H

#include <stddef.h>
#include <stdint.h>

#define TML_DD_MAX_ROWS 256
#define TML_DD_NAME 96
#define TML_DD_REASON 192
#define TML_DD_KEEP_RANKS 1024
/* The row of a module's lighter operators, folded by the package. */
#define TML_DD_OTHER "(other operators)"

typedef struct tml_dd_row {
    char module[TML_DD_NAME];   /* the module's path in the model ("" outside any) */
    char op[TML_DD_NAME];       /* the operator (aten::addmm) */
    int64_t self_ns;            /* self time over the window, CPU and CUDA */
    int64_t calls;
} tml_dd_row;

typedef struct tml_dd_window {
    uint64_t first_step, last_step;  /* the profiled steps (the rank's ids) */
    int64_t wall_ns;                 /* the window: profiler on to rows handed over */
    int32_t cuda;                    /* 1: CUDA activity was profiled too */
    char skipped[TML_DD_REASON];     /* why no window ran; "" when one did */
    size_t nrows, cap;               /* rows used, rows allocated */
    tml_dd_row rows[];
} tml_dd_window;

tml_dd_window *tml__dd_new(void);
/* A copy of d with room for its rows only; NULL when out of memory. */
tml_dd_window *tml__dd_copy(const tml_dd_window *d);
void tml__dd_free(tml_dd_window *d);
/* Appends a row (names cut to fit): 0, or TML_EFULL past TML_DD_MAX_ROWS. */
int tml__dd_add(tml_dd_window *d, const char *module, const char *op, int64_t self_ns,
                int64_t calls);

#endif
