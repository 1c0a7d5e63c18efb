/*
 * rule_input.c - INPUT-BOUND: the Input Wait share crosses input_warn;
 * its Next names the loader as configured, with its measured cost.
 */
#include "diag/rules.h"

/* Below this a DataLoader fetch gains nothing from worker processes. */
#define INPUT_CHEAP_FETCH_MS 2.0
/* Within this fraction of INPUT_CHEAP_FETCH_MS (1.5 to 2.5 ms) the call is
 * close: the hand-over cost is an estimate (it grows with the batch), and
 * a fetch's average moves by up to a quarter between identical runs on a
 * busy host (docs/diagnosis.md, "Close calls"). */
#define INPUT_CHEAP_FETCH_CLOSE 0.25

/* Is a batch too cheap to fetch for a worker to pay? (A fetch is only
 * handed over from num_workers=0.) The band is under the threshold as
 * over it, a fraction of it. */
static tml_call cheap_fetch_call(int workers, double fetch_ms)
{
    double band = INPUT_CHEAP_FETCH_MS * INPUT_CHEAP_FETCH_CLOSE;
    if (workers != 0 || isnan(fetch_ms))
        return TML_CALL_NO;
    if (fetch_ms < INPUT_CHEAP_FETCH_MS - band)
        return TML_CALL_YES;
    return fetch_ms < INPUT_CHEAP_FETCH_MS + band ? TML_CALL_CLOSE : TML_CALL_NO;
}

/* The number of workers to try from `workers`: min(8, max(2, cores)) from
 * none, else double, at most the cores. */
static int workers_to_try(int workers, int cores)
{
    if (workers == 0)
        return cores > 0 ? (cores < 2 ? 2 : cores > 8 ? 8 : cores) : 4;
    return cores > 0 && workers * 2 > cores ? cores : workers * 2;
}

/* " on 16 cores", "" when unknown. */
static void on_cores(int cores, char *out, size_t cap)
{
    if (cores > 0)
        snprintf(out, cap, " on %d core%s", cores, cores == 1 ? "" : "s");
    else if (cap)
        out[0] = '\0';
}

/* The text of a close call: the same whichever side of the threshold the
 * measured value fell on, so it names the band, not the value; both ways
 * and how to settle it. */
static void input_close_call(const tml_window *w, const tml_rank_window *rw, double share,
                             tml_call fetch, tml_call cpu, char *out, size_t cap)
{
    char on[32], why_fetch[160] = "", why_cpu[160] = "";
    int workers = rw->loader_workers, cores = rw->cpu_count;
    on_cores(cores, on, sizeof(on));
    if (fetch == TML_CALL_CLOSE)
        snprintf(why_fetch, sizeof(why_fetch), ", a batch takes %.1f to %.1f ms to fetch, about "
                 "what handing it to a worker costs (~%.0f ms)",
                 INPUT_CHEAP_FETCH_MS * (1 - INPUT_CHEAP_FETCH_CLOSE),
                 INPUT_CHEAP_FETCH_MS * (1 + INPUT_CHEAP_FETCH_CLOSE), INPUT_CHEAP_FETCH_MS);
    if (cpu == TML_CALL_CLOSE) {
        char band[96];
        tml__host_cpu_band(band, sizeof(band));
        snprintf(why_cpu, sizeof(why_cpu), "%s the %s", fetch == TML_CALL_CLOSE ? ", and" : ",", band);
    }
    snprintf(out, cap, "Input Wait %d%% with DataLoader(num_workers=%d)%s%s%s: a close call "
             "between num_workers=%d%s and %s; measure it with `traceml tune SCRIPT`.",
             pct(share), workers, on, why_fetch, why_cpu, workers_to_try(workers, cores),
             w->clock == TML_CLOCK_GPU && !rw->loader_pin_memory ? " (with pin_memory=True)" : "",
             fetch == TML_CALL_CLOSE ? "a cheaper fetch (index whole batches instead of collating "
                                   "samples one by one)"
                                 : "cheaper batches (transforms, decoding, collation), as more "
                                   "workers may compete with the training for cores");
}

/* More workers, or cheaper batches, by the workers and cores configured. */
static void input_workers_next(const tml_window *w, const tml_rank_window *rw, double share,
                               char *out, size_t cap)
{
    int workers = rw->loader_workers, cores = rw->cpu_count;
    char on[32];
    on_cores(cores, on, sizeof(on));
    const char *pin = w->clock == TML_CLOCK_GPU && !rw->loader_pin_memory ? ", pin_memory=True" : "";
    if (workers == 0)
        snprintf(out, cap, "Input Wait %d%% with DataLoader(num_workers=0)%s: try num_workers=%d%s.",
                 pct(share), on, workers_to_try(workers, cores), pin);
    else if (cores <= 0 || workers < cores)
        snprintf(out, cap, "Input Wait %d%% with DataLoader(num_workers=%d)%s: try num_workers=%d%s, "
                 "or make each batch cheaper (transforms, decoding, storage).",
                 pct(share), workers, on, workers_to_try(workers, cores), pin);
    else
        snprintf(out, cap, "Input Wait %d%% although DataLoader(num_workers=%d) already matches "
                 "the %d cores: make each batch cheaper (transforms, decoding, collation, storage).",
                 pct(share), workers, cores);
}

/* INPUT-BOUND's Next when other processes take the cores. */
static void input_others_next(const tml_window *w, const tml_rank_window *rw, double share,
                              char *out, size_t cap)
{
    const tml_contention *c = &w->contention;
    int workers = rw->loader_workers, cores = rw->cpu_count;
    char on[32];
    on_cores(cores, on, sizeof(on));
    /* three lines of an 80-column live view whatever the figures (the
     * host's HIGH CPU is an Also line of its own) */
    snprintf(out, cap, "Input Wait %d%% with DataLoader(num_workers=%d)%s; other processes used "
             "%.0f%% of the cores (the training %.0f%%): more workers win it a larger share. "
             "Measure num_workers=%d with `traceml tune SCRIPT`.",
             pct(share), workers, on, c->other_cpu_percent, c->training_cpu_percent,
             workers_to_try(workers, cores));
}

/* INPUT-BOUND's Next under `traceml run --apply`, where the loader runs
 * the worker count `traceml tune` measured fastest: never advice against
 * it (more or fewer workers), the batch's own cost instead. */
static void input_applied_next(const tml_window *w, const tml_rank_window *rw, double share,
                               char *out, size_t cap)
{
    (void)w;
    snprintf(out, cap, "Input Wait %d%% with DataLoader(num_workers=%d), the worker count "
             "`traceml tune` measured fastest (--apply): keep it and make each batch cheaper "
             "(transforms, decoding, collation, storage), or tune again if the machine's "
             "load has changed.", pct(share), rw->loader_workers);
}

/* The INPUT-BOUND Next line, naming the user's own loader settings when
 * the rank reported them (SPEC 4.4: the cause as configured, with its
 * measured cost). The median rank's settings, else any rank's. Two
 * reasons can speak against more workers, each a measured value against
 * a threshold: a fetch too cheap to hand over, a host too busy. Near
 * either threshold the advice is one close-call text, so identical runs
 * get the same Next line. */
static void input_next(const tml_window *w, double share, char *out, size_t cap)
{
    const tml_rank_window *rw = NULL;
    if (w->median_rank >= 0 && w->ranks[w->median_rank].loader_known)
        rw = &w->ranks[w->median_rank];
    for (size_t i = 0; !rw && i < w->nranks; i++)
        if (w->ranks[i].loader_known)
            rw = &w->ranks[i];
    if (!rw) {
        snprintf(out, cap, "Increase workers, prefetch, or storage throughput.");
        return;
    }
    int workers = rw->loader_workers, cores = rw->cpu_count;
    double fetch_ms = rw->avg_ns[TML_M_INPUT] / 1e6;
    int grow = workers == 0 || cores <= 0 || workers < cores;   /* more workers to advise */
    tml_call fetch = cheap_fetch_call(workers, fetch_ms);
    tml_call cpu = grow ? tml__host_busy_call(w) : TML_CALL_NO;
    if (fetch == TML_CALL_YES) {
        /* a worker hands each batch over through a pipe and shared memory:
         * for a fetch this cheap that costs about as much as the fetch */
        snprintf(out, cap, "Input Wait %d%%, but a batch takes only %.2f ms to fetch: worker "
                 "processes (num_workers>0) would cost about as much to hand it over. Make "
                 "the fetch cheaper: index whole batches (BatchSampler, tensor slicing) "
                 "instead of collating samples one by one.", pct(share), fetch_ms);
    } else if (w->applied && w->applied_workers == workers) {
        input_applied_next(w, rw, share, out, cap);
    } else if (cpu != TML_CALL_NO && tml__others_take_cores(w)) {
        input_others_next(w, rw, share, out, cap);
    } else if (cpu == TML_CALL_YES) {
        /* the cores more workers would need are taken already, by the
         * training's own tree (whatever the fetch costs: no worker then) */
        snprintf(out, cap, "Input Wait %d%%, but the host CPU averaged %.0f%% (HIGH CPU): more "
                 "DataLoader workers would compete with the training. Make batches cheaper "
                 "(transforms, decoding, collation) or prepare them ahead.", pct(share),
                 tml__host_cpu(w));
    } else if (fetch == TML_CALL_CLOSE || cpu == TML_CALL_CLOSE) {
        input_close_call(w, rw, share, fetch, cpu, out, cap);
    } else {
        input_workers_next(w, rw, share, out, cap);
    }
}

const char *const tml__rule_input_kinds[] = { "INPUT_BOUND", NULL };

int tml__rule_input(const tml_rule_ctx *c, tml_diagnosis *d)
{
    if (!tml__share_issue(c->st->share[TML_M_INPUT], c->th->input_warn, c->th->input_crit,
                          "INPUT_BOUND", "INPUT-BOUND", TML_M_INPUT,
                          "Increase workers, prefetch, or storage throughput.", c->multi, d))
        return 0;
    input_next(c->w, d->share, d->next, sizeof(d->next));
    return 1;
}
