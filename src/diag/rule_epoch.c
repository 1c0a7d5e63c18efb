/*
 * rule_epoch.c - EPOCH START: the first step of each epoch waits for its
 * DataLoader's workers to start.
 */
#include "diag/rules.h"

/* EPOCH START: the first step of each epoch waits for its DataLoader's
 * workers to start (left out of the window, window.c), for long enough to
 * matter: at least EPOCH_MIN_WAIT_MS and 3x a steady step each, and
 * EPOCH_WARN_SHARE of the time (those waits and the window's steps). */
#define EPOCH_MIN_WAIT_MS TML_EPOCH_MIN_WAIT_MS
#define EPOCH_WARN_SHARE 0.05
#define EPOCH_CRIT_SHARE 0.20

static int epoch_start_issue(const tml_window *w, tml_diagnosis *d)
{
    double wait = w->epoch_start_wait_ns, step = NAN;
    if (w->median_rank >= 0)
        step = w->ranks[w->median_rank].avg_ns[TML_M_STEP];
    if (!w->epoch_start_steps || isnan(wait) || isnan(step) || wait < EPOCH_MIN_WAIT_MS * 1e6 ||
        wait < 3.0 * step)
        return 0;
    double spin = wait * (double)w->epoch_start_steps;
    double share = spin / (spin + step * (double)w->window_steps);
    if (share < EPOCH_WARN_SHARE)
        return 0;
    int crit = share >= EPOCH_CRIT_SHARE;
    diag_init(d, "EPOCH_START", "EPOCH START", crit ? TML_SEV_CRITICAL : TML_SEV_WARNING);
    d->share = share;
    d->threshold = crit ? EPOCH_CRIT_SHARE : EPOCH_WARN_SHARE;
    char own[128] = "";
    if (w->between_epochs_ns >= EPOCH_MIN_WAIT_MS * 1e6)
        snprintf(own, sizeof(own), " The script's own %.2f s before each (validation, "
                 "checkpoints) is Untraced time, not the loader's.", w->between_epochs_ns / 1e9);
    snprintf(d->why, sizeof(d->why), "The first step of each epoch waited %.2f s for the "
             "DataLoader's workers to start (%zu epoch start%s, %d%% of the time); they are left "
             "out of the figures, whose Input Wait is the steady state.%s", wait / 1e9,
             w->epoch_start_steps, w->epoch_start_steps == 1 ? "" : "s", pct(share), own);
    snprintf(d->next, sizeof(d->next), "Keep the workers between epochs: "
             "DataLoader(..., persistent_workers=True); or make their start cheaper (what the "
             "dataset loads in __init__, worker_init_fn).");
    return 1;
}

const char *const tml__rule_epoch_start_kinds[] = { "EPOCH_START", NULL };

int tml__rule_epoch_start(const tml_rule_ctx *c, tml_diagnosis *d)
{
    return epoch_start_issue(c->w, d);
}
