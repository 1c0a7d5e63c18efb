/*
 * run.c - the in-memory run. Ranks are few (up to thousands) and arrive
 * once, so a sorted array with insertion is simplest; steps per rank are an
 * array that grows to TML_RUN_CAP_STEPS and then drops its middle (run.h). Run names (what a run folder may be called)
 * are part of a run's identity and live here too.
 */
#include "model/run.h"
#include "base/array.h"
#include "model/timeline.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const tml_rank_limits FULL_SHARE = { TML_RUN_HEAD_STEPS, TML_RUN_KEEP_STEPS,
                                             TML_RUN_CAP_STEPS, TML_HISTORY_BUCKETS };

void tml__run_init(tml_run *run, const char *name, const char *id)
{
    memset(run, 0, sizeof(*run));
    if (name)
        snprintf(run->name, sizeof(run->name), "%s", name);
    if (id)
        snprintf(run->id, sizeof(run->id), "%s", id);
    run->lim = FULL_SHARE;
}

/* A rank's share of `budget` bytes among n ranks: a tenth for the history
 * (a power of two of buckets, 16 at least), the rest for records, of
 * which a sixteenth the first ones and a quarter room to append. */
static tml_rank_limits share_of(size_t budget, size_t n)
{
    const size_t rec = sizeof(tml_step_record), bucket = sizeof(tml_step_bucket);
    size_t share = budget / (n ? n : 1);
    if (share >= TML_RUN_CAP_STEPS * rec + TML_HISTORY_BUCKETS * bucket)
        return FULL_SHARE;
    tml_rank_limits l;
    l.buckets = 16;
    while (l.buckets * 2 * bucket <= share / 10 && l.buckets < TML_HISTORY_BUCKETS)
        l.buckets *= 2;
    size_t left = share > l.buckets * bucket ? share - l.buckets * bucket : 0;
    l.cap = left / rec;
    if (l.cap > TML_RUN_CAP_STEPS)
        l.cap = TML_RUN_CAP_STEPS;
    if (l.cap < TML_RUN_MIN_STEPS)
        l.cap = TML_RUN_MIN_STEPS;
    l.head = l.cap / 16;
    l.keep = l.cap - l.head - l.cap / 4;
    return l;
}

/* Drops the records between the first lim.head and the last lim.keep:
 * counted, folded into the history, then the tail moves down. */
static int drop_middle(tml_rank *r)
{
    size_t from = r->lim.head, keep = r->lim.keep;
    if (r->nsteps <= from + keep)
        return 0;
    size_t n = r->nsteps - from - keep;
    for (size_t i = from; i < from + n; i++) {
        const tml_step_record *s = &r->steps[i];
        if (tml__history_add(&r->past, s) < 0)
            return TML_ENOMEM;
        r->past_aborted += (s->flags & TML_STEP_ABORTED) != 0;
        r->past_gpu |= s->gpu_traced_ns >= 0 || s->cuda_allocated_peak_bytes >= 0 ||
                       s->cuda_reserved_peak_bytes >= 0;
    }
    memmove(&r->steps[from], &r->steps[from + n], keep * sizeof(*r->steps));
    r->past_steps += n;
    r->nsteps -= n;
    return 0;
}

/* The rank held to limits lim: its middle dropped past them, its arrays
 * given back. */
static int rank_fit(tml_rank *r, const tml_rank_limits *lim)
{
    r->lim = *lim;
    tml__history_limit(&r->past, lim->buckets);
    if (r->nsteps >= lim->cap && drop_middle(r) < 0)
        return TML_ENOMEM;
    if (r->cap > lim->cap) {
        tml_step_record *v = realloc(r->steps, lim->cap * sizeof(*v));
        if (v) {
            r->steps = v;
            r->cap = lim->cap;
        }
    }
    return 0;
}

/* The ranks to share the budget among: those seen rounded up (to an
 * eighth of the power of two below), so that ranks arriving one by one
 * reshare it a few times per doubling, not every time; or the world size
 * expected, when more. */
static size_t ranks_planned(const tml_run *run)
{
    size_t n = run->nranks, step = 1;
    while (step * 16 <= n)
        step *= 2;
    n = (n + step - 1) / step * step;
    if (run->world_size > 0 && (size_t)run->world_size > n)
        n = (size_t)run->world_size;
    return n;
}

int tml__run_share_budget(tml_run *run)
{
    size_t n = ranks_planned(run);
    tml_rank_limits l = share_of(run->mem_budget ? run->mem_budget
                                                 : (size_t)TML_RUN_BUDGET_MB << 20, n);
    if (memcmp(&l, &run->lim, sizeof(l)) == 0)
        return 0;
    run->lim = l;
    int rc = 0;
    for (size_t i = 0; i < run->nranks; i++)
        if (!run->ranks[i].keep_all && rank_fit(&run->ranks[i], &l) < 0)
            rc = TML_ENOMEM;
    return rc;
}

int tml__run_set_budget(tml_run *run, size_t bytes)
{
    run->mem_budget = bytes;
    return tml__run_share_budget(run);
}

void tml__run_release(tml_run *run)
{
    for (size_t i = 0; i < run->nranks; i++) {
        free(run->ranks[i].steps);
        tml__dd_free(run->ranks[i].deep_dive);
        tml__history_release(&run->ranks[i].past);
    }
    free(run->ranks);
    run->ranks = NULL;
    run->nranks = run->cap = 0;
    tml__series_release(&run->samples);
    tml__timeline_free(run->timeline);
    run->timeline = NULL;
}

tml_rank *tml__run_find(tml_run *run, int32_t rank)
{
    size_t lo = 0, hi = run->nranks;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (run->ranks[mid].info.rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < run->nranks && run->ranks[lo].info.rank == rank)
        return &run->ranks[lo];
    return NULL;
}

tml_rank *tml__run_rank(tml_run *run, const tml_rank_info *info)
{
    tml_rank *r = tml__run_find(run, info->rank);
    if (r) {
        r->info = *info;
        return r;
    }
    if (TML_GROW(run->ranks, run->nranks + 1, run->cap) < 0)
        return NULL;
    size_t at = 0;
    while (at < run->nranks && run->ranks[at].info.rank < info->rank)
        at++;
    memmove(&run->ranks[at + 1], &run->ranks[at],
            (run->nranks - at) * sizeof(*run->ranks));
    r = &run->ranks[at];
    memset(r, 0, sizeof(*r));
    r->info = *info;
    r->keep_all = run->keep_all;
    r->stats.overhead_ns_per_step = -1;
    run->nranks++;
    r->lim = run->lim;
    r->past.max = r->lim.buckets;
    /* a smaller share shrinks every rank, r with them (none moves) */
    tml__run_share_budget(run);
    return r;
}

/* The records just appended at steps[from..]: their ids moved on by the
 * incarnation's base, the rank's next step id kept. */
uint64_t tml__run_step_id(uint64_t step, uint64_t base, uint64_t *next_step)
{
    step += base;
    if (step + 1 > *next_step)
        *next_step = step + 1;
    return step;
}

static void number_on(tml_rank *rank, size_t from)
{
    for (size_t i = from; i < rank->nsteps; i++) {
        uint64_t next = rank->next_step;
        rank->steps[i].step = tml__run_step_id(rank->steps[i].step, rank->step_base,
                                                &rank->next_step);
        rank->unordered |= next > 0 && rank->steps[i].step < next;
    }
}

/* The first record of r at index >= lo whose id is >= id (ids ascend). */
static size_t lower_bound(const tml_rank *r, size_t lo, uint64_t id)
{
    size_t hi = r->nsteps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->steps[mid].step < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void tml__rank_span(const tml_rank *r, uint64_t first, uint64_t last, size_t *lo, size_t *hi)
{
    if (r->unordered || first > last) {
        *lo = 0;
        *hi = r->unordered ? r->nsteps : 0;
        return;
    }
    *lo = lower_bound(r, 0, first);
    *hi = last == UINT64_MAX ? r->nsteps : lower_bound(r, *lo, last + 1);
}

int tml__run_add_steps(tml_rank *rank, const tml_step_record *recs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        rank->detected_steps += (recs[i].flags & TML_STEP_DETECTED) != 0;
    if (rank->keep_all) {
        if (TML_GROW(rank->steps, rank->nsteps + n, rank->cap) < 0)
            return TML_ENOMEM;
        memcpy(&rank->steps[rank->nsteps], recs, n * sizeof(*recs));
        rank->nsteps += n;
        number_on(rank, rank->nsteps - n);
        return 0;
    }
    const size_t cap = rank->lim.cap;
    while (n > 0) {
        if (rank->nsteps >= cap && drop_middle(rank) < 0)
            return TML_ENOMEM;
        size_t k = cap - rank->nsteps;
        if (k > n)
            k = n;
        if (rank->nsteps + k > rank->cap) {   /* doubling, up to the cap */
            size_t c = rank->cap ? rank->cap * 2 : 16;
            c = c < rank->nsteps + k ? rank->nsteps + k : c;
            c = c > cap ? cap : c;
            tml_step_record *v = realloc(rank->steps, c * sizeof(*v));
            if (!v)
                return TML_ENOMEM;
            rank->steps = v;
            rank->cap = c;
        }
        memcpy(&rank->steps[rank->nsteps], recs, k * sizeof(*recs));
        rank->nsteps += k;
        number_on(rank, rank->nsteps - k);
        recs += k;
        n -= k;
    }
    return 0;
}

tml_rank_conflict *tml__run_add_conflict(tml_run *run, int kind)
{
    tml_rank_conflict *c = NULL;
    if (run->nconflicts < TML_MAX_CONFLICTS) {
        c = &run->conflicts[run->nconflicts];
        memset(c, 0, sizeof(*c));
        c->kind = kind;
    }
    run->nconflicts++;
    return c;
}

void tml__run_restart(tml_run *run, tml_rank *rank)
{
    rank->incarnation++;
    rank->step_base = rank->next_step;
    tml_rank_conflict *c = tml__run_add_conflict(run, TML_CONFLICT_RESTARTED);
    if (!c)
        return;
    c->claimed = c->reported_as = rank->info.rank;
    c->pid = c->first_pid = rank->info.pid;
    snprintf(c->host, sizeof(c->host), "%s", rank->info.host);
    snprintf(c->first_host, sizeof(c->first_host), "%s", rank->info.host);
    c->incarnation = rank->incarnation;
    c->first_step = rank->step_base;
}

static int in(int64_t v, int64_t max, int missing_ok)
{
    return (v >= 0 && v <= max) || (missing_ok && v == TML_MISSING);
}

int tml__record_possible(const tml_step_record *r)
{
    const int64_t ns = TML_RECORD_MAX_NS, bytes = TML_RECORD_MAX_BYTES;
    /* -1 is missing wherever a figure may be (a phase of an older file,
     * communication not measured); the step itself and its start are not */
    int ok = in(r->start_ns, ns * 4096, 0) && in(r->traced_ns, ns, 0) &&
             in(r->gpu_traced_ns, ns, 1) && in(r->gap_ns, ns, 1) && in(r->comm_ns, ns, 1) &&
             in(r->rss_bytes, bytes, 1) && in(r->cuda_allocated_peak_bytes, bytes, 1) &&
             in(r->cuda_reserved_peak_bytes, bytes, 1) && in(r->comm_bytes, bytes, 1) &&
             in(r->samples, TML_RECORD_MAX_SAMPLES, 0) && in(r->tokens, TML_RECORD_MAX_SAMPLES, 0) &&
             in(r->flops, TML_RECORD_MAX_FLOPS, 0) && in(r->peak_flops, TML_RECORD_MAX_FLOPS, 0);
    for (int k = 0; k < TML_PHASE_COUNT; k++)
        ok = ok && in(r->phase_ns[k], ns, 1) && in(r->gpu_phase_ns[k], ns, 1);
    return ok;
}

const char *tml__run_step_detection(const tml_run *run)
{
    int any = 0;
    for (size_t i = 0; i < run->nranks; i++) {
        if (run->ranks[i].detected_steps)
            return "automatic";
        any |= run->ranks[i].nsteps > 0;
    }
    return any ? "marked" : NULL;
}

/* The steps per second over the last PACE_STEPS intervals, leaving out
 * the first step (compilation, allocator and cache warm-up). */
#define PACE_STEPS 100

void tml__run_pace(const tml_run *run, const char *host, tml_run_pace *out)
{
    memset(out, 0, sizeof(*out));
    out->rank = -1;
    out->steps_per_s = NAN;
    const tml_rank *best = NULL;
    for (size_t i = 0; i < run->nranks; i++) {
        const tml_rank *r = &run->ranks[i];
        if (r->nsteps == 0 || (host && strcmp(r->info.host, host) != 0))
            continue;
        if (!best || r->steps[r->nsteps - 1].step > best->steps[best->nsteps - 1].step)
            best = r;
    }
    if (!best)
        return;
    size_t n = best->nsteps;
    const tml_step_record *last = &best->steps[n - 1];
    out->rank = best->info.rank;
    out->last_step = last->step;
    out->last_start_ns = last->start_ns;
    if (n < 2)
        return;
    size_t from = n - 1 > PACE_STEPS ? n - 1 - PACE_STEPS : 0;
    if (from == 0 && n >= 3)
        from = 1;
    const tml_step_record *first = &best->steps[from];
    if (last->step > first->step && last->start_ns > first->start_ns)
        out->steps_per_s = (double)(last->step - first->step) /
                           ((double)(last->start_ns - first->start_ns) / 1e9);
}

/* ---- run names ------------------------------------------------------- */

#define NAME_MAX_LEN 100

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-';
}

int tml__run_name_valid(const char *name)
{
    if (!name || !*name)
        return 0;
    size_t n = strnlen(name, NAME_MAX_LEN + 1);
    if (n > NAME_MAX_LEN)
        return 0;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char(name[i]))
            return 0;
    return 1;
}

void tml__run_name_generate(const char *stem, char *out, size_t cap)
{
    char clean[64];
    size_t k = 0;
    if (stem) {
        const char *base = strrchr(stem, '/');
        base = base ? base + 1 : stem;
        size_t n = strlen(base);
        if (n > 3 && strcmp(base + n - 3, ".py") == 0)
            n -= 3;
        for (size_t i = 0; i < n && k < sizeof(clean) - 1; i++)
            clean[k++] = name_char(base[i]) ? base[i] : '_';
    }
    clean[k] = '\0';
    /* leading dots would make hidden folders (or "." / "..") */
    size_t skip = 0;
    while (clean[skip] == '.')
        skip++;
    const char *s = clean[skip] ? clean + skip : "run";
    time_t now = time(NULL);
    struct tm tm;
    char stamp[32] = "00000000_000000";
    if (localtime_r(&now, &tm))
        strftime(stamp, sizeof(stamp), "%Y%m%d_%H%M%S", &tm);
    snprintf(out, cap, "%s_%s", s, stamp);
}
