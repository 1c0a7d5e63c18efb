/*
 * rule_data.c - whether the window can be diagnosed: NO DATA and WARMUP
 * (before the rules), INCOMPLETE DATA (after them: the verdict's caveat).
 */
#include "diag/rules.h"
#include "model/run.h"

#include <ctype.h>
#include <string.h>

static const char *missing_hint(int phase)
{
    switch (phase) {
    case TML_PHASE_INPUT:
        return "batches made without a DataLoader are not timed: wrap the function that makes "
               "them with traceml.wrap_input(), or your iterator with traceml.wrap_dataloader_fetch()";
    case TML_PHASE_H2D:
        return "move batches with .to(device)/.cuda() or wrap them with traceml.wrap_h2d()";
    case TML_PHASE_FORWARD:
        return "pass the model to trace_step(model) or traceml.wrap_forward(model), so its forward is "
               "traced (a forward inside a torch.compile'd function cannot be seen: compile the "
               "model itself, torch.compile(model), to have it timed)";
    case TML_PHASE_BACKWARD:
        return "call loss.backward() inside trace_step or wrap the loss with traceml.wrap_backward()";
    default:
        return "no optimizer.step() ran in the step (a hand-written update is not split out; a "
               "step compiled with torch.compile(optimizer.step) is not seen): call optimizer.step() "
               "inside trace_step or wrap the optimizer with traceml.wrap_optimizer()";
    }
}

/* NO DATA or WARMUP as the primary when the window cannot be diagnosed;
 * returns 1 when it set one. */
/* No rank reported: why, and what to do, by how the launcher ran it. */
static void no_rank(const tml_window *w, tml_diagnosis *d)
{
    static const char *const why[] = {
        [TML_LAUNCH_UNKNOWN] = "no process of the training started TraceML (no rank reported).",
        [TML_LAUNCH_ZERO_EDIT] = "no process of the training started TraceML (no rank "
            "reported): zero-edit tracing starts it when the script imports torch and trains "
            "(a backward, an optimizer step), and none did.",
        [TML_LAUNCH_NO_AUTO_TRACE] = "no process of the training started TraceML (no rank "
            "reported), and --no-auto-trace left the script untraced.",
        [TML_LAUNCH_COMMAND] = "no process of the training started TraceML (no rank "
            "reported): `traceml run -- COMMAND` runs the command as given.",
        [TML_LAUNCH_FORKED] = "the training ran in processes forked from this one "
            "(multiprocessing's fork start method, as Accelerate's notebook_launcher and a "
            "Hogwild loop start them), and a forked process is not traced (no rank reported).",
    };
    static const char *const next[] = {
        [TML_LAUNCH_UNKNOWN] = "Call traceml.init() in the training and wrap each step in "
            "traceml.trace_step(model).",
        [TML_LAUNCH_ZERO_EDIT] = "Check that the script trains with torch in this process or in "
            "ranks that join a process group, or call traceml.init() and wrap each step in "
            "traceml.trace_step(model).",
        [TML_LAUNCH_NO_AUTO_TRACE] = "Let `traceml run` trace the script as is (without "
            "--no-auto-trace), or call traceml.init() and wrap each step in "
            "traceml.trace_step(model).",
        [TML_LAUNCH_COMMAND] = "Run the script as `traceml run SCRIPT` (traced as is), or call "
            "traceml.init() in it and wrap each step in traceml.trace_step(model).",
        [TML_LAUNCH_FORKED] = "Run the training as a script under `traceml run` (from a "
            "notebook: `!traceml run --nproc-per-node N train.py`), which traces each rank; "
            "processes it starts with the spawn start method are traced too.",
    };
    int k = w->launch >= TML_LAUNCH_UNKNOWN && w->launch <= TML_LAUNCH_FORKED ? w->launch : 0;
    snprintf(d->why, sizeof(d->why), "No training steps were detected: %s", why[k]);
    snprintf(d->next, sizeof(d->next), "%s", next[k]);
}

int tml__rule_no_data(const tml_window *w, const tml_thresholds *th, size_t nactive,
                             tml_step_diag *out)
{
    if (w->common_steps == 0 || w->window_steps == 0 || nactive == 0) {
        diag_init(&out->primary, "NO_DATA", "NO DATA", TML_SEV_INFO);
        if (w->nranks == 0) {
            no_rank(w, &out->primary);
            return 1;
        } else if (w->aborted_steps > 0 && w->common_steps == 0)
            snprintf(out->primary.why, sizeof(out->primary.why),
                     "Every common step was aborted (%zu), so no step can be timed.", w->aborted_steps);
        else if (nactive > 1 || (nactive == 1 && w->nranks > 1))
            snprintf(out->primary.why, sizeof(out->primary.why),
                     "No step id was reported by every rank.");
        else
            snprintf(out->primary.why, sizeof(out->primary.why),
                     "No training steps were detected: no complete step was recorded (no "
                     "trace_step, and no optimizer.step() for automatic detection; a "
                     "torch.compile'd optimizer.step() is not seen).");
        snprintf(out->primary.next, sizeof(out->primary.next),
                 "Wrap the training step in traceml.trace_step(model) and run at least a few steps.");
        return 1;
    }
    if (w->window_steps < th->min_steps) {
        diag_init(&out->primary, "WARMUP", "WARMUP", TML_SEV_INFO);
        snprintf(out->primary.why, sizeof(out->primary.why),
                 "Only %zu step%s in the window after warm-up; at least %zu are needed.",
                 w->window_steps, w->window_steps == 1 ? "" : "s", th->min_steps);
        snprintf(out->primary.next, sizeof(out->primary.next),
                 "Run longer: the diagnosis needs steady-state steps.");
        return 1;
    }
    return 0;
}

/* Whether batches made without a DataLoader can matter: time in the step
 * outside the measured phases, or between the steps, of a tenth of the
 * step or more. Otherwise the step is explained without an Input Wait and
 * the wrap_input() hint would send the user after nothing. */
static int unseen_input_matters(const tml_window *w, const tml_thresholds *th)
{
    return ge(tml__median_of(w, tml__outside_share, TML_M_RESIDUAL, 0), th->residual_warn) ||
           ge(tml__median_share(w, TML_M_UNTRACED, 1), th->residual_warn);
}

/* The INCOMPLETE DATA issue when a required phase was never observed,
 * its Next line joining one hint per missing phase that can apply (an
 * Input Wait never observed is no gap when no time is left to explain). */
int tml__rule_incomplete(const tml_window *w, const tml_thresholds *th,
                                 tml_diagnosis *d)
{
    uint32_t required = TML_PHASE_BIT(TML_PHASE_INPUT) | TML_PHASE_BIT(TML_PHASE_FORWARD) |
                        TML_PHASE_BIT(TML_PHASE_BACKWARD) | TML_PHASE_BIT(TML_PHASE_OPTIMIZER);
    uint32_t missing = w->missing & required, hinted = missing;
    char names[128], hint[TML_DIAG_TEXT];
    size_t hl = 0;
    int n = 0;

    if ((missing & TML_PHASE_BIT(TML_PHASE_INPUT)) && !unseen_input_matters(w, th))
        hinted &= ~TML_PHASE_BIT(TML_PHASE_INPUT);
    if (!hinted)
        return 0;
    tml__phase_list(missing, names, sizeof(names));
    hint[0] = '\0';
    for (int p = 0; p < TML_PHASE_COUNT; p++) {
        if (!(hinted & TML_PHASE_BIT(p)))
            continue;
        const char *h = missing_hint(p);
        int wr = snprintf(hint + hl, sizeof(hint) - hl, "%s%c%s",
                          n ? "; " : "", n ? h[0] : (char)toupper((unsigned char)h[0]), h + 1);
        if (wr > 0 && (size_t)wr < sizeof(hint) - hl)
            hl += (size_t)wr;
        n++;
    }
    diag_init(d, "INCOMPLETE_DATA", "INCOMPLETE DATA", TML_SEV_WARNING);
    d->missing = missing;
    snprintf(d->why, sizeof(d->why), "%s %s never observed in the window, so the step cannot be fully explained.",
             names, (missing & (missing - 1)) ? "were" : "was");
    snprintf(d->next, sizeof(d->next), "%s.", hint);
    return 1;
}

/* The caveat a verdict carries when a phase was never observed: what that
 * leaves unknown, and the hints that apply (none for a RESIDUAL-HEAVY that
 * already states what the unmeasured time holds). */
void tml__rule_caveat(tml_diagnosis *v, const tml_diagnosis *inc)
{
    uint32_t compute = TML_PHASE_BIT(TML_PHASE_FORWARD) | TML_PHASE_BIT(TML_PHASE_BACKWARD) |
                       TML_PHASE_BIT(TML_PHASE_OPTIMIZER);
    char names[128];
    size_t n = strlen(v->why);
    v->missing = inc->missing;
    if (strcmp(v->kind, "RESIDUAL_HEAVY") == 0 && v->cause < 0)
        return;
    tml__phase_list(inc->missing, names, sizeof(names));
    if (inc->missing & compute)
        snprintf(v->why + n, sizeof(v->why) - n, " Caveat: %s %s never observed, so Compute "
                 "and Residual are unknown. %s", names,
                 (inc->missing & (inc->missing - 1)) ? "were" : "was", inc->next);
    else
        snprintf(v->why + n, sizeof(v->why) - n, " Caveat: Input Wait was never observed (no "
                 "DataLoader was seen): batches made in the step are in Residual, between "
                 "steps in Untraced. %s", inc->next);
}
