/*
 * rule_straggler.c - the straggler analysis, and the straggler rules: a
 * rank that makes its peers wait at the gradient all-reduce (INPUT / H2D / COMPUTE /
 * OUTSIDE-STEP STRAGGLER, STRAGGLER), when its score crosses
 * straggler_warn, or below it where it explains part of the exposed
 * communication that fired (docs/diagnosis.md, "Stragglers").
 */
#include "diag/rules.h"

#include <stdlib.h>
#include <string.h>

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

/* Each straggler component's metric (compute's first part, for its name). */
static const tml_metric comp[4] = { TML_M_INPUT, TML_M_H2D, TML_M_FORWARD, TML_M_UNTRACED };

/* The culprit's excess in straggler component c (input, h2d, compute,
 * outside the step). A part that is missing on either rank adds nothing;
 * NAN when all are. */
static double excess_ns(const tml_rank_window *cul, const tml_rank_window *vic, int c)
{
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
    return rank_waited_longer(cul, vic, cost_ns) || (spread && tml__others_take_cores(w));
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

/* On a machine that other processes contend (tml__contended), a culprit
 * of a CPU training that used no more CPU than its victim fell behind for
 * want of a core: below the threshold it is the machine's, which the
 * communication's verdict names already (a healthy 2-rank run beside a
 * profiler once got a 4.8% COMPUTE STRAGGLER there). A rank that computes
 * more uses more CPU; one that sleeps, reads or evaluates on a device does
 * not, but its excess lies in one component other than the compute, past
 * what waiting for a core adds to it: a wait q of the time stretches a
 * phase by q / (1 - q), and the excess is over twice that of the victim's
 * own (rank 0's evaluation between steps beside two busy loops: 7.6 ms a
 * step against 0.1 ms stretched by 15%). */
static int machine_made(const tml_window *w, const tml_straggler *s)
{
    const tml_rank_window *cul = &w->ranks[s->culprit], *vic = &w->ranks[s->victim];
    if (w->clock != TML_CLOCK_CPU || !tml__contended(&w->contention))
        return 0;
    if (s->component >= 0 && s->component != 2) {
        double q = w->contention.runq_wait_percent / 100.0;
        double own = vic->avg_ns[comp[s->component]];
        if (q < 1 && !isnan(own) &&
            excess_ns(cul, vic, s->component) > 2.0 * own * q / (1.0 - q))
            return 0;
    }
    for (size_t i = 0; i < w->nranks; i++)
        if (w->ranks[i].has_gpu)
            return 0;
    return vic->cpu_percent > 0 && cul->cpu_percent >= 0 &&
           cul->cpu_percent <= vic->cpu_percent * (1.0 + CPU_SAME);
}

int tml__straggler_in_comm(const tml_window *w, const tml_straggler *s)
{
    if (!s->valid || s->component < 0 || !(s->cost_ns > 0) || machine_made(w, s))
        return 0;
    double comm = w->ranks[s->victim].avg_ns[TML_M_COMM];
    return !isnan(comm) && comm > 0 && s->cost_ns >= STRAGGLER_COMM_PART * comm;
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
        if (tml__others_take_cores(w))
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

const char *const tml__rule_straggler_kinds[] = {
    "INPUT_STRAGGLER", "H2D_STRAGGLER", "COMPUTE_STRAGGLER", "OUTSIDE_STEP_STRAGGLER", "STRAGGLER",
    NULL
};
const char *const tml__rule_straggler_in_comm_kinds[] = {
    "INPUT_STRAGGLER", "H2D_STRAGGLER", "COMPUTE_STRAGGLER", "OUTSIDE_STEP_STRAGGLER", NULL
};

/* A straggler whose score crosses straggler_warn. */
int tml__rule_straggler(const tml_rule_ctx *c, tml_diagnosis *d)
{
    const tml_straggler *s = &c->st->straggler;
    return ge(s->score, c->th->straggler_warn) && straggler_issue(c->w, c->th, s, 0, d);
}

/* Below straggler_warn, a straggler whose peers' exposed communication
 * fired (COMMUNICATION-BOUND, CPU CONTENTION) and that explains a part of
 * it worth naming: it follows the communication it explains. */
int tml__rule_straggler_in_comm(const tml_rule_ctx *c, tml_diagnosis *d)
{
    const tml_straggler *s = &c->st->straggler;
    if (ge(s->score, c->th->straggler_warn) || !(c->fired & (1u << TML_RULE_COMM)) ||
        !tml__straggler_in_comm(c->w, s))
        return 0;
    return straggler_issue(c->w, c->th, s, 1, d);
}
