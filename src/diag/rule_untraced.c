/*
 * rule_untraced.c - UNTRACED-HEAVY: the run's verdict when most of the wall-clock goes
 * between steps.
 */
#include "diag/rules.h"

#include <string.h>

/* The share of wall-clock between steps: the window's Untraced, and the
 * script's own time before each epoch's loader started (validation,
 * checkpoints; left out of the window with the epoch starts, window.c),
 * over the window's steps and the epoch starts at the median rank's pace. */
void tml__untraced_wall(const tml_window *w, tml_step_diag *out)
{
    double u = tml__median_share(w, TML_M_UNTRACED, 1), b = w->between_epochs_ns;
    double l = isnan(w->epoch_start_wait_ns) ? 0 : w->epoch_start_wait_ns;
    out->untraced_wall = u;
    out->between_epochs_wall = isnan(u) ? NAN : 0;
    if (isnan(u) || isnan(b) || b <= 0 || w->median_rank < 0)
        return;
    const double *v = w->ranks[w->median_rank].avg_ns;
    double pace = v[TML_M_STEP] + v[TML_M_UNTRACED];
    if (isnan(pace) || pace <= 0)
        return;
    double n = (double)w->window_steps, e = (double)w->epoch_start_steps;
    double wall = n * pace + e * (b + l);
    out->untraced_wall = (u * n * pace + e * b) / wall;
    out->between_epochs_wall = e * b / wall;
}

/* UNTRACED-HEAVY: most of the wall-clock goes between steps, so whatever
 * the step's own verdict, it is not where the time goes. 1 when it fired. */
int tml__rule_untraced_heavy(const tml_step_diag *st, const tml_thresholds *th,
                          tml_diagnosis *out)
{
    const tml_diagnosis *p = &st->primary;
    double u = st->untraced_wall;
    /* an OUTSIDE-STEP STRAGGLER already names that time: whose, and what
     * it costs the others */
    if (isnan(u) || u < th->untraced_warn - 1e-9 || strcmp(p->kind, "NO_DATA") == 0 ||
        strcmp(p->kind, "WARMUP") == 0 || strcmp(p->kind, "OUTSIDE_STEP_STRAGGLER") == 0)
        return 0;
    int crit = u >= th->untraced_crit - 1e-9;
    diag_init(out, "UNTRACED_HEAVY", "UNTRACED-HEAVY", crit ? TML_SEV_CRITICAL : TML_SEV_WARNING);
    out->share = u;
    out->threshold = crit ? th->untraced_crit : th->untraced_warn;
    double b = st->between_epochs_wall;
    char epochs[160] = "";
    if (b >= 0.005)
        snprintf(epochs, sizeof(epochs), " (%.0f%% before epochs: the script's own work before "
                 "each epoch's DataLoader started, such as validation and checkpoints)", 100.0 * b);
    snprintf(out->why, sizeof(out->why), "Time between steps, outside any traced step, took "
             "%.0f%% of wall-clock%s; inside the step the verdict is %s (%s).", 100.0 * u,
             epochs, p->label, tml__severity_name(p->severity));
    if (b >= 0.5 * u)
        snprintf(out->next, sizeof(out->next), "Look at what runs between epochs (validation, "
                 "checkpointing): run it less often or on fewer batches, or in the background.");
    else
        snprintf(out->next, sizeof(out->next), "Look at what runs between steps (evaluation, "
                 "checkpointing, logging, batches made outside the loader): run it less often "
                 "or in the background, or move it into trace_step if it belongs to the step.");
    return 1;
}
