/*
 * history.h - a rank's step records folded into buckets of consecutive
 * step ids: what the charts of a long run are drawn from once the records
 * themselves are gone from memory (model/run.h keeps only a run's first and
 * last steps; telemetry.sqlite keeps them all).
 *
 * A bucket holds sums, never means, so buckets merge exactly: the step
 * breakdown (model/breakdown.h, nothing masked) on both clocks, the
 * Untraced gap and the per-step memory, each with its count. Aborted steps
 * are left out, as everywhere in the report.
 *
 * A history has at most TML_HISTORY_BUCKETS buckets of `width` step ids
 * from `base`. A step past the last bucket merges neighbours pairwise and
 * doubles the width, so a rank's history is at most ~250 KB however long
 * the run (the same scheme as the system timeline, model/timeline.h).
 */
#ifndef TML_HISTORY_H
#define TML_HISTORY_H

#include <stddef.h>
#include <stdint.h>
#include "model/breakdown.h"

typedef struct tml_step_bucket {
    uint64_t n[2];                 /* steps timed on the CPU / the GPU clock */
    double t[2][TML_M_COUNT];      /* their breakdowns summed (Untraced apart) */
    uint64_t n_gap;
    double gap;                    /* Untraced, steps with a gap */
    uint64_t n_mem[3];
    double mem[3];                 /* RSS, CUDA allocated peak, reserved peak */
} tml_step_bucket;

/* Adds step s (aborted steps are ignored); merges b into into. */
void tml__step_bucket_add(tml_step_bucket *into, const tml_step_record *s);
void tml__step_bucket_merge(tml_step_bucket *into, const tml_step_bucket *b);

#define TML_HISTORY_BUCKETS 1024

typedef struct tml_step_history {
    size_t max;                    /* buckets at most; 0: TML_HISTORY_BUCKETS */
    uint64_t base;                 /* first step id of bucket 0 */
    uint64_t width;                /* step ids per bucket, a power of two */
    uint64_t first, last;          /* smallest and largest id folded in */
    uint64_t steps;                /* steps folded in (aborted ones excluded) */
    tml_step_bucket *b;
    size_t nb, cap;
} tml_step_history;

/* Folds step s in. 0, or TML_ENOMEM with the history as it was. */
int tml__history_add(tml_step_history *h, const tml_step_record *s);
/* At most `buckets` (a power of two, at most TML_HISTORY_BUCKETS) from now
 * on: neighbours merged until it fits, the memory given back. */
void tml__history_limit(tml_step_history *h, size_t buckets);
void tml__history_release(tml_step_history *h);

#endif
