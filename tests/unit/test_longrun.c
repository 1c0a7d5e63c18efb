/*
 * test_longrun.c - a long run in bounded memory (model/run.h): the records
 * between a rank's first and last steps are dropped from memory, and the
 * summary is still right: the window is the last 10,000 steps, the counts
 * cover the whole run, warm-up is still found at the start, and the
 * per-step series spans the whole run from the step histories.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/run.h"
#include "diag/window.h"
#include "report/report.h"
#include "report/model.h"
#include "base/json.h"
#include "base/strbuf.h"

#include "harness.h"

#define MS 1000000LL

/* Step i of rank r: 1 ms of input before the last 10,000 steps and 6 ms
 * in them (so averaging anything but the window shows), 10 ms traced,
 * the first 5 steps 100 ms slow (warm-up), RSS 1000 + i, step `aborted`
 * aborted (when not -1). */
static void fill(tml_step_record *s, uint64_t i, uint64_t n, int r, int64_t aborted)
{
    memset(s, 0, sizeof(*s));
    s->step = i;
    s->observed = TML_STEP_PHASES;
    s->phase_ns[TML_PHASE_INPUT] = (i + 10000 < n ? 1 : 6) * MS + r * 100000LL;
    s->phase_ns[TML_PHASE_FORWARD] = 3 * MS;
    s->phase_ns[TML_PHASE_BACKWARD] = 5 * MS;
    s->phase_ns[TML_PHASE_OPTIMIZER] = 1 * MS;
    s->traced_ns = (i < 5 ? 100 : 10) * MS;
    s->start_ns = (int64_t)i * 20 * MS;
    s->gap_ns = i ? 100000 : -1;
    s->gpu_traced_ns = -1;
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        s->gpu_phase_ns[p] = -1;
    s->rss_bytes = 1000 + (int64_t)i;
    s->cuda_allocated_peak_bytes = s->cuda_reserved_peak_bytes = -1;
    s->flags = (int64_t)i == aborted ? TML_STEP_ABORTED : 0;
}

/* ranks x n steps, sent in batches of `batch` as a rank's shipper does. */
static void make_run(tml_run *run, int ranks, uint64_t n, int keep_all, int64_t aborted)
{
    enum { BATCH = 700 };
    tml_step_record recs[BATCH];
    tml__run_init(run, "long", "id0");
    run->keep_all = keep_all;
    for (int r = 0; r < ranks; r++) {
        tml_rank_info info;
        memset(&info, 0, sizeof(info));
        info.rank = r;
        info.world_size = ranks;
        info.instrumented = TML_PHASES_ALL;
        tml_rank *rk = tml__run_rank(run, &info);
        for (uint64_t i = 0; i < n;) {
            size_t k = 0;
            for (; k < BATCH && i < n; k++, i++)
                fill(&recs[k], i, n, r, aborted);
            CHECK_EQ_INT(tml__run_add_steps(rk, recs, k), 0);
        }
    }
}

static tml_json *summary_of(const tml_run *run)
{
    tml_strbuf json = TML_STRBUF_INIT;
    tml_report_opts o;
    memset(&o, 0, sizeof(o));
    o.generated_at = "2025-01-01T00:00:00Z";
    o.series = 1;
    CHECK_EQ_INT(tml__report_build(run, &o, NULL, &json), 0);
    tml_json *doc = NULL;
    tml_json_error err = {0, NULL};
    CHECK(tml__json_parse(json.buf, json.len, &doc, &err) == 0);
    tml__sb_release(&json);
    return doc;
}

static double num(const tml_json *doc, const char *path)
{
    double v = NAN;
    tml__json_num(tml__json_path(doc, path), &v);
    return v;
}

static void test_memory_is_bounded(void)
{
    tml_run run;
    make_run(&run, 2, 300000, 0, -1);
    for (size_t i = 0; i < run.nranks; i++) {
        const tml_rank *r = &run.ranks[i];
        CHECK(r->cap <= TML_RUN_CAP_STEPS);
        CHECK(r->nsteps >= TML_RUN_HEAD_STEPS + TML_RUN_KEEP_STEPS);
        CHECK(r->past.cap <= TML_HISTORY_BUCKETS);
        CHECK_EQ_INT(tml__rank_received(r), 300000);
        /* the head is the run's start, the tail its end, in order */
        CHECK_EQ_INT(r->steps[0].step, 0);
        CHECK_EQ_INT(r->steps[TML_RUN_HEAD_STEPS - 1].step, TML_RUN_HEAD_STEPS - 1);
        CHECK_EQ_INT(r->steps[r->nsteps - 1].step, 299999);
        for (size_t j = TML_RUN_HEAD_STEPS + 1; j < r->nsteps; j++)
            if (r->steps[j].step != r->steps[j - 1].step + 1) {
                CHECK(!"tail not contiguous");
                break;
            }
        CHECK_EQ_INT(r->past.steps, r->past_steps);
        CHECK_EQ_INT(r->past.first, TML_RUN_HEAD_STEPS);
    }
    tml__run_release(&run);
}

static void test_window_is_the_last_steps(void)
{
    tml_run run;
    make_run(&run, 2, 100000, 0, 50000);
    tml_window w;
    CHECK_EQ_INT(tml__window_compute(&run, 0, &w), 0);
    CHECK_EQ_INT(w.common_steps, 100000 - 1);     /* one aborted, in the dropped middle */
    CHECK_EQ_INT(w.aborted_steps, 1);
    CHECK_EQ_INT(w.warmup_steps, 5);
    CHECK_EQ_INT(w.window_steps, 10000);
    CHECK_EQ_INT(w.first_step, 90000);
    CHECK_EQ_INT(w.last_step, 99999);
    /* only the window's input wait: 6 ms (+0.1 ms on rank 1) */
    CHECK_NEAR(w.ranks[0].avg_ns[TML_M_INPUT], 6.0 * MS, 1);
    CHECK_NEAR(w.ranks[1].avg_ns[TML_M_INPUT], 6.1 * MS, 1);
    CHECK_NEAR(w.ranks[0].avg_ns[TML_M_STEP], 16.0 * MS, 1);
    tml__window_release(&w);
    tml__run_release(&run);
}

/* The same run kept whole and kept bounded: the same diagnosis and window
 * figures, and series that agree within one bucket. */
static void test_bounded_matches_whole(void)
{
    tml_run whole, bounded;
    make_run(&whole, 2, 100000, 1, -1);
    make_run(&bounded, 2, 100000, 0, -1);
    CHECK_EQ_INT(whole.ranks[0].nsteps, 100000);
    tml_json *a = summary_of(&whole), *b = summary_of(&bounded);
    CHECK(a && b);
    static const char *const same[] = {
        "step_time.window.common_steps", "step_time.window.window_steps",
        "step_time.window.warmup_steps_excluded", "step_time.window.first_step",
        "step_time.average.step_time_ms", "step_time.average.input_wait_ms",
        "step_time.average.untraced_ms", "step_time.shares_percent.input_wait",
        "step_time.median.step_time_p90_ms", "series.first_step", "series.last_step",
    };
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        double x = num(a, same[i]), y = num(b, same[i]);
        if (!(x == y)) {
            fprintf(stderr, "%s: %g (whole) vs %g (bounded)\n", same[i], x, y);
            CHECK(x == y);
        }
    }
    CHECK_STR(tml__json_str(tml__json_path(a, "step_time.diagnosis.kind")),
              tml__json_str(tml__json_path(b, "step_time.diagnosis.kind")));
    CHECK_STR(tml__json_str(tml__json_path(b, "step_time.diagnosis.kind")), "INPUT_BOUND");

    /* the series covers the whole run in at most 600 points per rank */
    const tml_json *steps = tml__json_path(b, "series.step");
    double bucket = num(b, "series.bucket_steps");
    CHECK(steps && steps->n >= 100 && steps->n <= 600);
    CHECK(bucket >= 100000.0 / 600);
    const tml_json *rss = tml__json_get(tml__json_at(tml__json_path(b, "series.ranks"), 0),
                                        "rss_bytes");
    const tml_json *in = tml__json_get(tml__json_at(tml__json_path(b, "series.ranks"), 0),
                                       "input_wait_ms");
    CHECK(rss && rss->n == steps->n && in && in->n == steps->n);
    size_t nulls = 0;
    for (size_t k = 0; rss && k < rss->n; k++) {
        double v = NAN, s0 = NAN;
        if (tml__json_at(rss, k)->type == TML_JSON_NULL) {
            nulls++;
            continue;
        }
        /* RSS is 1000 + step id: a bucket's mean lies in its span, give
         * or take one history bucket (they join by their first id) */
        CHECK(tml__json_num(tml__json_at(rss, k), &v) &&
              tml__json_num(tml__json_at(steps, k), &s0));
        CHECK(v >= 1000 + s0 - bucket && v <= 1000 + s0 + 2 * bucket);
    }
    CHECK(nulls == 0);
    /* input wait: 1 ms at the start, 6 ms at the end */
    double v0 = NAN, vn = NAN;
    tml__json_num(tml__json_at(in, 1), &v0);
    tml__json_num(tml__json_at(in, in->n - 1), &vn);
    CHECK_NEAR(v0, 1.0, 1e-6);
    CHECK_NEAR(vn, 6.0, 1e-6);
    tml__json_free(a);
    tml__json_free(b);
    tml__run_release(&whole);
    tml__run_release(&bounded);
}

/* Ranks apart mid-run (one 2,000 steps ahead): the window is what they
 * have in common among the kept steps. */
static void test_ranks_apart(void)
{
    tml_run run;
    make_run(&run, 1, 60000, 0, -1);
    tml_rank_info info;
    memset(&info, 0, sizeof(info));
    info.rank = 1;
    info.instrumented = TML_PHASES_ALL;
    tml_rank *rk = tml__run_rank(&run, &info);
    tml_step_record s;
    for (uint64_t i = 0; i < 58000; i++) {
        fill(&s, i, 60000, 1, -1);
        CHECK_EQ_INT(tml__run_add_steps(rk, &s, 1), 0);
    }
    tml_window w;
    CHECK_EQ_INT(tml__window_compute(&run, 0, &w), 0);
    CHECK_EQ_INT(w.window_steps, 10000);
    CHECK_EQ_INT(w.last_step, 57999);
    CHECK(w.common_steps >= 55000 && w.common_steps <= 58000);   /* counted, not compared */
    tml__window_release(&w);
    tml__run_release(&run);
}

/* What the ranks' records and histories hold now, in bytes. */
static size_t held(const tml_run *run)
{
    size_t b = 0;
    for (size_t i = 0; i < run->nranks; i++)
        b += run->ranks[i].cap * sizeof(tml_step_record) +
             run->ranks[i].past.cap * sizeof(tml_step_bucket);
    return b;
}

/* Many ranks share the memory budget (model/run.h): what they hold stays
 * within it, each keeps its last steps, every record is counted, and the
 * summary says the window was limited, with the right verdict. */
static void test_budget_is_shared(void)
{
    tml_run run;
    tml__run_init(&run, "many", "id0");
    run.world_size = 400;
    CHECK_EQ_INT(tml__run_set_budget(&run, 8u << 20), 0);
    tml_step_record recs[700];
    for (int r = 0; r < 400; r++) {
        tml_rank_info info;
        memset(&info, 0, sizeof(info));
        info.rank = r;
        info.world_size = 400;
        info.instrumented = TML_PHASES_ALL;
        tml_rank *rk = tml__run_rank(&run, &info);
        for (uint64_t i = 0; i < 3000;) {
            size_t k = 0;
            for (; k < 700 && i < 3000; k++, i++)
                fill(&recs[k], i, 3000, r, -1);
            CHECK_EQ_INT(tml__run_add_steps(rk, recs, k), 0);
        }
    }
    CHECK(held(&run) <= (8u << 20));
    CHECK(run.lim.cap < TML_RUN_CAP_STEPS && run.lim.cap >= TML_RUN_MIN_STEPS);
    for (size_t i = 0; i < run.nranks; i++) {
        const tml_rank *r = &run.ranks[i];
        CHECK_EQ_INT(tml__rank_received(r), 3000);
        CHECK_EQ_INT(r->steps[r->nsteps - 1].step, 2999);
        CHECK(r->past.nb <= run.lim.buckets);
    }
    tml_window w;
    CHECK_EQ_INT(tml__window_compute(&run, 0, &w), 0);
    CHECK_STR(w.limited_by, "memory");
    CHECK(w.window_steps > 0 && w.window_steps < run.lim.cap);
    CHECK(w.first_step >= run.lim.head);          /* never the run's first steps */
    CHECK_EQ_INT(w.last_step, 2999);
    CHECK(w.common_steps >= 2990 && w.common_steps <= 3000);
    tml__window_release(&w);
    tml_json *doc = summary_of(&run);
    CHECK_STR(tml__json_str(tml__json_path(doc, "step_time.window.limited_by")), "memory");
    CHECK_STR(tml__json_str(tml__json_path(doc, "step_time.diagnosis.kind")), "INPUT_BOUND");
    tml__json_free(doc);
    /* a larger budget later does not bring records back, and a smaller one
     * shrinks every rank at once */
    CHECK_EQ_INT(tml__run_set_budget(&run, 15u << 19), 0);
    CHECK(held(&run) <= (15u << 19));
    for (size_t i = 0; i < run.nranks; i++)
        CHECK_EQ_INT(tml__rank_received(&run.ranks[i]), 3000);
    tml__run_release(&run);
}

/* Past TML_WINDOW_CELLS steps x ranks the window's cap comes down, and
 * the summary says so; below it nothing changes. */
static void test_many_ranks_cap_the_window(void)
{
    tml_run run;
    make_run(&run, 200, 2000, 0, -1);
    tml_window w;
    CHECK_EQ_INT(tml__window_compute(&run, 0, &w), 0);
    CHECK_EQ_INT(w.max_steps, TML_WINDOW_CELLS / 200);
    CHECK_EQ_INT(w.window_steps, TML_WINDOW_CELLS / 200);
    CHECK_STR(w.limited_by, "ranks");
    CHECK_EQ_INT(w.last_step, 1999);
    CHECK_EQ_INT(w.common_steps, 2000);
    tml__window_release(&w);
    tml__run_release(&run);
    make_run(&run, 20, 2000, 0, -1);
    CHECK_EQ_INT(tml__window_compute(&run, 0, &w), 0);
    CHECK(w.limited_by == NULL);
    CHECK_EQ_INT(w.window_steps, 2000 - 5);   /* all but the warm-up */
    tml__window_release(&w);
    tml__run_release(&run);
}

/* traceml.summary()'s answer (compact_ranks) keeps the per-rank rows of
 * the ranks the summary names, whatever the rank count; the file keeps all. */
static void test_compact_answer(void)
{
    tml_run run;
    make_run(&run, 300, 200, 0, -1);
    tml_strbuf full = TML_STRBUF_INIT, small = TML_STRBUF_INIT;
    tml_report_opts o;
    memset(&o, 0, sizeof(o));
    o.generated_at = "2025-01-01T00:00:00Z";
    CHECK_EQ_INT(tml__report_build(&run, &o, NULL, &full), 0);
    o.compact_ranks = 1;
    CHECK_EQ_INT(tml__report_build(&run, &o, NULL, &small), 0);
    tml_json *a = NULL, *b = NULL;
    tml_json_error err = {0, NULL};
    CHECK(tml__json_parse(full.buf, full.len, &a, &err) == 0);
    CHECK(tml__json_parse(small.buf, small.len, &b, &err) == 0);
    const char *lists[3] = { "step_time", "step_memory", "process" };
    for (int k = 0; k < 3; k++) {
        char path[64];
        snprintf(path, sizeof(path), "%s.per_rank", lists[k]);
        const tml_json *pa = tml__json_path(a, path), *pb = tml__json_path(b, path);
        CHECK(pa && pb && pa->n == 300 && pb->n >= 1 && pb->n <= TML_REPORT_NAMED_RANKS);
        snprintf(path, sizeof(path), "%s.per_rank_omitted", lists[k]);
        CHECK(tml__json_path(a, path) == NULL);
        CHECK_EQ_INT((long)num(b, path) + (long)(pb ? pb->n : 0), 300);
    }
    /* the worst rank (rank 299: the most input) is among those kept */
    double worst = num(b, "step_time.worst.rank");
    const tml_json *pb = tml__json_path(b, "step_time.per_rank");
    int found = 0;
    for (size_t i = 0; pb && i < pb->n; i++)
        found |= num(tml__json_at(pb, i), "rank") == worst;
    CHECK(found);
    CHECK(small.len < full.len / 10);
    CHECK_STR(tml__json_str(tml__json_path(a, "primary_diagnosis.kind")),
              tml__json_str(tml__json_path(b, "primary_diagnosis.kind")));
    tml__json_free(a);
    tml__json_free(b);
    tml__sb_release(&full);
    tml__sb_release(&small);
    tml__run_release(&run);
}

#define TESTS X(test_memory_is_bounded) X(test_window_is_the_last_steps) \
    X(test_bounded_matches_whole) X(test_ranks_apart) X(test_budget_is_shared) \
    X(test_many_ranks_cap_the_window) X(test_compact_answer)
#include "harness.h"

