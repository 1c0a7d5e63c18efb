/*
 * breakdown.h - what a step is made of: the one definition of the step
 * breakdown (Step Time, the phases, Compute, Residual, Untraced) that the
 * window, the per-step series, the live views and the trace export share.
 *
 * Missing versus zero is decided here too. A phase that was never
 * observed over the steps considered is missing (NAN, "n/a"), never zero;
 * within those steps, a step that did not run an observed phase (no
 * optimizer step on a gradient-accumulation micro-step) counts it as a
 * measured 0. The exception is H2D when the process says it instruments
 * copies: then no copy happened and zero is the measurement. Compute and
 * Residual exist only when Forward, Backward and Optimizer were all
 * measured: otherwise untraced compute would show up as residual.
 */
#ifndef TML_BREAKDOWN_H
#define TML_BREAKDOWN_H

#include <stdint.h>
#include "model/record.h"

typedef enum tml_clock {
    TML_CLOCK_CPU = 0,
    TML_CLOCK_GPU = 1
} tml_clock;

/* The figures of the STEP TIMING panel. */
typedef enum tml_metric {
    TML_M_STEP = 0,      /* Step Time = Input Wait + traced */
    TML_M_INPUT,         /* Input Wait */
    TML_M_H2D,
    TML_M_FORWARD,
    TML_M_BACKWARD,
    TML_M_OPTIMIZER,
    TML_M_COMPUTE,       /* Forward + Backward + Optimizer */
    TML_M_RESIDUAL,      /* max(0, traced - H2D - Compute), per step */
    TML_M_UNTRACED,      /* gap_ns, CPU clock, steps with a gap only */
    TML_M_FETCH_CPU,     /* DataLoader fetch, CPU clock (supplemental) */
    TML_M_COUNT
} tml_metric;

/* Stable lower-case names ("step_time", "input_wait", ...), used in JSON
 * and /metrics; display names ("Step Time", "Input Wait", ...). */
const char *tml__metric_name(tml_metric m);
const char *tml__metric_label(tml_metric m);

/* The phases missing over steps whose `observed` bits were OR-ed into
 * observed, for a process that instruments `instrumented` (TML_PHASE_BIT
 * masks). */
uint32_t tml__phases_missing(uint32_t observed, uint32_t instrumented);

/* Step s on the clock, in ns: v[TML_M_*], NAN where missing (the phases
 * in `missing`, Compute and Residual with any of them, the fetch with
 * Input, Untraced without a gap). Durations are never negative. */
void tml__step_breakdown(const tml_step_record *s, tml_clock clock, uint32_t missing,
                         double v[TML_M_COUNT]);

#endif
