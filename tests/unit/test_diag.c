/*
 * test_diag.c - the step-time rules, table-driven, on both sides of every
 * threshold; the straggler score; priority; WARMUP / NO DATA / INCOMPLETE
 * DATA; the run verdict; the thresholds parser.
 *
 * Windows are built by hand from shares of a 100 ms step, so a row of a
 * table reads like the situation it describes.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diag/diag.h"
#include "harness.h"

#define MS 1e6

typedef struct shares {
    double input, h2d, fwd, bwd, opt, residual;   /* ms of a step; NAN = missing */
} shares;

static void fill_rank(tml_rank_window *r, int32_t rank, int32_t node, shares s, size_t steps)
{
    memset(r, 0, sizeof(*r));
    r->rank = rank;
    r->node = node;
    r->nsteps = steps;
    double in = isnan(s.input) ? 0 : s.input, h = isnan(s.h2d) ? 0 : s.h2d;
    double f = isnan(s.fwd) ? 0 : s.fwd, b = isnan(s.bwd) ? 0 : s.bwd, o = isnan(s.opt) ? 0 : s.opt;
    double res = isnan(s.residual) ? 0 : s.residual;
    r->avg_ns[TML_M_STEP] = (in + h + f + b + o + res) * MS;
    r->avg_ns[TML_M_INPUT] = s.input * MS;
    r->avg_ns[TML_M_H2D] = s.h2d * MS;
    r->avg_ns[TML_M_FORWARD] = s.fwd * MS;
    r->avg_ns[TML_M_BACKWARD] = s.bwd * MS;
    r->avg_ns[TML_M_OPTIMIZER] = s.opt * MS;
    r->avg_ns[TML_M_COMPUTE] = (s.fwd + s.bwd + s.opt) * MS;   /* NAN if any missing */
    r->avg_ns[TML_M_RESIDUAL] = isnan(r->avg_ns[TML_M_COMPUTE]) ? NAN : s.residual * MS;
    r->avg_ns[TML_M_UNTRACED] = NAN;
    r->avg_ns[TML_M_FETCH_CPU] = s.input * MS;
    r->step_median_ns = r->step_p90_ns = r->avg_ns[TML_M_STEP];
    r->rss_bytes = r->cuda_allocated_bytes = r->cuda_reserved_bytes = NAN;
    r->overhead_ns_per_step = -1;
    static const int pm[TML_PHASE_COUNT] = { 0, 1, 2, 3, 4 };
    double v[5] = { s.input, s.h2d, s.fwd, s.bwd, s.opt };
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        if (isnan(v[pm[p]]))
            r->missing |= TML_PHASE_BIT(p);
}

static tml_rank_window ranks[8];

static tml_window window(size_t n, const shares *s, size_t steps, tml_clock clock)
{
    tml_window w;
    memset(&w, 0, sizeof(w));
    w.clock = clock;
    w.common_steps = steps;
    w.window_steps = steps;
    w.max_steps = 10000;
    w.nranks = n;
    w.ranks = ranks;
    for (size_t i = 0; i < n; i++) {
        fill_rank(&ranks[i], (int32_t)i, (int32_t)(i / 2), s[i], steps);
        w.missing |= ranks[i].missing;
    }
    w.median_rank = 0;
    w.worst_rank = 0;
    w.skew = 0;
    return w;
}

static const char *verdict1(shares s, size_t steps, tml_clock clock, tml_severity *sev)
{
    static tml_step_diag d;
    tml_window w = window(1, &s, steps, clock);
    tml__diag_step_time(&w, NULL, &d);
    if (sev)
        *sev = d.primary.severity;
    return d.primary.kind;
}

/* Shares of a 100 ms step: the rest is compute split 30/50/20 (fwd/bwd/opt)
 * so that compute itself never crosses 0.90 unless the row says so. */
static shares split(double input, double h2d, double residual, double compute)
{
    shares s = { input, h2d, compute * 0.3, compute * 0.5, compute * 0.2, residual };
    return s;
}

#define INFO TML_SEV_INFO
#define WARN TML_SEV_WARNING
#define CRIT TML_SEV_CRITICAL

static void test_share_thresholds_table(void)
{
    static const struct {
        double input, h2d, residual, compute;
        tml_clock clock;
        const char *kind;
        tml_severity sev;
    } t[] = {
        /* input: 0.099 / 0.10 / 0.199 / 0.20 */
        { 9.9, 0, 5, 85.1, TML_CLOCK_CPU, "BALANCED", INFO },
        { 10, 0, 5, 85, TML_CLOCK_CPU, "INPUT_BOUND", WARN },
        { 19.9, 0, 5, 75.1, TML_CLOCK_CPU, "INPUT_BOUND", WARN },
        { 20, 0, 5, 75, TML_CLOCK_CPU, "INPUT_BOUND", CRIT },
        { 64, 0, 2, 34, TML_CLOCK_GPU, "INPUT_BOUND", CRIT },
        /* residual */
        { 5, 0, 9.9, 85.1, TML_CLOCK_CPU, "BALANCED", INFO },
        { 5, 0, 10, 85, TML_CLOCK_CPU, "RESIDUAL_HEAVY", WARN },
        { 5, 0, 19.9, 75.1, TML_CLOCK_CPU, "RESIDUAL_HEAVY", WARN },
        { 5, 0, 20, 75, TML_CLOCK_CPU, "RESIDUAL_HEAVY", CRIT },
        /* H2D: only on the GPU clock */
        { 5, 9.9, 5, 80.1, TML_CLOCK_GPU, "BALANCED", INFO },
        { 5, 10, 5, 80, TML_CLOCK_GPU, "H2D_BOUND", WARN },
        { 5, 19.9, 5, 70.1, TML_CLOCK_GPU, "H2D_BOUND", WARN },
        { 5, 20, 5, 70, TML_CLOCK_GPU, "H2D_BOUND", CRIT },
        { 5, 30, 5, 60, TML_CLOCK_CPU, "BALANCED", INFO },
        /* compute: 0.90 and no other share >= 0.10 */
        { 3, 3, 4.1, 89.9, TML_CLOCK_CPU, "BALANCED", INFO },
        { 3, 3, 4, 90, TML_CLOCK_CPU, "COMPUTE_BOUND", INFO },
        { 0, 0, 0, 100, TML_CLOCK_CPU, "COMPUTE_BOUND", INFO },
        { 0, 9.9, 0, 90.1, TML_CLOCK_CPU, "COMPUTE_BOUND", INFO },
        /* H2D >= 0.10 on the CPU clock does not fire H2D-BOUND but does
         * keep COMPUTE-BOUND from firing */
        { 0, 10, 0, 90, TML_CLOCK_CPU, "BALANCED", INFO },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        tml_severity sev;
        const char *k = verdict1(split(t[i].input, t[i].h2d, t[i].residual, t[i].compute), 100,
                                 t[i].clock, &sev);
        if (strcmp(k, t[i].kind) != 0 || sev != t[i].sev)
            fprintf(stderr, "row %zu: got %s/%d, want %s/%d\n", i, k, (int)sev, t[i].kind, (int)t[i].sev);
        CHECK_STR(k, t[i].kind);
        CHECK_EQ_INT(sev, t[i].sev);
    }
}

static void test_diagnosis_fields(void)
{
    tml_step_diag d;
    shares s = split(64, 0.4, 1.6, 34);
    tml_window w = window(1, &s, 256, TML_CLOCK_GPU);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "INPUT_BOUND");
    CHECK_STR(d.primary.label, "INPUT-BOUND");
    CHECK_STR(d.primary.section, "step_time");
    CHECK_STR(d.primary.why, "Input Wait took 64% of Step Time.");
    CHECK_STR(d.primary.next, "Increase workers, prefetch, or storage throughput.");
    CHECK_EQ_INT(d.primary.cause, TML_M_INPUT);
    CHECK_NEAR(d.primary.share, 0.64, 1e-9);
    CHECK_NEAR(d.primary.threshold, 0.20, 1e-12);
    CHECK_EQ_INT(d.nissues, 1);
    CHECK_NEAR(d.share[TML_M_COMPUTE], 0.34, 1e-9);
}

/* INPUT-BOUND names the loader as the user configured it (SPEC 4.4). */
static void test_input_next_names_loader(void)
{
    static const struct {
        int known, workers, pin, cores;
        tml_clock clock;
        const char *next;
    } t[] = {
        {0, 0, 0, 16, TML_CLOCK_CPU, "Increase workers, prefetch, or storage throughput."},
        {1, 0, 0, 16, TML_CLOCK_GPU,
         "Input Wait 64% with DataLoader(num_workers=0) on 16 cores: try num_workers=8, pin_memory=True."},
        {1, 0, 1, 16, TML_CLOCK_GPU,
         "Input Wait 64% with DataLoader(num_workers=0) on 16 cores: try num_workers=8."},
        {1, 0, 0, 2, TML_CLOCK_CPU, "Input Wait 64% with DataLoader(num_workers=0) on 2 cores: try num_workers=2."},
        {1, 0, 0, 0, TML_CLOCK_CPU, "Input Wait 64% with DataLoader(num_workers=0): try num_workers=4."},
        {1, 2, 0, 16, TML_CLOCK_CPU,
         "Input Wait 64% with DataLoader(num_workers=2) on 16 cores: try num_workers=4, "
         "or make each batch cheaper (transforms, decoding, storage)."},
        {1, 12, 0, 16, TML_CLOCK_CPU,
         "Input Wait 64% with DataLoader(num_workers=12) on 16 cores: try num_workers=16, "
         "or make each batch cheaper (transforms, decoding, storage)."},
        {1, 16, 0, 16, TML_CLOCK_CPU,
         "Input Wait 64% although DataLoader(num_workers=16) already matches the 16 cores: "
         "make each batch cheaper (transforms, decoding, collation, storage)."},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        tml_step_diag d;
        shares s = split(64, 0.4, 1.6, 34);
        tml_window w = window(1, &s, 256, t[i].clock);
        w.ranks[0].loader_known = t[i].known;
        w.ranks[0].loader_workers = t[i].workers;
        w.ranks[0].loader_pin_memory = t[i].pin;
        w.ranks[0].cpu_count = t[i].cores;
        tml__diag_step_time(&w, NULL, &d);
        CHECK_STR(d.primary.kind, "INPUT_BOUND");
        CHECK_STR(d.primary.next, t[i].next);
    }
    /* below the threshold nothing is said about the loader */
    tml_step_diag d;
    shares s = split(5, 0, 5, 90);
    tml_window w = window(1, &s, 256, TML_CLOCK_CPU);
    w.ranks[0].loader_known = 1;
    tml__diag_step_time(&w, NULL, &d);
    CHECK(strstr(d.primary.next, "num_workers") == NULL);

    /* a 1 ms step whose 0.64 ms fetch is cheap: workers would not help
     * (a user who followed "try num_workers=2" got 5x slower epochs) */
    s = split(64, 0.4, 1.6, 34);
    w = window(1, &s, 256, TML_CLOCK_CPU);
    for (int m = 0; m < TML_M_COUNT; m++)
        w.ranks[0].avg_ns[m] /= 100.0;
    w.ranks[0].loader_known = 1;
    w.ranks[0].cpu_count = 2;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "INPUT_BOUND");
    CHECK(strstr(d.primary.next, "only 0.64 ms to fetch") != NULL);
    CHECK(strstr(d.primary.next, "try num_workers") == NULL);
}

/* Priority: straggler, input, H2D, residual, compute; all are issues. */
static void with_comm(tml_window *w, const double *comm_ms);

static void test_priority_order(void)
{
    tml_step_diag d;
    shares s = split(25, 25, 25, 25);
    tml_window w = window(1, &s, 100, TML_CLOCK_GPU);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_EQ_INT(d.nissues, 3);
    CHECK_STR(d.issues[0].kind, "INPUT_BOUND");
    CHECK_STR(d.issues[1].kind, "H2D_BOUND");
    CHECK_STR(d.issues[2].kind, "RESIDUAL_HEAVY");
    CHECK_STR(d.primary.kind, "INPUT_BOUND");

    s = split(0, 25, 25, 50);
    w = window(1, &s, 100, TML_CLOCK_GPU);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "H2D_BOUND");

    s = split(0, 0, 25, 75);
    w = window(1, &s, 100, TML_CLOCK_GPU);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "RESIDUAL_HEAVY");

    /* COMMUNICATION-BOUND (WARNING) yields to a graver RESIDUAL-HEAVY
     * behind it; as severe, it stays ahead */
    shares c[2] = { split(0, 0, 40, 60), split(0, 0, 40, 60) };
    w = window(2, c, 100, TML_CLOCK_CPU);
    double comm[2] = { 15, 15 };
    with_comm(&w, comm);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.issues[0].kind, "RESIDUAL_HEAVY");
    CHECK_STR(d.issues[1].kind, "COMMUNICATION_BOUND");
    c[0] = c[1] = split(0, 0, 25, 75);
    w = window(2, c, 100, TML_CLOCK_CPU);
    comm[0] = comm[1] = 22;
    with_comm(&w, comm);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.issues[0].kind, "COMMUNICATION_BOUND");

    /* as severe, the larger part of the step goes first (diag.c's one
     * comparator): against RESIDUAL-HEAVY behind it and INPUT-BOUND ahead */
    static const struct {
        double input, comm, residual;   /* ms of 100; Residual after the comm */
        const char *first, *second;
    } tie[] = {
        { 0, 17, 13, "COMMUNICATION_BOUND", "RESIDUAL_HEAVY" },
        { 0, 12, 18, "RESIDUAL_HEAVY", "COMMUNICATION_BOUND" },
        { 15, 17, 2, "COMMUNICATION_BOUND", "INPUT_BOUND" },
        { 15, 12, 2, "INPUT_BOUND", "COMMUNICATION_BOUND" },
    };
    for (size_t i = 0; i < sizeof(tie) / sizeof(tie[0]); i++) {
        double res = tie[i].comm + tie[i].residual;
        c[0] = c[1] = split(tie[i].input, 0, res, 100 - tie[i].input - res);
        w = window(2, c, 100, TML_CLOCK_CPU);
        comm[0] = comm[1] = tie[i].comm;
        with_comm(&w, comm);
        tml__diag_step_time(&w, NULL, &d);
        CHECK_STR(d.issues[0].kind, tie[i].first);
        CHECK_STR(d.issues[1].kind, tie[i].second);
        CHECK_EQ_INT(d.issues[0].severity, TML_SEV_WARNING);
        CHECK_EQ_INT(d.issues[1].severity, TML_SEV_WARNING);
    }
}

static void test_shares_median_over_ranks(void)
{
    /* input shares 0.05, 0.15, 0.50: the median 0.15 decides */
    shares s[3] = { split(5, 0, 5, 90), split(15, 0, 5, 80), split(50, 0, 5, 45) };
    tml_window w = window(3, s, 100, TML_CLOCK_CPU);
    CHECK_NEAR(tml__diag_share(&w, TML_M_INPUT), 0.15, 1e-9);
    /* two ranks: the mean of the middle two */
    w = window(2, s, 100, TML_CLOCK_CPU);
    CHECK_NEAR(tml__diag_share(&w, TML_M_INPUT), 0.10, 1e-9);
    /* a rank with the phase missing is skipped, not read as zero */
    shares m[3] = { split(NAN, 0, 5, 90), split(15, 0, 5, 80), split(50, 0, 5, 45) };
    w = window(3, m, 100, TML_CLOCK_CPU);
    CHECK_NEAR(tml__diag_share(&w, TML_M_INPUT), (0.15 + 0.50) / 2, 1e-9);
    /* every rank missing: NAN */
    shares all[1] = { split(NAN, 0, 5, 90) };
    w = window(1, all, 100, TML_CLOCK_CPU);
    CHECK(isnan(tml__diag_share(&w, TML_M_INPUT)));
}

/* DDP straggler: the culprit waits least in Backward. Rank r of n ranks:
 * Backward 100 ms except the culprit (rank 0), whose Backward is shorter
 * by `cost` and whose component `comp` (0 input, 1 h2d, 2 forward,
 * 4 optimizer, 5 forward and optimizer half each, 6 input 30% and
 * forward 70%: spread over components) is longer by `cover` * cost. */
static tml_window straggler_window(size_t n, double cost, int comp, double cover, size_t steps)
{
    shares s[8];
    for (size_t i = 0; i < n; i++) {
        s[i].input = 5;
        s[i].h2d = 2;
        s[i].fwd = 50;
        s[i].bwd = 100;
        s[i].opt = 10;
        s[i].residual = 3;
    }
    s[0].bwd -= cost;
    double extra = cover * cost;
    if (comp == 0) s[0].input += extra;
    else if (comp == 1) s[0].h2d += extra;
    else if (comp == 2) s[0].fwd += extra;
    else if (comp == 4) s[0].opt += extra;
    else if (comp == 5) {
        s[0].fwd += extra / 2;
        s[0].opt += extra / 2;
    }
    else if (comp == 6) {
        s[0].input += 0.3 * extra;
        s[0].fwd += 0.7 * extra;
    }
    /* the rest of the gap shows in no phase of the culprit (a phase not
     * traced): Residual is a part of compute, so it cannot hold it */
    return window(n, s, steps, TML_CLOCK_GPU);
}

static void test_straggler_score(void)
{
    tml_straggler st;
    tml_thresholds th;
    tml__thresholds_default(&th);

    /* one process never triggers it */
    tml_window w = straggler_window(1, 50, 0, 1.0, 100);
    tml__diag_straggler(&w, &th, &st);
    CHECK(!st.valid);

    /* cost 34 ms of a 170 ms victim step: score 0.20 */
    w = straggler_window(4, 34, 0, 1.0, 100);
    ranks[0].culprit_steps = 90;
    tml__diag_straggler(&w, &th, &st);
    CHECK(st.valid);
    CHECK_EQ_INT(st.culprit, 0);
    CHECK_EQ_INT(st.victim, 2);        /* upper median of 4 */
    CHECK_NEAR(st.cost_ns, 34 * MS, 1);
    CHECK_NEAR(st.score, 34.0 / 170.0, 1e-9);
    CHECK_NEAR(st.coverage[0], 1.0, 1e-9);
    CHECK_EQ_INT(st.component, 0);
    CHECK_EQ_INT(st.culprit_steps, 90);

    /* a missing Backward on any rank: no score */
    w = straggler_window(2, 34, 0, 1.0, 100);
    ranks[1].avg_ns[TML_M_BACKWARD] = NAN;
    tml__diag_straggler(&w, &th, &st);
    CHECK(!st.valid);
}

static void test_straggler_table(void)
{
    static const struct {
        size_t nranks;
        double cost;      /* ms of a 170 ms step */
        int comp;
        double cover;
        size_t steps;
        const char *kind;
        tml_severity sev;
    } t[] = {
        { 2, 16.83, 0, 1.0, 100, "BALANCED", INFO },            /* score 0.099 */
        { 2, 17.0, 0, 1.0, 100, "INPUT_STRAGGLER", WARN },      /* 0.10 */
        { 2, 33.83, 0, 1.0, 100, "INPUT_STRAGGLER", WARN },     /* 0.199 */
        { 2, 34.0, 0, 1.0, 100, "INPUT_STRAGGLER", CRIT },      /* 0.20 */
        { 2, 34.0, 0, 1.0, 19, "INPUT_STRAGGLER", WARN },       /* < 20 steps */
        { 2, 34.0, 0, 1.0, 20, "INPUT_STRAGGLER", CRIT },
        { 4, 40.0, 1, 0.8, 100, "H2D_STRAGGLER", CRIT },        /* coverage 0.80 */
        { 4, 40.0, 2, 0.9, 100, "COMPUTE_STRAGGLER", CRIT },
        { 2, 40.0, 4, 0.9, 100, "COMPUTE_STRAGGLER", CRIT },    /* in optimizer.step() */
        { 2, 40.0, 4, 0.79, 100, "STRAGGLER", CRIT },
        { 2, 40.0, 5, 0.8, 100, "COMPUTE_STRAGGLER", CRIT },    /* 0.4 + 0.4 */
        { 4, 40.0, 0, 0.79, 100, "STRAGGLER", CRIT },           /* coverage below */
        { 3, 20.0, -1, 0.0, 100, "STRAGGLER", WARN },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        tml_step_diag d;
        tml_window w = straggler_window(t[i].nranks, t[i].cost, t[i].comp, t[i].cover, t[i].steps);
        tml__diag_step_time(&w, NULL, &d);
        if (strcmp(d.primary.kind, t[i].kind) != 0 || d.primary.severity != t[i].sev)
            fprintf(stderr, "row %zu: got %s/%d (score %g), want %s/%d\n", i, d.primary.kind,
                    (int)d.primary.severity, d.straggler.score, t[i].kind, (int)t[i].sev);
        CHECK_STR(d.primary.kind, t[i].kind);
        CHECK_EQ_INT(d.primary.severity, t[i].sev);
    }
}

static void test_straggler_before_input(void)
{
    /* the culprit's input wait also makes the median input share high:
     * both fire, straggler first */
    shares s[2] = { { 250, 1.1, 80, 170, 10, 5 }, { 3.8, 1.1, 80, 416.2, 10, 5 } };
    tml_window w = window(2, s, 250, TML_CLOCK_GPU);
    tml_step_diag d;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "INPUT_STRAGGLER");
    CHECK_EQ_INT(d.primary.severity, CRIT);
    CHECK_STR(d.primary.why, "R0/N0 waited 250.0 ms for input; R1/N0 waited 3.8 ms for input.");
    CHECK(d.nissues >= 2);
    CHECK_STR(d.issues[1].kind, "INPUT_BOUND");
    CHECK(d.primary.straggler.valid);
}

/* A rank's own work between steps (rank-0-only evaluation) that the
 * others wait out in their all-reduce: OUTSIDE-STEP STRAGGLER, named with
 * its cost; the untraced time it causes is not UNTRACED-HEAVY too. */
static void test_outside_step_straggler(void)
{
    /* both ranks: 18 ms forward; R0 spends 20 ms a step between steps,
     * R1 waits 20 ms more in backward */
    shares s[2] = { { 0.2, 0, 18, 3, 0.1, 0.3 }, { 0.2, 0, 18, 23, 0.1, 0.3 } };
    tml_window w = window(2, s, 60, TML_CLOCK_CPU);
    w.ranks[0].avg_ns[TML_M_UNTRACED] = 20 * MS;
    w.ranks[1].avg_ns[TML_M_UNTRACED] = 0;
    tml_step_diag d;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "OUTSIDE_STEP_STRAGGLER");
    CHECK_EQ_INT(d.primary.straggler.component, 3);
    CHECK(strstr(d.primary.why, "R0/N0 spends 20.0 ms per step outside the step") != NULL);
    CHECK(strstr(d.primary.why, "20.0 ms per step, 48% of R1/N0's Step Time") != NULL);
    d.untraced_wall = 0.5;
    tml_diagnosis v;
    tml__diag_run_verdict(&d, NAN, NULL, &v);
    CHECK_STR(v.kind, "OUTSIDE_STEP_STRAGGLER");
}

/* Rank 0 alone works 6 ms a step between steps (a periodic evaluation,
 * averaged); rank 1 waits that out in its all-reduce: a score of 0.066,
 * under straggler_warn, in a run whose every rank is COMMUNICATION-BOUND
 * (20 and 26 ms exposed). The wait is more than a fifth of rank 1's
 * exposed communication: COMMUNICATION-BOUND says whose it is, and the
 * OUTSIDE-STEP STRAGGLER follows it. */
static void test_straggler_under_threshold_in_comm(void)
{
    shares s[2] = { { 1, 0, 30, 30, 2, 22 }, { 1, 0, 30, 30, 2, 28 } };
    tml_window w = window(2, s, 60, TML_CLOCK_CPU);
    const double comm[2] = { 20, 26 };
    with_comm(&w, comm);
    w.ranks[0].avg_ns[TML_M_UNTRACED] = 6 * MS;
    w.ranks[1].avg_ns[TML_M_UNTRACED] = 0;
    tml_step_diag d;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_NEAR(d.straggler.score, 6.0 / 91.0, 1e-9);
    CHECK_STR(d.primary.kind, "COMMUNICATION_BOUND");
    CHECK(strstr(d.primary.why, "Of R1/N0's, 6.0 ms per step is its wait for R0/N0, not the "
                 "transfer: its time between steps") != NULL);
    CHECK(strncmp(d.primary.next, "First R0/N0: share that work among the ranks or do it less "
                  "often", 63) == 0);
    CHECK(strstr(d.primary.next, ". Then: ") != NULL);
    CHECK_STR(d.issues[1].kind, "OUTSIDE_STEP_STRAGGLER");
    CHECK_EQ_INT(d.issues[1].severity, TML_SEV_WARNING);
    CHECK(strstr(d.issues[1].why, "R0/N0 spends 6.0 ms per step outside the step") != NULL);

    /* a wait under a fifth of the exposed communication: the transport's */
    w.ranks[0].avg_ns[TML_M_UNTRACED] = 4 * MS;
    const double comm2[2] = { 20, 24 };
    s[1].residual = 26;
    w = window(2, s, 60, TML_CLOCK_CPU);
    with_comm(&w, comm2);
    w.ranks[0].avg_ns[TML_M_UNTRACED] = 4 * MS;
    w.ranks[1].avg_ns[TML_M_UNTRACED] = 0;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "COMMUNICATION_BOUND");
    CHECK(strstr(d.primary.why, "its wait for") == NULL);
    CHECK(strncmp(d.primary.next, "First", 5) != 0);
    for (size_t i = 0; i < d.nissues; i++)
        CHECK(strstr(d.issues[i].kind, "STRAGGLER") == NULL);
}

static void test_no_data_and_warmup(void)
{
    tml_step_diag d;
    tml_window w;
    memset(&w, 0, sizeof(w));
    w.median_rank = w.worst_rank = -1;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "NO_DATA");
    CHECK_STR(d.primary.label, "NO DATA");
    CHECK_EQ_INT(d.nissues, 0);

    shares s = split(50, 0, 0, 50);
    w = window(1, &s, 1, TML_CLOCK_CPU);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "WARMUP");
    w = window(1, &s, 2, TML_CLOCK_CPU);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "INPUT_BOUND");
}

static void test_incomplete_data_names_phases(void)
{
    tml_step_diag d;
    shares s = split(5, 0, 5, 90);
    s.fwd = NAN;
    tml_window w = window(1, &s, 100, TML_CLOCK_CPU);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "INCOMPLETE_DATA");
    CHECK_STR(d.primary.label, "INCOMPLETE DATA");
    CHECK_EQ_INT(d.primary.missing, TML_PHASE_BIT(TML_PHASE_FORWARD));
    CHECK(strstr(d.primary.why, "Forward was never observed") != NULL);
    CHECK(strstr(d.primary.next, "wrap_forward(model)") != NULL);
    CHECK(strstr(d.primary.next, "trace_step(model)") != NULL);

    s = split(5, 0, 5, 90);
    s.input = NAN;
    s.opt = NAN;
    w = window(1, &s, 100, TML_CLOCK_CPU);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "INCOMPLETE_DATA");
    CHECK(strstr(d.primary.why, "Input Wait and Optimizer were never observed") != NULL);
    CHECK(strstr(d.primary.next, "optimizer.step()") != NULL);
    /* 5% of the step outside the phases, nothing between steps: batches
     * made without a DataLoader cost nothing measurable, no hint for them */
    CHECK(strstr(d.primary.next, "wrap_dataloader_fetch()") == NULL);

    /* an input-bound run with forward missing: the verdict is not hidden,
     * the missing phase is its caveat (with the hint) and an issue too */
    s = split(50, 0, 0, 50);
    s.fwd = NAN;
    w = window(1, &s, 100, TML_CLOCK_CPU);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "INPUT_BOUND");
    CHECK(strstr(d.primary.why, "Caveat: Forward was never observed") != NULL);
    CHECK(strstr(d.primary.why, "trace_step(model)") != NULL);
    CHECK_EQ_INT(d.primary.missing, TML_PHASE_BIT(TML_PHASE_FORWARD));
    CHECK_EQ_INT(d.nissues, 2);
    CHECK_STR(d.issues[1].kind, "INCOMPLETE_DATA");

    /* no DataLoader and a hand-written update: the input wait is unknown,
     * compute still decides; the hints fit that loop */
    s = split(0, 0, 2, 98);
    s.input = NAN;
    s.opt = NAN;
    w = window(1, &s, 100, TML_CLOCK_CPU);
    tml__diag_step_time(&w, NULL, &d);
    CHECK(strstr(d.primary.next, "wrap_input()") == NULL);
    CHECK(strstr(d.primary.next, "hand-written update") != NULL);

    /* a get_batch() loop (no DataLoader, batches made in the step) with a
     * hand-written update: 83% of the step is measurably outside forward
     * and backward; the verdict says so and what is in it, not INCOMPLETE
     * DATA, and the hints fit the loop */
    s = split(NAN, 0, 80, 20);
    s.opt = NAN;
    w = window(1, &s, 100, TML_CLOCK_CPU);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "RESIDUAL_HEAVY");
    CHECK_EQ_INT(d.primary.severity, TML_SEV_CRITICAL);
    CHECK_EQ_INT(d.primary.cause, -1);
    CHECK(strstr(d.primary.why, "83% of Step Time is outside the traced forward and backward: "
                 "no optimizer.step() ran, so a hand-written update is in it, and no DataLoader "
                 "was seen, so batches made in the step are too.") != NULL);
    CHECK(strstr(d.primary.why, "Caveat") == NULL);
    CHECK(strstr(d.primary.next, "traceml.wrap_input(get_batch)") != NULL);
    CHECK_EQ_INT(d.primary.missing, TML_PHASE_BIT(TML_PHASE_INPUT) | TML_PHASE_BIT(TML_PHASE_OPTIMIZER));
    CHECK_STR(d.issues[1].kind, "INCOMPLETE_DATA");
    CHECK(strstr(d.issues[1].next, "wrap_input()") != NULL);

    /* only Input missing: Compute and Residual are known; the caveat says
     * where the batches' time is, not that the figures are unknown */
    s = split(NAN, 0, 30, 70);
    w = window(1, &s, 100, TML_CLOCK_CPU);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "RESIDUAL_HEAVY");
    CHECK(strstr(d.primary.why, "Caveat: Input Wait was never observed (no DataLoader was "
                 "seen): batches made in the step are in Residual") != NULL);
    CHECK(strstr(d.primary.why, "unknown") == NULL);
    CHECK(strstr(d.primary.why, "wrap_input()") != NULL);

    /* H2D missing is not incomplete: copies are optional */
    s = split(5, NAN, 5, 90);
    w = window(1, &s, 100, TML_CLOCK_GPU);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "COMPUTE_BOUND");
}

static void test_run_verdict(void)
{
    tml_step_diag d;
    tml_diagnosis v;
    static const struct {
        double input, residual, compute;
        size_t steps;
        double gpu_util;
        const char *kind;
    } t[] = {
        { 64, 2, 34, 100, NAN, "INPUT_BOUND" },
        { 5, 20, 75, 100, NAN, "RESIDUAL_HEAVY" },
        { 1, 1, 98, 100, NAN, "COMPUTE_BOUND" },
        { 5, 5, 90, 100, 10.0, "COMPUTE_BOUND" },               /* bound wins */
        { 5, 5, 85, 100, NAN, "NO_CLEAR_PERFORMANCE_BOTTLENECK" },
        { 5, 5, 85, 100, 29.9, "LOW_GPU_UTILIZATION" },
        { 5, 5, 85, 100, 30.0, "NO_CLEAR_PERFORMANCE_BOTTLENECK" },
        { 5, 5, 85, 1, NAN, "INSUFFICIENT_STEP_TIME_DATA" },    /* WARMUP */
        { 5, 5, 85, 0, NAN, "INSUFFICIENT_STEP_TIME_DATA" },    /* NO DATA */
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        shares s = split(t[i].input, 0, t[i].residual, t[i].compute);
        tml_window w = window(1, &s, t[i].steps, TML_CLOCK_GPU);
        tml__diag_step_time(&w, NULL, &d);
        tml__diag_run_verdict(&d, t[i].gpu_util, NULL, &v);
        if (strcmp(v.kind, t[i].kind) != 0)
            fprintf(stderr, "row %zu: got %s want %s\n", i, v.kind, t[i].kind);
        CHECK_STR(v.kind, t[i].kind);
        CHECK_STR(v.section, "step_time");
        CHECK(v.why[0] != '\0');
    }
    /* INCOMPLETE DATA stays the verdict: it names what to instrument */
    shares s = split(5, 0, 5, 90);
    s.bwd = NAN;
    tml_window w = window(1, &s, 100, TML_CLOCK_CPU);
    tml__diag_step_time(&w, NULL, &d);
    tml__diag_run_verdict(&d, NAN, NULL, &v);
    CHECK_STR(v.kind, "INCOMPLETE_DATA");
    CHECK_STR(v.label, "INCOMPLETE DATA");
}

static void test_thresholds_override_changes_verdict(void)
{
    tml_thresholds th;
    tml_step_diag d;
    tml__thresholds_default(&th);
    CHECK(tml__thresholds_parse(&th, "input_warn=0.15,input_crit=0.3") == 0);
    shares s = split(12, 0, 3, 85);
    tml_window w = window(1, &s, 100, TML_CLOCK_CPU);
    tml__diag_step_time(&w, &th, &d);
    CHECK_STR(d.primary.kind, "BALANCED");
    s = split(25, 0, 3, 72);
    w = window(1, &s, 100, TML_CLOCK_CPU);
    tml__diag_step_time(&w, &th, &d);
    CHECK_STR(d.primary.kind, "INPUT_BOUND");
    CHECK_EQ_INT(d.primary.severity, WARN);
}

static void test_thresholds_parser(void)
{
    tml_thresholds t, before;
    tml__thresholds_default(&t);
    CHECK_NEAR(t.input_warn, 0.10, 0);
    CHECK_NEAR(t.compute_min, 0.90, 0);
    CHECK_EQ_INT(t.straggler_crit_min_steps, 20);

    CHECK(tml__thresholds_parse(&t, "") == 0);
    CHECK(tml__thresholds_parse(&t, NULL) == 0);
    CHECK(tml__thresholds_parse(&t, " input_warn = 0.15 , input_crit=0.3,") == 0);
    CHECK_NEAR(t.input_warn, 0.15, 1e-12);
    CHECK_NEAR(t.input_crit, 0.30, 1e-12);
    CHECK(tml__thresholds_parse(&t, "compute=0.8,compute_other=0.05,straggler_min_steps=50,min_steps=5") == 0);
    CHECK_NEAR(t.compute_min, 0.8, 1e-12);
    CHECK_NEAR(t.compute_other_max, 0.05, 1e-12);
    CHECK_EQ_INT(t.straggler_crit_min_steps, 50);
    CHECK_EQ_INT(t.min_steps, 5);
    CHECK(tml__thresholds_parse(&t, "h2d_warn=0.2,h2d_crit=0.4,residual_warn=0,residual_crit=1") == 0);
    CHECK(tml__thresholds_parse(&t, "straggler_warn=0.05,straggler_crit=0.5,straggler_coverage=0.7") == 0);
    CHECK_NEAR(t.straggler_coverage, 0.7, 1e-12);

    static const char *bad[] = {
        "input_warn", "input_warn=", "=0.1", "nope=0.1", "input_warn=abc",
        "input_warn=0.1x", "input_warn=1.5", "input_warn=-0.1", "input_warn=nan",
        "input_warn=inf", "straggler_min_steps=0", "straggler_min_steps=2.5",
        "min_steps=-1", "input_warn=0.5,input_crit=0.4", "input_warn=0.1;input_crit=0.2",
        "INPUT_WARN=0.1", "input_warn=0.10000000000000000000000000000000000000000000000000000000000000000001",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        before = t;
        int rc = tml__thresholds_parse(&t, bad[i]);
        if (rc != TML_EINVAL)
            fprintf(stderr, "accepted bad spec: %s\n", bad[i]);
        CHECK_EQ_INT(rc, TML_EINVAL);
        CHECK(memcmp(&before, &t, sizeof(t)) == 0);   /* unchanged */
    }
    /* all or nothing: a bad second item keeps the first from applying */
    before = t;
    CHECK(tml__thresholds_parse(&t, "input_warn=0.01,bogus=1") == TML_EINVAL);
    CHECK(memcmp(&before, &t, sizeof(t)) == 0);
}

static void test_phase_list(void)
{
    char b[128];
    tml__phase_list(TML_PHASE_BIT(TML_PHASE_FORWARD), b, sizeof(b));
    CHECK_STR(b, "Forward");
    tml__phase_list(TML_PHASE_BIT(TML_PHASE_FORWARD) | TML_PHASE_BIT(TML_PHASE_BACKWARD), b, sizeof(b));
    CHECK_STR(b, "Forward and Backward");
    tml__phase_list(TML_PHASE_BIT(TML_PHASE_INPUT) | TML_PHASE_BIT(TML_PHASE_FORWARD) |
                    TML_PHASE_BIT(TML_PHASE_OPTIMIZER), b, sizeof(b));
    CHECK_STR(b, "Input Wait, Forward and Optimizer");
    tml__phase_list(0, b, sizeof(b));
    CHECK_STR(b, "");
}

static void test_resource_sections(void)
{
    tml_diagnosis d;
    shares s = split(5, 0, 5, 90);
    tml_window w = window(1, &s, 100, TML_CLOCK_CPU);
    tml__diag_step_memory(&w, NULL, &d);
    CHECK_STR(d.kind, "NO_GPU");
    CHECK_STR(d.section, "step_memory");
    ranks[0].cuda_reserved_bytes = 3.2e9;
    tml__diag_step_memory(&w, NULL, &d);
    CHECK_STR(d.kind, "BALANCED");
    tml_sys_node n = { .node = 0, .samples = 0, .cpu_percent = NAN, .ram_used_bytes = NAN,
                       .ram_total_bytes = NAN, .gpu_util_percent = NAN };
    tml__diag_system(&n, 1, NULL, &d);
    CHECK_STR(d.kind, "NORMAL");
    CHECK_STR(d.section, "system");
    CHECK(strstr(d.why, "No system metrics") != NULL);
    tml_proc_rank p = { .rank = 0, .node = 0, .samples = 0, .cpu_capacity_percent = NAN,
                        .rss_bytes = NAN, .cuda_reserved_bytes = NAN };
    tml__diag_process(&p, 1, NULL, &d);
    CHECK_STR(d.kind, "NORMAL");
    CHECK_STR(d.section, "process");
}

/* UNTRACED-HEAVY: time between steps as a share of wall-clock, around
 * its 25% / 50% thresholds; the step-time verdict is kept in its Why. */
static void test_untraced_heavy(void)
{
    static const struct {
        double untraced_ms;       /* per step, the step being 100 ms (input 30%) */
        const char *kind;
        const char *severity;
    } rows[] = {
        {0.0, "INPUT_BOUND", "CRITICAL"},
        {33.0, "INPUT_BOUND", "CRITICAL"},         /* 24.8% of wall-clock */
        {34.0, "UNTRACED_HEAVY", "WARNING"},       /* 25.4% */
        {99.0, "UNTRACED_HEAVY", "WARNING"},       /* 49.7% */
        {101.0, "UNTRACED_HEAVY", "CRITICAL"},     /* 50.2% */
        {300.0, "UNTRACED_HEAVY", "CRITICAL"},     /* 75% */
    };
    shares sh = {30, 0, 20, 40, 10, 0};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        tml_window w = window(1, &sh, 100, TML_CLOCK_CPU);
        w.ranks[0].avg_ns[TML_M_UNTRACED] = rows[i].untraced_ms * MS;
        tml_step_diag st;
        tml_diagnosis v;
        tml__diag_step_time(&w, NULL, &st);
        CHECK_STR(st.primary.kind, "INPUT_BOUND");     /* the step's own verdict stands */
        tml__diag_run_verdict(&st, NAN, NULL, &v);
        CHECK_STR(v.kind, rows[i].kind);
        CHECK_STR(tml__severity_name(v.severity), rows[i].severity);
        if (strcmp(v.kind, "UNTRACED_HEAVY") == 0) {
            CHECK(strstr(v.why, "INPUT-BOUND (CRITICAL)") != NULL);
            CHECK_NEAR(v.share, rows[i].untraced_ms / (100.0 + rows[i].untraced_ms), 1e-9);
        }
    }
    /* the thresholds are overridable like the others */
    tml_thresholds th;
    tml__thresholds_default(&th);
    CHECK_EQ_INT(tml__thresholds_parse(&th, "untraced_warn=0.6,untraced_crit=0.8"), 0);
    CHECK_EQ_INT(tml__thresholds_parse(&th, "untraced_warn=0.9"), TML_EINVAL);   /* > crit */
    tml_window w = window(1, &sh, 100, TML_CLOCK_CPU);
    w.ranks[0].avg_ns[TML_M_UNTRACED] = 200 * MS;      /* 67% */
    tml_step_diag st;
    tml_diagnosis v;
    tml__diag_step_time(&w, &th, &st);
    tml__diag_run_verdict(&st, NAN, &th, &v);
    CHECK_STR(v.kind, "UNTRACED_HEAVY");
    CHECK_STR(tml__severity_name(v.severity), "WARNING");
}

/* A saturated host: "try num_workers" would add competition for the
 * same cores, so INPUT-BOUND's Next says to make batches cheaper. */
static void test_input_advice_vs_saturated_host(void)
{
    tml_step_diag d;
    shares s = split(64, 0.4, 1.6, 34);
    tml_window w = window(1, &s, 256, TML_CLOCK_CPU);
    w.ranks[0].loader_known = 1;
    w.ranks[0].cpu_count = 2;
    tml__diag_step_time(&w, NULL, &d);
    CHECK(strstr(d.primary.next, "try num_workers=2") != NULL);
    w.host_cpu_busy = 97.0;                          /* HIGH CPU */
    tml__diag_step_time(&w, NULL, &d);
    CHECK(strstr(d.primary.next, "host CPU averaged 97% (HIGH CPU)") != NULL);
    CHECK(strstr(d.primary.next, "try num_workers") == NULL);
    CHECK(strstr(d.issues[0].next, "host CPU averaged 97%") != NULL);
}

/* An INPUT-BOUND window (Input Wait 64% of the step) whose batch takes
 * fetch_ms to fetch, with the loader and host CPU given; cpu at or over
 * HIGH CPU's threshold is also host_cpu_busy, as the report sets it. */
static const char *input_next_at(double fetch_ms, int workers, int cores, tml_clock clock,
                                 double cpu)
{
    static tml_step_diag d;
    shares s = split(64, 0.4, 1.6, 34);
    tml_window w = window(1, &s, 256, clock);
    for (int m = 0; m < TML_M_COUNT; m++)
        w.ranks[0].avg_ns[m] *= fetch_ms / 64.0;
    w.ranks[0].step_median_ns = w.ranks[0].step_p90_ns = w.ranks[0].avg_ns[TML_M_STEP];
    w.ranks[0].loader_known = 1;
    w.ranks[0].loader_workers = workers;
    w.ranks[0].cpu_count = cores;
    w.host_cpu_percent = cpu;
    w.host_cpu_busy = cpu >= TML_HOST_CPU_HIGH ? cpu : 0;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "INPUT_BOUND");
    return d.primary.next;
}

#define FETCH_CLOSE "Input Wait 64% with DataLoader(num_workers=0) on 16 cores, a batch takes " \
    "1.5 to 2.5 ms to fetch, about what handing it to a worker costs (~2 ms): a close call " \
    "between num_workers=8 and a cheaper fetch (index whole batches instead of collating " \
    "samples one by one); measure it with `traceml tune SCRIPT`."
#define CPU_CLOSE "Input Wait 64% with DataLoader(num_workers=2) on 16 cores, the host CPU " \
    "averaged between 75% and 85%, near HIGH CPU's 80%: a close call between num_workers=4 " \
    "and cheaper batches (transforms, decoding, collation), as more workers may compete with " \
    "the training for cores; measure it with `traceml tune SCRIPT`."
#define BOTH_CLOSE "Input Wait 64% with DataLoader(num_workers=0) on 16 cores, a batch takes " \
    "1.5 to 2.5 ms to fetch, about what handing it to a worker costs (~2 ms), and the host CPU " \
    "averaged between 75% and 85%, near HIGH CPU's 80%: a close call between num_workers=8 " \
    "(with pin_memory=True) and a cheaper fetch (index whole batches instead of collating " \
    "samples one by one); measure it with `traceml tune SCRIPT`."
#define SATURATED(pct) "Input Wait 64%, but the host CPU averaged " pct " (HIGH CPU): more " \
    "DataLoader workers would compete with the training. Make batches cheaper (transforms, " \
    "decoding, collation) or prepare them ahead."

/* Close calls (docs/diagnosis.md): near the cheap-fetch threshold (2 ms,
 * band 1.5 to 2.5 ms) and near HIGH CPU (80%, band 75% to 85%) the
 * INPUT-BOUND Next line is one text whichever side the value fell on;
 * outside the bands it is the advice of either side, as before. */
static void test_input_next_close_calls(void)
{
    static const struct {
        double fetch_ms;
        int workers, cores;
        tml_clock clock;
        double cpu;             /* host CPU %; NAN unsampled */
        const char *next;       /* NULL: starts with prefix */
        const char *prefix;
    } t[] = {
        /* the fetch, host CPU unsampled and well below HIGH CPU */
        { 1.49, 0, 16, TML_CLOCK_CPU, NAN, NULL, "Input Wait 64%, but a batch takes only 1.49 ms" },
        { 1.50, 0, 16, TML_CLOCK_CPU, NAN, FETCH_CLOSE, NULL },
        { 1.99, 0, 16, TML_CLOCK_CPU, NAN, FETCH_CLOSE, NULL },   /* just below: was "cheap" */
        { 2.00, 0, 16, TML_CLOCK_CPU, NAN, FETCH_CLOSE, NULL },   /* just above: was "try 8" */
        { 2.49, 0, 16, TML_CLOCK_CPU, 50, FETCH_CLOSE, NULL },
        { 2.50, 0, 16, TML_CLOCK_CPU, 50, "Input Wait 64% with DataLoader(num_workers=0) on 16 "
          "cores: try num_workers=8.", NULL },
        /* the host CPU, the fetch far from cheap */
        { 64, 2, 16, TML_CLOCK_CPU, 74.9, "Input Wait 64% with DataLoader(num_workers=2) on 16 "
          "cores: try num_workers=4, or make each batch cheaper (transforms, decoding, "
          "storage).", NULL },
        { 64, 2, 16, TML_CLOCK_CPU, 75.0, CPU_CLOSE, NULL },
        { 64, 2, 16, TML_CLOCK_CPU, 79.9, CPU_CLOSE, NULL },      /* just below: was "try 4" */
        { 64, 2, 16, TML_CLOCK_CPU, 80.0, CPU_CLOSE, NULL },      /* HIGH CPU: was "compete" */
        { 64, 2, 16, TML_CLOCK_CPU, 84.9, CPU_CLOSE, NULL },
        { 64, 2, 16, TML_CLOCK_CPU, 85.0, SATURATED("85%"), NULL },
        /* both close, either side of either threshold */
        { 1.9, 0, 16, TML_CLOCK_GPU, 78, BOTH_CLOSE, NULL },
        { 2.1, 0, 16, TML_CLOCK_GPU, 78, BOTH_CLOSE, NULL },
        { 1.9, 0, 16, TML_CLOCK_GPU, 82, BOTH_CLOSE, NULL },
        { 2.1, 0, 16, TML_CLOCK_GPU, 82, BOTH_CLOSE, NULL },
        /* a saturated host: no workers, whatever the fetch in its band */
        { 1.9, 0, 16, TML_CLOCK_CPU, 90, SATURATED("90%"), NULL },
        { 2.1, 0, 16, TML_CLOCK_CPU, 90, SATURATED("90%"), NULL },
        { 1.4, 0, 16, TML_CLOCK_CPU, 90, NULL, "Input Wait 64%, but a batch takes only 1.40 ms" },
        /* a cheap fetch is cheap whatever the host */
        { 1.4, 0, 16, TML_CLOCK_CPU, 78, NULL, "Input Wait 64%, but a batch takes only 1.40 ms" },
        /* workers already match the cores: no more workers either side */
        { 64, 16, 16, TML_CLOCK_CPU, 78, "Input Wait 64% although DataLoader(num_workers=16) "
          "already matches the 16 cores: make each batch cheaper (transforms, decoding, "
          "collation, storage).", NULL },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        const char *next = input_next_at(t[i].fetch_ms, t[i].workers, t[i].cores, t[i].clock,
                                         t[i].cpu);
        if (t[i].next ? strcmp(next, t[i].next) != 0
                      : strncmp(next, t[i].prefix, strlen(t[i].prefix)) != 0)
            fprintf(stderr, "row %zu: got \"%s\"\n", i, next);
        if (t[i].next)
            CHECK_STR(next, t[i].next);
        else
            CHECK(strncmp(next, t[i].prefix, strlen(t[i].prefix)) == 0);
    }
}

/* EPOCH START: workers restarted each epoch; left out of the window,
 * reported apart, the verdict when it outweighs the steady state's. */
static void test_epoch_start(void)
{
    tml_step_diag d;
    shares s = split(2, 0, 3, 95);                    /* a 100 ms steady step */
    tml_window w = window(1, &s, 100, TML_CLOCK_CPU);
    w.epoch_start_steps = 5;
    w.epoch_start_wait_ns = 2.0e9;                    /* 10 s of 20 s: 50% */
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "EPOCH_START");
    CHECK_EQ_INT(d.primary.severity, TML_SEV_CRITICAL);
    CHECK(strstr(d.primary.why, "waited 2.00 s") != NULL);
    CHECK(strstr(d.primary.why, "5 epoch starts, 50% of the time") != NULL);
    CHECK(strstr(d.primary.next, "persistent_workers=True") != NULL);
    tml_diagnosis v;
    tml__diag_run_verdict(&d, NAN, NULL, &v);
    CHECK_STR(v.kind, "EPOCH_START");

    /* 10% of the time: a WARNING behind an INPUT-BOUND of the same rank */
    s = split(30, 0, 3, 67);
    w = window(1, &s, 100, TML_CLOCK_CPU);
    w.epoch_start_steps = 1;
    w.epoch_start_wait_ns = 1.1e9;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "INPUT_BOUND");
    CHECK_STR(d.issues[1].kind, "EPOCH_START");

    /* both CRITICAL (a saturated host stretches the steady state's input
     * wait to 27%): the starts, 77% of the run, come first; the steady
     * state's wait is 27% of the rest, 6% of the run */
    s = split(1.62, 0, 0.18, 4.2);                    /* a 6 ms steady step */
    w = window(1, &s, 70, TML_CLOCK_CPU);
    w.epoch_start_steps = 4;
    w.epoch_start_wait_ns = 0.35e9;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "EPOCH_START");
    CHECK_EQ_INT(d.primary.severity, TML_SEV_CRITICAL);
    CHECK_STR(d.issues[1].kind, "INPUT_BOUND");
    CHECK_EQ_INT(d.issues[1].severity, TML_SEV_CRITICAL);

    /* too short to matter (under 50 ms, or under 3 steps' worth): nothing */
    s = split(2, 0, 3, 95);
    w = window(1, &s, 100, TML_CLOCK_CPU);
    w.epoch_start_steps = 50;
    w.epoch_start_wait_ns = 0.25e9;                   /* 2.5 steps */
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "COMPUTE_BOUND");
    CHECK_EQ_INT(d.nissues, 1);
}

/* Validation before each epoch (the script's time before the loader's
 * start, window.c): Untraced time, not the loader's; with it between
 * epochs is most of the run, UNTRACED-HEAVY names it. */
static void test_between_epochs(void)
{
    tml_step_diag d;
    shares s = split(2, 0, 3, 95);                    /* a 100 ms steady step */
    tml_window w = window(1, &s, 100, TML_CLOCK_CPU);
    ranks[0].avg_ns[TML_M_UNTRACED] = 0;
    w.epoch_start_steps = 5;
    w.epoch_start_wait_ns = 0.4e9;                    /* the loader's own: 2 s */
    w.between_epochs_ns = 3.6e9;                      /* validation: 18 s */
    tml__diag_step_time(&w, NULL, &d);
    /* 10 s of steps, 2 s of loader starts, 18 s of validation */
    CHECK_NEAR(d.untraced_wall, 18.0 / 30.0, 1e-9);
    CHECK_NEAR(d.between_epochs_wall, 18.0 / 30.0, 1e-9);
    CHECK_STR(d.primary.kind, "EPOCH_START");
    CHECK(strstr(d.primary.why, "waited 0.40 s") != NULL);
    CHECK(strstr(d.primary.why, "own 3.60 s before each") != NULL);
    tml_diagnosis v;
    tml__diag_run_verdict(&d, NAN, NULL, &v);
    CHECK_STR(v.kind, "UNTRACED_HEAVY");
    CHECK(strstr(v.why, "60% of wall-clock (60% before epochs") != NULL);
    CHECK(strstr(v.next, "between epochs (validation") != NULL);

    /* none timed (tml_mark_epoch_start from C): as before */
    w.between_epochs_ns = 0;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_NEAR(d.untraced_wall, 0, 1e-9);
    CHECK_NEAR(d.between_epochs_wall, 0, 1e-9);
    CHECK(strstr(d.primary.why, "before each") == NULL);
}

/* Exposed communication of every rank (ms of a 100 ms step, the rest as
 * split() has it), the step time kept. */
static void with_comm(tml_window *w, const double *comm_ms)
{
    for (size_t i = 0; i < w->nranks; i++) {
        tml_rank_window *r = &w->ranks[i];
        r->avg_ns[TML_M_COMM] = comm_ms[i] * MS;
        r->avg_ns[TML_M_RESIDUAL] -= comm_ms[i] * MS;
        r->avg_ns[TML_M_COMM_TOTAL] = comm_ms[i] * MS;
        r->comm_bytes_per_step = 8e6;
        r->comm_bytes_per_s = 8e6 / (comm_ms[i] / 1e3);
        r->missing &= ~TML_PHASE_BIT(TML_PHASE_COMM);
    }
    w->missing &= ~TML_PHASE_BIT(TML_PHASE_COMM);
}

static void test_communication_bound(void)
{
    static const struct {
        double comm0, comm1;   /* ms of a 100 ms step */
        size_t steps;
        const char *kind;
        tml_severity sev;
    } t[] = {
        { 25, 25, 100, "COMMUNICATION_BOUND", CRIT },
        { 20, 24, 100, "COMMUNICATION_BOUND", CRIT },   /* the least-waiting rank: 20% */
        { 19.9, 24, 100, "COMMUNICATION_BOUND", WARN },
        { 25, 25, 19, "COMMUNICATION_BOUND", WARN },    /* CRITICAL needs 20 steps */
        { 10, 12, 100, "COMMUNICATION_BOUND", WARN },
        { 9.9, 14, 100, "BALANCED", INFO },             /* one rank waits less than 10% */
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        double rest = t[i].comm1 + 2;         /* Residual: what communication leaves of it */
        shares s[2] = { split(2, 0, rest, 98 - rest), split(2, 0, rest, 98 - rest) };
        tml_window w = window(2, s, t[i].steps, TML_CLOCK_CPU);
        double c[2] = { t[i].comm0, t[i].comm1 };
        with_comm(&w, c);
        tml_step_diag d;
        tml__diag_step_time(&w, NULL, &d);
        if (strcmp(d.primary.kind, t[i].kind) != 0 || d.primary.severity != t[i].sev)
            fprintf(stderr, "row %zu: got %s/%d, want %s/%d\n", i, d.primary.kind,
                    (int)d.primary.severity, t[i].kind, (int)t[i].sev);
        CHECK_STR(d.primary.kind, t[i].kind);
        CHECK_EQ_INT(d.primary.severity, t[i].sev);
    }
    /* the evidence: who waited least, the bytes and the bandwidth */
    shares s[2] = { split(2, 0, 31, 67), split(2, 0, 31, 67) };
    tml_window w = window(2, s, 100, TML_CLOCK_CPU);
    double c[2] = { 30, 25 };
    with_comm(&w, c);
    tml_step_diag d;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_EQ_INT(d.primary.cause, TML_M_COMM);
    CHECK_NEAR(d.primary.share, 0.25, 1e-9);
    CHECK(strstr(d.primary.why, "25% of Step Time on every rank (R1/N0") != NULL);
    CHECK(strstr(d.primary.why, "8.0 MB per step at 320.0 MB/s") != NULL);
    CHECK(strstr(d.primary.next, "no_sync()") != NULL);
    /* a threshold of the user's */
    tml_thresholds th;
    tml__thresholds_default(&th);
    CHECK_EQ_INT(tml__thresholds_parse(&th, "comm_warn=0.3,comm_crit=0.5"), 0);
    tml__diag_step_time(&w, &th, &d);
    CHECK_STR(d.primary.kind, "BALANCED");
    CHECK_EQ_INT(tml__thresholds_parse(&th, "comm_warn=0.6"), TML_EINVAL);   /* above crit */
    /* the advice fits where the collectives run: one CPU host has no
     * link to check, its gloo reduces on the training's cores, so a comm
     * hook's casts cost what they save (traceml tune: +2.0%, -5.9 .. +9.9%)
     * and a copy less is the gain (gradient_as_bucket_view: -17.4%) */
    tml__diag_step_time(&w, NULL, &d);
    CHECK(strstr(d.primary.next, "Every rank is on this host and trains on its CPU: gloo") != NULL);
    CHECK(strstr(d.primary.next, "check the link") == NULL);
    CHECK(strstr(d.primary.next, "send less") == NULL);
    CHECK(strstr(d.primary.next, "copy less (DDP gradient_as_bucket_view=True); a comm hook's "
                 "casts would take those cores too") != NULL);
    /* a few kB a step: bound by latency, so no comm hook or buckets (a tune
     * measures no gain from them there), a larger batch or fewer syncs */
    double sent[2] = {w.ranks[0].comm_bytes_per_step, w.ranks[1].comm_bytes_per_step};
    w.ranks[0].comm_bytes_per_step = w.ranks[1].comm_bytes_per_step = 19000;
    tml__diag_step_time(&w, NULL, &d);
    CHECK(strstr(d.primary.next, "a step is bound by latency") != NULL);
    CHECK(strstr(d.primary.next, "larger batches") != NULL);
    CHECK(strstr(d.primary.next, "send less") == NULL);
    w.ranks[0].comm_bytes_per_step = sent[0];
    w.ranks[1].comm_bytes_per_step = sent[1];
    w.host_cpu_busy = 97;
    tml__diag_step_time(&w, NULL, &d);
    CHECK(strstr(d.primary.next, "the host CPU averaged 97%: HIGH CPU") != NULL);
    w.ranks[0].has_gpu = w.ranks[1].has_gpu = 1;          /* one node of GPUs */
    w.host_cpu_busy = 0;
    tml__diag_step_time(&w, NULL, &d);
    CHECK(strstr(d.primary.next, "NVLink/PCIe") != NULL);
    CHECK(strstr(d.primary.next, "send less (a bf16/fp16 or PowerSGD comm hook)") != NULL);
    CHECK(strstr(d.primary.next, "check the link") == NULL);
    w.ranks[1].node = 1;                                  /* two nodes: the link */
    tml__diag_step_time(&w, NULL, &d);
    CHECK(strstr(d.primary.next, "check the link between the nodes") != NULL);
    /* on a saturated host the ranks' waits for CPU time are in it too: the
     * Next line says so before it blames the link */
    w.host_cpu_busy = 97;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "COMMUNICATION_BOUND");
    CHECK(strstr(d.primary.next, "host CPU averaged 97% (HIGH CPU)") != NULL);
    CHECK(strstr(d.primary.next, "check the link") == NULL);
    w.ranks[1].node = 0;
    w.ranks[0].has_gpu = w.ranks[1].has_gpu = 0;
    /* a group of one (a single process's gloo group: DeepSpeed on one
     * rank) sends nothing: its "collectives" are no communication */
    shares one[1] = { split(2, 0, 31, 67) };
    tml_window w1 = window(1, one, 100, TML_CLOCK_CPU);
    double c1[1] = { 30 };
    with_comm(&w1, c1);
    w1.ranks[0].comm_bytes_per_step = 0;
    tml__diag_step_time(&w1, NULL, &d);
    CHECK(strcmp(d.primary.kind, "COMMUNICATION_BOUND") != 0);
    w1.ranks[0].comm_bytes_per_step = 8e6;      /* one rank of a larger group that sent */
    tml__diag_step_time(&w1, NULL, &d);
    CHECK_STR(d.primary.kind, "COMMUNICATION_BOUND");
}


/* COMMUNICATION-BOUND's Next on the host CPU (close calls): across nodes
 * a saturated host is named before the link; near HIGH CPU one text;
 * on one host only the note about the CPU is banded. */
static const char *comm_next_at(int nodes, double cpu)
{
    static tml_step_diag d;
    shares s[2] = { split(2, 0, 31, 67), split(2, 0, 31, 67) };
    tml_window w = window(2, s, 100, TML_CLOCK_CPU);
    double c[2] = { 30, 25 };
    with_comm(&w, c);
    w.ranks[0].has_gpu = w.ranks[1].has_gpu = 1;
    w.ranks[1].node = nodes > 1;
    w.host_cpu_percent = cpu;
    w.host_cpu_busy = cpu >= TML_HOST_CPU_HIGH ? cpu : 0;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "COMMUNICATION_BOUND");
    return d.primary.next;
}

static void test_comm_next_close_call(void)
{
    static const char close[] = "The host CPU averaged between 75% and 85%, near HIGH CPU's 80%: "
        "a close call between giving each rank its cores (fewer ranks or threads per host: "
        "ranks waiting for CPU time hold the collectives up too) and the transfer itself (a "
        "bf16/fp16 comm hook, DDP bucket_cap_mb, the link between the nodes); measure it with "
        "`traceml tune SCRIPT`.";
    char below[TML_DIAG_TEXT], above[TML_DIAG_TEXT];
    CHECK(strncmp(comm_next_at(2, 74.9), "The transfer itself is slow on every rank", 41) == 0);
    CHECK_STR(comm_next_at(2, 75.0), close);
    CHECK_STR(comm_next_at(2, 79.9), close);   /* just below: was the link */
    CHECK_STR(comm_next_at(2, 80.0), close);   /* HIGH CPU: was the cores first */
    CHECK_STR(comm_next_at(2, 84.9), close);
    CHECK(strncmp(comm_next_at(2, 85.0), "The host CPU averaged 85% (HIGH CPU): ranks waiting", 51) == 0);
    CHECK(strncmp(comm_next_at(2, NAN), "The transfer itself is slow on every rank", 41) == 0);
    /* one host: the same advice either side, the note banded */
    snprintf(below, sizeof(below), "%s", comm_next_at(1, 79.9));
    snprintf(above, sizeof(above), "%s", comm_next_at(1, 80.0));
    CHECK_STR(below, above);
    CHECK(strstr(below, "no network is involved (the host CPU averaged between 75% and 85%, "
                        "near HIGH CPU's 80%).") != NULL);
    CHECK(strstr(comm_next_at(1, 74.9), "no network is involved. ") != NULL);
    CHECK(strstr(comm_next_at(1, 85.0), "(the host CPU averaged 85%: HIGH CPU)") != NULL);
}

/* RESIDUAL-HEAVY on a saturated host: waiting for a core between the
 * phases is Residual too, and the Next line says so first; near HIGH CPU
 * the note is the band, the same either side. */
static const char *residual_next_at(double cpu)
{
    static tml_step_diag d;
    shares s = split(0, 0, 12, 88);
    tml_window w = window(1, &s, 30, TML_CLOCK_CPU);
    w.host_cpu_percent = cpu;
    w.host_cpu_busy = cpu >= TML_HOST_CPU_HIGH ? cpu : 0;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "RESIDUAL_HEAVY");
    return d.primary.next;
}

static void test_residual_next_on_saturated_host(void)
{
    static const char look[] = "Look for work in the step outside traced phases: CPU stalls, "
                               ".item() syncs, logging.";
    char below[TML_DIAG_TEXT], above[TML_DIAG_TEXT];
    CHECK_STR(residual_next_at(NAN), look);
    CHECK_STR(residual_next_at(74.9), look);
    snprintf(below, sizeof(below), "%s", residual_next_at(79.9));
    snprintf(above, sizeof(above), "%s", residual_next_at(80.0));
    CHECK_STR(below, above);
#define STARTS(s, lit) (strncmp((s), lit, sizeof(lit) - 1) == 0)
    CHECK(STARTS(below, "The host CPU averaged between 75% and 85%, near HIGH CPU's 80%: "
                 "waiting for a core"));
    const char *high = residual_next_at(97.0);
    CHECK(STARTS(high, "The host CPU averaged 97% (HIGH CPU): waiting for a core between the "
                 "traced phases is Residual too, so give the training its cores first. "));
#undef STARTS
    CHECK(strstr(high, look) != NULL);
}

/* A rank slowed in its forward: its peer waits in the all-reduce (exposed
 * communication), which neither makes the run COMMUNICATION-BOUND nor
 * hides the straggler (the score reads Backward + Communication). */
static void test_straggler_wait_is_not_communication(void)
{
    shares s[2] = { { 1, 0, 16, 1, 1, 0.5 }, { 1, 0, 56, 1, 1, 0.5 } };
    tml_window w = window(2, s, 30, TML_CLOCK_CPU);
    double c[2] = { 40, 1 };
    for (size_t i = 0; i < 2; i++)
        w.ranks[i].avg_ns[TML_M_STEP] += c[i] * MS;
    with_comm(&w, c);
    w.ranks[0].avg_ns[TML_M_RESIDUAL] += c[0] * MS;     /* with_comm took it from Residual */
    w.ranks[1].avg_ns[TML_M_RESIDUAL] += c[1] * MS;
    tml_step_diag d;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "COMPUTE_STRAGGLER");
    CHECK(strstr(d.primary.why, "R1/N0's Forward took 40.0 ms more than R0/N0's (56.0 vs "
                 "16.0 ms); the others waited 39.0 ms per step for it") != NULL);
    for (size_t i = 0; i < d.nissues; i++)
        CHECK(strcmp(d.issues[i].kind, "COMMUNICATION_BOUND") != 0);
    CHECK_NEAR(d.straggler.cost_ns, 39 * MS, 1);
}

/* One rank does extra work in optimizer.step() (0.5.0's compute-straggler
 * demo): its peer waits for it at the next all-reduce. The compute
 * component is Forward + Optimizer, the work outside the collective, so
 * this is a COMPUTE STRAGGLER pointing at the optimizer step, not a
 * STRAGGLER that no traced phase explains. */
static void test_compute_straggler_in_optimizer(void)
{
    tml_step_diag d;
    tml_window w = straggler_window(2, 40, 4, 1.0, 100);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "COMPUTE_STRAGGLER");
    CHECK_EQ_INT(d.straggler.component, 2);
    CHECK_NEAR(d.straggler.coverage[2], 1.0, 1e-9);
    CHECK_NEAR(d.straggler.optimizer_coverage, 1.0, 1e-9);
    CHECK_NEAR(d.straggler.forward_coverage, 0.0, 1e-9);
    CHECK(strstr(d.primary.why, "R0/N0's Optimizer took 40.0 ms more than R1/N0's (50.0 vs "
                 "10.0 ms); the others waited 40.0 ms per step") != NULL);
    CHECK(strstr(d.primary.next, "Inspect the optimizer step on the slow rank (R0/N0)") != NULL);

    /* the excess in forward: Next points at the forward's inputs */
    w = straggler_window(2, 40, 2, 1.0, 100);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "COMPUTE_STRAGGLER");
    CHECK(strstr(d.primary.next, "uneven batch sizes") != NULL);

    /* Optimizer missing on a rank (a hand-written update): the forward
     * alone is the compute part, never a zero for the missing one */
    w = straggler_window(2, 40, 2, 1.0, 100);
    ranks[1].avg_ns[TML_M_OPTIMIZER] = NAN;
    tml__diag_straggler(&w, NULL, &d.straggler);
    CHECK_NEAR(d.straggler.coverage[2], 1.0, 1e-9);
    CHECK(isnan(d.straggler.optimizer_coverage));
    tml__diag_step_time(&w, NULL, &d);
    CHECK(strstr(d.primary.why, "R0/N0's Forward took 40.0 ms more than R1/N0's (90.0 vs "
                 "50.0 ms);") != NULL);
    /* and the optimizer alone when Forward is missing */
    w = straggler_window(2, 40, 4, 1.0, 100);
    ranks[0].avg_ns[TML_M_FORWARD] = NAN;
    tml__diag_straggler(&w, NULL, &d.straggler);
    CHECK_NEAR(d.straggler.coverage[2], 1.0, 1e-9);
    CHECK(isnan(d.straggler.forward_coverage));

    /* extra work in the step outside every phase (24 matmuls after
     * optimizer.step()): Residual explains it, named in Why and Next */
    w = straggler_window(2, 40, -1, 0.0, 100);
    ranks[0].avg_ns[TML_M_RESIDUAL] += 34 * MS;
    ranks[0].avg_ns[TML_M_FORWARD] += 6 * MS;
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "COMPUTE_STRAGGLER");
    CHECK_NEAR(d.straggler.residual_coverage, 34.0 / 40.0, 1e-9);
    CHECK_NEAR(d.straggler.coverage[2], 1.0, 1e-9);
    CHECK(strstr(d.primary.why, "R0/N0's Residual took 34.0 ms more than R1/N0's (37.0 vs 3.0 "
                 "ms), Forward 6.0 ms more; the others waited 40.0 ms") != NULL);
    CHECK(strstr(d.primary.next, "outside forward, backward and the optimizer") != NULL);
}

/* A CPU training on a saturated host: a rank that waited for a core
 * falls behind as one that computes more would. It takes two figures to
 * tell them apart: it used no more CPU than the victim (within 10%), and
 * its run-queue wait exceeds the victim's by half the cost or more; then
 * it is contention, a plain STRAGGLER whose Why and Next say so.
 * Otherwise (a rank that sleeps, waits for I/O or a device, or computes
 * more and waits for a core in proportion) the component stands. Only on
 * the CPU clock without GPUs, never without the figures, never for an
 * input straggler. The victim's step is 170 ms, the cost 40 ms (20 ms:
 * half). */
static void test_straggler_cpu_contention(void)
{
    static const struct {
        double busy;            /* host CPU % when HIGH CPU fired, else 0 */
        int comp;               /* straggler_window's component */
        double cul, vic;        /* run-queue wait, % of wall time, of R0 and R1 */
        double cul_cpu, vic_cpu;   /* process CPU % */
        tml_clock clock;
        int gpu;                /* a rank has GPU figures */
        const char *kind;
    } t[] = {
        { 100, 2, 20.0, 5.0, 33.1, 31.7, TML_CLOCK_CPU, 0, "STRAGGLER" },  /* +25.5 ms */
        { 100, 2, 17.2, 5.0, 33.1, 31.7, TML_CLOCK_CPU, 0, "STRAGGLER" },  /* +20.7 ms */
        { 100, 2, 16.5, 5.0, 33.1, 31.7, TML_CLOCK_CPU, 0, "COMPUTE_STRAGGLER" },  /* +19.5 */
        { 100, 2, 5.0, 5.0, 20.1, 19.1, TML_CLOCK_CPU, 0, "COMPUTE_STRAGGLER" },   /* it slept */
        { 100, 2, 20.0, 5.0, 35.2, 32.0, TML_CLOCK_CPU, 0, "STRAGGLER" },  /* CPU +10% */
        { 100, 2, 20.0, 5.0, 35.3, 32.0, TML_CLOCK_CPU, 0, "COMPUTE_STRAGGLER" },
        { 100, 2, 40.0, 5.0, 45.1, 16.1, TML_CLOCK_CPU, 0, "COMPUTE_STRAGGLER" },  /* real work */
        { 100, -1, 30.0, 5.0, 30.0, 30.0, TML_CLOCK_CPU, 0, "STRAGGLER" },
        { 0, 2, 20.0, 5.0, 33.1, 31.7, TML_CLOCK_CPU, 0, "COMPUTE_STRAGGLER" },    /* not saturated */
        { 100, 2, 20.0, 5.0, 33.1, 31.7, TML_CLOCK_GPU, 0, "COMPUTE_STRAGGLER" },
        { 100, 2, 20.0, 5.0, 33.1, 31.7, TML_CLOCK_CPU, 1, "COMPUTE_STRAGGLER" },
        { 100, 2, NAN, 5.0, 33.1, 31.7, TML_CLOCK_CPU, 0, "COMPUTE_STRAGGLER" },   /* no run queue */
        { 100, 2, 20.0, 5.0, NAN, 31.7, TML_CLOCK_CPU, 0, "COMPUTE_STRAGGLER" },   /* no CPU */
        { 100, 0, 20.0, 5.0, 25.0, 27.0, TML_CLOCK_CPU, 0, "INPUT_STRAGGLER" },    /* sleeps */
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        tml_step_diag d;
        tml_window w = straggler_window(2, 40, t[i].comp, t[i].comp < 0 ? 0.0 : 1.0, 100);
        w.clock = t[i].clock;
        w.host_cpu_busy = t[i].busy;
        ranks[0].runq_wait_percent = t[i].cul;
        ranks[1].runq_wait_percent = t[i].vic;
        ranks[0].cpu_percent = t[i].cul_cpu;
        ranks[1].cpu_percent = t[i].vic_cpu;
        ranks[1].has_gpu = t[i].gpu;
        tml__diag_step_time(&w, NULL, &d);
        if (strcmp(d.primary.kind, t[i].kind) != 0)
            fprintf(stderr, "row %zu: got %s, want %s\n", i, d.primary.kind, t[i].kind);
        CHECK_STR(d.primary.kind, t[i].kind);
        int contention = strcmp(t[i].kind, "STRAGGLER") == 0;
        CHECK_EQ_INT(d.straggler.cpu_contention, contention);
        if (d.straggler.cpu_contention) {
            CHECK_EQ_INT(d.primary.severity, CRIT);             /* the time is lost all the same */
            CHECK(strstr(d.primary.why, "and R0/N0 waited") != NULL);
            CHECK(strstr(d.primary.why, "per step for a core (run queue)") != NULL);
            CHECK(strstr(d.primary.why, "(HIGH CPU): it fell behind for want of CPU") != NULL);
            CHECK(strstr(d.primary.next, "Give each rank its cores") != NULL);
        }
    }
}

/* The attribution: the training's trees (100 = one core) against the
 * host's busy share of all cores. */
static void test_contention_maths(void)
{
    static const struct {
        int32_t cores;
        double host, trees, runq;
        double training, other;   /* NAN: unknown */
        int contended;
    } t[] = {
        /* 2 cores, two busy loops beside a training using half a core */
        { 2, 100, 50, 40, 25, 75, 1 },
        /* the training's own tree takes the cores: nobody else */
        { 2, 98, 196, 40, 98, 0, 0 },
        /* trees read a little over the host's figure (sampled apart): clamped */
        { 4, 50, 220, 5, 55, 0, 0 },
        /* other processes busy, but the training never waits for a core */
        { 8, 60, 100, 2, 12.5, 47.5, 0 },
        /* waits, but the others take less than TML_CONTENTION_OTHER */
        { 4, 60, 160, 30, 40, 20, 0 },
        /* at the thresholds exactly */
        { 4, 50, 100, 10, 25, 25, 1 },
        /* cores unknown: training and other unknown, never contended */
        { 0, 100, 50, 60, NAN, NAN, 0 },
        /* no tree samples (an older rank) */
        { 2, 100, NAN, 60, NAN, NAN, 0 },
        /* no host sample */
        { 2, NAN, 50, 60, 25, NAN, 0 },
        /* a tree over every core (more workers than cores): at most 100 */
        { 2, 100, 260, 60, 100, 0, 0 },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        tml_contention c;
        tml__contention_compute(&c, 0, t[i].cores, t[i].host, t[i].trees, t[i].runq);
        if (isnan(t[i].training))
            CHECK(isnan(c.training_cpu_percent));
        else
            CHECK_NEAR(c.training_cpu_percent, t[i].training, 1e-9);
        if (isnan(t[i].other))
            CHECK(isnan(c.other_cpu_percent));
        else
            CHECK_NEAR(c.other_cpu_percent, t[i].other, 1e-9);
        if (tml__contended(&c) != t[i].contended)
            fprintf(stderr, "row %zu: contended %d\n", i, tml__contended(&c));
        CHECK_EQ_INT(tml__contended(&c), t[i].contended);
        CHECK_EQ_INT(c.gpu_shared, -1);
    }
}

/* gpu_shared: yes when any GPU's samples saw another process, no when
 * the GPUs were sampled and none did, unknown without a sample. */
static void test_gpu_shared_of(void)
{
    double one[] = { 0, 2 }, none[] = { 0, 0 }, mixed[] = { NAN, 0 }, unknown[] = { NAN };
    CHECK_EQ_INT(tml__gpu_shared_of(one, 2), 1);
    CHECK_EQ_INT(tml__gpu_shared_of(none, 2), 0);
    CHECK_EQ_INT(tml__gpu_shared_of(mixed, 2), 0);
    CHECK_EQ_INT(tml__gpu_shared_of(unknown, 1), -1);
    CHECK_EQ_INT(tml__gpu_shared_of(NULL, 0), -1);
}

/* A window's machine: other processes' share, the training's, the wait. */
static void set_machine(tml_window *w, double host, double training, double runq)
{
    tml__contention_compute(&w->contention, 0, 2, host, training * 2, runq);
}

/* The below-threshold straggler of test_straggler_under_threshold_in_comm
 * on a machine other processes contend (37% of the cores, a 29% wait for
 * a core: CI 26's healthy 2-rank run beside a profiler): a culprit whose
 * excess is compute (6 ms of Forward) and that used no more CPU than its
 * peer is the machine's, named by neither the communication's Why nor an
 * issue; one that used more is still named. So is one whose excess lies
 * between steps (a sleep, I/O: no CPU) past twice what the wait adds to
 * the victim's own (6 ms against 0), but not within it (26 ms against 20,
 * stretched by 0.29 / 0.71 = 8.2 ms). */
static void test_straggler_in_comm_machine_made(void)
{
    static const struct {
        double fwd0, untraced0, untraced1, cul_cpu;
        int named;
    } t[] = {
        { 36, 0, 0, 96, 0 },
        { 36, 0, 0, 130, 1 },
        { 30, 6, 0, 96, 1 },
        { 30, 26, 20, 96, 0 },
    };
    const double comm[2] = { 20, 26 };
    for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
        shares s[2] = { { 1, 0, t[k].fwd0, 30, 2, 22 },
                        { 1, 0, 30, 30, 2, 28 } };
        tml_window w = window(2, s, 60, TML_CLOCK_CPU);
        with_comm(&w, comm);
        w.ranks[0].avg_ns[TML_M_UNTRACED] = t[k].untraced0 * MS;
        w.ranks[1].avg_ns[TML_M_UNTRACED] = t[k].untraced1 * MS;
        w.ranks[0].cpu_percent = t[k].cul_cpu;
        w.ranks[1].cpu_percent = 95;
        set_machine(&w, 100, 63, 29);
        tml_step_diag d;
        tml__diag_step_time(&w, NULL, &d);
        int named = 0;
        for (size_t i = 0; i < d.nissues; i++)
            named |= strstr(d.issues[i].kind, "STRAGGLER") != NULL;
        CHECK_EQ_INT(named, t[k].named);
        CHECK_EQ_INT(strstr(d.primary.why, "its wait for R0/N0") != NULL, t[k].named);
    }
}

/* A rank's run-queue wait is a mean over the run's samples, too coarse to
 * show every time what two ranks of a healthy CPU training on a shared
 * machine lose to it (CI 20: R0 11% behind R1 in every phase, input
 * wait 23% and compute 78% of the excess, a plain STRAGGLER WARNING "no
 * traced phase explains it"). Where the machine is contended by other
 * processes (others at least the training, a wait for a core), a culprit
 * whose excess is spread over its phases (none explains 80%, all
 * together do) and that used no more CPU waited for a core: a STRAGGLER
 * with cpu_contention that says so with the machine's figures. Not for a
 * component (a sleep stands for device time: COMPUTE STRAGGLER), an
 * excess in no phase, more CPU, a machine the training itself fills, a
 * host not saturated, or the GPU clock. The victim's step is 170 ms, the
 * cost 40 ms, the run-queue waits equal (5% each). */
static void test_straggler_spread_on_contended_machine(void)
{
    static const struct {
        int comp;
        double cover;
        double busy, host, training, runq;   /* HIGH CPU's value; the machine */
        double cul_cpu, vic_cpu;
        tml_clock clock;
        const char *kind;
        int contention;
    } t[] = {
        { 6, 1.0, 100, 100, 23, 34, 30.0, 29.0, TML_CLOCK_CPU, "STRAGGLER", 1 },
        { 6, 1.0, 100, 100, 23, 34, 31.9, 29.0, TML_CLOCK_CPU, "STRAGGLER", 1 },   /* +10% */
        { 6, 1.0, 100, 100, 23, 34, 33.0, 29.0, TML_CLOCK_CPU, "STRAGGLER", 0 },   /* more CPU */
        { 6, 1.0, 100, 100, 23, 34, NAN, 29.0, TML_CLOCK_CPU, "STRAGGLER", 0 },    /* no CPU */
        { 6, 1.0, 100, 100, 60, 34, 30.0, 29.0, TML_CLOCK_CPU, "STRAGGLER", 0 },   /* its own */
        { 6, 1.0, 100, 100, 23, 5, 30.0, 29.0, TML_CLOCK_CPU, "STRAGGLER", 0 },    /* no wait */
        { 6, 1.0, 0, 100, 23, 34, 30.0, 29.0, TML_CLOCK_CPU, "STRAGGLER", 0 },     /* no HIGH CPU */
        { 6, 1.0, 100, 100, 23, 34, 30.0, 29.0, TML_CLOCK_GPU, "STRAGGLER", 0 },
        { 6, 0.7, 100, 100, 23, 34, 30.0, 29.0, TML_CLOCK_CPU, "STRAGGLER", 0 },   /* 70% in phases */
        { -1, 0.0, 100, 100, 23, 34, 30.0, 29.0, TML_CLOCK_CPU, "STRAGGLER", 0 },  /* in none */
        { 2, 1.0, 100, 100, 23, 34, 30.0, 29.0, TML_CLOCK_CPU, "COMPUTE_STRAGGLER", 0 },
        { 0, 1.0, 100, 100, 23, 34, 30.0, 29.0, TML_CLOCK_CPU, "INPUT_STRAGGLER", 0 },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        tml_step_diag d;
        tml_window w = straggler_window(2, 40, t[i].comp, t[i].cover, 100);
        w.clock = t[i].clock;
        w.host_cpu_busy = t[i].busy;
        set_machine(&w, t[i].host, t[i].training, t[i].runq);
        ranks[0].runq_wait_percent = ranks[1].runq_wait_percent = 5.0;
        ranks[0].cpu_percent = t[i].cul_cpu;
        ranks[1].cpu_percent = t[i].vic_cpu;
        tml__diag_step_time(&w, NULL, &d);
        if (strcmp(d.primary.kind, t[i].kind) != 0 ||
            d.straggler.cpu_contention != t[i].contention)
            fprintf(stderr, "row %zu: got %s (%d), want %s (%d)\n", i, d.primary.kind,
                    d.straggler.cpu_contention, t[i].kind, t[i].contention);
        CHECK_STR(d.primary.kind, t[i].kind);
        CHECK_EQ_INT(d.straggler.cpu_contention, t[i].contention);
        CHECK_EQ_INT(d.primary.severity, CRIT);
        if (t[i].contention) {
            CHECK(strstr(d.primary.why, "Peers waited 40.0 ms per step for R0/N0 at the gradient "
                         "all-reduce (24% of R1/N0's Step Time), spread over its phases (input "
                         "wait 30%, compute 70% of it) with no more CPU") != NULL);
            CHECK(strstr(d.primary.why, "other processes used 77% of the host's cores and the "
                         "training waited for a core 34% of its time") != NULL);
            CHECK(strstr(d.primary.why, "(HIGH CPU): it fell behind for want of CPU") != NULL);
            CHECK(strstr(d.primary.next, "Give each rank its cores: other processes used 77%")
                  != NULL);
        } else if (strcmp(t[i].kind, "STRAGGLER") == 0) {
            CHECK(strstr(d.primary.why, "no traced phase explains it") != NULL);
        }
    }
}

/* RESIDUAL-HEAVY's and a contention STRAGGLER's Next on a saturated host
 * name who took the cores when other processes did (issue 45: the Next
 * fits who uses the CPU), and stay as they were when the training did. */
static void test_other_processes_named_in_next(void)
{
    static tml_step_diag d;
    shares s = split(0, 0, 12, 88);
    tml_window w = window(1, &s, 30, TML_CLOCK_CPU);
    w.host_cpu_percent = w.host_cpu_busy = 97;
    set_machine(&w, 97, 17, 50);
    tml__diag_step_time(&w, NULL, &d);
    CHECK_STR(d.primary.kind, "RESIDUAL_HEAVY");
    CHECK(strncmp(d.primary.next, "The host CPU averaged 97% (HIGH CPU), other processes using "
                  "80% of the cores: waiting for a core between the traced phases", 120) == 0);
    set_machine(&w, 97, 90, 50);            /* the training's own: as before */
    tml__diag_step_time(&w, NULL, &d);
    CHECK(strstr(d.primary.next, "other processes") == NULL);

    for (int others = 0; others < 2; others++) {
        tml_window v = straggler_window(2, 40, 2, 1.0, 100);
        v.clock = TML_CLOCK_CPU;
        v.host_cpu_busy = 100;
        ranks[0].runq_wait_percent = 20.0;
        ranks[1].runq_wait_percent = 5.0;
        ranks[0].cpu_percent = 33.1;
        ranks[1].cpu_percent = 31.7;
        ranks[1].has_gpu = 0;
        set_machine(&v, 100, others ? 30 : 95, 20);
        tml__diag_step_time(&v, NULL, &d);
        CHECK_STR(d.primary.kind, "STRAGGLER");
        CHECK(strstr(d.primary.next, "Give each rank its cores") != NULL);
        CHECK((strstr(d.primary.next, "other processes used 70% of this host's cores") != NULL) ==
              others);
    }
}

/* INPUT-BOUND on a saturated host: "would compete" only when the
 * training's own tree takes the cores; when other processes take them,
 * the Next names their share and sends the worker count to tune; under
 * `traceml run --apply` it keeps tune's measured worker count. */
static void test_input_next_on_shared_machine(void)
{
    static const struct {
        double host, training, runq;   /* % of the cores, % of the cores, % of wall */
        int applied;                   /* --apply num_workers=1 (the script's own is 1) */
        const char *want, *not;
    } t[] = {
        /* two busy loops beside: others 86%, the training waited 58% */
        { 100, 14, 58, 0, "other processes used 86% of the cores (the training 14%)",
          "would compete" },
        { 100, 14, 58, 0, "Measure num_workers=2 with `traceml tune SCRIPT`",
          "HIGH CPU" },
        /* the training's own workers take the cores: nobody else */
        { 97, 95, 40, 0, "more DataLoader workers would compete with the training",
          "other processes" },
        /* others busy, but the training never waited for a core */
        { 97, 30, 3, 0, "would compete", "other processes" },
        /* unknown attribution (an older rank): as before */
        { 97, NAN, 40, 0, "would compete", "other processes" },
        /* --apply of tune's num_workers=1, busy loops beside or not */
        { 100, 14, 58, 1, "the worker count `traceml tune` measured fastest (--apply): keep it",
          "would compete" },
        { 97, 95, 40, 1, "keep it", "would compete" },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        tml_step_diag d;
        shares s = split(64, 0.4, 1.6, 34);
        tml_window w = window(1, &s, 256, TML_CLOCK_CPU);
        for (int m = 0; m < TML_M_COUNT; m++)
            w.ranks[0].avg_ns[m] *= 10.0 / 64.0;   /* a 10 ms fetch: worth a worker */
        w.ranks[0].loader_known = 1;
        w.ranks[0].loader_workers = 1;
        w.ranks[0].cpu_count = 2;
        w.host_cpu_percent = w.host_cpu_busy = t[i].host;
        set_machine(&w, t[i].host, t[i].training, t[i].runq);
        w.applied = t[i].applied;
        w.applied_workers = t[i].applied ? 1 : -1;
        tml__diag_step_time(&w, NULL, &d);
        CHECK_STR(d.primary.kind, "INPUT_BOUND");
        if (!strstr(d.primary.next, t[i].want) || strstr(d.primary.next, t[i].not))
            fprintf(stderr, "row %zu: %s\n", i, d.primary.next);
        CHECK(strstr(d.primary.next, t[i].want) != NULL);
        CHECK(strstr(d.primary.next, t[i].not) == NULL);
    }
}

/* Two healthy ranks on a host whose cores other processes take: their
 * exposed communication is waiting for peers without a core, so the
 * verdict is CPU CONTENTION, not COMMUNICATION-BOUND; the ranks' own
 * saturation of the host (nobody else) stays COMMUNICATION-BOUND. */
static void test_communication_on_shared_machine(void)
{
    static const struct {
        double host, training, runq;
        const char *kind;
    } t[] = {
        { 100, 30, 45, "CPU_CONTENTION" },        /* two busy loops beside 2 ranks */
        { 100, 30, 20, "CPU_CONTENTION" },        /* wait >= half the 38% exposed */
        { 100, 30, 15, "COMMUNICATION_BOUND" },   /* the wait explains too little */
        { 100, 97, 45, "COMMUNICATION_BOUND" },   /* the ranks take the cores themselves */
        { 100, 30, NAN, "COMMUNICATION_BOUND" },  /* no schedstat: never guessed */
        { 60, 50, 45, "COMMUNICATION_BOUND" },    /* others 10% only */
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        shares s[2] = { split(2, 0, 40, 58), split(2, 0, 40, 58) };
        tml_window w = window(2, s, 100, TML_CLOCK_CPU);
        double c[2] = { 38, 39 };
        with_comm(&w, c);
        ranks[1].node = 0;                        /* both ranks on this host */
        w.host_cpu_percent = w.host_cpu_busy = t[i].host;
        set_machine(&w, t[i].host, t[i].training, t[i].runq);
        tml_step_diag d;
        tml_diagnosis v;
        tml__diag_step_time(&w, NULL, &d);
        if (i == 0) {                             /* across nodes the link is a suspect too */
            ranks[1].node = 1;
            tml__diag_step_time(&w, NULL, &d);
            CHECK_STR(d.primary.kind, "COMMUNICATION_BOUND");
            ranks[1].node = 0;
            tml__diag_step_time(&w, NULL, &d);
        }
        tml__diag_run_verdict(&d, NAN, NULL, &v);
        if (strcmp(v.kind, t[i].kind) != 0)
            fprintf(stderr, "row %zu: got %s\n", i, v.kind);
        CHECK_STR(v.kind, t[i].kind);
        if (strcmp(v.kind, "CPU_CONTENTION") == 0) {
            CHECK_EQ_INT(v.severity, CRIT);        /* the time is lost all the same */
            CHECK(strstr(v.why, "Other processes used 70% of the 2 cores (the training 30%)") != NULL);
            CHECK(strstr(v.why, "not the transfer") != NULL);
            CHECK(strstr(v.next, "Give the training its cores") != NULL);
            CHECK(strstr(v.next, "comm hook") == NULL);
        }
    }
}

#define TESTS X(test_input_next_on_shared_machine) X(test_communication_on_shared_machine) \
    X(test_contention_maths) X(test_gpu_shared_of) X(test_communication_bound) X(test_straggler_cpu_contention) X(test_straggler_spread_on_contended_machine) X(test_straggler_wait_is_not_communication) X(test_compute_straggler_in_optimizer) X(test_outside_step_straggler) X(test_straggler_under_threshold_in_comm) X(test_straggler_in_comm_machine_made) X(test_epoch_start) X(test_between_epochs) X(test_input_advice_vs_saturated_host) X(test_input_next_close_calls) X(test_comm_next_close_call) X(test_residual_next_on_saturated_host) X(test_other_processes_named_in_next) X(test_untraced_heavy) X(test_share_thresholds_table) X(test_diagnosis_fields) X(test_input_next_names_loader) X(test_priority_order) \
    X(test_shares_median_over_ranks) X(test_straggler_score) X(test_straggler_table) \
    X(test_straggler_before_input) X(test_no_data_and_warmup) \
    X(test_incomplete_data_names_phases) X(test_run_verdict) \
    X(test_thresholds_override_changes_verdict) X(test_thresholds_parser) X(test_phase_list) \
    X(test_resource_sections)
#include "harness.h"
