/*
 * rule_residual.c - RESIDUAL-HEAVY: work in the step that no traced
 * phase covers.
 */
#include "diag/rules.h"

#include <string.h>

/* Input or Optimizer never observed, with Forward and Backward measured:
 * what the time outside the measured phases holds besides the usual. */
#define UNSEEN_INPUT_OPT (TML_PHASE_BIT(TML_PHASE_INPUT) | TML_PHASE_BIT(TML_PHASE_OPTIMIZER))

/* RESIDUAL-HEAVY: work in the step that no phase covers. With Optimizer
 * missing, Residual is unknown (a hand-written update would hide in it),
 * but the step is still measurable: the share outside the phases that
 * were measured is the fact the verdict states, naming what is in it. */
/* On a saturated host a process that waits for a core between two traced
 * phases adds that wait to Residual: the Next line says so first (a
 * banded note near HIGH CPU, as COMMUNICATION-BOUND's). */
static void residual_host_note(const tml_window *w, tml_diagnosis *d)
{
    char was[sizeof(d->next)], cpu[128] = "host CPU averaged ";
    tml_call busy = tml__host_busy_call(w);
    if (busy == TML_CALL_NO)
        return;
    if (busy == TML_CALL_YES)
        snprintf(cpu + strlen(cpu), sizeof(cpu) - strlen(cpu), "%.0f%% (HIGH CPU)", tml__host_cpu(w));
    else
        tml__host_cpu_band(cpu, sizeof(cpu));
    if (tml__others_take_cores(w))   /* who took them: the Next fits it */
        snprintf(cpu + strlen(cpu), sizeof(cpu) - strlen(cpu), ", other processes using %.0f%% "
                 "of the cores", w->contention.other_cpu_percent);
    memcpy(was, d->next, sizeof(was));
    snprintf(d->next, sizeof(d->next), "The %.127s: waiting for a core between the traced "
             "phases is Residual too, so give the training its cores first. %.275s", cpu, was);
}

static int residual_issue(const tml_window *w, const tml_thresholds *th, double residual,
                          const char *multi, tml_diagnosis *d)
{
    static const char look[] = "Look for work in the step outside traced phases: CPU stalls, "
                               ".item() syncs, logging.";
    if (!isnan(residual) || !(w->missing & UNSEEN_INPUT_OPT)) {
        if (!tml__share_issue(residual, th->residual_warn, th->residual_crit, "RESIDUAL_HEAVY",
                         "RESIDUAL-HEAVY", TML_M_RESIDUAL, look, multi, d))
            return 0;
        residual_host_note(w, d);
        return 1;
    }
    double share = tml__median_of(w, tml__outside_share, TML_M_RESIDUAL, 0);
    if (!tml__share_issue(share, th->residual_warn, th->residual_crit, "RESIDUAL_HEAVY",
                     "RESIDUAL-HEAVY", TML_M_RESIDUAL, look, multi, d))
        return 0;
    int no_input = (w->missing & TML_PHASE_BIT(TML_PHASE_INPUT)) != 0;
    int no_opt = (w->missing & TML_PHASE_BIT(TML_PHASE_OPTIMIZER)) != 0;
    d->cause = -1;    /* Residual itself is n/a: the share is of what was not measured */
    snprintf(d->why, sizeof(d->why), "%d%% of Step Time%s is outside the traced forward and "
             "backward%s%s.", pct(share), multi,
             no_opt ? ": no optimizer.step() ran, so a hand-written update is in it" : "",
             no_input ? (no_opt ? ", and no DataLoader was seen, so batches made in the step "
                                  "are too" : ": no DataLoader was seen, so batches made in the "
                                              "step are in it") : "");
    snprintf(d->next, sizeof(d->next), "%s%sthen look for the rest: CPU stalls, .item() "
             "syncs, logging.",
             no_input ? "If batches are made in the step, time them: get_batch = "
                        "traceml.wrap_input(get_batch); " : "",
             no_opt ? "a torch.optim optimizer's step() inside trace_step (or "
                      "traceml.wrap_optimizer(optimizer)) is timed apart; " : "");
    residual_host_note(w, d);
    return 1;
}

const char *const tml__rule_residual_kinds[] = { "RESIDUAL_HEAVY", NULL };

int tml__rule_residual(const tml_rule_ctx *c, tml_diagnosis *d)
{
    return residual_issue(c->w, c->th, c->st->share[TML_M_RESIDUAL], c->multi, d);
}
