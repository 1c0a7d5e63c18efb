/*
 * test_window.c - the analysed window: common steps across ranks, warm-up,
 * aborted steps, missing versus measured zero, the residual floor, the
 * untraced gap, clock selection, median/worst rank and skew.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/run.h"
#include "diag/window.h"
#include "harness.h"

#define MS 1000000LL

/* A step with every phase observed: input 10, fwd 20, bwd 30, opt 5,
 * traced 60 (so residual 5), no GPU figures, no gap. */
static tml_step_record rec(uint64_t step)
{
    tml_step_record r;
    memset(&r, 0, sizeof(r));
    r.step = step;
    r.phase_ns[TML_PHASE_INPUT] = 10 * MS;
    r.phase_ns[TML_PHASE_FORWARD] = 20 * MS;
    r.phase_ns[TML_PHASE_BACKWARD] = 30 * MS;
    r.phase_ns[TML_PHASE_OPTIMIZER] = 5 * MS;
    r.traced_ns = 60 * MS;
    r.gpu_traced_ns = -1;
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        r.gpu_phase_ns[p] = -1;
    r.gap_ns = -1;
    r.rss_bytes = r.cuda_allocated_peak_bytes = r.cuda_reserved_peak_bytes = -1;
    r.observed = TML_PHASES_ALL & ~TML_PHASE_BIT(TML_PHASE_H2D);
    return r;
}

static tml_rank *add_rank(tml_run *run, int32_t rank, int32_t node, uint32_t instrumented)
{
    tml_rank_info info;
    memset(&info, 0, sizeof(info));
    info.rank = rank;
    info.node_rank = node;
    info.instrumented = instrumented;
    return tml__run_rank(run, &info);
}

static void add(tml_rank *r, tml_step_record s)
{
    CHECK(tml__run_add_steps(r, &s, 1) == 0);
}

static void test_empty_run(void)
{
    tml_run run;
    tml_window w;
    tml__run_init(&run, "x", "id");
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK_EQ_INT(w.nranks, 0);
    CHECK_EQ_INT(w.common_steps, 0);
    CHECK_EQ_INT(w.window_steps, 0);
    CHECK_EQ_INT(w.max_steps, TML_WINDOW_DEFAULT_STEPS);
    CHECK(w.median_rank == -1 && w.worst_rank == -1);
    CHECK(isnan(w.skew));
    tml__window_release(&w);
    tml__run_release(&run);
}

static void test_single_rank_averages(void)
{
    tml_run run;
    tml_window w;
    tml__run_init(&run, "x", "id");
    tml_rank *r = add_rank(&run, 0, 0, TML_PHASES_ALL);
    for (uint64_t i = 0; i < 10; i++)
        add(r, rec(i));
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK_EQ_INT(w.common_steps, 10);
    CHECK_EQ_INT(w.window_steps, 10);
    CHECK_EQ_INT(w.warmup_steps, 0);
    CHECK_EQ_INT(w.first_step, 0);
    CHECK_EQ_INT(w.last_step, 9);
    CHECK(w.clock == TML_CLOCK_CPU);
    const tml_rank_window *rw = &w.ranks[0];
    CHECK_NEAR(rw->avg_ns[TML_M_STEP], 70.0 * MS, 1);
    CHECK_NEAR(rw->avg_ns[TML_M_INPUT], 10.0 * MS, 1);
    CHECK_NEAR(rw->avg_ns[TML_M_COMPUTE], 55.0 * MS, 1);
    CHECK_NEAR(rw->avg_ns[TML_M_RESIDUAL], 5.0 * MS, 1);
    CHECK_NEAR(rw->avg_ns[TML_M_FETCH_CPU], 10.0 * MS, 1);
    CHECK_NEAR(rw->step_median_ns, 70.0 * MS, 1);
    CHECK_NEAR(rw->step_p90_ns, 70.0 * MS, 1);
    CHECK_EQ_INT(w.median_rank, 0);
    CHECK_EQ_INT(w.worst_rank, 0);
    CHECK_NEAR(w.skew, 0.0, 1e-12);
    tml__window_release(&w);
    tml__run_release(&run);
}

/* Rank 0 has steps 0..9, rank 1 has 3..12: common 3..9. */
static void test_common_steps_across_ranks(void)
{
    tml_run run;
    tml_window w;
    tml__run_init(&run, "x", "id");
    tml_rank *a = add_rank(&run, 0, 0, TML_PHASES_ALL);
    tml_rank *b = add_rank(&run, 1, 0, TML_PHASES_ALL);
    a = tml__run_find(&run, 0);   /* adding rank 1 may move rank 0 */
    for (uint64_t i = 0; i < 10; i++)
        add(a, rec(i));
    b = tml__run_find(&run, 1);
    for (uint64_t i = 3; i < 13; i++) {
        tml_step_record s = rec(i);
        s.phase_ns[TML_PHASE_BACKWARD] = 40 * MS;   /* slower rank */
        s.traced_ns = 70 * MS;
        add(b, s);
    }
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK_EQ_INT(w.common_steps, 7);
    CHECK_EQ_INT(w.window_steps, 7);
    CHECK_EQ_INT(w.first_step, 3);
    CHECK_EQ_INT(w.last_step, 9);
    CHECK_EQ_INT(w.ranks[0].nsteps, 7);
    CHECK_EQ_INT(w.ranks[1].nsteps, 7);
    /* Worst is rank 1 (80 ms vs 70 ms); with two ranks the median is 75 and
     * the tie goes to the upper one. */
    CHECK_EQ_INT(w.worst_rank, 1);
    CHECK_EQ_INT(w.median_rank, 1);
    CHECK_NEAR(w.skew, 0.0, 1e-12);
    /* Rank 0 has the smaller Backward every step: it is the culprit. */
    CHECK_EQ_INT(w.ranks[0].culprit_steps, 7);
    CHECK_EQ_INT(w.ranks[1].culprit_steps, 0);
    tml__window_release(&w);
    tml__run_release(&run);
}

static void test_three_ranks_median_and_skew(void)
{
    tml_run run;
    tml_window w;
    tml__run_init(&run, "x", "id");
    int64_t extra[3] = { 0, 10, 40 };   /* step 70, 80, 110 ms */
    for (int k = 0; k < 3; k++)
        add_rank(&run, k, k / 2, TML_PHASES_ALL);
    for (int k = 0; k < 3; k++) {
        tml_rank *r = tml__run_find(&run, k);
        for (uint64_t i = 0; i < 5; i++) {
            tml_step_record s = rec(i);
            s.traced_ns += extra[k] * MS;
            add(r, s);
        }
    }
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK_EQ_INT(w.median_rank, 1);
    CHECK_EQ_INT(w.worst_rank, 2);
    CHECK_NEAR(w.skew, (110.0 - 80.0) / 80.0, 1e-9);
    CHECK_EQ_INT(w.ranks[2].node, 1);
    tml__window_release(&w);
    tml__run_release(&run);
}

static void test_window_cap_takes_last_steps(void)
{
    tml_run run;
    tml_window w;
    tml__run_init(&run, "x", "id");
    tml_rank *r = add_rank(&run, 0, 0, TML_PHASES_ALL);
    for (uint64_t i = 0; i < 50; i++) {
        tml_step_record s = rec(i);
        if (i >= 40)
            s.phase_ns[TML_PHASE_INPUT] = 30 * MS;   /* only the last 10 are slow */
        add(r, s);
    }
    CHECK(tml__window_compute(&run, 10, &w) == 0);
    CHECK_EQ_INT(w.window_steps, 10);
    CHECK_EQ_INT(w.first_step, 40);
    CHECK_EQ_INT(w.last_step, 49);
    CHECK_NEAR(w.ranks[0].avg_ns[TML_M_INPUT], 30.0 * MS, 1);
    tml__window_release(&w);
    tml__run_release(&run);
}

static void test_warmup_rule(void)
{
    double v[100];
    for (int i = 0; i < 100; i++)
        v[i] = 100;
    CHECK_EQ_INT(tml__warmup_count(v, 100), 0);
    v[0] = 5000;
    v[1] = 900;
    v[2] = 160;            /* 100 + max(50, 0) = 150: still warm-up */
    v[3] = 149;            /* below: the prefix stops here */
    v[4] = 5000;           /* a later outlier is not warm-up */
    CHECK_EQ_INT(tml__warmup_count(v, 100), 3);
    v[2] = 150;            /* exactly the limit is not warm-up */
    CHECK_EQ_INT(tml__warmup_count(v, 100), 2);
    /* capped at ceil(10%) of the steps */
    double s[20];
    for (int i = 0; i < 20; i++)
        s[i] = i < 5 ? 1000 : 100;
    CHECK_EQ_INT(tml__warmup_count(s, 20), 2);
    /* capped at 50 */
    static double big[1000];
    for (int i = 0; i < 1000; i++)
        big[i] = i < 80 ? 1000 : 100;
    CHECK_EQ_INT(tml__warmup_count(big, 1000), 50);
    /* fewer than 3 steps: nothing left out */
    double two[2] = { 1000, 100 };
    CHECK_EQ_INT(tml__warmup_count(two, 2), 0);
    /* noisy run: MAD widens the margin */
    double noisy[10] = { 400, 100, 300, 100, 300, 100, 300, 100, 300, 100 };
    CHECK_EQ_INT(tml__warmup_count(noisy, 10), 0);
}

static void test_warmup_excluded_from_window(void)
{
    tml_run run;
    tml_window w;
    tml__run_init(&run, "x", "id");
    tml_rank *r = add_rank(&run, 0, 0, TML_PHASES_ALL);
    for (uint64_t i = 0; i < 40; i++) {
        tml_step_record s = rec(i);
        if (i < 2)
            s.traced_ns = 2000 * MS;
        add(r, s);
    }
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK_EQ_INT(w.common_steps, 40);
    CHECK_EQ_INT(w.warmup_steps, 2);
    CHECK_EQ_INT(w.window_steps, 38);
    CHECK_EQ_INT(w.first_step, 2);
    CHECK_NEAR(w.ranks[0].avg_ns[TML_M_STEP], 70.0 * MS, 1);
    tml__window_release(&w);
    tml__run_release(&run);
}

static void test_aborted_steps_excluded(void)
{
    tml_run run;
    tml_window w;
    tml__run_init(&run, "x", "id");
    add_rank(&run, 0, 0, TML_PHASES_ALL);
    add_rank(&run, 1, 0, TML_PHASES_ALL);
    for (int k = 0; k < 2; k++) {
        tml_rank *r = tml__run_find(&run, k);
        for (uint64_t i = 0; i < 6; i++) {
            tml_step_record s = rec(i);
            if (k == 1 && i == 5) {
                s.flags = TML_STEP_ABORTED;   /* aborted on one rank only */
                s.traced_ns = 5000 * MS;
            }
            add(r, s);
        }
    }
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK_EQ_INT(w.aborted_steps, 1);
    CHECK_EQ_INT(w.common_steps, 5);
    CHECK_EQ_INT(w.last_step, 4);
    CHECK_NEAR(w.ranks[1].avg_ns[TML_M_STEP], 70.0 * MS, 1);
    tml__window_release(&w);
    tml__run_release(&run);
}

/* Epoch starts (flagged on either rank) leave the window like warm-up,
 * stay common steps, and their wait (gap before + Input Wait, the larger
 * rank's) is averaged apart. */
static void test_epoch_starts_excluded(void)
{
    tml_run run;
    tml_window w;
    tml__run_init(&run, "x", "id");
    add_rank(&run, 0, 0, TML_PHASES_ALL);
    add_rank(&run, 1, 0, TML_PHASES_ALL);
    for (int k = 0; k < 2; k++) {
        tml_rank *r = tml__run_find(&run, k);
        for (uint64_t i = 0; i < 12; i++) {
            tml_step_record s = rec(i);
            if (i == 4 || i == 8) {
                s.flags = k == (int)(i / 8) ? TML_STEP_EPOCH_START : 0;
                s.gap_ns = (k + 1) * 100 * MS;           /* workers starting */
                s.phase_ns[TML_PHASE_INPUT] = 300 * MS;
            }
            add(r, s);
        }
    }
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK_EQ_INT(w.common_steps, 12);
    CHECK_EQ_INT(w.epoch_start_steps, 2);
    CHECK_EQ_INT(w.window_steps, 10 - w.warmup_steps);
    CHECK_NEAR(w.epoch_start_wait_ns, 500.0 * MS, 1);     /* rank 1: 200 + 300 */
    CHECK_NEAR(w.between_epochs_ns, 0, 1);                  /* no loader start timed */
    CHECK_NEAR(w.ranks[0].avg_ns[TML_M_INPUT], 10.0 * MS, 1);   /* steady state only */
    tml__window_release(&w);

    /* the loader's start timed (TML_STEP_LOADER_START): the wait is the
     * Input Wait from it, the gap before it the script's own */
    for (int k = 0; k < 2; k++) {
        tml_rank *r = tml__run_find(&run, k);
        for (size_t j = 0; j < r->nsteps; j++)
            if (r->steps[j].flags & TML_STEP_EPOCH_START)
                r->steps[j].flags |= TML_STEP_LOADER_START;
            else if (r->steps[j].step == 4 || r->steps[j].step == 8)
                r->steps[j].flags = TML_STEP_EPOCH_START | TML_STEP_LOADER_START;
    }
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK_EQ_INT(w.epoch_start_steps, 2);
    CHECK_NEAR(w.epoch_start_wait_ns, 300.0 * MS, 1);
    CHECK_NEAR(w.between_epochs_ns, 200.0 * MS, 1);         /* rank 1's, the longer */
    tml__window_release(&w);

    /* the run's first step starts an epoch too (a loader's first epoch):
     * nothing of the script came before it, so the time before each epoch
     * is averaged over the two that follow a step, not three */
    for (int k = 0; k < 2; k++) {
        tml_rank *r = tml__run_find(&run, k);
        r->steps[0].flags = TML_STEP_EPOCH_START | TML_STEP_LOADER_START;
        r->steps[0].gap_ns = 0;
    }
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK_EQ_INT(w.epoch_start_steps, 3);
    CHECK_NEAR(w.between_epochs_ns, 200.0 * MS, 1);
    tml__window_release(&w);
    tml__run_release(&run);
}

/* Steps the deep dive profiled (TML_STEP_DEEP_DIVE on any rank) leave the
 * window, their 10x slower time in no average, and are counted. */
static void test_deep_dive_steps_excluded(void)
{
    tml_run run;
    tml_window w;
    tml__run_init(&run, "x", "id");
    add_rank(&run, 0, 0, TML_PHASES_ALL);
    add_rank(&run, 1, 0, TML_PHASES_ALL);
    for (int k = 0; k < 2; k++) {
        tml_rank *r = tml__run_find(&run, k);
        for (uint64_t i = 0; i < 30; i++) {
            tml_step_record s = rec(i);
            if (i >= 20 && i <= 22) {
                s.flags = k == 1 || i == 21 ? TML_STEP_DEEP_DIVE : 0;
                s.phase_ns[TML_PHASE_FORWARD] = 200 * MS;    /* under the profiler */
                s.traced_ns = 240 * MS;
            }
            add(r, s);
        }
    }
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK_EQ_INT(w.common_steps, 30);
    CHECK_EQ_INT(w.deep_dive_steps, 3);
    CHECK_EQ_INT(w.deep_dive_first, 20);
    CHECK_EQ_INT(w.deep_dive_last, 22);
    CHECK_EQ_INT(w.window_steps, 27 - w.warmup_steps);
    CHECK_NEAR(w.ranks[0].avg_ns[TML_M_FORWARD], 20.0 * MS, 1);
    CHECK_NEAR(w.ranks[1].avg_ns[TML_M_FORWARD], 20.0 * MS, 1);
    tml__window_release(&w);
    tml__run_release(&run);
}

static void test_missing_vs_measured_zero(void)
{
    tml_run run;
    tml_window w;
    tml__run_init(&run, "x", "id");
    /* rank 0 instruments H2D: never observed means zero copies */
    tml_rank *r = add_rank(&run, 0, 0, TML_PHASES_ALL);
    for (uint64_t i = 0; i < 5; i++)
        add(r, rec(i));
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK(!(w.ranks[0].missing & TML_PHASE_BIT(TML_PHASE_H2D)));
    CHECK(w.ranks[0].avg_ns[TML_M_H2D] == 0.0);
    CHECK_EQ_INT(w.missing, 0);
    tml__window_release(&w);
    tml__run_release(&run);

    /* not instrumented and never observed: missing (NAN), not zero */
    tml__run_init(&run, "x", "id");
    r = add_rank(&run, 0, 0, TML_PHASES_ALL & ~TML_PHASE_BIT(TML_PHASE_H2D));
    for (uint64_t i = 0; i < 5; i++)
        add(r, rec(i));
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK(w.ranks[0].missing & TML_PHASE_BIT(TML_PHASE_H2D));
    CHECK(isnan(w.ranks[0].avg_ns[TML_M_H2D]));
    CHECK(!isnan(w.ranks[0].avg_ns[TML_M_RESIDUAL]));   /* copies count as residual */
    tml__window_release(&w);
    tml__run_release(&run);

    /* forward instrumented but never observed: missing all the same,
     * and Compute and Residual are not defined without it */
    tml__run_init(&run, "x", "id");
    r = add_rank(&run, 0, 0, TML_PHASES_ALL);
    for (uint64_t i = 0; i < 5; i++) {
        tml_step_record s = rec(i);
        s.observed &= ~TML_PHASE_BIT(TML_PHASE_FORWARD);
        s.phase_ns[TML_PHASE_FORWARD] = 0;
        add(r, s);
    }
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK(w.missing & TML_PHASE_BIT(TML_PHASE_FORWARD));
    CHECK(isnan(w.ranks[0].avg_ns[TML_M_FORWARD]));
    CHECK(isnan(w.ranks[0].avg_ns[TML_M_COMPUTE]));
    CHECK(isnan(w.ranks[0].avg_ns[TML_M_RESIDUAL]));
    CHECK(!isnan(w.ranks[0].avg_ns[TML_M_BACKWARD]));
    tml__window_release(&w);
    tml__run_release(&run);

    /* a phase observed in some steps only (gradient accumulation) is
     * averaged over every step, zero where absent */
    tml__run_init(&run, "x", "id");
    r = add_rank(&run, 0, 0, TML_PHASES_ALL);
    for (uint64_t i = 0; i < 4; i++) {
        tml_step_record s = rec(i);
        if (i % 4 != 3) {
            s.observed &= ~TML_PHASE_BIT(TML_PHASE_OPTIMIZER);
            s.phase_ns[TML_PHASE_OPTIMIZER] = 0;
        } else {
            s.phase_ns[TML_PHASE_OPTIMIZER] = 20 * MS;
        }
        add(r, s);
    }
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK(!(w.missing & TML_PHASE_BIT(TML_PHASE_OPTIMIZER)));
    CHECK_NEAR(w.ranks[0].avg_ns[TML_M_OPTIMIZER], 5.0 * MS, 1);
    tml__window_release(&w);
    tml__run_release(&run);
}

static void test_residual_floor_and_untraced(void)
{
    tml_run run;
    tml_window w;
    tml__run_init(&run, "x", "id");
    tml_rank *r = add_rank(&run, 0, 0, TML_PHASES_ALL);
    tml_step_record s = rec(0);
    s.traced_ns = 50 * MS;        /* phases sum to 55: residual would be -5 */
    s.gap_ns = -1;                /* first step: no gap */
    add(r, s);
    s = rec(1);
    s.traced_ns = 65 * MS;        /* residual 10 */
    s.gap_ns = 4 * MS;
    add(r, s);
    s = rec(2);
    s.traced_ns = 55 * MS;        /* residual 0 */
    s.gap_ns = 0;                 /* a measured zero gap counts */
    add(r, s);
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK_NEAR(w.ranks[0].avg_ns[TML_M_RESIDUAL], 10.0 * MS / 3.0, 1);
    CHECK_NEAR(w.ranks[0].avg_ns[TML_M_UNTRACED], 2.0 * MS, 1);
    tml__window_release(&w);

    /* no gap at all: untraced is missing, not zero */
    tml__run_release(&run);
    tml__run_init(&run, "x", "id");
    r = add_rank(&run, 0, 0, TML_PHASES_ALL);
    add(r, rec(0));
    add(r, rec(1));
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK(isnan(w.ranks[0].avg_ns[TML_M_UNTRACED]));
    tml__window_release(&w);
    tml__run_release(&run);
}

static void test_clock_selection(void)
{
    tml_run run;
    tml_window w;
    tml__run_init(&run, "x", "id");
    add_rank(&run, 0, 0, TML_PHASES_ALL);
    add_rank(&run, 1, 0, TML_PHASES_ALL);
    for (int k = 0; k < 2; k++) {
        tml_rank *r = tml__run_find(&run, k);
        for (uint64_t i = 0; i < 5; i++) {
            tml_step_record s = rec(i);
            s.gpu_traced_ns = 80 * MS;
            for (int p = 0; p < TML_PHASE_COUNT; p++)
                s.gpu_phase_ns[p] = s.phase_ns[p];
            s.gpu_phase_ns[TML_PHASE_INPUT] = 2 * MS;   /* the GPU idled less */
            add(r, s);
        }
    }
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK(w.clock == TML_CLOCK_GPU);
    CHECK_NEAR(w.ranks[0].avg_ns[TML_M_STEP], 82.0 * MS, 1);
    CHECK_NEAR(w.ranks[0].avg_ns[TML_M_INPUT], 2.0 * MS, 1);
    CHECK_NEAR(w.ranks[0].avg_ns[TML_M_FETCH_CPU], 10.0 * MS, 1);   /* stays CPU */
    CHECK_NEAR(w.ranks[0].avg_ns[TML_M_RESIDUAL], 25.0 * MS, 1);
    CHECK(w.ranks[0].has_gpu);
    tml__window_release(&w);

    /* one step of one rank without GPU figures: the whole window is CPU */
    tml_rank *r1 = tml__run_find(&run, 1);
    r1->steps[3].gpu_traced_ns = -1;
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK(w.clock == TML_CLOCK_CPU);
    CHECK_NEAR(w.ranks[0].avg_ns[TML_M_STEP], 70.0 * MS, 1);
    tml__window_release(&w);
    tml__run_release(&run);
}

static void test_rank_without_steps(void)
{
    tml_run run;
    tml_window w;
    tml__run_init(&run, "x", "id");
    add_rank(&run, 0, 0, TML_PHASES_ALL);
    add_rank(&run, 1, 0, TML_PHASES_ALL);
    tml_rank *r = tml__run_find(&run, 0);
    for (uint64_t i = 0; i < 5; i++)
        add(r, rec(i));
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK_EQ_INT(w.nranks, 2);
    CHECK_EQ_INT(w.common_steps, 5);      /* the silent rank does not block */
    CHECK_EQ_INT(w.ranks[1].nsteps, 0);
    CHECK(isnan(w.ranks[1].avg_ns[TML_M_STEP]));
    CHECK_EQ_INT(w.median_rank, 0);
    tml__window_release(&w);
    tml__run_release(&run);
}

static void test_duplicate_and_unsorted_ids(void)
{
    tml_run run;
    tml_window w;
    tml__run_init(&run, "x", "id");
    tml_rank *r = add_rank(&run, 0, 0, TML_PHASES_ALL);
    uint64_t ids[] = { 2, 0, 1, 1, 3 };
    for (size_t i = 0; i < 5; i++)
        add(r, rec(ids[i]));
    CHECK(tml__window_compute(&run, 0, &w) == 0);
    CHECK_EQ_INT(w.common_steps, 4);
    CHECK_EQ_INT(w.first_step, 0);
    CHECK_EQ_INT(w.last_step, 3);
    tml__window_release(&w);
    tml__run_release(&run);
}

/* The pace a rebuilt summary estimates the rest of a run from: that of
 * the last steps, not of a slow first step; per host. */
static void test_pace_leaves_start_up_out(void)
{
    tml_run run;
    tml_run_pace p;
    tml__run_init(&run, "x", "id");
    tml__run_pace(&run, NULL, &p);
    CHECK(p.rank == -1 && isnan(p.steps_per_s));
    tml_rank *a = add_rank(&run, 0, 0, TML_PHASES_ALL);
    snprintf(a->info.host, sizeof(a->info.host), "here");
    tml_step_record s = rec(0);
    s.start_ns = 1000 * MS;
    add(a, s);
    tml__run_pace(&run, NULL, &p);
    CHECK(p.rank == 0 && p.last_step == 0 && isnan(p.steps_per_s));
    for (uint64_t k = 1; k <= 40; k++) {   /* step 0 took 5 s; then 20 ms each */
        s = rec(k);
        s.start_ns = 6000 * MS + (int64_t)(k - 1) * 20 * MS;
        add(a, s);
    }
    tml__run_pace(&run, NULL, &p);
    CHECK_EQ_INT(p.last_step, 40);
    CHECK(p.last_start_ns == 6000 * MS + 39 * 20 * MS);
    CHECK_NEAR(p.steps_per_s, 50.0, 1e-9);
    tml_rank *b = add_rank(&run, 1, 1, TML_PHASES_ALL);
    snprintf(b->info.host, sizeof(b->info.host), "there");
    for (uint64_t k = 0; k <= 50; k++) {   /* further on, on another host */
        s = rec(k);
        s.start_ns = (int64_t)k * 10 * MS;
        add(b, s);
    }
    tml__run_pace(&run, NULL, &p);
    CHECK(p.rank == 1 && p.last_step == 50);
    CHECK_NEAR(p.steps_per_s, 100.0, 1e-9);
    tml__run_pace(&run, "here", &p);
    CHECK(p.rank == 0 && p.last_step == 40);
    tml__run_pace(&run, "elsewhere", &p);
    CHECK(p.rank == -1);
    tml__run_release(&run);
}

#define TESTS X(test_empty_run) X(test_single_rank_averages) X(test_common_steps_across_ranks) \
    X(test_three_ranks_median_and_skew) X(test_window_cap_takes_last_steps) X(test_warmup_rule) \
    X(test_warmup_excluded_from_window) X(test_aborted_steps_excluded) X(test_epoch_starts_excluded) \
    X(test_missing_vs_measured_zero) X(test_residual_floor_and_untraced) \
    X(test_clock_selection) X(test_rank_without_steps) X(test_duplicate_and_unsorted_ids) \
    X(test_pace_leaves_start_up_out) X(test_deep_dive_steps_excluded)
#include "harness.h"
