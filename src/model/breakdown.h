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
 * Communication is missing in a run that never communicated (one rank):
 * then it is no row at all, and Residual is what it was.
 */
#ifndef TML_BREAKDOWN_H
#define TML_BREAKDOWN_H

#include <math.h>
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
    TML_M_RESIDUAL,      /* max(0, traced - H2D - Compute - Communication), per step */
    TML_M_UNTRACED,      /* gap_ns, CPU clock, steps with a gap only */
    TML_M_FETCH_CPU,     /* DataLoader fetch, CPU clock (supplemental) */
    TML_M_COMM,          /* Communication the step waited for (exposed) */
    TML_M_COMM_TOTAL,    /* time some collective was in flight, CPU clock (supplemental) */
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

/* Supplemental figures: shown beside the breakdown, not shares of it. */
static inline int tml__metric_supplemental(int m)
{
    return m == TML_M_UNTRACED || m == TML_M_FETCH_CPU || m == TML_M_COMM_TOTAL;
}

static inline double tml__nonneg_ns(int64_t v)
{
    return v > 0 ? (double)v : 0.0;
}

/* What `missing` (TML_PHASE_BIT mask) makes unknown in a breakdown, of
 * one step or of a sum of steps: the missing phases, Compute and Residual
 * with any of Forward, Backward, Optimizer, the fetch with Input. */
static inline void tml__breakdown_mask(double v[TML_M_COUNT], uint32_t missing)
{
    static const int metric_of[TML_PHASE_COUNT] = {
        TML_M_INPUT, TML_M_H2D, TML_M_FORWARD, TML_M_BACKWARD, TML_M_OPTIMIZER, TML_M_COMM
    };
    const uint32_t compute = TML_PHASE_BIT(TML_PHASE_FORWARD) |
                             TML_PHASE_BIT(TML_PHASE_BACKWARD) |
                             TML_PHASE_BIT(TML_PHASE_OPTIMIZER);
    if (!missing)
        return;
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        if (missing & TML_PHASE_BIT(p))
            v[metric_of[p]] = NAN;
    if (missing & compute)
        v[TML_M_COMPUTE] = v[TML_M_RESIDUAL] = NAN;
    if (missing & TML_PHASE_BIT(TML_PHASE_INPUT))
        v[TML_M_FETCH_CPU] = NAN;
    if (missing & TML_PHASE_BIT(TML_PHASE_COMM))
        v[TML_M_COMM_TOTAL] = NAN;
}

/* Step s on the clock, in ns: v[TML_M_*] with nothing missing (a phase
 * not observed in a step measured 0 there, model/record.h); Untraced NAN
 * without a gap. Durations are never negative. Inline: the window calls
 * it for every step of every rank. */
static inline void tml__step_breakdown_all(const tml_step_record *s, tml_clock clock,
                                           double v[TML_M_COUNT])
{
    const int64_t *ph = clock == TML_CLOCK_GPU ? s->gpu_phase_ns : s->phase_ns;
    double traced = tml__nonneg_ns(clock == TML_CLOCK_GPU ? s->gpu_traced_ns : s->traced_ns);
    v[TML_M_INPUT] = tml__nonneg_ns(ph[TML_PHASE_INPUT]);
    v[TML_M_H2D] = tml__nonneg_ns(ph[TML_PHASE_H2D]);
    v[TML_M_FORWARD] = tml__nonneg_ns(ph[TML_PHASE_FORWARD]);
    v[TML_M_BACKWARD] = tml__nonneg_ns(ph[TML_PHASE_BACKWARD]);
    v[TML_M_OPTIMIZER] = tml__nonneg_ns(ph[TML_PHASE_OPTIMIZER]);
    v[TML_M_COMM] = tml__nonneg_ns(ph[TML_PHASE_COMM]);
    double compute = v[TML_M_FORWARD] + v[TML_M_BACKWARD] + v[TML_M_OPTIMIZER];
    double residual = traced - v[TML_M_H2D] - compute - v[TML_M_COMM];
    v[TML_M_STEP] = v[TML_M_INPUT] + traced;
    v[TML_M_COMPUTE] = compute;
    v[TML_M_RESIDUAL] = residual > 0 ? residual : 0.0;
    v[TML_M_FETCH_CPU] = tml__nonneg_ns(s->phase_ns[TML_PHASE_INPUT]);
    v[TML_M_UNTRACED] = s->gap_ns >= 0 ? (double)s->gap_ns : NAN;
    v[TML_M_COMM_TOTAL] = tml__nonneg_ns(s->comm_ns);
}

/* The step breakdown: step s on the clock with the phases in `missing`
 * unknown (NAN), as every report, chart and live view shows it. */
static inline void tml__step_breakdown(const tml_step_record *s, tml_clock clock,
                                       uint32_t missing, double v[TML_M_COUNT])
{
    tml__step_breakdown_all(s, clock, v);
    tml__breakdown_mask(v, missing);
}

#endif
