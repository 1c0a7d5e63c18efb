/*
 * series.c - per-place aggregates of resource samples (series.h). A linear
 * search is fine: a run has a handful of places per node.
 */
#include "model/series.h"
#include "base/array.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "traceml/traceml.h"

void tml__series_init(tml_series_set *s)
{
    memset(s, 0, sizeof(*s));
}

void tml__series_release(tml_series_set *s)
{
    free(s->v);
    free(s->rg);
    memset(s, 0, sizeof(*s));
}

const tml_series *tml__series_find(const tml_series_set *s, int32_t node, int32_t rank,
                                   int32_t gpu, uint32_t metric)
{
    for (size_t i = 0; i < s->n; i++) {
        const tml_series *x = &s->v[i];
        if (x->metric == metric && x->node == node && x->rank == rank && x->gpu == gpu)
            return x;
    }
    return NULL;
}

static int note_rank_gpu(tml_series_set *s, int32_t rank, int32_t node, int32_t gpu)
{
    for (size_t i = 0; i < s->nrg; i++)
        if (s->rg[i].rank == rank) {
            s->rg[i].gpu = gpu;
            s->rg[i].node = node;
            return 0;
        }
    if (TML_GROW(s->rg, s->nrg + 1, s->caprg) < 0)
        return TML_ENOMEM;
    s->rg[s->nrg++] = (tml_rank_gpu){ rank, node, gpu };
    return 0;
}

int tml__series_add(tml_series_set *s, const tml_sample *x)
{
    int scope = tml__sample_metric_scope(x->metric);
    if (!scope || !isfinite(x->value) || x->node < 0)
        return 0;
    int32_t rank = scope == 3 ? x->rank : -1;
    int32_t gpu = scope == 2 ? x->gpu : -1;
    if (scope == 2 && gpu < 0)
        return 0;
    if (scope == 3 && rank < 0)
        return 0;
    if (scope == 2 && x->rank >= 0 && note_rank_gpu(s, x->rank, x->node, gpu) < 0)
        return TML_ENOMEM;
    tml_series *t = (tml_series *)tml__series_find(s, x->node, rank, gpu, x->metric);
    if (!t) {
        if (TML_GROW(s->v, s->n + 1, s->cap) < 0)
            return TML_ENOMEM;
        t = &s->v[s->n++];
        memset(t, 0, sizeof(*t));
        t->node = x->node;
        t->rank = rank;
        t->gpu = gpu;
        t->metric = x->metric;
        t->min = t->max = x->value;
    }
    t->n++;
    t->sum += x->value;
    if (x->value < t->min)
        t->min = x->value;
    if (x->value > t->max)
        t->max = x->value;
    t->last = x->value;
    s->samples++;
    return 0;
}

double tml__series_mean(const tml_series *x)
{
    return x && x->n ? x->sum / (double)x->n : NAN;
}

int32_t tml__series_rank_gpu(const tml_series_set *s, int32_t rank)
{
    for (size_t i = 0; i < s->nrg; i++)
        if (s->rg[i].rank == rank)
            return s->rg[i].gpu;
    return -1;
}
