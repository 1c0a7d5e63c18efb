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
 *   step's start (its fetch, else its bracket) that nothing covers, and
 *   between that fetch's end and the bracket (work a rank does after
 *   fetching, before stepping): the "Untraced" time of SPEC 3.1. A step
 *   found automatically (zero-edit) has no bracket the user placed:
 *   detected_start() decides where it began.
 * - A loader that starts its workers anew (tml_mark_loader_start) marks
 *   the step its first fetch feeds as an epoch start, and that fetch is
 *   taken to run from the loader's start: its wait is the loader's own,
 *   and what the script did before (a validation pass, a checkpoint) stays
 *   in gap_ns (TML_STEP_LOADER_START). A validation loader's start is
 *   taken by its own first fetch, so the training step after it is none.
 * - A lost begin or end (ring full) discards that one step; step indices
 *   come from the producer, so ranks stay aligned on step ids.
 * - GPU clock: the boundaries' CUDA events travel as GPU_SPAN / GPU_STEP
 *   events and are collected per step (tml_gpu_marks); the shipper turns
 *   them into durations once the GPU got there. The fetch before the
 *   bracket carries its GPU pair along with its CPU span.
 * - CUDA memory: a step's peak is the largest "current" figure reported
 *   inside it, raised to the allocator's all-time peak when that peak grew
 *   during the step (then the step is where it was reached, and the figure
 *   is exact). The user's peak counters are only read, never reset.
 * - A copy to the GPU between brackets (a prepared DataLoader moving the
 *   batch before the step, Lightning's batch_to_device) is the next
 *   step's H2D: the step is taken to start that much earlier and the time
 *   leaves Untraced. A compute phase between brackets (a validation
 *   forward) keeps the copies before it: they were its own.
 * - Nested phases are counted once: a span around others (a closure
 *   optimizer's step around its forward and backward, a forward around a
 *   copy) is charged its own time only (tml__span_exclusive).
 * - RSS: read once a shipper pass, never on the hot path (rss.c).
 */
#include "core/assemble.h"

#include <string.h>

static void marks_reset(tml_gpu_marks *g)
{
    memset(g, 0, sizeof(*g));
    g->step_b = g->step_e = -1;
}

int tml__gpu_marks_any(const tml_gpu_marks *g)
{
    return g->step_b >= 0 || g->step_e >= 0 || g->nspans > 0 || g->overflow;
}

void tml__asm_init(tml_assembler *a)
{
    memset(a, 0, sizeof(*a));
    a->last_end_ns = -1;
    a->loader_t0 = -1;
    marks_reset(&a->gcur);
    marks_reset(&a->gpu);
    a->mem_seen_peak[0] = a->mem_seen_peak[1] = -1;
}

static void add_gpu_span(tml_gpu_marks *g, const tml_gpu_span *sp)
{
    if (g->nspans == TML_GPU_MAX_SPANS) {
        g->overflow = 1;
        return;
    }
    g->span[g->nspans++] = *sp;
}

static void drop_pending_h2d(tml_assembler *a)
{
    a->pending_h2d_ns = 0;
    a->pending_h2d_n = a->pending_h2d_ngpu = 0;
}

/* The copies made since the last bracket become this step's H2D; the step
 * starts that much earlier, and Untraced (which held them) shrinks. */
static void take_pending_h2d(tml_assembler *a, tml_step_record *r)
{
    int64_t h = a->pending_h2d_ns;
    if (a->pending_h2d_n == 0)
        return;
    r->phase_ns[TML_PHASE_H2D] += h;
    r->observed |= TML_PHASE_BIT(TML_PHASE_H2D);
    r->start_ns -= h;
    if (r->gap_ns != TML_MISSING)
        r->gap_ns = r->gap_ns > h ? r->gap_ns - h : 0;
    a->gcur.cpu_spans[TML_PHASE_H2D] += a->pending_h2d_n;
    for (uint32_t i = 0; i < a->pending_h2d_ngpu; i++)
        add_gpu_span(&a->gcur, &a->pending_h2d_gpu[i]);
    drop_pending_h2d(a);
}

static void start_step(tml_assembler *a, const tml_event *e)
{
    tml_step_record *r = &a->cur;
    int fetched = a->has_pending;
    memset(r, 0, sizeof(*r));
    r->step = (uint64_t)e->t1;
    r->start_ns = e->t0;
    r->gpu_traced_ns = TML_MISSING;
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        r->gpu_phase_ns[p] = TML_MISSING;
    r->rss_bytes = TML_MISSING;
    r->cuda_allocated_peak_bytes = TML_MISSING;
    r->cuda_reserved_peak_bytes = TML_MISSING;
    int64_t from = e->t0, after_fetch = 0;
    if (a->has_pending && a->pending_loader)
        r->flags |= TML_STEP_EPOCH_START | TML_STEP_LOADER_START;
    a->pending_loader = 0;
    if (a->has_pending) {
        r->phase_ns[TML_PHASE_INPUT] = a->pending_ns;
        r->observed |= TML_PHASE_BIT(TML_PHASE_INPUT);
        from = a->pending_t0;
        /* between the fetch and the bracket: also nobody's */
        after_fetch = e->t0 - (a->pending_t0 + a->pending_ns);
        if (after_fetch < 0)
            after_fetch = 0;
        a->has_pending = 0;
    }
    if (a->last_end_ns < 0)
        r->gap_ns = TML_MISSING;
    else
        r->gap_ns = (from > a->last_end_ns ? from - a->last_end_ns : 0) + after_fetch;
    a->inside_input_ns = 0;
    a->nnest = 0;
    a->ncomm = 0;
    a->ov_launch = a->ov_end = -1;
    a->in_step = 1;
    marks_reset(&a->gcur);
    if (r->observed & TML_PHASE_BIT(TML_PHASE_INPUT)) {
        a->gcur.cpu_spans[TML_PHASE_INPUT]++;
        if (a->has_pending_gpu)
            add_gpu_span(&a->gcur, &a->pending_gpu);
    }
    a->has_pending_gpu = 0;
    int64_t h = a->pending_h2d_ns;
    take_pending_h2d(a, r);
    tml__asm_take_counts(a, r);
    a->lead_unless_forward = !fetched;
    if (fetched) {
        a->lead_ns = after_fetch > h ? after_fetch - h : 0;
    } else {
        int64_t last = a->free_end_ns > a->last_end_ns ? a->free_end_ns : a->last_end_ns;
        a->lead_ns = r->gap_ns != TML_MISSING && r->start_ns > last ? r->start_ns - last : 0;
    }
    a->mem_step_peak[0] = a->mem_step_peak[1] = -1;
}

/* A step found automatically (zero-edit) opens at its first training call
 * that TraceML sees, which is not where the user's loop started it: it
 * starts where its fetch ended (what the loop did with the batch before
 * the first timed call is the step's), and a step whose forward was never
 * seen (it ran inside a torch.compile'd function) where the last thing
 * TraceML saw before it ended -- the step before, a validation forward, a
 * copy. What it takes in leaves Untraced. */
static void detected_start(tml_assembler *a)
{
    tml_step_record *r = &a->cur;
    int64_t lead = a->lead_ns;
    if (lead <= 0 || r->gap_ns == TML_MISSING ||
        (a->lead_unless_forward && (r->observed & TML_PHASE_BIT(TML_PHASE_FORWARD))))
        return;
    if (lead > r->gap_ns)
        lead = r->gap_ns;
    r->start_ns -= lead;
    r->gap_ns -= lead;
}

static void feed_mem(tml_assembler *a, const tml_event *e)
{
    int k = e->arg ? 1 : 0;
    int64_t cur = e->t0, peak = e->t1;
    if (a->in_step) {
        if (cur > a->mem_step_peak[k])
            a->mem_step_peak[k] = cur;
        if (peak >= 0 && a->mem_seen_peak[k] >= 0 && peak > a->mem_seen_peak[k] &&
            peak > a->mem_step_peak[k])
            a->mem_step_peak[k] = peak;
    }
    if (peak > a->mem_seen_peak[k])
        a->mem_seen_peak[k] = peak;
}

static void add_comm(tml_assembler *a, int64_t b, int64_t e)
{
    if (a->ncomm == TML_COMM_MAX) {      /* merge into the last one kept */
        uint32_t k = a->ncomm - 1;
        if (b < a->comm_b[k])
            a->comm_b[k] = b;
        if (e > a->comm_e[k])
            a->comm_e[k] = e;
        return;
    }
    a->comm_b[a->ncomm] = b;
    a->comm_e[a->ncomm++] = e;
    a->cur.observed |= TML_PHASE_BIT(TML_PHASE_COMM);
}

static int64_t overlap(int64_t b0, int64_t e0, int64_t b1, int64_t e1)
{
    int64_t b = b0 > b1 ? b0 : b1, e = e0 < e1 ? e0 : e1;
    return e > b ? e - b : 0;
}

/* The overlapped collectives' tail [L, E] (after the last launch) is
 * exposed: each span it falls in gives up its own part of it. */
static void expose_tail(tml_assembler *a, tml_step_record *r, int64_t step_end)
{
    int64_t L = a->ov_launch, E = a->ov_end < step_end ? a->ov_end : step_end;
    int64_t own[TML_NEST_MAX];
    if (L >= 0 && L < r->start_ns)
        L = r->start_ns;
    if (L < 0 || E <= L)
        return;
    for (uint32_t i = 0; i < a->nnest; i++) {
        int64_t ov = a->nest_p[i] == TML_PHASE_COMM ? 0
                     : overlap(L, E, a->nest_b[i], a->nest_e[i]);
        /* spans end inner first: an earlier span inside this one took its part */
        own[i] = tml__span_exclusive(a->nest_b, a->nest_e, own, i, a->nest_b[i], a->nest_e[i], ov);
        int64_t take = own[i] < a->nest_x[i] ? own[i] : a->nest_x[i];
        if (take > 0)
            r->phase_ns[a->nest_p[i]] -= take;
    }
    r->phase_ns[TML_PHASE_COMM] += E - L;
}

static void end_comm(tml_assembler *a, tml_step_record *r, int64_t step_end)
{
    if (!(r->observed & TML_PHASE_BIT(TML_PHASE_COMM)))
        return;
    expose_tail(a, r, step_end);
    r->comm_ns = tml__union_ns(a->comm_b, a->comm_e, a->ncomm);
}

/* A phase's span: the fetch or copies before a step, or a phase inside one. */
static void feed_span(tml_assembler *a, const tml_event *e)
{
    if (e->arg >= TML_PHASE_COUNT || e->t1 < e->t0)
        return;
    int64_t d = e->t1 - e->t0;
    if (!a->in_step) {
        a->free_end_ns = e->t1;
        if (e->arg == TML_PHASE_INPUT) {
            a->has_pending = 1;
            a->pending_t0 = e->t0;
            a->pending_ns = d;
            a->has_pending_gpu = 0;
            /* the epoch's first fetch: from the loader's start on */
            a->pending_loader = a->loader_t0 >= 0 && a->loader_t0 <= e->t0;
            if (a->pending_loader) {
                a->pending_t0 = a->loader_t0;
                a->pending_ns = e->t1 - a->loader_t0;
            }
            a->loader_t0 = -1;
            a->pending_samples = a->pending_tokens = 0;   /* a batch no step took */
        } else if (e->arg == TML_PHASE_H2D) {
            a->pending_h2d_ns += d;
            a->pending_h2d_n++;
        } else {
            drop_pending_h2d(a);
        }
        return;
    }
    a->gcur.cpu_spans[e->arg]++;
    if (e->arg == TML_PHASE_INPUT) {
        a->inside_input_ns += d;
        if (a->loader_t0 >= 0 && a->loader_t0 <= e->t0)   /* fetched inside the bracket */
            a->cur.flags |= TML_STEP_EPOCH_START;
        a->loader_t0 = -1;
    }
    int64_t x = tml__span_exclusive(a->nest_b, a->nest_e, a->nest_x, a->nnest, e->t0, e->t1, d);
    if (a->nnest < TML_NEST_MAX) {
        a->nest_b[a->nnest] = e->t0;
        a->nest_e[a->nnest] = e->t1;
        a->nest_p[a->nnest] = (uint8_t)e->arg;
        a->nest_x[a->nnest++] = x;
    }
    a->cur.phase_ns[e->arg] += x;
    a->cur.observed |= TML_PHASE_BIT(e->arg);
    if (e->arg == TML_PHASE_COMM)
        add_comm(a, e->t0, e->t1);
    a->events_in_steps++;
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
    case TML_EV_SPAN:
        feed_span(a, e);
        return 0;
    case TML_EV_COMM_BYTES:
        if (a->in_step) {
            a->cur.comm_bytes += e->t0 > 0 ? e->t0 : 0;
            a->cur.comm_count++;
        }
        return 0;
    case TML_EV_COMM_OVERLAPPED:
        if (!a->in_step || e->t1 < e->t0)
            return 0;
        add_comm(a, e->t0, e->t1);
        a->cur.comm_bytes += e->arg;
        a->cur.comm_count++;
        if (e->t0 > a->ov_launch)
            a->ov_launch = e->t0;
        if (e->t1 > a->ov_end)
            a->ov_end = e->t1;
        return 0;
    case TML_EV_GPU_SPAN: {
        if (e->arg >= TML_PHASE_COUNT)
            return 0;
        tml_gpu_span sp = { e->t0, e->t1, (uint8_t)e->arg, (uint8_t)a->in_step };
        if (a->in_step) {
            add_gpu_span(&a->gcur, &sp);
        } else if (e->arg == TML_PHASE_INPUT && a->has_pending) {
            a->pending_gpu = sp;
            a->has_pending_gpu = 1;
        } else if (e->arg == TML_PHASE_H2D && a->pending_h2d_n > a->pending_h2d_ngpu &&
                   a->pending_h2d_ngpu < TML_PENDING_H2D) {
            /* more copies than kept: the step's GPU figures are left out
             * (every CPU span needs its GPU pair, gpuclock.c) */
            a->pending_h2d_gpu[a->pending_h2d_ngpu++] = sp;
        }
        return 0;
    }
    case TML_EV_GPU_STEP:
        if (a->in_step) {
            a->gcur.step_b = e->t0;
            a->gcur.step_e = e->t1;
        }
        return 0;
    case TML_EV_MEM:
        feed_mem(a, e);
        return 0;
    case TML_EV_LOADER_START:
        a->loader_t0 = e->t0;
        return 0;
    case TML_EV_STEP_END:
        if (!a->in_step) {
            a->records_lost++;   /* its begin was dropped */
            a->last_end_ns = e->t0;
            return 0;
        }
        a->events_in_steps++;
        a->in_step = 0;
        a->last_end_ns = e->t0;
        if (e->arg & TML_STEP_DETECTED)
            detected_start(a);
        *out = a->cur;
        out->flags = e->arg | a->cur.flags;
        out->traced_ns = e->t0 - a->cur.start_ns - a->inside_input_ns;
        if (out->traced_ns < 0)
            out->traced_ns = 0;
        end_comm(a, out, e->t0);
        out->cuda_allocated_peak_bytes = a->mem_step_peak[0];
        out->cuda_reserved_peak_bytes = a->mem_step_peak[1];
        tml__asm_step_flops(a, out);
        a->gpu = a->gcur;
        marks_reset(&a->gcur);
        return 1;
    default:
        tml__asm_count(a, e);   /* TML_EV_SAMPLES, TML_EV_FLOPS; else nothing */
        return 0;
    }
}

static void sort_pairs(int64_t *b, int64_t *e, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {     /* insertion sort: n <= 64, nearly sorted */
        int64_t kb = b[i], ke = e[i];
        uint32_t j = i;
        for (; j > 0 && b[j - 1] > kb; j--) {
            b[j] = b[j - 1];
            e[j] = e[j - 1];
        }
        b[j] = kb;
        e[j] = ke;
    }
}

int64_t tml__union_ns(int64_t *b, int64_t *e, uint32_t n)
{
    int64_t total = 0, cb = 0, ce = 0;
    if (n == 0)
        return 0;
    sort_pairs(b, e, n);
    cb = b[0];
    ce = e[0];
    for (uint32_t i = 1; i < n; i++) {
        if (b[i] > ce) {
            total += ce - cb;
            cb = b[i];
            ce = e[i];
        } else if (e[i] > ce) {
            ce = e[i];
        }
    }
    return total + (ce - cb);
}

int64_t tml__span_exclusive(const int64_t *bs, const int64_t *es, const int64_t *xs, uint32_t n,
                            int64_t b, int64_t e, int64_t ns)
{
    for (uint32_t i = 0; i < n; i++)
        if (bs[i] >= b && es[i] <= e)
            ns -= xs[i];
    return ns > 0 ? ns : 0;
}
