/*
 * breakdown.c - the one step breakdown (breakdown.h).
 */
#include "model/breakdown.h"

#include <math.h>

static const char *const metric_names[TML_M_COUNT] = {
    "step_time", "input_wait", "h2d", "forward", "backward", "optimizer",
    "compute", "residual", "untraced", "dataloader_fetch_cpu"
};
static const char *const metric_labels[TML_M_COUNT] = {
    "Step Time", "Input Wait", "H2D", "Forward", "Backward", "Optimizer",
    "Compute", "Residual", "Untraced", "DataLoader fetch"
};

const char *tml__metric_name(tml_metric m)
{
    return (unsigned)m < TML_M_COUNT ? metric_names[m] : "?";
}

const char *tml__metric_label(tml_metric m)
{
    return (unsigned)m < TML_M_COUNT ? metric_labels[m] : "?";
}

uint32_t tml__phases_missing(uint32_t observed, uint32_t instrumented)
{
    uint32_t missing = TML_PHASES_ALL & ~observed;
    uint32_t h2d = TML_PHASE_BIT(TML_PHASE_H2D);
    if ((missing & h2d) && (instrumented & h2d))
        missing &= ~h2d;            /* instrumented, never happened: zero */
    return missing;
}

static double nonneg(int64_t v)
{
    return v > 0 ? (double)v : 0.0;
}

void tml__step_breakdown(const tml_step_record *s, tml_clock clock, uint32_t missing,
                         double v[TML_M_COUNT])
{
    static const int metric_of[TML_PHASE_COUNT] = {
        TML_M_INPUT, TML_M_H2D, TML_M_FORWARD, TML_M_BACKWARD, TML_M_OPTIMIZER
    };
    const int64_t *ph = clock == TML_CLOCK_GPU ? s->gpu_phase_ns : s->phase_ns;
    double traced = nonneg(clock == TML_CLOCK_GPU ? s->gpu_traced_ns : s->traced_ns);
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        v[metric_of[p]] = (missing & TML_PHASE_BIT(p)) ? NAN : nonneg(ph[p]);

    double input = isnan(v[TML_M_INPUT]) ? 0.0 : v[TML_M_INPUT];
    double h2d = isnan(v[TML_M_H2D]) ? 0.0 : v[TML_M_H2D];
    double compute = v[TML_M_FORWARD] + v[TML_M_BACKWARD] + v[TML_M_OPTIMIZER];
    double residual = traced - h2d - compute;
    v[TML_M_STEP] = input + traced;
    v[TML_M_COMPUTE] = compute;                       /* NAN with a missing part */
    v[TML_M_RESIDUAL] = isnan(compute) ? NAN : residual > 0 ? residual : 0.0;
    v[TML_M_FETCH_CPU] = (missing & TML_PHASE_BIT(TML_PHASE_INPUT))
                             ? NAN : nonneg(s->phase_ns[TML_PHASE_INPUT]);
    v[TML_M_UNTRACED] = s->gap_ns >= 0 ? (double)s->gap_ns : NAN;
}
