/*
 * compare.c - two runs in, one verdict out (SPEC 6): the decision of
 * `traceml compare`, on plain structs (the summaries are read and the
 * result printed by src/report/compare.c and reload_compare.c).
 *
 * The question a user asks after changing something is "did it help?", and
 * the honest answers are five: IMPROVEMENT, REGRESSION, MIXED (time and
 * memory moved in opposite directions), EQUIVALENT and INCONCLUSIVE (the
 * runs cannot be compared: one has no step-time window). The rules:
 *
 *  - Clock. Step times are compared on a clock both runs have: the GPU
 *    clock when both summaries carry GPU figures, else the CPU clock. Each
 *    summary has its figures on both clocks where it can (step_time.
 *    by_clock), so a GPU run can still be compared with a CPU-clock run.
 *  - Gates. Step time moves when it changes by at least 3%; peak reserved
 *    memory when it changes by at least 10% (both configurable).
 *  - Significance. Step time moves only when the change is both
 *    significant and past the gate, and the Why says which held. Each
 *    summary carries the Step Time medians of up to 20 consecutive blocks
 *    of its window (step_time.by_clock.*.step_time_blocks_ms): steps next to
 *    each other are not independent (epoch starts, drifting load) and a few
 *    slow ones inflate a standard deviation, while block medians are nearly
 *    independent and robust. The two runs' block medians go through a
 *    two-sided Mann-Whitney U test (significant at p < 0.01), and the
 *    effect the gate sees is the change of their medians. Two runs of the
 *    same script on a busy machine may differ significantly by 1-2%: the
 *    gate keeps that EQUIVALENT; a real slowdown moves every block. A
 *    summary without block medians (older TraceML) falls back to the
 *    window averages, with a change smaller than the larger step-to-step
 *    standard deviation called noise.
 *  - Verdict. Neither moved: EQUIVALENT. Opposite directions: MIXED.
 *    Otherwise the direction that moved: faster or smaller is IMPROVEMENT.
 *
 * The Why and the Next are part of the decision: each says which rule
 * held, in the words of the rule, so they are composed here with it.
 */
#include "judge/compare.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/stats.h"

void tml__cmp_gates_default(tml_cmp_gates *g)
{
    g->step_time = 0.03;
    g->memory = 0.10;
}

const char *tml__cmp_verdict_name(tml_cmp_verdict v)
{
    switch (v) {
    case TML_CMP_EQUIVALENT: return "EQUIVALENT";
    case TML_CMP_IMPROVEMENT: return "IMPROVEMENT";
    case TML_CMP_REGRESSION: return "REGRESSION";
    case TML_CMP_MIXED: return "MIXED";
    case TML_CMP_INCONCLUSIVE: return "INCONCLUSIVE";
    }
    return "INCONCLUSIVE";
}

const char *tml__cmp_clock_name(int c)
{
    return c == TML_CMP_GPU ? "GPU" : "CPU";
}

const char *tml__cmp_run_name(const tml_cmp_run *r, const char *which)
{
    return r->label[0] ? r->label : which;
}

void tml__cmp_run_init(tml_cmp_run *r)
{
    memset(r, 0, sizeof(*r));
    for (int c = 0; c < 2; c++) {
        tml_cmp_clock *k = &r->clock[c];
        k->step_ms = k->input_ms = k->h2d_ms = k->compute_ms = k->residual_ms = NAN;
        k->noise_ms = NAN;
    }
    r->peak_reserved_bytes = r->mem_skew_percent = NAN;
    r->proc_cpu_percent = r->proc_rss_bytes = NAN;
    r->sys_cpu_percent = r->sys_ram_used_bytes = r->gpu_util_percent = r->gpu_mem_percent = NAN;
    r->samples_per_s = r->tokens_per_s = r->flops_per_s = r->mfu_percent = NAN;
    r->cont.cores = r->cont.host_cpu = r->cont.training_cpu = r->cont.other_cpu = NAN;
    r->cont.runq_wait = NAN;
    r->cont.gpu_shared = -1;
    r->work.world_size = -1;
}

/* ---- one run a side: the block test ---------------------------------- */

static int usable(const tml_cmp_run *r)
{
    return r->window_steps >= 2 && (r->clock[0].valid || r->clock[1].valid);
}

static void inconclusive(const tml_cmp_run *a, const tml_cmp_run *b, tml_cmp_result *out)
{
    out->verdict = TML_CMP_INCONCLUSIVE;
    if (usable(a) && usable(b)) {
        snprintf(out->why, sizeof(out->why),
                 "The runs have no step-time clock in common: step time cannot be compared.");
        return;
    }
    const tml_cmp_run *bad = usable(a) ? b : a;
    const char *which = bad == a ? "A" : "B";
    if (bad->window_steps == 0 || !(bad->clock[0].valid || bad->clock[1].valid))
        snprintf(out->why, sizeof(out->why),
                 "%s (%s) has no step-time window (%s): step time cannot be compared.",
                 which, tml__cmp_run_name(bad, which),
                 bad->primary[0] ? bad->primary : "no data");
    else
        snprintf(out->why, sizeof(out->why),
                 "%s (%s) has %zu step%s in its window: too few to compare.", which,
                 tml__cmp_run_name(bad, which), bad->window_steps,
                 bad->window_steps == 1 ? "" : "s");
}

static double median_copy(const double *v, size_t n)
{
    double t[TML_CMP_BLOCKS];
    memcpy(t, v, n * sizeof(*t));
    return tml__median(t, n);
}

/* The test on the block medians when both runs have them; 1 when it ran
 * (out->time_moved set by it). */
static int significance_test(const tml_cmp_clock *ka, const tml_cmp_clock *kb,
                             tml_cmp_result *out)
{
    if (ka->nblocks < TML_CMP_MIN_BLOCKS || kb->nblocks < TML_CMP_MIN_BLOCKS)
        return 0;
    double ca = median_copy(ka->blocks_ms, ka->nblocks);
    double cb = median_copy(kb->blocks_ms, kb->nblocks);
    if (!(ca > 0))
        return 0;
    out->tested = 1;
    out->blocks_a = ka->nblocks;
    out->blocks_b = kb->nblocks;
    out->center_a_ms = ca;
    out->center_b_ms = cb;
    out->effect = (cb - ca) / ca;
    out->p_value = tml__mann_whitney_p(ka->blocks_ms, ka->nblocks, kb->blocks_ms, kb->nblocks);
    out->significant = out->p_value < TML_CMP_ALPHA;
    out->past_gate = fabs(out->effect) >= out->gates.step_time;
    if (out->significant && out->past_gate)
        out->time_moved = out->effect > 0 ? 1 : -1;
    return 1;
}

/* ---- a side of several runs ------------------------------------------- */


/* The median over the runs of the double at off of each (run or clock). */
static double med_field(const tml_cmp_run *runs, size_t n, size_t off)
{
    double v[TML_CMP_MAX_RUNS];
    for (size_t i = 0; i < n; i++)
        v[i] = *(const double *)(const void *)((const char *)&runs[i] + off);
    return tml__median(v, n);
}

void tml__cmp_side(const tml_cmp_run *runs, size_t n, tml_cmp_run *out)
{
    if (n > TML_CMP_MAX_RUNS)
        n = TML_CMP_MAX_RUNS;
    if (n <= 1) {
        if (n == 1)
            *out = runs[0];
        else
            tml__cmp_run_init(out);
        return;
    }
    *out = runs[0];
    size_t used = (size_t)snprintf(out->label, sizeof(out->label), "%zu runs:", n);
    for (size_t i = 0; i < n && used < sizeof(out->label); i++)
        used += (size_t)snprintf(out->label + used, sizeof(out->label) - used, "%s %s",
                                 i ? "," : "", runs[i].label[0] ? runs[i].label : "?");
    out->path[0] = '\0';
    out->window_steps = runs[0].window_steps;
    for (size_t i = 1; i < n; i++)
        if (runs[i].window_steps < out->window_steps)
            out->window_steps = runs[i].window_steps;
    for (int c = 0; c < 2; c++) {
        tml_cmp_clock *k = &out->clock[c];
        k->nblocks = 0;
        k->valid = 1;
        for (size_t i = 0; i < n; i++)
            k->valid &= runs[i].clock[c].valid;
#define MED_CLOCK(f) k->f = med_field(runs, n, offsetof(tml_cmp_run, clock) + \
                                      c * sizeof(tml_cmp_clock) + offsetof(tml_cmp_clock, f))
        MED_CLOCK(step_ms);
        MED_CLOCK(input_ms);
        MED_CLOCK(h2d_ms);
        MED_CLOCK(compute_ms);
        MED_CLOCK(residual_ms);
        MED_CLOCK(noise_ms);
#undef MED_CLOCK
    }
#define MED(f) out->f = med_field(runs, n, offsetof(tml_cmp_run, f))
    MED(peak_reserved_bytes);
    MED(mem_skew_percent);
    MED(proc_cpu_percent);
    MED(proc_rss_bytes);
    MED(sys_cpu_percent);
    MED(sys_ram_used_bytes);
    MED(gpu_util_percent);
    MED(gpu_mem_percent);
    MED(samples_per_s);
    MED(tokens_per_s);
    MED(flops_per_s);
    MED(mfu_percent);
    MED(cont.cores);
    MED(cont.host_cpu);
    MED(cont.training_cpu);
    MED(cont.other_cpu);
    MED(cont.runq_wait);
#undef MED
    out->cont.known = 0;
    out->cont.gpu_shared = -1;
    for (size_t i = 0; i < n; i++) {
        out->cont.known |= runs[i].cont.known;
        if (runs[i].cont.gpu_shared >= 0)
            out->cont.gpu_shared = out->cont.gpu_shared == 1 ? 1 : runs[i].cont.gpu_shared;
    }
    /* a diagnosis the runs disagree on is shown as the first run's */
}

/* ---- the verdict ------------------------------------------------------ */

static double run_center(const tml_cmp_run *r, int c)
{
    const tml_cmp_clock *k = &r->clock[c];
    return k->nblocks ? median_copy(k->blocks_ms, k->nblocks) : k->step_ms;
}

/* Welch's t-test on the logs of the runs' centers; 0, or -1 (why set)
 * when a run has no positive step time. */
static int run_test(const tml_cmp_run *a, size_t na, const tml_cmp_run *b, size_t nb,
                    tml_cmp_result *out)
{
    double la[TML_CMP_MAX_RUNS], lb[TML_CMP_MAX_RUNS], ma = 0, mb = 0, va = 0, vb = 0;
    for (size_t i = 0; i < na + nb; i++) {
        const tml_cmp_run *r = i < na ? &a[i] : &b[i - na];
        double c = run_center(r, out->clock);
        if (!(c > 0)) {
            snprintf(out->why, sizeof(out->why), "%s (%s) has no positive step time: no "
                     "change can be measured.", i < na ? "A" : "B", tml__cmp_run_name(r, "?"));
            return -1;
        }
        if (i < na) {
            out->run_a_ms[i] = c;
            ma += (la[i] = log(c)) / (double)na;
        } else {
            out->run_b_ms[i - na] = c;
            mb += (lb[i - na] = log(c)) / (double)nb;
        }
    }
    for (size_t i = 0; i < na; i++)
        va += (la[i] - ma) * (la[i] - ma) / (na > 1 ? (double)(na - 1) : 1);
    for (size_t i = 0; i < nb; i++)
        vb += (lb[i] - mb) * (lb[i] - mb) / (nb > 1 ? (double)(nb - 1) : 1);
    /* one run on a side: its noise taken as the other side's */
    out->run_noise_a = na > 1 ? sqrt(va) : NAN;
    out->run_noise_b = nb > 1 ? sqrt(vb) : NAN;
    if (na < 2)
        va = vb;
    if (nb < 2)
        vb = va;
    double se2 = va / (double)na + vb / (double)nb;
    double df;
    if (na > 1 && nb > 1)
        df = se2 > 0 ? tml__welch_df(va, (double)na, vb, (double)nb) : (double)(na + nb - 2);
    else
        df = (double)((na > 1 ? na : nb) - 1);
    out->run_tested = 1;
    out->t_df = df;
    out->center_a_ms = out->time_a_ms = exp(ma);
    out->center_b_ms = out->time_b_ms = exp(mb);
    out->effect = out->time_change = exp(mb - ma) - 1;
    if (se2 > 0) {
        out->p_value = tml__t_p2((mb - ma) / sqrt(se2), df);
        out->mdc = exp(tml__t_detectable(TML_CMP_ALPHA, 0.8, df) * sqrt(se2)) - 1;
    } else {
        out->p_value = mb == ma ? 1 : 0;
        out->mdc = 0;
    }
    out->significant = out->p_value < TML_CMP_ALPHA;
    out->past_gate = fabs(out->effect) >= out->gates.step_time;
    if (out->significant && out->past_gate)
        out->time_moved = out->effect > 0 ? 1 : -1;
    else if (!out->significant &&
             (out->past_gate || !(out->mdc <= TML_CMP_MDC_GATES * out->gates.step_time)))
        out->undecided = 1;
    return 0;
}

static void run_sentence(const tml_cmp_result *r, char *t, size_t cap)
{
    const char *clk = tml__cmp_clock_name(r->clock);
    double gate = 100.0 * r->gates.step_time, ep = 100.0 * r->effect;
    char head[200], see[96];
    snprintf(head, sizeof(head), "%s Step Time %s %.1f%% (geometric mean of %zu vs %zu run "
             "medians: %.2f -> %.2f ms)", clk,
             r->time_moved ? (ep > 0 ? "increased by" : "decreased by") : "changed by",
             r->time_moved ? fabs(ep) : ep, r->runs_a, r->runs_b, r->center_a_ms,
             r->center_b_ms);
    snprintf(see, sizeof(see), "these runs can detect a change of %.1f%% or more",
             100.0 * r->mdc);
    if (r->time_moved)
        snprintf(t, cap, "%s: significant (Welch t on log run medians, p = %.2g) and past "
                 "the %.0f%% gate; %s.", head, r->p_value, gate, see);
    else if (r->significant)
        snprintf(t, cap, "%s: significant (Welch t, p = %.2g) but within the %.0f%% gate.",
                 head, r->p_value, gate);
    else if (r->past_gate)
        snprintf(t, cap, "%s: past the %.0f%% gate but not significant (Welch t, p = %.2g): "
                 "the runs overlap; %s.", head, gate, r->p_value, see);
    else
        snprintf(t, cap, "%s: within the %.0f%% gate and not significant (Welch t, p = %.2g); "
                 "%s.", head, gate, r->p_value, see);
}

/* What happened to step time with one run a side, in one true sentence:
 * which of significance and the gate held. d is B - A of the window
 * averages. */
static void time_sentence(const tml_cmp_result *r, double d, char *t, size_t cap)
{
    const char *clk = tml__cmp_clock_name(r->clock);
    double gate = 100.0 * r->gates.step_time;
    if (r->run_tested) {
        run_sentence(r, t, cap);
        return;
    }
    if (!r->tested) {
        double tp = 100.0 * r->time_change;
        if (r->time_moved)
            snprintf(t, cap, "%s Step Time %s by %.1f%%.", clk,
                     d > 0 ? "increased" : "decreased", fabs(tp));
        else if (r->within_noise)
            snprintf(t, cap, "%s Step Time changed by %+.1f%% (%+.2f ms), past the %.0f%% gate "
                     "but within the runs' step-to-step noise (+/-%.2f ms): one run a side "
                     "cannot tell the two apart.", clk, tp, d, gate, r->noise_ms);
        else
            snprintf(t, cap, "%s Step Time changed by %+.1f%%, within the %.0f%% gate.", clk,
                     tp, gate);
        return;
    }
    double ep = 100.0 * r->effect;
    if (r->time_moved)
        snprintf(t, cap, "%s Step Time %s by %.1f%% (median of %zu vs %zu blocks: %.2f -> "
                 "%.2f ms): significant (Mann-Whitney p = %.2g) and past the %.0f%% gate.",
                 clk, ep > 0 ? "increased" : "decreased", fabs(ep), r->blocks_a, r->blocks_b,
                 r->center_a_ms, r->center_b_ms, r->p_value, gate);
    else if (r->significant)
        snprintf(t, cap, "%s Step Time changed by %+.1f%%: significant (Mann-Whitney p = %.2g) "
                 "but within the %.0f%% gate.", clk, ep, r->p_value, gate);
    else if (r->past_gate)
        snprintf(t, cap, "%s Step Time changed by %+.1f%%, past the %.0f%% gate but not "
                 "significant (Mann-Whitney p = %.2g): the runs' step times overlap.", clk, ep,
                 gate, r->p_value);
    else
        snprintf(t, cap, "%s Step Time changed by %+.1f%%: within the %.0f%% gate and not "
                 "significant (Mann-Whitney p = %.2g).", clk, ep, gate, r->p_value);
}

/* One run a side on its own (SPEC 6's block test); d as above. */
static double single_time(const tml_cmp_run *a, const tml_cmp_run *b, tml_cmp_result *out)
{
    const tml_cmp_clock *ka = &a->clock[out->clock], *kb = &b->clock[out->clock];
    out->time_a_ms = ka->step_ms;
    out->time_b_ms = kb->step_ms;
    double d = kb->step_ms - ka->step_ms;
    out->time_change = d / ka->step_ms;
    if (!isnan(ka->noise_ms) || !isnan(kb->noise_ms))
        out->noise_ms = fmax(isnan(ka->noise_ms) ? 0 : ka->noise_ms,
                             isnan(kb->noise_ms) ? 0 : kb->noise_ms);
    if (significance_test(ka, kb, out)) {
        /* past the gate, not significant: not evidence of no change */
        out->undecided = !out->significant && out->past_gate;
    } else if (fabs(out->time_change) >= out->gates.step_time) {
        /* a shift of the median held against the steps' spread proves
         * nothing either way: past the gate and within it is undecided */
        if (!isnan(out->noise_ms) && fabs(d) < out->noise_ms)
            out->within_noise = out->undecided = 1;
        else
            out->time_moved = d > 0 ? 1 : -1;
    }
    return d;
}

static int loaded(const tml_cmp_contention *c)
{
    return c->other_cpu >= TML_CMP_LOAD_OTHER_PP || c->runq_wait >= TML_CMP_LOAD_RUNQ_PP;
}

static void fmt_pct(double v, char *out, size_t cap)
{
    if (isnan(v))
        snprintf(out, cap, "n/a");
    else
        snprintf(out, cap, "%.0f%%", v);
}

/* The machines the sides ran on: differently loaded, or (one run a side)
 * loaded at all. Sets out->load_differs / loaded_single; t gets the
 * sentence. */
static void load_rule(const tml_cmp_run *sa, const tml_cmp_run *sb, size_t na, size_t nb,
                      tml_cmp_result *out, char *t, size_t cap)
{
    const tml_cmp_contention *ca = &sa->cont, *cb = &sb->cont;
    char oa[16], ob[16], qa[16], qb[16];
    t[0] = '\0';
    if (!ca->known || !cb->known)
        return;
    fmt_pct(ca->other_cpu, oa, sizeof(oa));
    fmt_pct(cb->other_cpu, ob, sizeof(ob));
    fmt_pct(ca->runq_wait, qa, sizeof(qa));
    fmt_pct(cb->runq_wait, qb, sizeof(qb));
    int gpu = ca->gpu_shared >= 0 && cb->gpu_shared >= 0 && ca->gpu_shared != cb->gpu_shared;
    /* which side the load weighed on: +1 B, -1 A, 2 both ways */
    int dir = 0;
    double dv[3] = {cb->other_cpu - ca->other_cpu, cb->runq_wait - ca->runq_wait,
                    gpu ? cb->gpu_shared - ca->gpu_shared : 0};
    double lim[3] = {TML_CMP_LOAD_OTHER_PP, TML_CMP_LOAD_RUNQ_PP, 1};
    for (int i = 0; i < 3; i++)
        if (fabs(dv[i]) >= lim[i]) {
            int s = dv[i] > 0 ? 1 : -1;
            dir = dir == 0 || dir == s ? s : 2;
        }
    /* a change against the load (the more loaded side was the faster) is
     * not the load's doing: at least that large a change is real */
    int slower = out->undecided ? 0 : out->time_moved;
    if ((dir == 1 || dir == -1) && slower == -dir) {
        snprintf(t, cap, "%s ran on the more loaded machine and was still faster.",
                 dir > 0 ? "B" : "A");
        return;
    }
    /* a change with the load (or with it by one measure and against it by
     * the other), but larger than the load could make it: the slower side's
     * step time with all its wait for a core taken out is still the other's
     * times TML_CMP_BEYOND_WAIT */
    if (dir && slower && !gpu) {
        double ratio = 1 + (out->tested ? out->effect : out->time_change);
        double w = (slower > 0 ? cb->runq_wait : ca->runq_wait) / 100.0;
        double slow = slower > 0 ? ratio : 1 / ratio;
        if (w >= 0 && w < 1 && slow * (1 - w) >= TML_CMP_BEYOND_WAIT) {
            snprintf(t, cap, "%s ran on the %s (it waited for a core %.0f%% of its time), "
                     "but was %.2fx as slow: more than the wait explains.",
                     slower > 0 ? "B" : "A",
                     dir == 2 ? "machine loaded otherwise" : "more loaded machine", 100 * w, slow);
            return;
        }
    }
    if (dir) {
        out->load_differs = 1;
        snprintf(t, cap, "A and B ran on differently loaded machines: other processes used "
                 "%s vs %s of the cores, the training waited for a core %s vs %s of its "
                 "time%s.", oa, ob, qa, qb,
                 gpu ? (ca->gpu_shared ? "; A's GPU was shared, B's not"
                                       : "; B's GPU was shared, A's not") : "");
    } else if (na == 1 && nb == 1 && (loaded(ca) || loaded(cb)) &&
               !(out->time_moved &&
                 fabs(log1p(out->tested ? out->effect : out->time_change)) >= log(TML_CMP_LOADED_FACTOR))) {
        out->loaded_single = 1;
        snprintf(t, cap, "One run a side on a loaded machine (other processes used %s and %s "
                 "of the cores, the training waited for a core %s and %s of its time): its "
                 "run-to-run noise is unknown, and only a change of %.1fx or more decides.",
                 oa, ob, qa, qb, TML_CMP_LOADED_FACTOR);
    }
}

static void guard_rule(const tml_cmp_run *a, size_t na, const tml_cmp_run *b, size_t nb,
                       tml_cmp_result *out)
{
    int any = 0;
    for (size_t i = 0; i < na + nb; i++) {
        const tml_cmp_run *r = i < na ? &a[i] : &b[i - na];
        any |= r->work.guard[0] != '\0';
        if (strcmp(r->work.guard, a[0].work.guard) != 0)
            out->guard_differs = 1;
    }
    if (!any)
        out->guard_differs = 0;
    for (size_t i = 0; any && i < na + nb; i++)
        out->launch_incomplete |= (i < na ? &a[i] : &b[i - na])->work.launch_incomplete;
}

static const tml_cmp_run *first_unusable(const tml_cmp_run *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!usable(&r[i]))
            return &r[i];
    return &r[0];
}


/* Interleaved runs a side that would see a change of target (a log
 * ratio) at TML_CMP_ALPHA with 80% power, the runs' log centers spreading
 * by s = sqrt(var_a + var_b): the smallest n past have with
 * (t(1 - alpha/2) + t(0.8)) * s / sqrt(n) <= target at 2n - 2 degrees of
 * freedom, as the minimal detectable change is computed; at most 999. */
int tml__cmp_runs_needed(double s, double target, size_t have)
{
    for (int n = (int)(have < 1 ? 1 : have) + 1; n < 999; n++) {
        double df = 2.0 * n - 2;
        double k = tml__t_detectable(TML_CMP_ALPHA, 0.8, df);
        if (!(target > 0) || k * s / sqrt((double)n) <= target)
            return n;
    }
    return 999;
}

/* The verdict and its Why / Next once step time (d: B - A with one run a
 * side) and memory are known: the guard and load rules first. */
static void settle(const tml_cmp_run *a, size_t na, const tml_cmp_run *b, size_t nb,
                   const tml_cmp_run *sa, const tml_cmp_run *sb, double d, tml_cmp_result *out)
{
    char t[400], load[320];
    time_sentence(out, d, t, sizeof(t));
    guard_rule(a, na, b, nb, out);
    load_rule(sa, sb, na, nb, out, load, sizeof(load));
    double mp = 100.0 * out->mem_change;
    const char *mdir = out->mem_change > 0 ? "increased" : "decreased";
    char *w = out->why;
    size_t cap = sizeof(out->why);
    static const char more[] = "Run 3 or more interleaved runs a side (baseline, candidate, "
                               "baseline, ...) on one machine, or on a quiet runner: traceml "
                               "compare --baseline A1 A2 A3 --candidate B1 B2 B3.";

    if (out->guard_differs) {
        out->verdict = TML_CMP_INCONCLUSIVE;
        snprintf(w, cap, "The declared workloads (traceml.yaml guard:) differ: the runs did "
                 "not run the same thing. %s", t);
        snprintf(out->next, sizeof(out->next), "Compare runs of one declared workload (the "
                 "same traceml.yaml guard: on both sides).");
        return;
    }
    if (out->launch_incomplete) {   /* TraceML 0.5.0's rule for guarded runs */
        out->verdict = TML_CMP_INCONCLUSIVE;
        snprintf(w, cap, "A guarded run's nodes did not all report a completed training "
                 "(its manifest's guard.training): it did not run its declared workload to "
                 "the end. %s", t);
        snprintf(out->next, sizeof(out->next), "Compare guarded runs whose every node ended "
                 "with exit code 0.");
        return;
    }
    if (out->load_differs || out->loaded_single) {
        out->verdict = TML_CMP_INCONCLUSIVE;
        out->time_moved = 0;
        snprintf(w, cap, "%s %s", load, t);
        snprintf(out->next, sizeof(out->next), "%s", more);
        return;
    }
    if (out->undecided && !out->mem_moved) {
        out->verdict = TML_CMP_INCONCLUSIVE;
        snprintf(w, cap, "%s", t);
        if (out->run_tested) {
            /* runs a side that would see the larger of the change and the gate */
            double s = sqrt(((isnan(out->run_noise_a) ? 0 : out->run_noise_a * out->run_noise_a) +
                             (isnan(out->run_noise_b) ? 0 : out->run_noise_b * out->run_noise_b)));
            double target = log(1 + fmax(fabs(out->effect), out->gates.step_time));
            snprintf(out->next, sizeof(out->next), "About %d interleaved runs a side, or a "
                     "quieter machine, would decide it.",
                     tml__cmp_runs_needed(s, target, na > nb ? na : nb));
        } else {
            snprintf(out->next, sizeof(out->next), "%s", more);
        }
        return;
    }

    int dir = out->time_moved ? out->time_moved : out->mem_moved;
    if (out->time_moved && out->mem_moved && out->time_moved != out->mem_moved)
        out->verdict = TML_CMP_MIXED;
    else if (dir)
        out->verdict = dir < 0 ? TML_CMP_IMPROVEMENT : TML_CMP_REGRESSION;
    else
        out->verdict = TML_CMP_EQUIVALENT;
    if (out->mem_moved && !out->time_moved)
        snprintf(w, cap, "Peak reserved memory %s by %.1f%%. %s", mdir, fabs(mp), t);
    else if (out->mem_moved)
        snprintf(w, cap, "%s Peak reserved memory %s by %.1f%%.", t, mdir, fabs(mp));
    else if (out->mem_compared)
        snprintf(w, cap, "%s Peak reserved memory %+.1f%%, within the %.0f%% gate.", t, mp,
                 100.0 * out->gates.memory);
    else
        snprintf(w, cap, "%s", t);
    if (load[0]) {   /* the load differed, against the change */
        size_t n = strlen(w);
        snprintf(w + n, cap - n, " %s", load);
    }
}

void tml__cmp_decide(const tml_cmp_run *a, const tml_cmp_run *b, const tml_cmp_gates *gates,
                     tml_cmp_result *out)
{
    tml__cmp_decide_n(a, 1, b, 1, gates, out);
}

void tml__cmp_decide_n(const tml_cmp_run *a, size_t na, const tml_cmp_run *b, size_t nb,
                       const tml_cmp_gates *gates, tml_cmp_result *out)
{
    memset(out, 0, sizeof(*out));
    if (gates)
        out->gates = *gates;
    else
        tml__cmp_gates_default(&out->gates);
    out->time_a_ms = out->time_b_ms = out->time_change = out->noise_ms = NAN;
    out->mem_change = out->mdc = out->run_noise_a = out->run_noise_b = out->t_df = NAN;
    out->p_value = out->effect = out->center_a_ms = out->center_b_ms = NAN;
    na = na > TML_CMP_MAX_RUNS ? TML_CMP_MAX_RUNS : na;
    nb = nb > TML_CMP_MAX_RUNS ? TML_CMP_MAX_RUNS : nb;
    out->runs_a = na;
    out->runs_b = nb;
    out->ra = a;
    out->rb = b;
    out->clock = -1;
    if (na == 0 || nb == 0) {
        out->verdict = TML_CMP_INCONCLUSIVE;
        snprintf(out->why, sizeof(out->why), "A side has no runs.");
        return;
    }
    tml_cmp_run sa, sb;
    tml__cmp_side(a, na, &sa);
    tml__cmp_side(b, nb, &sb);
    tml__cmp_deep_dive(&sa.dd, &sb.dd, &out->dd);
    /* a clock every run has */
    for (int c = TML_CMP_GPU; c >= TML_CMP_CPU && out->clock < 0; c--) {
        int all = 1;
        for (size_t i = 0; i < na + nb; i++)
            all &= (i < na ? &a[i] : &b[i - na])->clock[c].valid;
        if (all)
            out->clock = c;
    }

    /* Memory is a secondary signal: compared when both runs have it. */
    double ma = sa.peak_reserved_bytes, mb = sb.peak_reserved_bytes;
    if (!isnan(ma) && !isnan(mb) && ma > 0) {
        out->mem_compared = 1;
        out->mem_change = (mb - ma) / ma;
        if (fabs(out->mem_change) >= out->gates.memory)
            out->mem_moved = out->mem_change > 0 ? 1 : -1;
    }

    /* Step time is the primary signal: without it there is no verdict. */
    const tml_cmp_run *ua = first_unusable(a, na), *ub = first_unusable(b, nb);
    if (out->clock < 0 || !usable(ua) || !usable(ub)) {
        inconclusive(ua, ub, out);
        return;
    }
    double d = 0;
    if (na == 1 && nb == 1) {
        if (!(a->clock[out->clock].step_ms > 0) || isnan(b->clock[out->clock].step_ms)) {
            out->verdict = TML_CMP_INCONCLUSIVE;
            snprintf(out->why, sizeof(out->why),
                     "A's step time is zero: no change can be measured.");
            return;
        }
        d = single_time(a, b, out);
    } else if (run_test(a, na, b, nb, out) < 0) {
        out->verdict = TML_CMP_INCONCLUSIVE;
        return;
    }

    settle(a, na, b, nb, &sa, &sb, d, out);
}

