/*
 * series.c - per-place aggregates of resource samples (series.h), found
 * through a hash index: a run has a handful of places per node, and
 * thousands of nodes.
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
    free(s->vi);
    free(s->rgi);
    memset(s, 0, sizeof(*s));
}

static uint32_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (uint32_t)h;
}

static uint32_t place_hash(int32_t node, int32_t rank, int32_t gpu, uint32_t metric)
{
    uint64_t a = ((uint64_t)(uint32_t)node << 32) | (uint32_t)rank;
    uint64_t b = ((uint64_t)(uint32_t)gpu << 32) | metric;
    return mix(a * 0x9e3779b97f4a7c15ULL ^ mix(b));
}

static uint32_t series_hash(const tml_series *x)
{
    return place_hash(x->node, x->rank, x->gpu, x->metric);
}

static uint32_t rank_hash(const tml_rank_gpu *x)
{
    return mix((uint64_t)(uint32_t)x->rank * 0x9e3779b97f4a7c15ULL);
}

/* Index slot for entry i (0-based) of a table of cap slots (a power of two). */
static void index_put(uint32_t *tab, size_t cap, uint32_t h, size_t i)
{
    size_t at = h & (cap - 1);
    while (tab[at])
        at = (at + 1) & (cap - 1);
    tab[at] = (uint32_t)i + 1;
}

/* The index *tab (cap slots) rebuilt for n entries when it is over half
 * full; hash(i) hashes entry i. */
static int index_grow(uint32_t **tab, size_t *cap, size_t n, const void *base, size_t size,
                      uint32_t (*hash)(const void *))
{
    if (2 * (n + 1) <= *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    while (2 * (n + 1) > nc)
        nc *= 2;
    uint32_t *t = calloc(nc, sizeof(*t));
    if (!t)
        return TML_ENOMEM;
    for (size_t i = 0; i < n; i++)
        index_put(t, nc, hash((const char *)base + i * size), i);
    free(*tab);
    *tab = t;
    *cap = nc;
    return 0;
}

static uint32_t series_hash_v(const void *x)
{
    return series_hash(x);
}

static uint32_t rank_hash_v(const void *x)
{
    return rank_hash(x);
}

const tml_series *tml__series_find(const tml_series_set *s, int32_t node, int32_t rank,
                                   int32_t gpu, uint32_t metric)
{
    if (!s->vi_cap)
        return NULL;
    for (size_t at = place_hash(node, rank, gpu, metric) & (s->vi_cap - 1); s->vi[at];
         at = (at + 1) & (s->vi_cap - 1)) {
        const tml_series *x = &s->v[s->vi[at] - 1];
        if (x->metric == metric && x->node == node && x->rank == rank && x->gpu == gpu)
            return x;
    }
    return NULL;
}

static tml_rank_gpu *find_rank(const tml_series_set *s, int32_t rank)
{
    if (!s->rgi_cap)
        return NULL;
    tml_rank_gpu key = { rank, 0, 0 };
    for (size_t at = rank_hash(&key) & (s->rgi_cap - 1); s->rgi[at];
         at = (at + 1) & (s->rgi_cap - 1))
        if (s->rg[s->rgi[at] - 1].rank == rank)
            return &s->rg[s->rgi[at] - 1];
    return NULL;
}

static int note_rank_gpu(tml_series_set *s, int32_t rank, int32_t node, int32_t gpu)
{
    tml_rank_gpu *r = find_rank(s, rank);
    if (r) {
        r->gpu = gpu;
        r->node = node;
        return 0;
    }
    if (TML_GROW(s->rg, s->nrg + 1, s->caprg) < 0 ||
        index_grow(&s->rgi, &s->rgi_cap, s->nrg, s->rg, sizeof(*s->rg), rank_hash_v) < 0)
        return TML_ENOMEM;
    s->rg[s->nrg] = (tml_rank_gpu){ rank, node, gpu };
    index_put(s->rgi, s->rgi_cap, rank_hash(&s->rg[s->nrg]), s->nrg);
    s->nrg++;
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
        if (TML_GROW(s->v, s->n + 1, s->cap) < 0 ||
            index_grow(&s->vi, &s->vi_cap, s->n, s->v, sizeof(*s->v), series_hash_v) < 0)
            return TML_ENOMEM;
        t = &s->v[s->n];
        memset(t, 0, sizeof(*t));
        t->node = x->node;
        t->rank = rank;
        t->gpu = gpu;
        t->metric = x->metric;
        t->min = t->max = x->value;
        index_put(s->vi, s->vi_cap, series_hash(t), s->n);
        s->n++;
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
    const tml_rank_gpu *r = find_rank(s, rank);
    return r ? r->gpu : -1;
}
