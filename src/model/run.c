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

void tml__run_init(tml_run *run, const char *name, const char *id)
{
    memset(run, 0, sizeof(*run));
    if (name)
        snprintf(run->name, sizeof(run->name), "%s", name);
    if (id)
        snprintf(run->id, sizeof(run->id), "%s", id);
}

void tml__run_release(tml_run *run)
{
    for (size_t i = 0; i < run->nranks; i++) {
        free(run->ranks[i].steps);
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
    memset(&run->ranks[at], 0, sizeof(run->ranks[at]));
    run->ranks[at].info = *info;
    run->ranks[at].keep_all = run->keep_all;
    run->ranks[at].stats.overhead_ns_per_step = -1;
    run->nranks++;
    return &run->ranks[at];
}

/* The full array drops the records between the head and the kept tail:
 * counted, folded into the history, then the tail moves down. */
static int drop_middle(tml_rank *r)
{
    size_t from = TML_RUN_HEAD_STEPS, n = r->nsteps - TML_RUN_HEAD_STEPS - TML_RUN_KEEP_STEPS;
    for (size_t i = from; i < from + n; i++) {
        const tml_step_record *s = &r->steps[i];
        if (tml__history_add(&r->past, s) < 0)
            return TML_ENOMEM;
        r->past_aborted += (s->flags & TML_STEP_ABORTED) != 0;
        r->past_gpu |= s->gpu_traced_ns >= 0 || s->cuda_allocated_peak_bytes >= 0 ||
                       s->cuda_reserved_peak_bytes >= 0;
    }
    memmove(&r->steps[from], &r->steps[from + n], TML_RUN_KEEP_STEPS * sizeof(*r->steps));
    r->past_steps += n;
    r->nsteps -= n;
    return 0;
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
    for (size_t i = from; i < rank->nsteps; i++)
        rank->steps[i].step = tml__run_step_id(rank->steps[i].step, rank->step_base,
                                                &rank->next_step);
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
    while (n > 0) {
        if (rank->nsteps == TML_RUN_CAP_STEPS && drop_middle(rank) < 0)
            return TML_ENOMEM;
        size_t k = TML_RUN_CAP_STEPS - rank->nsteps;
        if (k > n)
            k = n;
        /* capacities double from 16, so the cap stops at TML_RUN_CAP_STEPS */
        if (TML_GROW(rank->steps, rank->nsteps + k, rank->cap) < 0)
            return TML_ENOMEM;
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
             in(r->cuda_reserved_peak_bytes, bytes, 1) && in(r->comm_bytes, bytes, 1);
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
