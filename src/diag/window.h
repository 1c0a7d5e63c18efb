/*
 * window.h - from a run (every rank's step records) to the analysed window
 * (plain numbers per rank, tml_window in diag/diag.h).
 */
#ifndef TML_WINDOW_H
#define TML_WINDOW_H

#include <stddef.h>
#include "model/run.h"
#include "diag/diag.h"

#define TML_WINDOW_DEFAULT_STEPS 10000
/* Steps x ranks a window analyses at most: past it, the cap comes down to
 * TML_WINDOW_CELLS / ranks (TML_WINDOW_MIN_STEPS at least), so that a
 * summary of a thousand ranks costs what one of 25 ranks does. */
#define TML_WINDOW_CELLS 250000
#define TML_WINDOW_MIN_STEPS 100

/*
 * Computes the window of `run`: the last max_steps (0 = 10000; fewer for
 * many ranks, TML_WINDOW_CELLS) common, non-aborted steps after the
 * warm-up prefix, on the GPU clock when every
 * window step of every rank has GPU figures, else on the CPU clock; then
 * per-rank averages and the median/worst rank. Ranks that sent no step at
 * all are kept (nsteps 0, every metric NAN) and take no part in choosing
 * the common steps. Returns 0 or TML_ENOMEM (w is then empty but valid to
 * release). Release with tml__window_release().
 */
int tml__window_compute(const tml_run *run, size_t max_steps, tml_window *w);
void tml__window_release(tml_window *w);
/* The same window on the CPU clock whatever GPU figures exist (compare
 * and the report's per-clock figures need both clocks). */
int tml__window_compute_cpu(const tml_run *run, size_t max_steps, tml_window *w);

/* The warm-up rule on a series of step times (docs/diagnosis.md): the
 * number of leading entries to leave out. Exposed for tests. */
size_t tml__warmup_count(const double *step_ns, size_t n);

#endif
