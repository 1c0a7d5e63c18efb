/*
 * test_deepdive.c - the deep dive in the report (src/report/deepdive.c and
 * its printers): modules ranked at the model's first level with their
 * heaviest operator, the level below when the first holds one module,
 * the box's line, the JSON, a summary read back, a skipped window, and
 * across ranks the module whose time differs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "report/model.h"
#include "report/reload.h"
#include "harness.h"

#define MS 1000000LL

static tml_step_record rec(uint64_t step)
{
    tml_step_record r;
    memset(&r, 0, sizeof(r));
    r.step = step;
    r.phase_ns[TML_PHASE_FORWARD] = 24 * MS;
    r.phase_ns[TML_PHASE_BACKWARD] = 38 * MS;
    r.phase_ns[TML_PHASE_OPTIMIZER] = 6 * MS;
    r.traced_ns = 70 * MS;
    r.gpu_traced_ns = -1;
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        r.gpu_phase_ns[p] = -1;
    r.gap_ns = 1 * MS;
    r.rss_bytes = r.cuda_allocated_peak_bytes = r.cuda_reserved_peak_bytes = -1;
    r.observed = TML_STEP_PHASES & ~TML_PHASE_BIT(TML_PHASE_H2D);
    if (step >= 20 && step <= 22)
        r.flags = TML_STEP_DEEP_DIVE;
    return r;
}

/* straggle: rank 1 the straggler, its Forward 40 ms longer, rank 0's
 * Backward (the all-reduce) 40 ms longer waiting for it. */
static void make_run_with(tml_run *run, int nranks, int straggle)
{
    tml__run_init(run, "dd_run", "abc");
    for (int k = 0; k < nranks; k++) {
        tml_rank_info info;
        memset(&info, 0, sizeof(info));
        info.rank = k;
        info.world_size = nranks;
        info.instrumented = TML_PHASES_ALL;
        tml_rank *r = tml__run_rank(run, &info);
        for (uint64_t i = 0; r && i < 40; i++) {
            tml_step_record s = rec(i);
            if (straggle) {
                s.phase_ns[k ? TML_PHASE_FORWARD : TML_PHASE_BACKWARD] += 40 * MS;
                s.traced_ns += 40 * MS;
            }
            CHECK(tml__run_add_steps(r, &s, 1) == 0);
        }
    }
}

static void make_run(tml_run *run, int nranks)
{
    make_run_with(run, nranks, 0);
}

/* A window where heavy_block (two submodules) does 90% of 100 ms; extra:
 * the rank's heavy_block.1 takes that much more. */
static tml_dd_window *window(double extra_ms)
{
    tml_dd_window *d = tml__dd_new();
    d->first_step = 20;
    d->last_step = 22;
    d->wall_ns = 150 * MS;
    tml__dd_add(d, "heavy_block.0", "aten::addmm", 50 * MS, 30);
    tml__dd_add(d, "heavy_block.1", "aten::mm", (int64_t)((30 + extra_ms) * MS), 30);
    tml__dd_add(d, "heavy_block.1", "aten::addmm", 10 * MS, 30);
    tml__dd_add(d, "stem", "aten::addmm", 6 * MS, 6);
    tml__dd_add(d, "", "aten::add_", 4 * MS, 60);
    return d;
}

static void build(const tml_run *run, tml_strbuf *text, tml_strbuf *json)
{
    tml_report_opts o = {.status = "completed", .width = 120,
                         .generated_at = "2025-01-01T00:00:00Z"};
    CHECK_EQ_INT(tml__report_build(run, &o, text, json), 0);
}

static void test_modules_ranked_and_printed(void)
{
    tml_run run;
    make_run(&run, 1);
    run.ranks[0].deep_dive = window(0);
    tml_report_model m;
    CHECK_EQ_INT(tml__report_model_init(&m, &run, NULL), 0);
    const tml_report_dd *dd = &m.dd;
    CHECK(dd->present && dd->ran);
    CHECK_EQ_INT(dd->depth, 1);
    CHECK_EQ_INT(dd->steps_left_out, 3);
    CHECK_EQ_INT(dd->nmodules, 3);
    CHECK_STR(dd->modules[0].name, "heavy_block");
    CHECK_NEAR(dd->modules[0].pct, 90.0, 1e-9);
    CHECK_STR(dd->modules[0].op, "aten::addmm");      /* 50 + 10 against aten::mm's 30 */
    CHECK_STR(dd->modules[1].name, "stem");
    CHECK_STR(dd->modules[2].name, "");
    CHECK_STR(dd->ops[0].name, "aten::addmm");
    CHECK_NEAR(dd->ops[0].pct, 66.0, 1e-9);
    CHECK_EQ_INT(dd->spread.name[0], 0);                 /* one rank: no spread */
    tml__report_model_release(&m);

    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
    build(&run, &text, &json);
    CHECK(strstr(text.buf, "Deep dive (steps 20-22, left out): 90% in heavy_block (aten::addmm), "
                           "6% in stem") != NULL);
    tml_json *doc = NULL;
    CHECK(tml__json_parse(json.buf, json.len, &doc, NULL) == 0);
    CHECK_STR(tml__json_str(tml__json_path(doc, "deep_dive.status")), "ran");
    const tml_json *first = tml__json_at(tml__json_path(doc, "deep_dive.modules"), 0);
    CHECK_STR(tml__json_str(tml__json_get(first, "name")), "heavy_block");
    CHECK_NEAR(tml__rl_num(doc, "deep_dive.steps_excluded", 0, 1e9), 3, 0);
    CHECK_NEAR(tml__rl_num(doc, "step_time.window.window_steps", 0, 1e9),
               37 - tml__rl_num(doc, "step_time.window.warmup_steps_excluded", 0, 1e9), 0);

    /* read back: the same line, nothing ranked again */
    tml_report_loaded *l = NULL;
    char why[256] = "";
    CHECK_EQ_INT(tml__report_load(doc, NULL, 120, &l, why, sizeof(why)), 0);
    if (l) {
        tml_strbuf again = TML_STRBUF_INIT;
        tml__report_box(&l->m, &again);
        CHECK(strstr(again.buf, "Deep dive (steps 20-22, left out): 90% in heavy_block "
                                "(aten::addmm), 6% in stem") != NULL);
        tml__sb_release(&again);
        tml__report_loaded_free(l);
    }
    tml__json_free(doc);
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__run_release(&run);
}

/* A model wrapped in one module: ranked a level down. */
static void test_single_wrapper_goes_a_level_down(void)
{
    tml_run run;
    make_run(&run, 1);
    tml_dd_window *d = tml__dd_new();
    tml__dd_add(d, "backbone.encoder.0", "aten::mm", 70 * MS, 1);
    tml__dd_add(d, "backbone.decoder", "aten::mm", 20 * MS, 1);
    tml__dd_add(d, "", "aten::add_", 10 * MS, 1);
    run.ranks[0].deep_dive = d;
    tml_report_model m;
    CHECK_EQ_INT(tml__report_model_init(&m, &run, NULL), 0);
    CHECK_EQ_INT(m.dd.depth, 2);
    CHECK_STR(m.dd.modules[0].name, "backbone.encoder");
    CHECK_NEAR(m.dd.modules[0].pct, 70.0, 1e-9);
    CHECK_STR(m.dd.modules[1].name, "backbone.decoder");
    tml__report_model_release(&m);
    tml__run_release(&run);
}

/* A module's folded row (its lighter operators together) is never named
 * as its heaviest operator while a named one exists. */
static void test_folded_row_is_no_operator(void)
{
    tml_run run;
    make_run(&run, 1);
    tml_dd_window *d = tml__dd_new();
    tml__dd_add(d, "head", TML_DD_OTHER, 5 * MS, 40);
    tml__dd_add(d, "head", "aten::addmm", 2 * MS, 3);
    tml__dd_add(d, "stem", TML_DD_OTHER, 1 * MS, 10);
    run.ranks[0].deep_dive = d;
    tml_report_model m;
    CHECK_EQ_INT(tml__report_model_init(&m, &run, NULL), 0);
    CHECK_STR(m.dd.modules[0].name, "head");
    CHECK_STR(m.dd.modules[0].op, "aten::addmm");
    CHECK_STR(m.dd.modules[1].op, TML_DD_OTHER);     /* nothing else to name */
    tml__report_model_release(&m);
    tml__run_release(&run);
}

static void test_skipped_says_why(void)
{
    tml_run run;
    make_run(&run, 1);
    tml_dd_window *d = tml__dd_new();
    snprintf(d->skipped, sizeof(d->skipped), "the model is compiled (torch.compile)");
    run.ranks[0].deep_dive = d;
    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
    build(&run, &text, &json);
    CHECK(strstr(text.buf, "Deep dive: skipped: the model is compiled (torch.compile)") != NULL);
    tml_json *doc = NULL;
    CHECK(tml__json_parse(json.buf, json.len, &doc, NULL) == 0);
    CHECK_STR(tml__json_str(tml__json_path(doc, "deep_dive.status")), "skipped");
    CHECK(tml__json_path(doc, "deep_dive.modules") == NULL);
    tml__json_free(doc);
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__run_release(&run);
}

/* Without a deep dive the summary keeps its shape: no key, no line. */
static void test_none_leaves_no_trace(void)
{
    tml_run run;
    make_run(&run, 1);
    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
    build(&run, &text, &json);
    CHECK(strstr(text.buf, "Deep dive") == NULL);
    CHECK(strstr(json.buf, "\"deep_dive\"") == NULL);
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__run_release(&run);
}

/* Two ranks, rank 1's heavy_block 40 ms heavier: the spread names it. */
static void test_spread_names_the_module(void)
{
    tml_run run;
    make_run(&run, 2);
    run.ranks[0].deep_dive = window(0);
    run.ranks[1].deep_dive = window(40);
    tml_report_model m;
    CHECK_EQ_INT(tml__report_model_init(&m, &run, NULL), 0);
    CHECK_EQ_INT(m.dd.nranks, 2);
    CHECK_EQ_INT(m.dd.rank, 0);
    CHECK_STR(m.dd.spread.name, "heavy_block");
    CHECK_EQ_INT(m.dd.spread_slow_rank, 1);
    /* much outside modules is said: rank 0's 4 ms of 100 is not */
    tml_strbuf box = TML_STRBUF_INIT;
    m.dd.modules[2].pct = 40;
    tml__report_box(&m, &box);
    CHECK(strstr(box.buf, "; 40% outside modules (aten::add_)") != NULL);
    tml__sb_release(&box);
    CHECK_EQ_INT(m.dd.spread_fast_rank, 0);
    CHECK_NEAR(m.dd.spread_slow_ns - m.dd.spread_fast_ns, 40.0 * MS, 1);
    tml__report_model_release(&m);
    tml__run_release(&run);
}

/* The straggler's Next names the module whose time differs only where the
 * difference explains a part of the peers' wait worth naming: 40 ms a
 * step of 40 does; 1 ms over the 3 window steps does not (noise). */
static void test_straggler_named_only_by_its_cause(void)
{
    for (int big = 0; big < 2; big++) {
        tml_run run;
        make_run_with(&run, 2, 1);
        run.ranks[0].deep_dive = window(0);
        run.ranks[1].deep_dive = window(big ? 120 : 1);
        tml_report_model m;
        CHECK_EQ_INT(tml__report_model_init(&m, &run, NULL), 0);
        CHECK_STR(m.verdict.kind, "COMPUTE_STRAGGLER");
        CHECK_STR(m.dd.spread.name, "heavy_block");
        CHECK_EQ_INT(strncmp(m.verdict.next, "Inspect heavy_block on rank 1", 29) == 0, big);
        tml__report_model_release(&m);
        tml__run_release(&run);
    }
}

#define TESTS X(test_modules_ranked_and_printed) X(test_single_wrapper_goes_a_level_down) \
    X(test_folded_row_is_no_operator) X(test_skipped_says_why) X(test_none_leaves_no_trace) X(test_spread_names_the_module) \
    X(test_straggler_named_only_by_its_cause)
#include "harness.h"
