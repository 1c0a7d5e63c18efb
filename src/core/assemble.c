/*
 * assemble.c - step assembly.
 *
 * The hot path only writes spans ("phase p ran from t0 to t1", already
 * reduced to the outermost call) and step begin/end events. Everything that
 * needs state across events lives here, off the hot path:
 *
 * - Input Wait is the fetch that ended just before the bracket (the last
 *   one, so a validation loop's fetches between steps are not billed to the
 *   next step) plus any fetch inside the bracket.
 * - traced_ns is the bracket minus fetches inside it, so Step Time =
 *   Input Wait + traced_ns counts nothing twice.
 * - gap_ns is what happened between the previous bracket's end and this
 *   step's start (its fetch, else its bracket) that nothing covers: the
 *   "Untraced" time of SPEC 3.1.
 * - A lost begin or end (ring full) discards that one step; step indices
 *   come from the producer, so ranks stay aligned on step ids.
 */
#include "core/assemble.h"

#include <string.h>

void tml__asm_init(tml_assembler *a)
{
    memset(a, 0, sizeof(*a));
    a->last_end_ns = -1;
}

static void start_step(tml_assembler *a, const tml_event *e)
{
    tml_step_record *r = &a->cur;
    memset(r, 0, sizeof(*r));
    r->step = (uint64_t)e->t1;
    r->start_ns = e->t0;
    r->gpu_traced_ns = TML_MISSING;
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        r->gpu_phase_ns[p] = TML_MISSING;
    r->rss_bytes = TML_MISSING;
    r->cuda_allocated_peak_bytes = TML_MISSING;
    r->cuda_reserved_peak_bytes = TML_MISSING;
    int64_t from = e->t0;
    if (a->has_pending) {
        r->phase_ns[TML_PHASE_INPUT] = a->pending_ns;
        r->observed |= TML_PHASE_BIT(TML_PHASE_INPUT);
        from = a->pending_t0;
        a->has_pending = 0;
    }
    if (a->last_end_ns < 0)
        r->gap_ns = TML_MISSING;
    else
        r->gap_ns = from > a->last_end_ns ? from - a->last_end_ns : 0;
    a->inside_input_ns = 0;
    a->in_step = 1;
}

int tml__asm_feed(tml_assembler *a, const tml_event *e, tml_step_record *out)
{
    switch (e->kind) {
    case TML_EV_STEP_BEGIN:
        if (a->in_step)
            a->records_lost++;   /* the previous step's end was dropped */
        start_step(a, e);
        a->events_in_steps++;
        return 0;
    case TML_EV_SPAN: {
        if (e->arg >= TML_PHASE_COUNT || e->t1 < e->t0)
            return 0;
        int64_t d = e->t1 - e->t0;
        if (!a->in_step) {
            if (e->arg == TML_PHASE_INPUT) {
                a->has_pending = 1;
                a->pending_t0 = e->t0;
                a->pending_ns = d;
            }
            return 0;
        }
        if (e->arg == TML_PHASE_INPUT)
            a->inside_input_ns += d;
        a->cur.phase_ns[e->arg] += d;
        a->cur.observed |= TML_PHASE_BIT(e->arg);
        a->events_in_steps++;
        return 0;
    }
    case TML_EV_STEP_END:
        if (!a->in_step) {
            a->records_lost++;   /* its begin was dropped */
            a->last_end_ns = e->t0;
            return 0;
        }
        a->events_in_steps++;
        a->in_step = 0;
        a->last_end_ns = e->t0;
        *out = a->cur;
        out->flags = e->arg;
        out->traced_ns = e->t0 - a->cur.start_ns - a->inside_input_ns;
        if (out->traced_ns < 0)
            out->traced_ns = 0;
        return 1;
    default:
        return 0;
    }
}
