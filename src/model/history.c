/*
 * history.c - step buckets and a rank's bounded step history (history.h).
 */
#include "model/history.h"
#include "base/array.h"

#include <stdlib.h>
#include <string.h>

void tml__step_bucket_add(tml_step_bucket *into, const tml_step_record *s)
{
    double v[TML_M_COUNT];
    if (s->flags & TML_STEP_ABORTED)
        return;
    for (int c = 0; c < 2; c++) {
        if (c == TML_CLOCK_GPU && s->gpu_traced_ns < 0)
            break;
        tml__step_breakdown_all(s, (tml_clock)c, v);
        into->n[c]++;
        for (int m = 0; m < TML_M_COUNT; m++)
            if (m != TML_M_UNTRACED)
                into->t[c][m] += v[m];
    }
    if (s->gap_ns >= 0) {
        into->gap += (double)s->gap_ns;
        into->n_gap++;
    }
    const int64_t mem[3] = { s->rss_bytes, s->cuda_allocated_peak_bytes,
                             s->cuda_reserved_peak_bytes };
    for (int k = 0; k < 3; k++)
        if (mem[k] >= 0) {
            into->mem[k] += (double)mem[k];
            into->n_mem[k]++;
        }
}

void tml__step_bucket_merge(tml_step_bucket *into, const tml_step_bucket *b)
{
    for (int c = 0; c < 2; c++) {
        into->n[c] += b->n[c];
        for (int m = 0; m < TML_M_COUNT; m++)
            into->t[c][m] += b->t[c][m];
    }
    into->n_gap += b->n_gap;
    into->gap += b->gap;
    for (int k = 0; k < 3; k++) {
        into->n_mem[k] += b->n_mem[k];
        into->mem[k] += b->mem[k];
    }
}

/* Neighbours merged pairwise: half the buckets, twice the width. */
static void halve(tml_step_history *h)
{
    size_t n = (h->nb + 1) / 2;
    for (size_t i = 0; i < n; i++) {
        tml_step_bucket m = h->b[2 * i];
        if (2 * i + 1 < h->nb)
            tml__step_bucket_merge(&m, &h->b[2 * i + 1]);
        h->b[i] = m;
    }
    memset(h->b + n, 0, (h->nb - n) * sizeof(*h->b));
    h->nb = n;
    h->width *= 2;
}

int tml__history_add(tml_step_history *h, const tml_step_record *s)
{
    if (s->flags & TML_STEP_ABORTED)
        return 0;
    if (h->steps == 0) {
        h->base = h->first = h->last = s->step;
        h->width = 1;
    }
    /* an id before the base (resent out of order) joins the first bucket */
    uint64_t off = s->step > h->base ? s->step - h->base : 0;
    size_t max = h->max ? h->max : TML_HISTORY_BUCKETS;
    while (off / h->width >= max)
        halve(h);
    size_t i = (size_t)(off / h->width);
    if (i >= h->nb) {
        size_t old = h->cap;
        if (TML_GROW(h->b, i + 1, h->cap) < 0)
            return TML_ENOMEM;
        memset(h->b + old, 0, (h->cap - old) * sizeof(*h->b));
        h->nb = i + 1;
    }
    tml__step_bucket_add(&h->b[i], s);
    if (s->step < h->first)
        h->first = s->step;
    if (s->step > h->last)
        h->last = s->step;
    h->steps++;
    return 0;
}

void tml__history_limit(tml_step_history *h, size_t buckets)
{
    h->max = buckets;
    if (h->steps == 0)
        return;
    while (h->nb > buckets)
        halve(h);
    if (h->cap > buckets) {
        tml_step_bucket *b = realloc(h->b, buckets * sizeof(*b));
        if (b) {
            h->b = b;
            h->cap = buckets;
        }
    }
}

void tml__history_release(tml_step_history *h)
{
    free(h->b);
    memset(h, 0, sizeof(*h));
}
