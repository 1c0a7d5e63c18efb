/*
 * gpuclock.c - the GPU clock, on the shipper thread: a completed step's
 * CUDA events into its gpu_* durations.
 *
 * A thread that set a CUDA stream records an event per boundary (markers.c).
 * Its completed step records wait in a small per-ring queue until every
 * event of the step is done (cuEventQuery, never a synchronize); then the
 * durations come from cuEventElapsedTime. A step whose events are not done
 * after a few seconds, or whose GPU figures would leave a phase out, goes
 * on without GPU figures rather than hold the others back.
 */
#include "core/engine.h"

#include <stdlib.h>

#define GPU_GIVE_UP_NS 5000000000L    /* events not done after 5 s: no GPU figures */

/* 1: resolved (figures filled, or given up); 0: some event is not done. */
static int gpu_resolve(tml_gpu_pool *p, tml_gpending *g, int give_up)
{
    tml_step_record *r = &g->rec;
    const tml_gpu_marks *m = &g->marks;
    int64_t maxseq = -1, bracket = 0, inside_input = 0, before_h2d = 0, ns;
    int64_t phase[TML_PHASE_COUNT] = {0};
    int64_t bs[TML_GPU_MAX_SPANS], es[TML_GPU_MAX_SPANS], xs[TML_GPU_MAX_SPANS];
    uint32_t pairs[TML_PHASE_COUNT] = {0};
    int ok = p && !m->overflow && m->step_b >= 0 && m->step_e >= 0;

    for (uint32_t i = 0; i < m->nspans; i++) {
        if (m->span[i].b > maxseq)
            maxseq = m->span[i].b;
        if (m->span[i].e > maxseq)
            maxseq = m->span[i].e;
    }
    if (m->step_e > maxseq)
        maxseq = m->step_e;
    if (m->step_b > maxseq)
        maxseq = m->step_b;
    for (uint32_t i = 0; ok && i < m->nspans; i++)
        if (m->span[i].b < 0 || m->span[i].e < 0)
            ok = 0;
    if (ok) {
        /* Events on one stream complete in order, so the last one usually
         * decides; every event is still asked (a span may have been
         * recorded on another stream). Not done yet: try again next pass. */
        int d = tml__gpu_pool_done(p, maxseq);
        if (d == 1)
            d = tml__gpu_pool_done(p, m->step_b) == 1 && tml__gpu_pool_done(p, m->step_e) == 1;
        for (uint32_t i = 0; d == 1 && i < m->nspans; i++) {
            int x = tml__gpu_pool_done(p, m->span[i].b), y = tml__gpu_pool_done(p, m->span[i].e);
            d = x < 0 || y < 0 ? -1 : (x == 1 && y == 1);
        }
        if (d == 0 && !give_up)
            return 0;
        ok = d == 1;
    }
    if (ok)
        ok = tml__gpu_pool_elapsed(p, m->step_b, m->step_e, &bracket) == 0;
    for (uint32_t i = 0; ok && i < m->nspans; i++) {
        const tml_gpu_span *sp = &m->span[i];
        if (tml__gpu_pool_elapsed(p, sp->b, sp->e, &ns) < 0) {
            ok = 0;
            break;
        }
        if (sp->phase == TML_PHASE_INPUT && sp->inside)
            inside_input += ns;
        if (sp->phase == TML_PHASE_H2D && !sp->inside)
            before_h2d += ns;      /* copies before the bracket (assemble.c) */
        bs[i] = sp->b;
        es[i] = sp->e;
        xs[i] = tml__span_exclusive(bs, es, xs, i, sp->b, sp->e, ns);   /* nested: once */
        phase[sp->phase] += xs[i];
        pairs[sp->phase]++;
    }
    /* every CPU span of the step needs its GPU pair, else the step's GPU
     * figures would silently leave a phase out */
    for (int k = 0; ok && k < TML_PHASE_COUNT; k++)
        if (pairs[k] != m->cpu_spans[k])
            ok = 0;
    if (ok) {
        r->gpu_traced_ns = (bracket > inside_input ? bracket - inside_input : 0) + before_h2d;
        for (int k = 0; k < TML_PHASE_COUNT; k++)
            r->gpu_phase_ns[k] = phase[k];
    }
    if (p && maxseq >= 0)
        tml__gpu_pool_release(p, (uint64_t)maxseq + 1);
    return 1;
}

/* Delivers the slot's waiting steps whose events are done (all of them,
 * with or without GPU figures, when final). */
void tml__gpu_flush(tml_slot *s, int64_t now, int final)
{
    if (!s->pend || s->plen == 0)
        return;
    tml_gpu_pool *p = atomic_load(&s->gpu);
    if (p && tml__gpu_pool_bind(p) < 0)
        p = NULL;
    while (s->plen) {
        tml_gpending *g = &s->pend[s->phead];
        int give_up = final || now - g->since_ns > GPU_GIVE_UP_NS;
        if (!gpu_resolve(p, g, give_up))
            break;
        tml__ship_record(&g->rec);
        s->phead = (s->phead + 1) % TML_GPU_PENDING;
        s->plen--;
    }
}

void tml__gpu_wait(tml_slot *s, const tml_step_record *r, int64_t now)
{
    if (!s->pend) {
        s->pend = calloc(TML_GPU_PENDING, sizeof(*s->pend));
        if (!s->pend) {
            tml__ship_record(r);
            return;
        }
    }
    if (s->plen == TML_GPU_PENDING) {
        /* the GPU is far behind: the oldest step goes without GPU figures */
        tml_gpending *old = &s->pend[s->phead];
        gpu_resolve(atomic_load(&s->gpu), old, 1);
        tml__ship_record(&old->rec);
        s->phead = (s->phead + 1) % TML_GPU_PENDING;
        s->plen--;
    }
    tml_gpending *g = &s->pend[(s->phead + s->plen) % TML_GPU_PENDING];
    g->rec = *r;
    g->marks = s->as.gpu;
    g->since_ns = now;
    s->plen++;
}

size_t tml__gpu_waiting(void)
{
    size_t n = 0;
    for (int i = 0; tml__rings.slot && i < TML_MAX_RINGS; i++)
        n += tml__rings.slot[i].plen;
    return n;
}

