/* Step assembly on hand-written event sequences, and the ring. */
#include "core/assemble.h"
#include "core/ring.h"
#include "harness.h"

static tml_event ev(uint32_t kind, uint32_t arg, int64_t t0, int64_t t1)
{
    tml_event e = {t0, t1, kind, arg};
    return e;
}

static int feed(tml_assembler *a, tml_event e, tml_step_record *out)
{
    return tml__asm_feed(a, &e, out);
}

static void test_basic_step(void)
{
    tml_assembler a;
    tml_step_record r;
    tml__asm_init(&a);
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 100, 150), &r));
    CHECK(!feed(&a, ev(TML_EV_STEP_BEGIN, 0, 160, 0), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 170, 200), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_BACKWARD, 200, 260), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_OPTIMIZER, 260, 270), &r));
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 280, 0), &r));
    CHECK_EQ_INT(r.step, 0);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_INPUT], 50);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_FORWARD], 30);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_BACKWARD], 60);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_OPTIMIZER], 10);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_H2D], 0);
    CHECK_EQ_INT(r.traced_ns, 120);
    CHECK_EQ_INT(r.gap_ns, TML_MISSING);
    CHECK_EQ_INT(r.gpu_traced_ns, TML_MISSING);
    CHECK_EQ_INT(r.observed, TML_PHASE_BIT(TML_PHASE_INPUT) | TML_PHASE_BIT(TML_PHASE_FORWARD) |
                 TML_PHASE_BIT(TML_PHASE_BACKWARD) | TML_PHASE_BIT(TML_PHASE_OPTIMIZER));
    /* second step: 30 ns of untraced work before its fetch */
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 310, 320), &r));
    CHECK(!feed(&a, ev(TML_EV_STEP_BEGIN, 0, 320, 1), &r));
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 400, 0), &r));
    CHECK_EQ_INT(r.step, 1);
    CHECK_EQ_INT(r.gap_ns, 30);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_INPUT], 10);
    /* third: 20 ns after the fetch before the bracket (work between them,
     * as a rank-0-only evaluation after fetching) is untraced too */
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 410, 420), &r));
    CHECK(!feed(&a, ev(TML_EV_STEP_BEGIN, 0, 440, 2), &r));
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 500, 0), &r));
    CHECK_EQ_INT(r.gap_ns, 10 + 20);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_INPUT], 10);
}

static void test_only_last_fetch_counts(void)
{
    /* A validation loop's fetches between steps are not Input Wait. */
    tml_assembler a;
    tml_step_record r;
    tml__asm_init(&a);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 0, 100), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 100, 200), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 300, 310), &r);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 310, 0), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 400, 0), &r));
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_INPUT], 10);
}

static void test_fetch_inside_bracket(void)
{
    tml_assembler a;
    tml_step_record r;
    tml__asm_init(&a);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 0, 0), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 10, 40), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 40, 60), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 100, 0), &r));
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_INPUT], 30);
    CHECK_EQ_INT(r.traced_ns, 70);   /* the fetch is not counted twice */
}

static void test_spans_outside_steps_ignored(void)
{
    tml_assembler a;
    tml_step_record r;
    tml__asm_init(&a);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 0, 50), &r);   /* e.g. validation */
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 60, 0), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 70, 0), &r));
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_FORWARD], 0);
    CHECK_EQ_INT(r.observed, 0);
}

static void test_lost_events(void)
{
    tml_assembler a;
    tml_step_record r;
    tml__asm_init(&a);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 0, 0), &r);
    /* end of step 0 dropped */
    CHECK(!feed(&a, ev(TML_EV_STEP_BEGIN, 0, 100, 1), &r));
    CHECK(feed(&a, ev(TML_EV_STEP_END, TML_STEP_ABORTED, 150, 0), &r));
    CHECK_EQ_INT(r.step, 1);
    CHECK_EQ_INT(r.flags, TML_STEP_ABORTED);
    CHECK_EQ_INT(a.records_lost, 1);
    /* begin of step 2 dropped */
    CHECK(!feed(&a, ev(TML_EV_STEP_END, 0, 300, 0), &r));
    CHECK_EQ_INT(a.records_lost, 2);
    /* bad phase and reversed span are ignored */
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 400, 3), &r);
    feed(&a, ev(TML_EV_SPAN, 99, 400, 410), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 420, 410), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 500, 0), &r));
    CHECK_EQ_INT(r.observed, 0);
    CHECK_EQ_INT(r.gap_ns, 100);
}

static void test_ring_full_drops(void)
{
    static tml_ring ring;
    tml_event out[16];
    for (uint32_t i = 0; i < TML_RING_CAP; i++)
        CHECK(tml__ring_push(&ring, TML_EV_SPAN, 0, i, i) == 0);
    CHECK(tml__ring_push(&ring, TML_EV_SPAN, 0, 0, 0) < 0);
    CHECK_EQ_INT(atomic_load(&ring.dropped), 1);
    CHECK_EQ_INT(tml__ring_pop(&ring, out, 16), 16);
    CHECK_EQ_INT(out[0].t0, 0);
    CHECK_EQ_INT(out[15].t0, 15);
    CHECK(tml__ring_push(&ring, TML_EV_SPAN, 0, 7, 7) == 0);
    size_t total = 16;
    uint32_t n;
    while ((n = tml__ring_pop(&ring, out, 16)) > 0)
        total += n;
    CHECK_EQ_INT(total, TML_RING_CAP + 1);
}

/* RSS per step: the growth between two readings spread over the steps'
 * time [from, to]; none before, all of it at the last; drops not dated
 * back; no earlier reading: this one. */
static void test_rss_at(void)
{
    CHECK_EQ_INT(tml__rss_at(150, 100, 200, 100, 200, 0), 150);
    CHECK_EQ_INT(tml__rss_at(100, 100, 200, 100, 200, 0), 100);
    CHECK_EQ_INT(tml__rss_at(50, 100, 200, 100, 200, 0), 100);    /* ended before from */
    CHECK_EQ_INT(tml__rss_at(200, 100, 200, 100, 200, 0), 200);
    CHECK_EQ_INT(tml__rss_at(900, 100, 200, 100, 200, 0), 200);   /* after the last end */
    CHECK_EQ_INT(tml__rss_at(150, 300, 200, 100, 200, 0), 300);   /* a drop */
    CHECK_EQ_INT(tml__rss_at(150, -1, 200, 100, 200, 0), 200);    /* no anchor */
    CHECK_EQ_INT(tml__rss_at(150, 100, -1, 100, 200, 0), -1);     /* unreadable */
    CHECK_EQ_INT(tml__rss_at(160, 100, 200, 150, 150, 0), 200);   /* one instant */
    /* a late reading (the loop had stopped, shipper.c): a drop is
     * the loop's end or an evaluation, so the steps since the last reading
     * are unknown (memory_creep.py's last 40 steps were flat at the reading
     * before main() returned: 3.4 MiB/step measured of 4) */
    CHECK_EQ_INT(tml__rss_at(150, 300, 200, 100, 200, 1), TML_MISSING);
    CHECK_EQ_INT(tml__rss_at(50, 300, 200, 100, 200, 1), 300);     /* before that reading */
    CHECK_EQ_INT(tml__rss_at(150, 100, 200, 100, 200, 1), 150);    /* no drop: as before */
    tml_event ev[4] = {{.t0 = 3, .kind = TML_EV_STEP_END}, {.t0 = 5, .kind = TML_EV_STEP_END},
                       {.t0 = 7, .kind = TML_EV_STEP_BEGIN}, {.t0 = 1 << 20, .kind = TML_EV_MEM}};
    int64_t longest = -1;
    CHECK_EQ_INT(tml__asm_last_end(ev + 1, 3, -1, &longest), 5);
    CHECK_EQ_INT(longest, 0);                                       /* one end, none before */
    CHECK_EQ_INT(tml__asm_last_end(ev + 1, 3, 1, &longest), 5);
    CHECK_EQ_INT(longest, 4);                                       /* from the pass before */
    CHECK_EQ_INT(tml__asm_last_end(ev, 4, 2, &longest), 5);
    CHECK_EQ_INT(longest, 2);
    CHECK_EQ_INT(tml__asm_last_end(ev, 0, 2, &longest), 0);
    CHECK_EQ_INT(longest, 0);
}

/* Nested phases count once: a closure optimizer's step around its forward
 * and backward keeps only its own time; three levels (a recomputed
 * forward inside backward, a copy inside that forward) too. */
static void test_nested_phases_once(void)
{
    tml_assembler a;
    tml_step_record r;
    tml__asm_init(&a);
    CHECK(!feed(&a, ev(TML_EV_STEP_BEGIN, 0, 0, 0), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 10, 30), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_BACKWARD, 40, 80), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_OPTIMIZER, 5, 100), &r));
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 110, 0), &r));
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_FORWARD], 20);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_BACKWARD], 40);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_OPTIMIZER], 35);
    CHECK(!feed(&a, ev(TML_EV_STEP_BEGIN, 0, 200, 1), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_H2D, 212, 214), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 210, 230), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_BACKWARD, 200, 300), &r));
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 300, 0), &r));
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_H2D], 2);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_FORWARD], 18);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_BACKWARD], 80);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_OPTIMIZER], 0);   /* the previous step's is gone */
}

/* A copy to the GPU between brackets (Accelerate's prepared DataLoader
 * moves the batch, then fetches the next, then the step opens; Lightning
 * fetches, then transfers, then opens) is the next step's H2D, out of
 * Untraced; a validation forward between brackets keeps its own copies. */
static void test_copies_before_bracket(void)
{
    tml_assembler a;
    tml_step_record r;
    tml__asm_init(&a);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 0, 0), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 100, 0), &r));
    /* Accelerate: copy 110-130, fetch 130-170, bracket 175-275 */
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_H2D, 110, 130), &r);
    feed(&a, ev(TML_EV_GPU_SPAN, TML_PHASE_H2D, 1, 2), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 130, 170), &r);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 175, 1), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 180, 200), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 275, 0), &r));
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_H2D], 20);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_INPUT], 40);
    CHECK_EQ_INT(r.traced_ns, 100 + 20);
    CHECK_EQ_INT(r.gap_ns, 10 + 5 + 20 - 20);       /* before the copy, after the fetch */
    CHECK(r.observed & TML_PHASE_BIT(TML_PHASE_H2D));
    CHECK_EQ_INT(a.gpu.cpu_spans[TML_PHASE_H2D], 1);
    CHECK_EQ_INT(a.gpu.nspans, 1);
    CHECK_EQ_INT(a.gpu.span[0].inside, 0);
    /* a copy, a validation forward, then the next step: not its H2D */
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_H2D, 300, 310), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 310, 330), &r);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 340, 2), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 400, 0), &r));
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_H2D], 0);
    CHECK_EQ_INT(r.traced_ns, 60);
    CHECK_EQ_INT(r.gap_ns, 65);
}

/* DDP's buckets overlap backward: only their tail after the last launch
 * is exposed, and leaves Backward; a blocking collective is exposed whole;
 * in flight is the union of the intervals. */
static void test_communication(void)
{
    tml_assembler a;
    tml_step_record r;
    tml__asm_init(&a);
    CHECK(!feed(&a, ev(TML_EV_STEP_BEGIN, 0, 100, 0), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 100, 200), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_BACKWARD, 200, 500), &r));
    /* a blocking all_reduce of the loss, 1000 bytes */
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_COMM, 520, 540), &r));
    CHECK(!feed(&a, ev(TML_EV_COMM_BYTES, 0, 1000, 0), &r));
    /* the buckets, completed off-thread, arrive at the step's end */
    CHECK(!feed(&a, ev(TML_EV_COMM_OVERLAPPED, 4000, 250, 320), &r));
    CHECK(!feed(&a, ev(TML_EV_COMM_OVERLAPPED, 6000, 380, 480), &r));
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 600, 0), &r));
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_COMM], 100 + 20);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_BACKWARD], 300 - 100);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_FORWARD], 100);
    CHECK_EQ_INT(r.comm_ns, 70 + 100 + 20);
    CHECK_EQ_INT(r.comm_bytes, 11000);
    CHECK_EQ_INT(r.comm_count, 3);
    CHECK(r.observed & TML_PHASE_BIT(TML_PHASE_COMM));
    /* the next step has none: nothing carried over */
    CHECK(!feed(&a, ev(TML_EV_STEP_BEGIN, 0, 700, 1), &r));
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 800, 0), &r));
    CHECK_EQ_INT(r.comm_ns, 0);
    CHECK_EQ_INT(r.comm_count, 0);
    CHECK(!(r.observed & TML_PHASE_BIT(TML_PHASE_COMM)));
    /* a tail outside every phase (after backward) is exposed all the same:
     * it was Residual */
    CHECK(!feed(&a, ev(TML_EV_STEP_BEGIN, 0, 1000, 2), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_BACKWARD, 1000, 1100), &r));
    CHECK(!feed(&a, ev(TML_EV_COMM_OVERLAPPED, 10, 1050, 1150), &r));
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 1200, 0), &r));
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_COMM], 100);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_BACKWARD], 50);
    int64_t b[3] = {5, 1, 20}, e[3] = {9, 3, 30};
    CHECK_EQ_INT(tml__union_ns(b, e, 3), 4 + 2 + 10);
}

static void test_detected_step_start(void)
{
    /* A step found automatically (TML_STEP_DETECTED) starts where its
     * fetch ended; without a fetch and with no forward seen (a forward
     * inside a compiled function), where the last thing seen ended. */
    const uint32_t D = TML_STEP_DETECTED;
    tml_assembler a;
    tml_step_record r;
    tml__asm_init(&a);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 0, 0), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, D, 100, 0), &r));
    /* fetch 120-150, then 30 ns with the batch, then the first timed call */
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 120, 150), &r);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 180, 1), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 180, 200), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, D, 300, 0), &r));
    CHECK_EQ_INT(r.gap_ns, 20);             /* only before the fetch */
    CHECK_EQ_INT(r.start_ns, 150);           /* the fetch's end */
    CHECK_EQ_INT(r.traced_ns, 150);         /* 150-300 */
    /* no fetch, no forward seen (compiled): from the last step's end */
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 400, 2), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_BACKWARD, 400, 450), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, D, 500, 0), &r));
    CHECK_EQ_INT(r.gap_ns, 0);
    CHECK_EQ_INT(r.traced_ns, 200);
    /* ... or from a validation forward between the steps */
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 520, 560), &r);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 600, 3), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, D, 650, 0), &r));
    CHECK_EQ_INT(r.gap_ns, 60);
    CHECK_EQ_INT(r.traced_ns, 90);
    /* no fetch, forward seen: the step opened where the loop's step did
     * (a batch made without a DataLoader stays Untraced) */
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 700, 4), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 700, 720), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, D, 800, 0), &r));
    CHECK_EQ_INT(r.gap_ns, 50);
    /* a marked step keeps its bracket */
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 810, 820), &r);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 850, 5), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 900, 0), &r));
    CHECK_EQ_INT(r.gap_ns, 10 + 30);
}

static void test_loader_start(void)
{
    /* An epoch's loader starts at 1000 after 400 ns of validation: the
     * step its first fetch feeds is an epoch start whose Input Wait runs
     * from the loader's start, the validation stays in the gap. */
    tml_assembler a;
    tml_step_record r;
    tml__asm_init(&a);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 500, 0), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 600, 0), &r));
    CHECK_EQ_INT(r.flags, 0);
    /* validation on a loader of its own: its start is taken by its own
     * first fetch, so it marks no training step */
    feed(&a, ev(TML_EV_LOADER_START, 0, 610, 0), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 620, 640), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 640, 700), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 700, 720), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 720, 1000), &r);
    feed(&a, ev(TML_EV_LOADER_START, 0, 1000, 0), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 1250, 1300), &r);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 1300, 1), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 1400, 0), &r));
    CHECK_EQ_INT(r.flags, TML_STEP_EPOCH_START | TML_STEP_LOADER_START);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_INPUT], 300);
    CHECK_EQ_INT(r.gap_ns, 400);
    /* the next step is an ordinary one */
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 1400, 1410), &r);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 1410, 2), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 1500, 0), &r));
    CHECK_EQ_INT(r.flags, 0);
    CHECK_EQ_INT(r.phase_ns[TML_PHASE_INPUT], 10);
    /* a mid-epoch validation loader: the training step after it is none */
    feed(&a, ev(TML_EV_LOADER_START, 0, 1500, 0), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 1550, 1560), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_FORWARD, 1560, 1600), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 1600, 1610), &r);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 1610, 3), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 1700, 0), &r));
    CHECK_EQ_INT(r.flags, 0);
    CHECK_EQ_INT(r.gap_ns, 100);
    /* a loop that fetches inside its bracket: an epoch start (its wait
     * measured the old way, the gap with it) */
    feed(&a, ev(TML_EV_LOADER_START, 0, 1750, 0), &r);
    feed(&a, ev(TML_EV_STEP_BEGIN, 0, 1800, 4), &r);
    feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 1800, 1900), &r);
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 2000, 0), &r));
    CHECK_EQ_INT(r.flags, TML_STEP_EPOCH_START);
}

/* A step's samples: the batch fetched before it and those inside it
 * (gradient accumulation); a batch no step took (validation) is forgotten
 * at the next fetch; FLOPs are samples times a sample's. */
static void test_samples_and_flops(void)
{
    tml_assembler a;
    tml_step_record r;
    tml__asm_init(&a);
    CHECK(!feed(&a, ev(TML_EV_FLOPS, TML_FLOPS_COUNTED, 1000, 0), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 100, 150), &r));
    CHECK(!feed(&a, ev(TML_EV_SAMPLES, 0, 8, 8 * 128), &r));
    CHECK(!feed(&a, ev(TML_EV_STEP_BEGIN, 0, 160, 0), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 170, 180), &r));
    CHECK(!feed(&a, ev(TML_EV_SAMPLES, 0, 8, 8 * 128), &r));
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 280, 0), &r));
    CHECK_EQ_INT(r.samples, 16);
    CHECK_EQ_INT(r.tokens, 16 * 128);
    CHECK_EQ_INT(r.flops, 16000);
    CHECK_EQ_INT(r.flops_how, TML_FLOPS_COUNTED);
    /* two validation batches, then the next training batch (no tokens) */
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 300, 310), &r));
    CHECK(!feed(&a, ev(TML_EV_SAMPLES, 0, 100, -1), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 320, 330), &r));
    CHECK(!feed(&a, ev(TML_EV_SAMPLES, 0, 100, -1), &r));
    CHECK(!feed(&a, ev(TML_EV_SPAN, TML_PHASE_INPUT, 340, 350), &r));
    CHECK(!feed(&a, ev(TML_EV_SAMPLES, 0, 7, -1), &r));
    CHECK(!feed(&a, ev(TML_EV_STEP_BEGIN, 0, 360, 1), &r));
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 400, 0), &r));
    CHECK_EQ_INT(r.samples, 7);
    CHECK_EQ_INT(r.tokens, 0);
    CHECK_EQ_INT(r.flops, 7000);
    /* a step without samples has no FLOPs; forgetting the figure */
    CHECK(!feed(&a, ev(TML_EV_STEP_BEGIN, 0, 500, 2), &r));
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 600, 0), &r));
    CHECK_EQ_INT(r.samples, 0);
    CHECK_EQ_INT(r.flops, 0);
    CHECK(!feed(&a, ev(TML_EV_FLOPS, 0, 0, 0), &r));
    CHECK(!feed(&a, ev(TML_EV_STEP_BEGIN, 0, 700, 3), &r));
    CHECK(!feed(&a, ev(TML_EV_SAMPLES, 0, 4, -1), &r));
    CHECK(feed(&a, ev(TML_EV_STEP_END, 0, 800, 0), &r));
    CHECK_EQ_INT(r.samples, 4);
    CHECK_EQ_INT(r.flops, 0);
}

#define TESTS X(test_samples_and_flops) X(test_communication) X(test_copies_before_bracket) X(test_nested_phases_once) X(test_rss_at) X(test_basic_step) X(test_only_last_fetch_counts) X(test_fetch_inside_bracket) \
    X(test_spans_outside_steps_ignored) X(test_lost_events) X(test_ring_full_drops) \
    X(test_detected_step_start) X(test_loader_start)
#include "harness.h"
