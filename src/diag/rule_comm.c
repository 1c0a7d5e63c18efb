/*
 * rule_comm.c - COMMUNICATION-BOUND, or CPU CONTENTION in its place:
 * the exposed communication of the rank that waited least crosses
 * comm_warn.
 */
#include "diag/rules.h"
#include "base/fmt.h"

#include <string.h>

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
    tml_call busy = tml__host_busy_call(w);
    char cpu[128] = "", band[96];
    tml__host_cpu_band(band, sizeof(band));
    if (busy == TML_CALL_YES)
        snprintf(cpu, sizeof(cpu), " (the host CPU averaged %.0f%%: HIGH CPU)", tml__host_cpu(w));
    else if (busy == TML_CALL_CLOSE)   /* the same advice either side: only the note is banded */
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
    else if (busy == TML_CALL_YES)   /* descheduled ranks hold the collectives up too */
        snprintf(d->next, sizeof(d->next), "The host CPU averaged %.0f%% (HIGH CPU): ranks "
                 "waiting for CPU time hold the collectives up as much as the link does; "
                 "give each rank its cores (fewer ranks or threads per host), then look "
                 "at the transfer: a bf16/fp16 comm hook, DDP bucket_cap_mb.",
                 tml__host_cpu(w));
    else if (busy == TML_CALL_CLOSE)
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

const char *const tml__rule_comm_kinds[] = { "COMMUNICATION_BOUND", "CPU_CONTENTION", NULL };

/* Of a rank's exposed communication, the part that is its wait for a
 * straggler is named (straggler_in_comm). */
int tml__rule_comm(const tml_rule_ctx *c, tml_diagnosis *d)
{
    if (!comm_issue(c->w, c->th, d))
        return 0;
    if (tml__straggler_in_comm(c->w, &c->st->straggler))
        comm_names_straggler(c->w, &c->st->straggler, d);
    return 1;
}
