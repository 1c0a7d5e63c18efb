/*
 * run.c - the in-memory run. Ranks are few (up to thousands) and arrive
 * once, so a sorted array with insertion is simplest; steps per rank are an
 * append-only growable array.
 */
#include "model/run.h"
#include "base/array.h"
#include "model/timeline.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

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
    for (size_t i = 0; i < run->nranks; i++)
        free(run->ranks[i].steps);
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
    run->ranks[at].stats.overhead_ns_per_step = -1;
    run->nranks++;
    return &run->ranks[at];
}

int tml__run_add_steps(tml_rank *rank, const tml_step_record *recs, size_t n)
{
    if (TML_GROW(rank->steps, rank->nsteps + n, rank->cap) < 0)
        return TML_ENOMEM;
    memcpy(&rank->steps[rank->nsteps], recs, n * sizeof(*recs));
    rank->nsteps += n;
    return 0;
}
