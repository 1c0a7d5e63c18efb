/*
 * rule_compute.c - COMPUTE-BOUND: compute dominates the step.
 */
#include "diag/rules.h"

/* COMPUTE-BOUND: compute dominates and no other share reaches its cap.
 * On the CPU clock the intra-op thread count is the first lever, and one
 * only a measurement settles (too many threads for the cores lose several
 * times over; more than one on a busy host may not pay): Next names the
 * measurement, not a count. */
static int compute_bound_issue(const tml_step_diag *st, tml_clock clock,
                               const tml_thresholds *th, const char *multi, tml_diagnosis *d)
{
    double c = st->share[TML_M_COMPUTE];
    if (!ge(c, th->compute_min) ||
        ge(st->share[TML_M_INPUT], th->compute_other_max) ||
        ge(st->share[TML_M_H2D], th->compute_other_max) ||
        ge(st->share[TML_M_COMM], th->compute_other_max) ||
        ge(st->share[TML_M_RESIDUAL], th->compute_other_max))
        return 0;
    diag_init(d, "COMPUTE_BOUND", "COMPUTE-BOUND", TML_SEV_INFO);
    d->cause = TML_M_COMPUTE;
    d->share = c;
    d->threshold = th->compute_min;
    snprintf(d->why, sizeof(d->why), "Compute took %d%% of Step Time%s.", pct(c), multi);
    snprintf(d->next, sizeof(d->next), "Speed up model compute: %smixed precision, batch size, "
             "kernel-level profiling.", clock == TML_CLOCK_GPU ? "" :
             "on the CPU, the intra-op thread count first (`traceml tune --only threads` "
             "measures it); ");
    return 1;
}

const char *const tml__rule_compute_kinds[] = { "COMPUTE_BOUND", NULL };

int tml__rule_compute(const tml_rule_ctx *c, tml_diagnosis *d)
{
    return compute_bound_issue(c->st, c->w->clock, c->th, c->multi, d);
}
