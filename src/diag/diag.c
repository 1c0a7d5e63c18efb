/*
 * diag.c - the step-time rules and the run's verdict (SPEC 4.1, 4.4).
 *
 * Everything here is a pure function of a tml_window: numbers in, verdict
 * out. That is deliberate. Rules are where a tool earns or loses trust, so
 * they must be small enough to read in one sitting and testable on both
 * sides of every threshold without a training run (tests/unit/test_diag.c).
 *
 * The order of the checks is the order of SPEC 4.1's priority: first "can
 * we say anything" (NO DATA, WARMUP, INCOMPLETE DATA), then the root causes
 * from the most specific to the least: a straggler explains everyone's
 * waiting, input wait explains idle compute, H2D explains idle compute on
 * the GPU clock, residual is work nobody traced, and compute-bound is what
 * is left when the step is busy doing the model's own work. Every rule that
 * fires is kept as an issue; the first one is the verdict.
 *
 * A rule never reasons from a missing value: a share whose inputs are NAN
 * is NAN, and every comparison with NAN is false, so a missing phase can
 * neither fire a verdict nor block one. Comparisons allow 1e-9 of slack so
 * that a share of exactly 0.10 computed in floating point meets a 0.10
 * threshold.
 */
#include "diag/diag.h"
#include "base/fmt.h"
#include "base/stats.h"
#include "model/run.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EPS 1e-9

static int ge(double v, double th)
{
    return !isnan(v) && !isnan(th) && v >= th - EPS;
}

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

static void diag_init(tml_diagnosis *d, const char *kind, const char *label,
                      tml_severity sev)
{
    tml__diag_init(d, kind, label, "step_time", sev);
}

/* Median over ranks of x / Step Time, or x / (Step Time + x) of_wall. */
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
static double outside_share(const tml_rank_window *r, tml_metric unused, int unused2)
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
static double median_of(const tml_window *w,
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

static double median_share(const tml_window *w, tml_metric m, int of_wall)
{
    return median_of(w, metric_share, m, of_wall);
}

double tml__diag_share(const tml_window *w, tml_metric m)
{
    return median_share(w, m, 0);
}

typedef struct by_value {
    double v;
    int i;
} by_value;

static int cmp_by_value(const void *a, const void *b)
{
    const by_value *x = a, *y = b;
    if (x->v != y->v)
        return x->v < y->v ? -1 : 1;
    return x->i - y->i;
}

double tml__diag_collective_ns(const double v[TML_M_COUNT])
{
    return v[TML_M_BACKWARD] + (isnan(v[TML_M_COMM]) ? 0.0 : v[TML_M_COMM]);
}

double tml__diag_comm_share(const tml_window *w, int *rank_out)
{
    double best = NAN;
    int at = -1;
    for (size_t i = 0; i < w->nranks; i++) {
        const tml_rank_window *r = &w->ranks[i];
        double c = r->avg_ns[TML_M_COMM], st = r->avg_ns[TML_M_STEP];
        if (r->nsteps == 0 || isnan(c) || !(st > 0))
            continue;
        if (at < 0 || c / st < best) {
            best = c / st;
            at = (int)i;
        }
    }
    if (rank_out)
        *rank_out = at;
    return best;
}

/* culprit − victim of one metric; NAN when either is missing */
static double diff_ns(const tml_rank_window *cul, const tml_rank_window *vic, tml_metric m)
{
    return cul->avg_ns[m] - vic->avg_ns[m];
}

/* The parts of the compute component: the work in the step outside the
 * collective-bound phase. Forward runs before the all-reduce, the
 * optimizer step after it, and Residual (work in the step that no phase
 * covers: extra matmuls after optimizer.step(), a rank-only metric) around
 * it; extra work in any of them on one rank makes the peers wait at the
 * next all-reduce just the same. */
static const tml_metric compute_parts[3] = { TML_M_FORWARD, TML_M_OPTIMIZER, TML_M_RESIDUAL };

/* The culprit's excess in straggler component c (input, h2d, compute,
 * outside the step). A part that is missing on either rank adds nothing;
 * NAN when all are. */
static double excess_ns(const tml_rank_window *cul, const tml_rank_window *vic, int c)
{
    static const tml_metric comp[4] = { TML_M_INPUT, TML_M_H2D, TML_M_FORWARD, TML_M_UNTRACED };
    if (c != 2)
        return diff_ns(cul, vic, comp[c]);
    double sum = NAN;
    for (int k = 0; k < 3; k++) {
        double e = diff_ns(cul, vic, compute_parts[k]);
        if (!isnan(e))
            sum = isnan(sum) ? e : sum + e;
    }
    return sum;
}

/* The part of the straggler's cost its extra wait for a core must explain
 * to be called contention; how much more CPU than the victim it may use
 * and still be said to do no more work (the process samples cover the
 * whole run, start-up included: a little difference is noise). */
#define RUNQ_EXPLAINS 0.5
#define CPU_SAME 0.10

/* A rank's time waiting for a core (run queue) per step: its share of
 * wall time over the step and the time between steps; NAN unknown. */
static double runq_wait_ns(const tml_rank_window *r)
{
    double wall = r->avg_ns[TML_M_STEP] + (isnan(r->avg_ns[TML_M_UNTRACED]) ? 0.0
                                                                              : r->avg_ns[TML_M_UNTRACED]);
    return r->runq_wait_percent / 100.0 * wall;
}

void tml__contention_init(tml_contention *c)
{
    c->cores = 0;
    c->node = -1;
    c->host_cpu_percent = c->training_cpu_percent = c->other_cpu_percent = NAN;
    c->runq_wait_percent = NAN;
    c->gpu_shared = -1;
}

void tml__contention_compute(tml_contention *c, int32_t node, int32_t cores, double host_pct,
                             double trees_pct, double runq_pct)
{
    tml__contention_init(c);
    c->node = node;
    c->cores = cores > 0 ? cores : 0;
    c->host_cpu_percent = isfinite(host_pct) ? (host_pct < 0 ? 0 : host_pct > 100 ? 100 : host_pct)
                                             : NAN;
    c->runq_wait_percent = isfinite(runq_pct) && runq_pct >= 0 ? runq_pct : NAN;
    if (cores > 0 && isfinite(trees_pct) && trees_pct >= 0) {
        double t = trees_pct / (double)cores;
        c->training_cpu_percent = t > 100 ? 100 : t;
    }
    if (!isnan(c->host_cpu_percent) && !isnan(c->training_cpu_percent)) {
        double o = c->host_cpu_percent - c->training_cpu_percent;
        c->other_cpu_percent = o > 0 ? o : 0;
    }
}

int tml__gpu_shared_of(const double *most, size_t n)
{
    int shared = -1;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(most[i]) || most[i] < 0)
            continue;
        if (most[i] >= 1)
            return 1;
        shared = 0;
    }
    return shared;
}

int tml__contended(const tml_contention *c)
{
    return ge(c->other_cpu_percent, TML_CONTENTION_OTHER) &&
           ge(c->runq_wait_percent, TML_CONTENTION_RUNQ);
}

/* Do other processes, not the training's own tree, take the cores? The
 * machine is contended (tml__contended) and the others take at least what
 * the training takes. Then more DataLoader workers do not so much compete
 * with the training as win it a larger share of the cores (issue 45:
 * beside two busy loops, one more worker was 25-70% faster in 7 of 8 A/B
 * pairs), and which count wins is for `traceml tune` to measure. */
static int others_take_cores(const tml_window *w)
{
    const tml_contention *c = &w->contention;
    return tml__contended(c) && !(c->training_cpu_percent > c->other_cpu_percent);
}

/* The culprit's run-queue wait exceeds the victim's by half its cost. */
static int rank_waited_longer(const tml_rank_window *cul, const tml_rank_window *vic,
                              double cost_ns)
{
    double extra = runq_wait_ns(cul) - runq_wait_ns(vic);
    return !isnan(extra) && extra >= RUNQ_EXPLAINS * cost_ns;
}

/* The culprit's excess spread over its phases: no one component explains
 * it (component -1) and all of them together do (a part of it in the
 * input wait, a part in compute, ...): the culprit is slower at
 * everything it does, as a rank is that gets less of the cores. */
static int spread_over_phases(const tml_straggler *s, double cover)
{
    double sum = 0;
    int known = 0;
    for (int c = 0; c < 4; c++)
        if (!isnan(s->coverage[c])) {
            sum += s->coverage[c];
            known = 1;
        }
    return s->component < 0 && known && ge(sum, cover);
}

/* On a host whose CPU is saturated (HIGH CPU), a rank of a CPU training
 * falls behind its peers as much by waiting for a core as by computing
 * more; its phases run longer on the wall clock either way. Two figures
 * tell them apart, and it takes both: a rank that waited for a core used
 * no more CPU than its peers (one that computes more uses more), and its
 * main thread waited on a run queue longer than theirs, by at least half
 * of what the others wait for it (/proc/self/schedstat, sampled). The CPU
 * alone cannot tell a rank that waited for a core from one that waited
 * for something else (a sleep, I/O, a device); the run queue alone
 * cannot tell it from one that computes more (on a saturated host extra
 * work waits for a core in proportion). Only where CPU time is the work
 * (the CPU clock, no GPU), and never guessed without the figures.
 *
 * The rank's run-queue wait is a mean over the whole run's samples (a
 * few a second, start-up included), too coarse to show a few ms per step
 * between two ranks every time. So where the machine itself is contended
 * by other processes (others_take_cores: they used at least what the
 * training used, and the training waited for a core), a culprit whose
 * excess is spread over its phases (spread) and that used no more CPU is
 * that machine's doing too: a sleep, an I/O or a device wait lies in one
 * component, extra work uses more CPU. */
static int waited_for_cpu(const tml_window *w, const tml_rank_window *cul,
                          const tml_rank_window *vic, double cost_ns, int spread)
{
    if (!(w->host_cpu_busy > 0) || w->clock != TML_CLOCK_CPU || !(cost_ns > 0))
        return 0;
    for (size_t i = 0; i < w->nranks; i++)
        if (w->ranks[i].has_gpu)
            return 0;
    if (!(vic->cpu_percent > 0 && cul->cpu_percent >= 0 &&
          cul->cpu_percent <= vic->cpu_percent * (1.0 + CPU_SAME)))
        return 0;
    return rank_waited_longer(cul, vic, cost_ns) || (spread && others_take_cores(w));
}

void tml__diag_straggler(const tml_window *w, const tml_thresholds *th,
                         tml_straggler *out)
{
    by_value *v = NULL;
    size_t n = 0;

    memset(out, 0, sizeof(*out));
    out->culprit = out->victim = -1;
    out->component = -1;
    out->cost_ns = out->score = NAN;
    for (int c = 0; c < 4; c++)
        out->coverage[c] = NAN;
    out->forward_coverage = out->optimizer_coverage = out->residual_coverage = NAN;
    if (w->nranks < 2)
        return;
    v = malloc(w->nranks * sizeof(*v));
    if (!v)
        return;
    for (size_t i = 0; i < w->nranks; i++) {
        const tml_rank_window *r = &w->ranks[i];
        if (r->nsteps == 0)
            continue;
        if (isnan(r->avg_ns[TML_M_BACKWARD]) || isnan(r->avg_ns[TML_M_STEP]))
            goto done;          /* never reason from a missing Backward */
        v[n].v = tml__diag_collective_ns(r->avg_ns);
        v[n].i = (int)i;
        n++;
    }
    if (n < 2)
        goto done;
    qsort(v, n, sizeof(*v), cmp_by_value);
    const tml_rank_window *cul = &w->ranks[v[0].i];
    const tml_rank_window *vic = &w->ranks[v[n / 2].i];
    out->culprit = v[0].i;
    out->victim = v[n / 2].i;
    out->cost_ns = tml__diag_collective_ns(vic->avg_ns) - tml__diag_collective_ns(cul->avg_ns);
    if (!(vic->avg_ns[TML_M_STEP] > 0))
        goto done;
    out->score = out->cost_ns / vic->avg_ns[TML_M_STEP];
    out->culprit_steps = cul->culprit_steps;
    out->valid = 1;
    /* what the culprit does more than the victim: its input, copies,
     * compute outside the collective-bound phase, or work between steps */
    int best = -1;
    for (int c = 0; c < 4 && out->cost_ns > 0; c++) {
        out->coverage[c] = excess_ns(cul, vic, c) / out->cost_ns;
        if (!isnan(out->coverage[c]) && (best < 0 || out->coverage[c] > out->coverage[best]))
            best = c;
    }
    if (out->cost_ns > 0) {
        out->forward_coverage = diff_ns(cul, vic, TML_M_FORWARD) / out->cost_ns;
        out->optimizer_coverage = diff_ns(cul, vic, TML_M_OPTIMIZER) / out->cost_ns;
        out->residual_coverage = diff_ns(cul, vic, TML_M_RESIDUAL) / out->cost_ns;
    }
    if (best >= 0 && ge(out->coverage[best], th ? th->straggler_coverage : 0.80))
        out->component = best;
    int spread = spread_over_phases(out, th ? th->straggler_coverage : 0.80);
    if ((out->component == 2 || out->component < 0) &&
        waited_for_cpu(w, cul, vic, out->cost_ns, spread)) {
        out->cpu_contention = 1;
        out->component = -1;
    }
done:
    free(v);
}

static void fmt_rank(const tml_rank_window *r, char *out, size_t cap)
{
    snprintf(out, cap, "R%d/N%d", (int)r->rank, (int)r->node);
}

static double ms(double ns)
{
    return ns / 1e6;
}

static int pct(double share)
{
    return (int)lround(share * 100.0);
}

/* COMPUTE STRAGGLER's Why and Next: the forward and, where both ranks
 * have one, the optimizer step (the compute outside the all-reduce);
 * Next points at the one where the culprit's excess lies. */
/* COMPUTE STRAGGLER's Why names the part of the step that explains the
 * gap (the largest excess), with the others that add to it; its Next
 * where to look in that part. */
static void compute_straggler_text(const tml_rank_window *cul, const tml_rank_window *vic,
                                   const char *cr, const char *vr, const tml_straggler *s,
                                   tml_diagnosis *d)
{
    static const char *const names[3] = { "Forward", "Optimizer", "Residual" };
    double e[3];
    int top = -1;
    for (int k = 0; k < 3; k++) {
        e[k] = diff_ns(cul, vic, compute_parts[k]);
        if (!isnan(e[k]) && (top < 0 || e[k] > e[top]))
            top = k;
    }
    if (top < 0)
        top = 0;
    tml_metric m = compute_parts[top];
    size_t n = (size_t)snprintf(d->why, sizeof(d->why), "%s's %s took %.1f ms more than %s's "
                                "(%.1f vs %.1f ms)", cr, names[top], ms(e[top]), vr,
                                ms(cul->avg_ns[m]), ms(vic->avg_ns[m]));
    for (int k = 0; k < 3; k++)   /* the other parts that add a tenth of the wait or more */
        if (k != top && !isnan(e[k]) && e[k] >= 0.1 * s->cost_ns && n < sizeof(d->why))
            n += (size_t)snprintf(d->why + n, sizeof(d->why) - n, ", %s %.1f ms more", names[k],
                                  ms(e[k]));
    if (n < sizeof(d->why))
        snprintf(d->why + n, sizeof(d->why) - n, "; the others waited %.1f ms per step for it at "
                 "the gradient all-reduce (%d%% of %s's Step Time).", ms(s->cost_ns),
                 pct(s->score), vr);
    if (top == 1)
        snprintf(d->next, sizeof(d->next), "Inspect the optimizer step on the slow rank (%s): "
                 "work only it does in optimizer.step(), more parameters to update than its "
                 "peers, a slower or throttled GPU.", cr);
    else if (top == 2)
        snprintf(d->next, sizeof(d->next), "Inspect what %s does in the step outside forward, "
                 "backward and the optimizer (extra computation, .item() syncs, metrics or "
                 "logging only it does), or time it (traceml.wrap_forward on the module it runs).",
                 cr);
    else
        snprintf(d->next, sizeof(d->next), "Inspect compute on the slow rank (%s): uneven "
                 "batch sizes or sequence lengths, a slower or throttled GPU.", cr);
}

/* Below straggler_warn a straggler is still named where its peers'
 * exposed communication is the verdict (COMMUNICATION-BOUND, or CPU
 * CONTENTION on a machine whose other processes take the cores): when the
 * culprit's excess explains the wait (a component) and the wait is at
 * least this part of the victim's exposed communication. A rank-0-only
 * evaluation every few steps (nanoGPT) costs its peer a tenth of a step
 * or less on average, yet it is that much of what the peer waits in its
 * all-reduce, which is not the transport's. */
#define STRAGGLER_COMM_PART 0.2

static int straggler_in_comm(const tml_window *w, const tml_straggler *s)
{
    if (!s->valid || s->component < 0 || !(s->cost_ns > 0))
        return 0;
    double comm = w->ranks[s->victim].avg_ns[TML_M_COMM];
    return !isnan(comm) && comm > 0 && s->cost_ns >= STRAGGLER_COMM_PART * comm;
}

/* What a straggler's component is, in a sentence about the culprit. */
static const char *const straggler_what[4] = {
    "its longer input wait", "its longer host-to-device copies", "its longer compute",
    "its time between steps (work only it does: evaluation, checkpoints, logging)"
};

/* What to do about a straggler's component, first in that Next. */
static const char *const straggler_fix[4] = {
    "give its DataLoader what the others' have (workers, storage)",
    "look at its host-to-device copies (pinned memory, batch sizes)",
    "even out the work between the ranks (batch sizes, sequence lengths)",
    /* one literal: clang takes two adjacent ones in an array for a missing comma */
    "share that work among the ranks or do it less often (evaluate each rank's shard)"
};

/* COMMUNICATION-BOUND's (CPU CONTENTION's) Why, when part of a rank's
 * exposed communication is its wait for a straggler (straggler_in_comm):
 * whose time it is; and its Next, what to do about it first. */
static void comm_names_straggler(const tml_window *w, const tml_straggler *s, tml_diagnosis *d)
{
    char cr[32], vr[32], next[sizeof(d->next)];
    size_t n = strlen(d->why);
    fmt_rank(&w->ranks[s->culprit], cr, sizeof(cr));
    fmt_rank(&w->ranks[s->victim], vr, sizeof(vr));
    if (n < sizeof(d->why))
        snprintf(d->why + n, sizeof(d->why) - n, " Of %s's, %.1f ms per step is its wait for "
                 "%s, not the transfer: %s.", vr, ms(s->cost_ns), cr,
                 straggler_what[s->component]);
    snprintf(next, sizeof(next), "First %s: %s. Then: ", cr, straggler_fix[s->component]);
    size_t k = strlen(next), m = strlen(d->next);
    if (k + m >= sizeof(next))
        m = sizeof(next) - 1 - k;      /* the prefix fits: it is short */
    memcpy(next + k, d->next, m);
    next[k + m] = '\0';
    memcpy(d->next, next, k + m + 1);
}

/* A contention STRAGGLER that the machine's figures tell, not the rank's
 * run queue (waited_for_cpu): its excess spread over its phases, the
 * other processes' share of the cores and the training's wait for one. */
static void machine_straggler_text(const tml_window *w, const tml_rank_window *cul,
                                   const tml_rank_window *vic, const char *cr, const char *vr,
                                   const tml_straggler *s, tml_diagnosis *d)
{
    static const char *const parts[4] = { "input wait", "host-to-device copies", "compute",
                                          "time between steps" };
    size_t n = (size_t)snprintf(d->why, sizeof(d->why), "Peers waited %.1f ms per step for "
                                "%s at the gradient all-reduce (%d%% of %s's Step Time), "
                                "spread over its phases (", ms(s->cost_ns), cr,
                                pct(s->score), vr);
    const char *sep = "";
    for (int k = 0; k < 4 && n < sizeof(d->why); k++)
        if (!isnan(s->coverage[k]) && s->coverage[k] >= 0.1) {
            n += (size_t)snprintf(d->why + n, sizeof(d->why) - n, "%s%s %d%%", sep, parts[k],
                                  pct(s->coverage[k]));
            sep = ", ";
        }
    if (n < sizeof(d->why))
        snprintf(d->why + n, sizeof(d->why) - n, " of it) with no more CPU (%.0f%% vs %.0f%% "
                 "of a core), while other processes used %.0f%% of the host's cores and the "
                 "training waited for a core %.0f%% of its time, the host CPU averaging %.0f%% "
                 "(HIGH CPU): it fell behind for want of CPU, not by computing more.",
                 cul->cpu_percent, vic->cpu_percent, w->contention.other_cpu_percent,
                 w->contention.runq_wait_percent, w->host_cpu_busy);
    snprintf(d->next, sizeof(d->next), "Give each rank its cores: other processes "
             "used %.0f%% of this host's cores (the training %.0f%%): stop, nice or "
             "confine them (taskset, cgroups), or run where they do not; then look at "
             "%s again.", w->contention.other_cpu_percent,
             w->contention.training_cpu_percent, cr);
}

/* The straggler issue, when the score crosses the warn threshold, or
 * (in_comm) below it where straggler_in_comm names it. */
static int straggler_issue(const tml_window *w, const tml_thresholds *th,
                           const tml_straggler *s, int in_comm, tml_diagnosis *d)
{
    static const char *kinds[4] = { "INPUT_STRAGGLER", "H2D_STRAGGLER", "COMPUTE_STRAGGLER",
                                    "OUTSIDE_STEP_STRAGGLER" };
    static const char *labels[4] = { "INPUT STRAGGLER", "H2D STRAGGLER", "COMPUTE STRAGGLER",
                                     "OUTSIDE-STEP STRAGGLER" };
    static const tml_metric comp[4] = { TML_M_INPUT, TML_M_H2D, TML_M_FORWARD, TML_M_UNTRACED };
    char cr[32], vr[32];

    if (!s->valid || !(ge(s->score, th->straggler_warn) || in_comm))
        return 0;
    tml_severity sev = TML_SEV_WARNING;
    if (ge(s->score, th->straggler_crit) && w->window_steps >= th->straggler_crit_min_steps)
        sev = TML_SEV_CRITICAL;
    const tml_rank_window *cul = &w->ranks[s->culprit], *vic = &w->ranks[s->victim];
    fmt_rank(cul, cr, sizeof(cr));
    fmt_rank(vic, vr, sizeof(vr));
    int c = s->component;
    if (c >= 0) {
        diag_init(d, kinds[c], labels[c], sev);
        double a = ms(cul->avg_ns[comp[c]]), b = ms(vic->avg_ns[comp[c]]);
        if (c == 0) {
            snprintf(d->why, sizeof(d->why), "%s waited %.1f ms for input; %s waited %.1f ms for input.",
                     cr, a, vr, b);
            snprintf(d->next, sizeof(d->next), "Inspect input wait on the slow rank (%s): its DataLoader workers, storage and data shards.", cr);
        } else if (c == 1) {
            snprintf(d->why, sizeof(d->why), "%s spent %.1f ms in H2D copies; %s spent %.1f ms.",
                     cr, a, vr, b);
            snprintf(d->next, sizeof(d->next), "Inspect host-to-device copies on the slow rank (%s): pinned memory, non_blocking copies, its PCIe/NUMA placement.", cr);
        } else if (c == 3) {
            snprintf(d->why, sizeof(d->why), "%s spends %.1f ms per step outside the step (between "
                     "steps: work only it does), %s %.1f ms; the others wait for it in their "
                     "gradient all-reduce: %.1f ms per step, %d%% of %s's Step Time.",
                     cr, a, vr, b, ms(s->cost_ns), pct(s->score), vr);
            snprintf(d->next, sizeof(d->next), "Find what %s does between steps that the others "
                     "do not (rank-0-only evaluation, checkpointing, logging): shard it over every "
                     "rank (a DistributedSampler for evaluation), do it less often, or in the "
                     "background.", cr);
        } else {
            compute_straggler_text(cul, vic, cr, vr, s, d);
        }
        d->cause = -1;
    } else if (s->cpu_contention && !rank_waited_longer(cul, vic, s->cost_ns)) {
        diag_init(d, "STRAGGLER", "STRAGGLER", sev);
        machine_straggler_text(w, cul, vic, cr, vr, s, d);
    } else if (s->cpu_contention) {
        diag_init(d, "STRAGGLER", "STRAGGLER", sev);
        snprintf(d->why, sizeof(d->why),
                 "Peers waited %.1f ms per step for %s at the gradient all-reduce (%d%% of %s's "
                 "Step Time), and %s waited %.1f ms per step for a core (run queue), %s %.1f ms, "
                 "using no more CPU (%.0f%% vs %.0f%% of a core) while the host CPU averaged "
                 "%.0f%% (HIGH CPU): it fell behind for want of CPU, not by computing more.",
                 ms(s->cost_ns), cr, pct(s->score), vr, cr, ms(runq_wait_ns(cul)), vr,
                 ms(runq_wait_ns(vic)), cul->cpu_percent, vic->cpu_percent, w->host_cpu_busy);
        if (others_take_cores(w))
            snprintf(d->next, sizeof(d->next), "Give each rank its cores: other processes "
                     "used %.0f%% of this host's cores (the training %.0f%%): stop, nice or "
                     "confine them (taskset, cgroups), or run where they do not; then look at "
                     "%s again.", w->contention.other_cpu_percent,
                     w->contention.training_cpu_percent, cr);
        else
            snprintf(d->next, sizeof(d->next),
                     "Give each rank its cores: fewer ranks, threads (OMP_NUM_THREADS) or other "
                     "processes on this host; then look at %s again.", cr);
    } else {
        diag_init(d, "STRAGGLER", "STRAGGLER", sev);
        snprintf(d->why, sizeof(d->why),
                 "Peers waited %.1f ms per step for %s at the gradient all-reduce (%d%% of %s's Step Time); no traced phase explains it.",
                 ms(s->cost_ns), cr, pct(s->score), vr);
        snprintf(d->next, sizeof(d->next),
                 "Inspect synchronisation, collectives and unattributed work on %s.", cr);
    }
    d->share = s->score;
    d->threshold = sev == TML_SEV_CRITICAL ? th->straggler_crit : th->straggler_warn;
    d->straggler = *s;
    return 1;
}

static int share_issue(double share, double warn, double crit, const char *kind,
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

/*
 * Close calls. Some Next lines choose between two pieces of advice by a
 * measured value against a threshold (a batch's fetch against what a
 * worker costs, the host CPU against HIGH CPU). A value near the
 * threshold falls on either side in identical runs, and the advice would
 * flip with it; so around each threshold a band gives one text that says
 * the call is close, names both ways and how to settle it (`traceml
 * tune`), the same whichever side the value fell on: it names the band,
 * not the value. Outside the band the advice is as before. The verdicts
 * and severities are not banded: only the Next text.
 *
 * A call: whether a reason against the advice holds clearly not, is too
 * close to call, or holds clearly.
 */
typedef enum call { CALL_NO, CALL_CLOSE, CALL_YES } call;


/* The host CPU as the rules read it: HIGH CPU's figure when it fired, else
 * the measured average (NAN unsampled). */
static double host_cpu(const tml_window *w)
{
    return w->host_cpu_busy > 0 ? w->host_cpu_busy : w->host_cpu_percent;
}

/* Is the host too busy for more workers (or ranks' collectives)? A HIGH
 * CPU below the band (a caller's own figure) stays a yes. */
static call host_busy_call(const tml_window *w)
{
    double cpu = host_cpu(w);
    if (ge(cpu, TML_HOST_CPU_HIGH + TML_HOST_CPU_CLOSE))
        return CALL_YES;
    if (ge(cpu, TML_HOST_CPU_HIGH - TML_HOST_CPU_CLOSE))
        return CALL_CLOSE;
    return w->host_cpu_busy > 0 ? CALL_YES : CALL_NO;
}

/* "host CPU averaged between 75% and 85%, near HIGH CPU's 80%": the band,
 * not the value, so that either side of the threshold reads the same. */
static void host_cpu_band(char *out, size_t cap)
{
    snprintf(out, cap, "host CPU averaged between %.0f%% and %.0f%%, near HIGH CPU's %.0f%%",
             TML_HOST_CPU_HIGH - TML_HOST_CPU_CLOSE, TML_HOST_CPU_HIGH + TML_HOST_CPU_CLOSE,
             TML_HOST_CPU_HIGH);
}

/* COMMUNICATION-BOUND: the exposed communication of the rank that waited
 * least is over the thresholds. Waiting for a slow peer shows on the
 * peers only (the straggler rules name it); what the least-waiting rank
 * spends there is the transfer itself, paid by every rank. */
/* Below this a step's all-reduce is bound by latency, not bandwidth (a
 * gloo or NCCL round trip costs about what 1 MB takes to send). */
#define COMM_LATENCY_BYTES 1e6

/* COMMUNICATION-BOUND's Next, by where the collectives run: between
 * nodes the link is a suspect; on one node there is none (loopback or
 * NVLink/PCIe), and a CPU training's gloo reduces on the very cores the
 * training needs; a saturated host holds every collective up. */
static void comm_next(const tml_window *w, tml_diagnosis *d)
{
    char less[192], moved[32];
    int multi_node = 0, gpu = 0;
    double bytes = NAN;
    for (size_t i = 0; i < w->nranks; i++) {
        gpu |= w->ranks[i].has_gpu;
        multi_node |= w->ranks[i].nsteps && w->ranks[i].node != w->ranks[0].node;
        if (!(bytes >= w->ranks[i].comm_bytes_per_step))
            bytes = w->ranks[i].comm_bytes_per_step;   /* the most any rank sends */
    }
    int cpu_host = !multi_node && !gpu;
    if (bytes < COMM_LATENCY_BYTES) {
        /* a few kB a step: fewer bytes or buckets change nothing (traceml
         * tune measures no gain from an fp16 hook there) */
        tml__fmt_bytes(bytes, moved, sizeof(moved));
        snprintf(less, sizeof(less), "sync less often (gradient accumulation under "
                 "model.no_sync(), or larger batches): %s a step is bound by latency, a comm "
                 "hook or other buckets would gain little", moved);
    } else if (cpu_host) {
        /* loopback costs what the cores do: a comm hook's casts run on the
         * same cores for no gain, a copy less into the buckets is a gain
         * (both measured by traceml tune, docs/tune.md) */
        snprintf(less, sizeof(less), "sync less often (gradient accumulation under "
                 "model.no_sync()), copy less (DDP gradient_as_bucket_view=True); a comm "
                 "hook's casts would take those cores too");
    } else {
        snprintf(less, sizeof(less), "sync less often (gradient accumulation under "
                 "model.no_sync()), send less (a bf16/fp16 or PowerSGD comm hook), fewer and "
                 "larger buckets (DDP bucket_cap_mb)");
    }
    call busy = host_busy_call(w);
    char cpu[128] = "", band[96];
    host_cpu_band(band, sizeof(band));
    if (busy == CALL_YES)
        snprintf(cpu, sizeof(cpu), " (the host CPU averaged %.0f%%: HIGH CPU)", host_cpu(w));
    else if (busy == CALL_CLOSE)   /* the same advice either side: only the note is banded */
        snprintf(cpu, sizeof(cpu), " (the %s)", band);
    if (cpu_host)
        snprintf(d->next, sizeof(d->next), "Every rank is on this host and trains on its CPU: "
                 "gloo reduces the gradients over loopback on the cores the training also "
                 "needs%.80s, no network is involved. Give each rank its cores (fewer ranks or "
                 "threads), %s; on GPUs, NCCL.", cpu, less);
    else if (!multi_node)
        snprintf(d->next, sizeof(d->next), "Every rank is on this host: the all-reduce goes "
                 "over NVLink/PCIe, no network is involved%.80s. %s; check that NCCL uses "
                 "peer-to-peer (NCCL_DEBUG=INFO).", cpu, less);
    else if (busy == CALL_YES)   /* descheduled ranks hold the collectives up too */
        snprintf(d->next, sizeof(d->next), "The host CPU averaged %.0f%% (HIGH CPU): ranks "
                 "waiting for CPU time hold the collectives up as much as the link does; "
                 "give each rank its cores (fewer ranks or threads per host), then look "
                 "at the transfer: a bf16/fp16 comm hook, DDP bucket_cap_mb.",
                 host_cpu(w));
    else if (busy == CALL_CLOSE)
        snprintf(d->next, sizeof(d->next), "The %s: a close call between giving each rank its "
                 "cores (fewer ranks or threads per host: ranks waiting for CPU time hold the "
                 "collectives up too) and the transfer itself (a bf16/fp16 comm hook, DDP "
                 "bucket_cap_mb, the link between the nodes); measure it with `traceml tune "
                 "SCRIPT`.", band);
    else
        snprintf(d->next, sizeof(d->next), "The transfer itself is slow on every rank, not a "
                 "peer: %s, overlap more of it with backward, or check the link between the "
                 "nodes.", less);
}

/* Of the exposed communication's share, the part the training's wait for
 * a core must explain for the machine, not the transfer, to be the cause
 * (as RUNQ_EXPLAINS for a straggler). */
#define CONTENTION_EXPLAINS 0.5

/* Do the other processes' CPU and the training's wait for a core explain
 * the exposed communication? Collectives wait for the slowest rank to get
 * there: a rank the kernel left waiting for a core holds every peer up,
 * and on a machine where other processes take the cores that shows as
 * communication on every rank. It takes a contended machine
 * (tml__contended: others used >= TML_CONTENTION_OTHER % of the cores and
 * the training waited for a core >= TML_CONTENTION_RUNQ % of its time),
 * other processes taking at least what the training takes, and a wait for
 * a core of at least half the exposed share. The training's own ranks
 * saturating the cores is not contention (other ~ 0): that stays
 * COMMUNICATION-BOUND, whose Next names HIGH CPU; so does a run across
 * nodes, whose link is a suspect too. */
static int contention_explains(const tml_window *w, double share)
{
    const tml_contention *c = &w->contention;
    for (size_t i = 0; i < w->nranks; i++)
        if (w->ranks[i].nsteps && w->ranks[i].node != w->ranks[0].node)
            return 0;   /* between nodes a link may be slow too: COMMUNICATION-BOUND names both */
    return tml__contended(c) && !(c->training_cpu_percent > c->other_cpu_percent) &&
           c->runq_wait_percent >= CONTENTION_EXPLAINS * share * 100.0;
}

/* CPU CONTENTION: the step-time verdict of a training that lost its time
 * to the machine (docs/diagnosis.md, "A shared machine"). */
static void contention_issue(const tml_window *w, double share, tml_severity sev,
                             tml_diagnosis *d)
{
    const tml_contention *c = &w->contention;
    char cores[32] = "the cores";
    if (c->cores > 0)
        snprintf(cores, sizeof(cores), "the %d cores", (int)c->cores);
    diag_init(d, "CPU_CONTENTION", "CPU CONTENTION", sev);
    d->share = share;
    snprintf(d->why, sizeof(d->why), "Other processes used %.0f%% of %s (the training %.0f%%) "
             "and the training waited for a core %.0f%% of its time: the exposed communication "
             "(%d%% of Step Time on every rank) is ranks waiting for peers the kernel left "
             "without a core, not the transfer.", c->other_cpu_percent, cores,
             c->training_cpu_percent, c->runq_wait_percent, pct(share));
    snprintf(d->next, sizeof(d->next), "Give the training its cores: run it where other "
             "processes do not take them (a quieter machine or runner), or stop, nice or "
             "confine them (taskset, cgroups); measure again before changing the "
             "communication (`traceml compare` the two runs).");
}

static int comm_issue(const tml_window *w, const tml_thresholds *th, tml_diagnosis *d)
{
    int at;
    double share = tml__diag_comm_share(w, &at);
    char who[32], moved[32], bw[48] = "";

    if (at < 0 || !ge(share, th->comm_warn))
        return 0;
    const tml_rank_window *r = &w->ranks[at];
    if (w->nranks < 2 && !(r->comm_bytes_per_step > 0))
        return 0;   /* a group of one sends nothing: its collectives are local copies */
    tml_severity sev = ge(share, th->comm_crit) && w->window_steps >= th->straggler_crit_min_steps
                       ? TML_SEV_CRITICAL : TML_SEV_WARNING;
    if (contention_explains(w, share)) {
        contention_issue(w, share, sev, d);
        d->threshold = sev == TML_SEV_CRITICAL ? th->comm_crit : th->comm_warn;
        return 1;
    }
    diag_init(d, "COMMUNICATION_BOUND", "COMMUNICATION-BOUND", sev);
    d->cause = TML_M_COMM;
    d->share = share;
    d->threshold = sev == TML_SEV_CRITICAL ? th->comm_crit : th->comm_warn;
    fmt_rank(r, who, sizeof(who));
    tml__fmt_bytes(r->comm_bytes_per_step, moved, sizeof(moved));
    if (!isnan(r->comm_bytes_per_s))
        snprintf(bw, sizeof(bw), " at %.1f MB/s (%.0f Mbit/s)", r->comm_bytes_per_s / 1e6,
                 r->comm_bytes_per_s * 8 / 1e6);
    snprintf(d->why, sizeof(d->why), "Exposed communication took %d%% of Step Time on every "
             "rank (%s, the one that waited least: %.1f ms per step); it sent %s per step%s, "
             "%.1f ms in flight.", pct(share), who, ms(r->avg_ns[TML_M_COMM]), moved, bw,
             ms(r->avg_ns[TML_M_COMM_TOTAL]));
    comm_next(w, d);
    return 1;
}

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
static call cheap_fetch_call(int workers, double fetch_ms)
{
    double band = INPUT_CHEAP_FETCH_MS * INPUT_CHEAP_FETCH_CLOSE;
    if (workers != 0 || isnan(fetch_ms))
        return CALL_NO;
    if (fetch_ms < INPUT_CHEAP_FETCH_MS - band)
        return CALL_YES;
    return fetch_ms < INPUT_CHEAP_FETCH_MS + band ? CALL_CLOSE : CALL_NO;
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
                             call fetch, call cpu, char *out, size_t cap)
{
    char on[32], why_fetch[160] = "", why_cpu[160] = "";
    int workers = rw->loader_workers, cores = rw->cpu_count;
    on_cores(cores, on, sizeof(on));
    if (fetch == CALL_CLOSE)
        snprintf(why_fetch, sizeof(why_fetch), ", a batch takes %.1f to %.1f ms to fetch, about "
                 "what handing it to a worker costs (~%.0f ms)",
                 INPUT_CHEAP_FETCH_MS * (1 - INPUT_CHEAP_FETCH_CLOSE),
                 INPUT_CHEAP_FETCH_MS * (1 + INPUT_CHEAP_FETCH_CLOSE), INPUT_CHEAP_FETCH_MS);
    if (cpu == CALL_CLOSE) {
        char band[96];
        host_cpu_band(band, sizeof(band));
        snprintf(why_cpu, sizeof(why_cpu), "%s the %s", fetch == CALL_CLOSE ? ", and" : ",", band);
    }
    snprintf(out, cap, "Input Wait %d%% with DataLoader(num_workers=%d)%s%s%s: a close call "
             "between num_workers=%d%s and %s; measure it with `traceml tune SCRIPT`.",
             pct(share), workers, on, why_fetch, why_cpu, workers_to_try(workers, cores),
             w->clock == TML_CLOCK_GPU && !rw->loader_pin_memory ? " (with pin_memory=True)" : "",
             fetch == CALL_CLOSE ? "a cheaper fetch (index whole batches instead of collating "
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
    call fetch = cheap_fetch_call(workers, fetch_ms);
    call cpu = grow ? host_busy_call(w) : CALL_NO;
    if (fetch == CALL_YES) {
        /* a worker hands each batch over through a pipe and shared memory:
         * for a fetch this cheap that costs about as much as the fetch */
        snprintf(out, cap, "Input Wait %d%%, but a batch takes only %.2f ms to fetch: worker "
                 "processes (num_workers>0) would cost about as much to hand it over. Make "
                 "the fetch cheaper: index whole batches (BatchSampler, tensor slicing) "
                 "instead of collating samples one by one.", pct(share), fetch_ms);
    } else if (w->applied && w->applied_workers == workers) {
        input_applied_next(w, rw, share, out, cap);
    } else if (cpu != CALL_NO && others_take_cores(w)) {
        input_others_next(w, rw, share, out, cap);
    } else if (cpu == CALL_YES) {
        /* the cores more workers would need are taken already, by the
         * training's own tree (whatever the fetch costs: no worker then) */
        snprintf(out, cap, "Input Wait %d%%, but the host CPU averaged %.0f%% (HIGH CPU): more "
                 "DataLoader workers would compete with the training. Make batches cheaper "
                 "(transforms, decoding, collation) or prepare them ahead.", pct(share),
                 host_cpu(w));
    } else if (fetch == CALL_CLOSE || cpu == CALL_CLOSE) {
        input_close_call(w, rw, share, fetch, cpu, out, cap);
    } else {
        input_workers_next(w, rw, share, out, cap);
    }
}

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

static int insufficient_data(const tml_window *w, const tml_thresholds *th, size_t nactive,
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
    return ge(median_of(w, outside_share, TML_M_RESIDUAL, 0), th->residual_warn) ||
           ge(median_share(w, TML_M_UNTRACED, 1), th->residual_warn);
}

/* The INCOMPLETE DATA issue when a required phase was never observed,
 * its Next line joining one hint per missing phase that can apply (an
 * Input Wait never observed is no gap when no time is left to explain). */
static int incomplete_data_issue(const tml_window *w, const tml_thresholds *th,
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
static void add_caveat(tml_diagnosis *v, const tml_diagnosis *inc)
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
    call busy = host_busy_call(w);
    if (busy == CALL_NO)
        return;
    if (busy == CALL_YES)
        snprintf(cpu + strlen(cpu), sizeof(cpu) - strlen(cpu), "%.0f%% (HIGH CPU)", host_cpu(w));
    else
        host_cpu_band(cpu, sizeof(cpu));
    if (others_take_cores(w))   /* who took them: the Next fits it */
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
        if (!share_issue(residual, th->residual_warn, th->residual_crit, "RESIDUAL_HEAVY",
                         "RESIDUAL-HEAVY", TML_M_RESIDUAL, look, multi, d))
            return 0;
        residual_host_note(w, d);
        return 1;
    }
    double share = median_of(w, outside_share, TML_M_RESIDUAL, 0);
    if (!share_issue(share, th->residual_warn, th->residual_crit, "RESIDUAL_HEAVY",
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

/* Root causes, in priority order. Straggler needs every rank's Backward,
 * residual and compute need every compute phase: the NAN inputs keep
 * them from firing when those are missing. */
static void root_cause_issues(const tml_window *w, const tml_thresholds *th,
                              const char *multi, tml_step_diag *out)
{
    tml_diagnosis d;

    tml_diagnosis comm, weak;
    int has_comm = comm_issue(w, th, &comm);
    const tml_straggler *s = &out->straggler;
    int in_comm = has_comm && straggler_in_comm(w, s);
    /* under its threshold, the straggler follows the communication it explains */
    int has_weak = 0;
    if (straggler_issue(w, th, s, in_comm, &d)) {
        has_weak = !ge(s->score, th->straggler_warn);
        if (has_weak)
            weak = d;
        else
            out->issues[out->nissues++] = d;
        if (in_comm)
            comm_names_straggler(w, s, &comm);
    }
    if (share_issue(out->share[TML_M_INPUT], th->input_warn, th->input_crit,
                    "INPUT_BOUND", "INPUT-BOUND", TML_M_INPUT,
                    "Increase workers, prefetch, or storage throughput.", multi, &d)) {
        input_next(w, d.share, d.next, sizeof(d.next));
        /* communication before input when at least as severe and as large */
        if (has_comm && (comm.severity > d.severity ||
                         (comm.severity == d.severity && comm.share >= d.share))) {
            out->issues[out->nissues++] = comm;
            has_comm = 0;
        }
        out->issues[out->nissues++] = d;
    }
    size_t comm_at = out->nissues;
    if (has_comm)
        out->issues[out->nissues++] = comm;
    if (w->clock == TML_CLOCK_GPU &&
        share_issue(out->share[TML_M_H2D], th->h2d_warn, th->h2d_crit,
                    "H2D_BOUND", "H2D-BOUND", TML_M_H2D,
                    "Use pinned memory and non_blocking copies; make fewer, larger transfers.", multi, &d))
        out->issues[out->nissues++] = d;
    if (residual_issue(w, th, out->share[TML_M_RESIDUAL], multi, &d))
        out->issues[out->nissues++] = d;
    /* communication (not in SPEC 4.1's order) yields to a graver H2D or
     * Residual finding after it: a 16% all-reduce WARNING is not the cause
     * of a run whose step is 57% Residual */
    for (size_t i = comm_at; has_comm && i + 1 < out->nissues &&
                             out->issues[i + 1].severity > out->issues[i].severity; i++) {
        tml_diagnosis t = out->issues[i];
        out->issues[i] = out->issues[i + 1];
        out->issues[i + 1] = t;
    }
    if (has_weak)
        out->issues[out->nissues++] = weak;
    if (compute_bound_issue(out, w->clock, th, multi, &d))
        out->issues[out->nissues++] = d;
}

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

/* The share of wall-clock between steps: the window's Untraced, and the
 * script's own time before each epoch's loader started (validation,
 * checkpoints; left out of the window with the epoch starts, window.c),
 * over the window's steps and the epoch starts at the median rank's pace. */
static void untraced_wall(const tml_window *w, tml_step_diag *out)
{
    double u = median_share(w, TML_M_UNTRACED, 1), b = w->between_epochs_ns;
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
    untraced_wall(w, out);
    tml__diag_straggler(w, th, &out->straggler);
    for (size_t i = 0; i < w->nranks; i++)
        if (w->ranks[i].nsteps)
            nactive++;
    if (nactive > 1)
        snprintf(multi, sizeof(multi), " (median over %zu ranks)", nactive);

    if (insufficient_data(w, th, nactive, out))
        return;
    root_cause_issues(w, th, multi, out);
    /* epoch starts after the steady state's causes, ahead of them when
     * more severe, or as severe and costing more of the run's time (the
     * steady state's share shrinks by the time the starts took) */
    if (epoch_start_issue(w, &d)) {
        size_t at = out->nissues;
        const tml_diagnosis *first = &out->issues[0];
        if (at > 0 && (d.severity > first->severity ||
                       (d.severity == first->severity && d.share > first->share * (1.0 - d.share)))) {
            memmove(&out->issues[1], &out->issues[0], at * sizeof(d));
            at = 0;
        }
        out->issues[at] = d;
        out->nissues++;
    }
    /* A phase never observed does not hide a verdict the other figures
     * support: it becomes its caveat (and an issue of its own); without
     * one, INCOMPLETE DATA is the verdict (Compute and Residual unknown). */
    if (incomplete_data_issue(w, th, &d)) {
        if (out->nissues > 0)
            add_caveat(&out->issues[0], &d);
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
    static const char *causes[] = {
        "INPUT_BOUND", "H2D_BOUND", "RESIDUAL_HEAVY", "COMPUTE_BOUND", "EPOCH_START",
        "COMMUNICATION_BOUND", "CPU_CONTENTION",
        "INPUT_STRAGGLER", "H2D_STRAGGLER", "COMPUTE_STRAGGLER", "OUTSIDE_STEP_STRAGGLER",
        "STRAGGLER"
    };
    if (!d->kind)
        return 0;
    for (size_t i = 0; i < sizeof(causes) / sizeof(causes[0]); i++)
        if (strcmp(d->kind, causes[i]) == 0)
            return 1;
    return 0;
}

/* UNTRACED-HEAVY: most of the wall-clock goes between steps, so whatever
 * the step's own verdict, it is not where the time goes. 1 when it fired. */
static int untraced_heavy(const tml_step_diag *st, const tml_thresholds *th,
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
    if (untraced_heavy(st, th, out))
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
