/*
 * diag.c - the step-time verdict and the run's (SPEC 4.1, 4.4): the
 * shares, the rule table (rules.h: one rule per rule_*.c) and the one
 * comparator that orders what fired.
 *
 * Everything here is a pure function of a tml_window: numbers in, verdict
 * out. That is deliberate. Rules are where a tool earns or loses trust, so
 * they must be small enough to read in one sitting and testable on both
 * sides of every threshold without a training run (tests/unit/test_diag.c).
 *
 * The order of the rules is SPEC 4.1's priority: first "can we say
 * anything" (NO DATA, WARMUP, INCOMPLETE DATA), then the root causes from
 * the most specific to the least: a straggler explains everyone's
 * waiting, input wait explains idle compute, H2D explains idle compute on
 * the GPU clock, residual is work nobody traced, and compute-bound is what
 * is left when the step is busy doing the model's own work. Every rule
 * that fires is kept as an issue; the first one is the verdict.
 *
 * A rule never reasons from a missing value: a share whose inputs are NAN
 * is NAN, and every comparison with NAN is false, so a missing phase can
 * neither fire a verdict nor block one. Comparisons allow 1e-9 of slack so
 * that a share of exactly 0.10 computed in floating point meets a 0.10
 * threshold.
 */
#include "diag/rules.h"
#include "base/stats.h"

#include <stdlib.h>
#include <string.h>

const char *tml__severity_name(tml_severity s)
{
    switch (s) {
    case TML_SEV_CRITICAL: return "CRITICAL";
    case TML_SEV_WARNING:  return "WARNING";
    default:               return "INFO";
    }
}

static const char *phase_labels[TML_PHASE_COUNT] = {
    "Input Wait", "H2D", "Forward", "Backward", "Optimizer", "Communication"
};

void tml__phase_list(uint32_t mask, char *out, size_t cap)
{
    int n = 0, total = 0;
    size_t len = 0;

    if (cap == 0)
        return;
    out[0] = '\0';
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        if (mask & TML_PHASE_BIT(p))
            total++;
    for (int p = 0; p < TML_PHASE_COUNT; p++) {
        if (!(mask & TML_PHASE_BIT(p)))
            continue;
        const char *sep = n == 0 ? "" : (n == total - 1 ? " and " : ", ");
        int w = snprintf(out + len, cap - len, "%s%s", sep, phase_labels[p]);
        if (w < 0 || (size_t)w >= cap - len)
            return;
        len += (size_t)w;
        n++;
    }
}

void tml__diag_init(tml_diagnosis *d, const char *kind, const char *label,
                    const char *section, tml_severity sev)
{
    memset(d, 0, sizeof(*d));
    d->kind = kind;
    d->label = label;
    d->section = section;
    d->severity = sev;
    d->cause = -1;
    d->share = NAN;
    d->threshold = NAN;
    d->straggler.valid = 0;
    d->straggler.culprit = d->straggler.victim = -1;
    d->straggler.component = -1;
    d->res.valid = 0;
    d->res.metric = NULL;
    d->res.value = d->res.threshold = NAN;
    d->res.rank = d->res.node = d->res.gpu = -1;
    d->res.growth_bytes_per_step = d->res.growth_bytes = NAN;
    d->res.projected_full_step = d->res.capacity_bytes = NAN;
}

/* A rank's share of metric m: of its Step Time, or (of_wall) of its
 * wall-clock, Step Time + m; NAN when unknown. */
static double metric_share(const tml_rank_window *r, tml_metric m, int of_wall)
{
    double s = r->avg_ns[TML_M_STEP], x = r->avg_ns[m], d = of_wall ? s + x : s;
    return isnan(s) || isnan(x) || !(s > 0) || !(d > 0) ? NAN : x / d;
}

/* The share of a rank's Step Time outside every phase it measured: its
 * Residual, but also when Compute is unknown (a phase missing): the time
 * of a missing Optimizer (a hand-written update) or of batches made in the
 * step (no DataLoader) is in it. NAN without Forward and Backward. */
double tml__outside_share(const tml_rank_window *r, tml_metric unused, int unused2)
{
    (void)unused;
    (void)unused2;
    const double *a = r->avg_ns;
    double s = a[TML_M_STEP];
    if (isnan(s) || !(s > 0) || isnan(a[TML_M_FORWARD]) || isnan(a[TML_M_BACKWARD]))
        return NAN;
    static const tml_metric known[] = { TML_M_INPUT, TML_M_H2D, TML_M_FORWARD, TML_M_BACKWARD,
                                        TML_M_OPTIMIZER, TML_M_COMM };
    double out = s;
    for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
        if (!isnan(a[known[k]]))
            out -= a[known[k]];
    return out > 0 ? out / s : 0.0;
}

/* The median over the ranks with steps of f(rank), NAN-valued ranks left
 * out; NAN when none. */
double tml__median_of(const tml_window *w,
                        double (*f)(const tml_rank_window *, tml_metric, int), tml_metric m,
                        int arg)
{
    double v[64];
    double *buf = w->nranks <= 64 ? v : malloc(w->nranks * sizeof(*buf));
    size_t n = 0;
    double med = NAN;

    if (!buf)
        return NAN;
    for (size_t i = 0; i < w->nranks; i++) {
        double x = w->ranks[i].nsteps ? f(&w->ranks[i], m, arg) : NAN;
        if (!isnan(x))
            buf[n++] = x;
    }
    med = tml__median(buf, n);
    if (buf != v)
        free(buf);
    return med;
}

double tml__median_share(const tml_window *w, tml_metric m, int of_wall)
{
    return tml__median_of(w, metric_share, m, of_wall);
}

double tml__diag_share(const tml_window *w, tml_metric m)
{
    return tml__median_share(w, m, 0);
}

int tml__share_issue(double share, double warn, double crit, const char *kind,
                     const char *label, tml_metric cause, const char *next,
                     const char *multi, tml_diagnosis *d)
{
    if (!ge(share, warn))
        return 0;
    tml_severity sev = ge(share, crit) ? TML_SEV_CRITICAL : TML_SEV_WARNING;
    diag_init(d, kind, label, sev);
    d->cause = (int)cause;
    d->share = share;
    d->threshold = sev == TML_SEV_CRITICAL ? crit : warn;
    snprintf(d->why, sizeof(d->why), "%s took %d%% of Step Time%s.",
             tml__metric_label(cause), pct(share), multi);
    snprintf(d->next, sizeof(d->next), "%s", next);
    return 1;
}

/* BALANCED: no rule fired; the Why line quotes the main shares
 * (Communication only in runs that communicate). */
static void balanced_primary(tml_step_diag *out, const char *multi)
{
    const double *sh = out->share;
    char comm[40] = "";
    if (sh[TML_M_COMM] > 0)
        snprintf(comm, sizeof(comm), ", Communication %d%%", pct(sh[TML_M_COMM]));
    diag_init(&out->primary, "BALANCED", "BALANCED", TML_SEV_INFO);
    snprintf(out->primary.why, sizeof(out->primary.why),
             "No phase crossed a threshold: Input Wait %d%%, Compute %d%%%s, Residual %d%% of "
             "Step Time%s.", isnan(sh[TML_M_INPUT]) ? 0 : pct(sh[TML_M_INPUT]),
             isnan(sh[TML_M_COMPUTE]) ? 0 : pct(sh[TML_M_COMPUTE]), comm,
             isnan(sh[TML_M_RESIDUAL]) ? 0 : pct(sh[TML_M_RESIDUAL]), multi);
    snprintf(out->primary.next, sizeof(out->primary.next),
             "No step-time bottleneck stands out; profile the model if it must be faster.");
}

/* ---- the rule table, and the order of the issues ----------------------- */

typedef struct tml_rule {
    tml_rule_fn fire;
    const char *const *kinds;
    int floats_from;
    int of_run;
} tml_rule;

static const tml_rule rules[TML_RULE_COUNT] = {
#define TML_RULE_ROW(ID, name, floats, run) \
    [TML_RULE_##ID] = { tml__rule_##name, tml__rule_##name##_kinds, floats, run },
    TML_RULES(TML_RULE_ROW)
#undef TML_RULE_ROW
};

typedef struct tml_issue {
    tml_diagnosis d;
    int rule;
} tml_issue;

/* An issue's part of the time: its share, of the run for a rule whose
 * share is (EPOCH START), else of the steady steps, which took (1 − the
 * run rules' shares) of the run. */
static double weight(const tml_issue *x, double run_part)
{
    return rules[x->rule].of_run ? x->d.share : x->d.share * (1.0 - run_part);
}

/*
 * The one ordering comparator: does issue a go ahead of issue b? A fixed
 * row's place is its order in TML_RULES. A row with floats_from goes
 * ahead of an issue of that row or a later one when it is more severe, or
 * as severe and at least as large a part of the time: a 16% all-reduce
 * WARNING is not the cause of a run whose step is 57% Residual
 * (CRITICAL); epoch starts that took most of the run go ahead of the
 * steady state's cause.
 */
static int ahead(const tml_issue *a, const tml_issue *b, double run_part)
{
    int from = rules[a->rule].floats_from;
    if (from < 0)
        return a->rule < b->rule;
    if (b->rule < from)
        return 0;
    if (a->d.severity != b->d.severity)
        return a->d.severity > b->d.severity;
    return weight(a, run_part) >= weight(b, run_part) - TML_DIAG_EPS;
}

/* The issues that fired, in order: each fixed row's in row order, then
 * each floating one ahead of the first issue it outranks. */
static void order_issues(const tml_issue *fired, size_t n, tml_step_diag *out)
{
    tml_issue placed[TML_RULE_COUNT];
    size_t np = 0;
    double run_part = 0;
    for (size_t i = 0; i < n; i++)
        if (rules[fired[i].rule].of_run)
            run_part += fired[i].d.share;
    for (int floating = 0; floating < 2; floating++)
        for (size_t i = 0; i < n; i++) {
            const tml_issue *f = &fired[i];
            if ((rules[f->rule].floats_from >= 0) != floating)
                continue;
            size_t at = 0;
            while (at < np && !ahead(f, &placed[at], run_part))
                at++;
            memmove(&placed[at + 1], &placed[at], (np - at) * sizeof(placed[0]));
            placed[at] = *f;
            np++;
        }
    for (size_t i = 0; i < np && out->nissues < TML_DIAG_MAX_ISSUES; i++)
        out->issues[out->nissues++] = placed[i].d;
}

/* Every row of the table, in order; what fired, ordered, to out->issues. */
static void run_rules(const tml_window *w, const tml_thresholds *th, const char *multi,
                      tml_step_diag *out)
{
    tml_issue fired[TML_RULE_COUNT];
    size_t n = 0;
    tml_rule_ctx c = { .w = w, .th = th, .st = out, .multi = multi, .fired = 0 };
    for (int r = 0; r < TML_RULE_COUNT; r++)
        if (rules[r].fire(&c, &fired[n].d)) {
            fired[n++].rule = r;
            c.fired |= 1u << r;
        }
    order_issues(fired, n, out);
}

void tml__diag_step_time(const tml_window *w, const tml_thresholds *th_in,
                         tml_step_diag *out)
{
    tml_thresholds defaults;
    const tml_thresholds *th = th_in;
    tml_diagnosis d;
    char multi[64] = "";
    size_t nactive = 0;

    if (!th) {
        tml__thresholds_default(&defaults);
        th = &defaults;
    }
    memset(out, 0, sizeof(*out));
    for (int m = 0; m < TML_M_COUNT; m++)
        out->share[m] = tml__diag_share(w, (tml_metric)m);
    tml__untraced_wall(w, out);
    tml__diag_straggler(w, th, &out->straggler);
    for (size_t i = 0; i < w->nranks; i++)
        if (w->ranks[i].nsteps)
            nactive++;
    if (nactive > 1)
        snprintf(multi, sizeof(multi), " (median over %zu ranks)", nactive);

    if (tml__rule_no_data(w, th, nactive, out))
        return;
    run_rules(w, th, multi, out);
    /* A phase never observed does not hide a verdict the other figures
     * support: it becomes its caveat (and an issue of its own); without
     * one, INCOMPLETE DATA is the verdict (Compute and Residual unknown). */
    if (tml__rule_incomplete(w, th, &d) && out->nissues < TML_DIAG_MAX_ISSUES) {
        if (out->nissues > 0)
            tml__rule_caveat(&out->issues[0], &d);
        out->issues[out->nissues++] = d;
    }
    if (out->nissues > 0) {
        out->primary = out->issues[0];
        return;
    }
    balanced_primary(out, multi);
}

int tml__diag_is_cause(const tml_diagnosis *d)
{
    if (!d->kind)
        return 0;
    for (int r = 0; r < TML_RULE_COUNT; r++)
        for (const char *const *k = rules[r].kinds; *k; k++)
            if (strcmp(d->kind, *k) == 0)
                return 1;
    return 0;
}

void tml__diag_run_verdict(const tml_step_diag *st, double gpu_util_percent,
                           const tml_thresholds *th_in, tml_diagnosis *out)
{
    const tml_diagnosis *p = &st->primary;
    tml_thresholds defaults;
    const tml_thresholds *th = th_in;

    if (!th) {
        tml__thresholds_default(&defaults);
        th = &defaults;
    }
    if (tml__rule_untraced_heavy(st, th, out))
        return;
    if (tml__diag_is_cause(p) || strcmp(p->kind, "INCOMPLETE_DATA") == 0) {
        *out = *p;
        return;
    }
    if (strcmp(p->kind, "NO_DATA") == 0 || strcmp(p->kind, "WARMUP") == 0) {
        diag_init(out, "INSUFFICIENT_STEP_TIME_DATA", "INSUFFICIENT STEP-TIME DATA", TML_SEV_INFO);
        snprintf(out->why, sizeof(out->why), "%s", p->why);
        snprintf(out->next, sizeof(out->next), "%s", p->next);
        return;
    }
    if (!isnan(gpu_util_percent) && gpu_util_percent < 30.0) {
        diag_init(out, "LOW_GPU_UTILIZATION", "LOW GPU UTILIZATION", TML_SEV_WARNING);
        snprintf(out->why, sizeof(out->why),
                 "GPU utilization averaged %.0f%% while no step-time phase stands out.",
                 gpu_util_percent);
        snprintf(out->next, sizeof(out->next),
                 "Look for idle time the step does not explain: small batches, CPU-side work between kernels, synchronisation.");
        return;
    }
    diag_init(out, "NO_CLEAR_PERFORMANCE_BOTTLENECK", "NO CLEAR PERFORMANCE BOTTLENECK", TML_SEV_INFO);
    snprintf(out->why, sizeof(out->why), "%s", p->why);
    snprintf(out->next, sizeof(out->next), "%s", p->next);
}

void tml__diag_watch(tml_diagnosis *step, tml_diagnosis *verdict)
{
    static const char why[] = "a watch run (traceml watch) records system and process "
        "metrics only: no step is traced, so there is no step-time verdict.";
    char v[sizeof(why)];
    snprintf(v, sizeof(v), "%s", why);
    v[0] = 'A';
    static const char next[] = "For why a step takes as long as it does: traceml run "
        "SCRIPT (its steps are found as is), or wrap each step in traceml.trace_step(model).";
    diag_init(step, "NO_DATA", "NO DATA", TML_SEV_INFO);
    diag_init(verdict, "INSUFFICIENT_STEP_TIME_DATA", "INSUFFICIENT STEP-TIME DATA",
              TML_SEV_INFO);
    snprintf(step->why, sizeof(step->why), "No step time: %s", why);
    snprintf(verdict->why, sizeof(verdict->why), "%s", v);
    snprintf(step->next, sizeof(step->next), "%s", next);
    snprintf(verdict->next, sizeof(verdict->next), "%s", next);
}
