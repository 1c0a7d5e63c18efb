/*
 * test_compare.c - `traceml compare`'s rules (src/judge/compare.c): the
 * verdict on both sides of every gate, the noise rule, the clock choice,
 * INCONCLUSIVE; reading summaries, good and bad
 * (src/report/reload_compare.c), and the box and JSON
 * (src/report/compare.c). The statistics under them: test_stats.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "judge/compare.h"
#include "report/compare.h"
#include "base/stats.h"
#include "traceml/traceml.h"
#include "base/json.h"
#include "harness.h"

/* A run with `steps` window steps and a CPU-clock Step Time. */
static tml_cmp_run mk(double step_ms, double noise_ms, double reserved_bytes, size_t steps)
{
    tml_cmp_run r;
    tml__cmp_run_init(&r);
    snprintf(r.label, sizeof(r.label), "run");
    snprintf(r.primary, sizeof(r.primary), "INPUT-BOUND");
    r.window_steps = steps;
    r.clock[TML_CMP_CPU].valid = !isnan(step_ms);
    r.clock[TML_CMP_CPU].step_ms = step_ms;
    r.clock[TML_CMP_CPU].noise_ms = noise_ms;
    r.peak_reserved_bytes = reserved_bytes;
    return r;
}

typedef struct vcase {
    const char *name;
    double a_ms, b_ms, noise_ms;          /* noise of both runs */
    double a_mem, b_mem;                  /* NAN: not sampled */
    size_t a_steps, b_steps;
    tml_cmp_verdict want;
    int want_within_noise;
} vcase;

static void test_verdict_table(void)
{
    const double G = 1e9;
    static const vcase cases[] = {
        /* step time gate, 3%: both sides, both directions */
        {"time -2.9% equivalent", 100, 97.1, NAN, NAN, NAN, 100, 100, TML_CMP_EQUIVALENT, 0},
        {"time -3.0% improvement", 100, 97.0, NAN, NAN, NAN, 100, 100, TML_CMP_IMPROVEMENT, 0},
        {"time +2.9% equivalent", 100, 102.9, NAN, NAN, NAN, 100, 100, TML_CMP_EQUIVALENT, 0},
        {"time +3.1% regression", 100, 103.1, NAN, NAN, NAN, 100, 100, TML_CMP_REGRESSION, 0},
        {"time -60% improvement", 200.4, 80.4, 0.1, NAN, NAN, 256, 256, TML_CMP_IMPROVEMENT, 0},
        /* noise: past the gate but within the steps' spread -> undecided
         * (a shift of the median is not held against the spread: issue 45) */
        {"time +5% within noise 6ms", 100, 105, 6, NAN, NAN, 100, 100, TML_CMP_INCONCLUSIVE, 1},
        {"time +282% within noise 300ms", 100, 382, 300, NAN, NAN, 100, 100,
         TML_CMP_INCONCLUSIVE, 1},
        {"time +5% beyond noise 4ms", 100, 105, 4, NAN, NAN, 100, 100, TML_CMP_REGRESSION, 0},
        {"time -5% within noise", 100, 95, 5.5, NAN, NAN, 100, 100, TML_CMP_INCONCLUSIVE, 1},
        /* memory gate, 10% */
        {"mem +9.9% equivalent", 100, 100, NAN, 10 * G, 10.99 * G, 100, 100, TML_CMP_EQUIVALENT, 0},
        {"mem +10% regression", 100, 100, NAN, 10 * G, 11.0 * G, 100, 100, TML_CMP_REGRESSION, 0},
        {"mem -10% improvement", 100, 100, NAN, 10 * G, 9.0 * G, 100, 100, TML_CMP_IMPROVEMENT, 0},
        {"mem -9% equivalent", 100, 100, NAN, 10 * G, 9.1 * G, 100, 100, TML_CMP_EQUIVALENT, 0},
        /* both move */
        {"faster, more memory: mixed", 100, 90, NAN, 10 * G, 12 * G, 100, 100, TML_CMP_MIXED, 0},
        {"slower, less memory: mixed", 100, 110, NAN, 10 * G, 8 * G, 100, 100, TML_CMP_MIXED, 0},
        {"faster, less memory", 100, 90, NAN, 10 * G, 8 * G, 100, 100, TML_CMP_IMPROVEMENT, 0},
        {"slower, more memory", 100, 110, NAN, 10 * G, 12 * G, 100, 100, TML_CMP_REGRESSION, 0},
        {"faster, memory within", 100, 90, NAN, 10 * G, 10.5 * G, 100, 100, TML_CMP_IMPROVEMENT, 0},
        /* memory only on one side: not compared */
        {"mem on one side only", 100, 100, NAN, 10 * G, NAN, 100, 100, TML_CMP_EQUIVALENT, 0},
        /* not comparable */
        {"B no window", 100, NAN, NAN, NAN, NAN, 100, 0, TML_CMP_INCONCLUSIVE, 0},
        {"A one step", 100, 100, NAN, NAN, NAN, 1, 100, TML_CMP_INCONCLUSIVE, 0},
        {"A two steps ok", 100, 100, NAN, NAN, NAN, 2, 100, TML_CMP_EQUIVALENT, 0},
        {"A zero step time", 0, 10, NAN, NAN, NAN, 100, 100, TML_CMP_INCONCLUSIVE, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const vcase *c = &cases[i];
        tml_cmp_run a = mk(c->a_ms, c->noise_ms, c->a_mem, c->a_steps);
        tml_cmp_run b = mk(c->b_ms, c->noise_ms, c->b_mem, c->b_steps);
        tml_cmp_result r;
        tml__cmp_decide(&a, &b, NULL, &r);
        if (r.verdict != c->want || r.within_noise != c->want_within_noise)
            fprintf(stderr, "case '%s': got %s (within_noise %d), why: %s\n", c->name,
                    tml__cmp_verdict_name(r.verdict), r.within_noise, r.why);
        CHECK_EQ_INT(r.verdict, c->want);
        CHECK_EQ_INT(r.within_noise, c->want_within_noise);
        CHECK(r.why[0] != '\0');
    }
}

static void test_why_lines(void)
{
    tml_cmp_run a = mk(200.4, 0.1, NAN, 256), b = mk(80.4, 0.1, NAN, 256);
    tml_cmp_result r;
    a.clock[TML_CMP_GPU] = a.clock[TML_CMP_CPU];
    b.clock[TML_CMP_GPU] = b.clock[TML_CMP_CPU];
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_STR(r.why, "GPU Step Time decreased by 59.9%.");
    CHECK_EQ_INT(r.clock, TML_CMP_GPU);

    tml_cmp_run c = mk(100, 6, NAN, 100), d = mk(105, 6, NAN, 100);
    tml__cmp_decide(&c, &d, NULL, &r);
    CHECK(strstr(r.why, "noise") != NULL);
    CHECK(strstr(r.why, "6.00 ms") != NULL);
    CHECK_NEAR(r.noise_ms, 6, 1e-9);

    CHECK(strstr(r.next, "--baseline") != NULL);
    /* the larger of the two noises counts */
    c.clock[TML_CMP_CPU].noise_ms = 1;
    d.clock[TML_CMP_CPU].noise_ms = 6;
    tml__cmp_decide(&c, &d, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_INCONCLUSIVE);
    CHECK_NEAR(r.noise_ms, 6, 1e-9);
}

static void test_clock_choice(void)
{
    tml_cmp_run a = mk(100, NAN, NAN, 100), b = mk(100, NAN, NAN, 100);
    tml_cmp_result r;
    /* only A has the GPU clock: compare on CPU, where B's GPU-less figures are */
    a.clock[TML_CMP_GPU].valid = 1;
    a.clock[TML_CMP_GPU].step_ms = 50;
    b.clock[TML_CMP_CPU].step_ms = 120;
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.clock, TML_CMP_CPU);
    CHECK_EQ_INT(r.verdict, TML_CMP_REGRESSION);
    /* both have GPU: GPU wins even though CPU says otherwise */
    b.clock[TML_CMP_GPU].valid = 1;
    b.clock[TML_CMP_GPU].step_ms = 50.5;
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.clock, TML_CMP_GPU);
    CHECK_EQ_INT(r.verdict, TML_CMP_EQUIVALENT);
    /* no clock in common */
    tml_cmp_run g = mk(NAN, NAN, NAN, 100), c = mk(100, NAN, NAN, 100);
    g.clock[TML_CMP_GPU].valid = 1;
    g.clock[TML_CMP_GPU].step_ms = 10;
    tml__cmp_decide(&g, &c, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_INCONCLUSIVE);
    CHECK(strstr(r.why, "no step-time clock in common") != NULL);
}

static void test_custom_gates(void)
{
    tml_cmp_run a = mk(100, NAN, NAN, 100), b = mk(104, NAN, NAN, 100);
    tml_cmp_gates g = {0.05, 0.10};
    tml_cmp_result r;
    tml__cmp_decide(&a, &b, &g, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_EQUIVALENT);
    g.step_time = 0.04;
    tml__cmp_decide(&a, &b, &g, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_REGRESSION);
}

static int parse(const char *text, tml_cmp_run *r, char *why, size_t cap)
{
    tml_json *doc = NULL;
    if (tml__json_parse(text, strlen(text), &doc, NULL) < 0)
        return -100;
    int rc = tml__cmp_run_from_json(doc, r, why, cap);
    tml__json_free(doc);
    return rc;
}

static const char *SUMMARY_GPU =
    "{\"schema_version\": 1, \"meta\": {\"run_name\": \"before\"},"
    " \"primary_diagnosis\": {\"label\": \"INPUT-BOUND\"},"
    " \"step_time\": {\"diagnosis\": {\"label\": \"INPUT-BOUND\"},"
    "   \"window\": {\"window_steps\": 256, \"clock\": \"gpu\"}, \"noise_ms\": 0.5,"
    "   \"by_clock\": {\"cpu\": {\"step_time_ms\": 210, \"input_wait_ms\": 130, \"h2d_ms\": 0.4,"
    "       \"compute_ms\": 70, \"residual_ms\": 3, \"noise_ms\": 0.7},"
    "     \"gpu\": {\"step_time_ms\": 200.4, \"input_wait_ms\": 128, \"h2d_ms\": 0.4,"
    "       \"compute_ms\": 68, \"residual_ms\": 3.6, \"noise_ms\": 0.5}}},"
    " \"step_memory\": {\"diagnosis\": {\"label\": \"BALANCED\"},"
    "   \"average\": {\"peak_reserved_bytes\": 3100000000},"
    "   \"median\": {\"peak_reserved_bytes\": 3000000000},"
    "   \"worst\": {\"peak_reserved_bytes\": 3300000000}},"
    " \"process\": {\"diagnosis\": {\"label\": \"NORMAL\"}, \"average\": {\"cpu_capacity_percent\": 12.5, \"rss_bytes\": 1400000000}},"
    " \"system\": {\"diagnosis\": {\"label\": \"LOW GPU UTIL\"}, \"average\": {\"cpu_percent\": 18.4,"
    "   \"ram_used_bytes\": 12000000000, \"gpu_util_percent\": 24, \"gpu_memory_used_bytes\": 18,"
    "   \"gpu_memory_total_bytes\": 100}}}";

static void test_read_summary(void)
{
    tml_cmp_run r;
    char why[256] = "";
    CHECK_EQ_INT(parse(SUMMARY_GPU, &r, why, sizeof(why)), 0);
    CHECK_STR(r.label, "before");
    CHECK_STR(r.primary, "INPUT-BOUND");
    CHECK_STR(r.diag[TML_CMP_SEC_SYSTEM], "LOW GPU UTIL");
    CHECK_EQ_INT(r.window_steps, 256);
    CHECK(r.clock[TML_CMP_GPU].valid && r.clock[TML_CMP_CPU].valid);
    CHECK_NEAR(r.clock[TML_CMP_GPU].step_ms, 200.4, 1e-9);
    CHECK_NEAR(r.clock[TML_CMP_CPU].noise_ms, 0.7, 1e-9);
    CHECK_NEAR(r.mem_skew_percent, 10.0, 1e-9);
    CHECK_NEAR(r.proc_cpu_percent, 12.5, 1e-9);
    CHECK_NEAR(r.gpu_mem_percent, 18.0, 1e-9);
    CHECK(isnan(r.sys_ram_used_bytes) == 0);

    /* an older summary without by_clock: the median on its window clock */
    const char *old = "{\"schema_version\": \"1.0\", \"primary_diagnosis\": {},"
                      " \"step_time\": {\"window\": {\"window_steps\": 10, \"clock\": \"cpu\"},"
                      " \"noise_ms\": 0.25, \"median\": {\"step_time_ms\": 12}}}";
    CHECK_EQ_INT(parse(old, &r, why, sizeof(why)), 0);
    CHECK(r.clock[TML_CMP_CPU].valid && !r.clock[TML_CMP_GPU].valid);
    CHECK_NEAR(r.clock[TML_CMP_CPU].noise_ms, 0.25, 1e-9);
    CHECK(isnan(r.peak_reserved_bytes));
    CHECK_STR(r.label, "");

    /* not comparable files */
    CHECK_EQ_INT(parse("[1, 2]", &r, why, sizeof(why)), TML_EPROTO);
    CHECK(strstr(why, "not a JSON object") != NULL);
    CHECK_EQ_INT(parse("{\"a\": 1}", &r, why, sizeof(why)), TML_EPROTO);
    CHECK(strstr(why, "no schema_version") != NULL);
    CHECK_EQ_INT(parse("{\"schema_version\": 2, \"step_time\": {}, \"primary_diagnosis\": {}}",
                       &r, why, sizeof(why)), TML_EPROTO);
    CHECK(strstr(why, "unsupported schema_version") != NULL);
    CHECK_EQ_INT(parse("{\"schema_version\": 1}", &r, why, sizeof(why)), TML_EPROTO);
    CHECK(strstr(why, "no step_time") != NULL);
}

/* A figure out of its range refuses the file, naming the field: a
 * window of 3e19 steps was cast to size_t (undefined behaviour) before. */
static void test_out_of_range(void)
{
    static const struct { const char *field, *value, *named; } bad[] = {
        { "\"window\": {\"window_steps\": ", "3e19}", "step_time.window.window_steps is 3e+19" },
        { "\"window\": {\"window_steps\": ", "1.55556e37}", "window_steps is 1.55556e+37" },
        { "\"window\": {\"window_steps\": ", "-4}", "window_steps is -4" },
        { "\"window\": {\"window_steps\": 10}, \"noise_ms\": ", "1e300", "step_time.noise_ms is 1e+300" },
        { "\"window\": {\"window_steps\": 10}, \"median\": {\"step_time_ms\": ", "\"12\"}",
          "step_time.median.step_time_ms is not a number" },
        { "\"window\": {\"window_steps\": 10}, \"by_clock\": {\"cpu\": "
          "{\"step_time_ms\": 1, \"step_time_blocks_ms\": [1, 2, ", "1e999]}}",
          "step_time.by_clock.cpu.step_time_blocks_ms[2] is inf" },
    };
    char text[512], why[256];
    tml_cmp_run r;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(text, sizeof(text), "{\"schema_version\": 1, \"primary_diagnosis\": {},"
                 " \"step_time\": {%s%s}}", bad[i].field, bad[i].value);
        why[0] = '\0';
        CHECK_EQ_INT(parse(text, &r, why, sizeof(why)), TML_EPROTO);
        CHECK(strstr(why, bad[i].named) != NULL);
        CHECK_EQ_INT(r.window_steps, 0);
    }
    CHECK_EQ_INT(parse("{\"schema_version\": 1, \"primary_diagnosis\": {}, \"step_time\": {},"
                       " \"system\": {\"average\": {\"gpu_memory_total_bytes\": -1}}}",
                       &r, why, sizeof(why)), TML_EPROTO);
    CHECK(strstr(why, "system.average.gpu_memory_total_bytes is -1, not a figure from 0 to") != NULL);
    /* null is missing, as the summary writes an unknown figure */
    CHECK_EQ_INT(parse("{\"schema_version\": 1, \"primary_diagnosis\": {}, \"step_time\":"
                       " {\"window\": {\"window_steps\": null}, \"noise_ms\": null}}",
                       &r, why, sizeof(why)), 0);
    CHECK_EQ_INT(r.window_steps, 0);
}

static void test_box_and_json(void)
{
    tml_cmp_run a, b;
    char why[256];
    CHECK_EQ_INT(parse(SUMMARY_GPU, &a, why, sizeof(why)), 0);
    CHECK_EQ_INT(parse(SUMMARY_GPU, &b, why, sizeof(why)), 0);
    snprintf(a.label, sizeof(a.label), "before_dataloader_fix");
    snprintf(b.label, sizeof(b.label), "after_dataloader_fix");
    snprintf(b.primary, sizeof(b.primary), "COMPUTE-BOUND");
    b.clock[TML_CMP_GPU].step_ms = 80.4;
    b.clock[TML_CMP_GPU].input_ms = 8.0;
    tml_cmp_result r;
    tml__cmp_decide(&a, &b, NULL, &r);
    tml_strbuf box = TML_STRBUF_INIT, js = TML_STRBUF_INIT;
    tml__cmp_text(&a, &b, &r, &box);
    CHECK(!box.failed);
    CHECK(strstr(box.buf, "| TraceML Compare ") != NULL);
    CHECK(strstr(box.buf, "| A: before_dataloader_fix ") != NULL);
    CHECK(strstr(box.buf, "| Delta: B - A ") != NULL);
    CHECK(strstr(box.buf, "Primary diagnosis: INPUT-BOUND -> COMPUTE-BOUND (changed)") != NULL);
    CHECK(strstr(box.buf, "| Verdict: IMPROVEMENT ") != NULL);
    CHECK(strstr(box.buf, "| Why: GPU Step Time decreased by 59.9%. ") != NULL);
    CHECK(strstr(box.buf, "Step Time (GPU comparison clock)") != NULL);
    CHECK(strstr(box.buf, "-120.0 ms (-59.9%)") != NULL);
    CHECK(strstr(box.buf, "Peak reserved         3.1 GB          3.1 GB          0 B (+0.0%)") != NULL);
    CHECK(strstr(box.buf, "System diagnosis      LOW GPU UTIL    LOW GPU UTIL    same") != NULL);
    /* every line is 80 columns (an 80-column terminal) */
    for (const char *p = box.buf; *p;) {
        const char *nl = strchr(p, '\n');
        CHECK(nl != NULL);
        if (!nl)
            break;
        char line[512];
        size_t n = (size_t)(nl - p) < sizeof(line) - 1 ? (size_t)(nl - p) : sizeof(line) - 1;
        memcpy(line, p, n);
        line[n] = '\0';
        size_t w = 0;
        for (const unsigned char *q = (const unsigned char *)line; *q; q++)
            w += (*q & 0xC0) != 0x80;
        CHECK_EQ_INT(w, 80);
        p = nl + 1;
    }
    tml__cmp_json(&a, &b, &r, box.buf, "2025-01-01T00:00:00Z", &js);
    tml_json *doc = NULL;
    CHECK_EQ_INT(tml__json_parse(js.buf, js.len, &doc, NULL), 0);
    CHECK_STR(tml__json_str(tml__json_get(doc, "verdict")), "IMPROVEMENT");
    CHECK_STR(tml__json_str(tml__json_get(doc, "clock")), "gpu");
    CHECK_STR(tml__json_str(tml__json_get(doc, "text")), box.buf);
    double v;
    CHECK(tml__json_num(tml__json_get(doc, "step_time_change_percent"), &v) && fabs(v + 59.88) < 0.01);
    const tml_json *st = tml__json_path(doc, "sections.step_time");
    CHECK(st && st->type == TML_JSON_ARRAY && st->n == 7);
    CHECK_STR(tml__json_str(tml__json_get(tml__json_at(st, 1), "metric")), "step_time_ms");
    CHECK(tml__json_num(tml__json_get(tml__json_at(st, 1), "delta"), &v) && fabs(v + 120) < 1e-6);
    CHECK(tml__json_path(doc, "primary_diagnosis.changed")->boolean == 1);
    tml__json_free(doc);
    tml__sb_release(&box);
    tml__sb_release(&js);
}

/* Block medians around `center` ms: a deterministic spread of +/- spread
 * ms, and one slow block of `spike` ms (an epoch start) when spike > 0. */
static void blocks(tml_cmp_run *r, double center, double spread, double spike, size_t n)
{
    tml_cmp_clock *k = &r->clock[TML_CMP_CPU];
    k->nblocks = n;
    for (size_t i = 0; i < n; i++)
        k->blocks_ms[i] = center + spread * (((double)((i * 7) % n) / (double)(n - 1)) - 0.5) * 2;
    if (spike > 0)
        k->blocks_ms[0] = spike;
}

/* The statistical rule: significant AND past the gate, and the Why says
 * which held (docs/compare.md). */
static void test_significance_and_gate(void)
{
    static const struct {
        const char *name;
        double a_center, b_center, spread, a_spike;
        tml_cmp_verdict want;
        const char *why;
    } cases[] = {
        /* the same script twice on a busy machine: a 1.5% shift of every
         * block is significant, and within the gate */
        {"same, shifted 1.5%", 10.0, 10.15, 0.05, 0, TML_CMP_EQUIVALENT,
         "significant (Mann-Whitney p = "},
        {"same, overlapping", 10.0, 10.02, 0.5, 0, TML_CMP_EQUIVALENT,
         "within the 3% gate and not significant"},
        /* a 10% slower variant moves every block */
        {"10% slower", 10.0, 11.0, 0.3, 0, TML_CMP_REGRESSION, "and past the 3% gate"},
        {"10% faster", 11.0, 10.0, 0.3, 0, TML_CMP_IMPROVEMENT, "decreased by 9.1%"},
        /* 5% apart but each run spread over +/-20%: past the gate, not
         * significant -- not evidence of no change (it was EQUIVALENT) */
        {"5% in wide noise", 10.0, 10.5, 2.0, 0, TML_CMP_INCONCLUSIVE,
         "past the 3% gate but not significant"},
        /* a slow epoch start in A inflates its stddev (60 ms), not its
         * block medians: the 60% slowdown is seen */
        {"spiky A, B 60% slower", 10.0, 16.0, 0.2, 200.0, TML_CMP_REGRESSION,
         "increased by 59."},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tml_cmp_run a = mk(cases[i].a_center, 60.0, NAN, 1000);
        tml_cmp_run b = mk(cases[i].b_center, 60.0, NAN, 1000);
        blocks(&a, cases[i].a_center, cases[i].spread, cases[i].a_spike, 20);
        blocks(&b, cases[i].b_center, cases[i].spread, 0, 20);
        tml_cmp_result r;
        tml__cmp_decide(&a, &b, NULL, &r);
        if (r.verdict != cases[i].want || !strstr(r.why, cases[i].why))
            fprintf(stderr, "case '%s': got %s: %s\n", cases[i].name,
                    tml__cmp_verdict_name(r.verdict), r.why);
        CHECK(r.tested == 1);
        CHECK(r.verdict == cases[i].want);
        CHECK(strstr(r.why, cases[i].why) != NULL);
    }
    /* memory moved, step time did not: the Why is true about both (it once
     * said "Step Time -20.0% (within the 3% gate)") */
    tml_cmp_run a = mk(10.0, NAN, 10e9, 1000), b = mk(9.5, NAN, 12e9, 1000);
    blocks(&a, 10.0, 3.0, 0, 20);
    blocks(&b, 9.5, 3.0, 0, 20);
    tml_cmp_result r;
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK(r.verdict == TML_CMP_REGRESSION);
    CHECK(strstr(r.why, "Peak reserved memory increased by 20.0%.") != NULL);
    CHECK(strstr(r.why, "within the 3% gate") == NULL);
    CHECK(strstr(r.why, "not significant") != NULL);
    /* too few blocks: the window-average rule */
    a = mk(10.0, NAN, NAN, 20);
    b = mk(11.0, NAN, NAN, 20);
    blocks(&a, 10.0, 0.1, 0, 4);
    blocks(&b, 11.0, 0.1, 0, 4);
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK(r.tested == 0 && r.verdict == TML_CMP_REGRESSION);
}

/* n runs around center ms, each off by a fixed pattern of +/- spread (a
 * fraction), with block medians like a real run's. */
static void runs(tml_cmp_run *r, size_t n, double center, double spread)
{
    static const double pat[] = {0, 1, -1, 0.5, -0.5, 0.8, -0.8, 0.2, -0.2, 0.6};
    for (size_t i = 0; i < n; i++) {
        double c = center * (1 + spread * pat[i % 10]);
        r[i] = mk(c, c * 0.1, NAN, 200);
        snprintf(r[i].label, sizeof(r[i].label), "run%zu", i);
        blocks(&r[i], c, c * 0.05, 0, 20);
    }
}

/* Several runs a side: the run is the unit (issue 45). */
static void test_runs_a_side(void)
{
    static const struct {
        const char *name;
        size_t na, nb;
        double a, b, spread;
        tml_cmp_verdict want;
        const char *why;
    } cases[] = {
        {"same, 3 a side, 1% noise", 3, 3, 10, 10, 0.01, TML_CMP_EQUIVALENT,
         "within the 3% gate and not significant"},
        {"same, 5 a side, 2% noise", 5, 5, 10, 10.05, 0.02, TML_CMP_EQUIVALENT,
         "can detect a change of"},
        {"+10%, 3 a side, 1% noise", 3, 3, 10, 11, 0.01, TML_CMP_REGRESSION,
         "significant (Welch t"},
        {"-20%, 3 a side", 3, 3, 10, 8, 0.01, TML_CMP_IMPROVEMENT, "decreased by 20.0%"},
        /* a large, clearly significant change is never EQUIVALENT */
        {"+282%, 3 a side, 20% noise", 3, 3, 10, 38.2, 0.2, TML_CMP_REGRESSION,
         "increased by"},
        /* noisy runs: a 6% change is not seen, and not called EQUIVALENT */
        {"+6%, 3 a side, 15% noise", 3, 3, 10, 10.6, 0.15, TML_CMP_INCONCLUSIVE,
         "not significant"},
        /* nothing seen, but the runs could not see 5 gates: undecided */
        {"same, 2 a side, 10% noise", 2, 2, 10, 10, 0.10, TML_CMP_INCONCLUSIVE,
         "can detect a change of"},
        /* one run on one side: the other side's run-to-run noise */
        {"+15%, 1 vs 4", 1, 4, 10, 11.5, 0.01, TML_CMP_REGRESSION, "1 vs 4 run"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tml_cmp_run a[10], b[10];
        runs(a, cases[i].na, cases[i].a, cases[i].spread);
        runs(b, cases[i].nb, cases[i].b, cases[i].spread);
        tml_cmp_result r;
        tml__cmp_decide_n(a, cases[i].na, b, cases[i].nb, NULL, &r);
        if (r.verdict != cases[i].want || !strstr(r.why, cases[i].why))
            fprintf(stderr, "case '%s': got %s: %s | %s\n", cases[i].name,
                    tml__cmp_verdict_name(r.verdict), r.why, r.next);
        CHECK(r.run_tested == 1);
        CHECK(r.verdict == cases[i].want);
        CHECK(strstr(r.why, cases[i].why) != NULL);
        CHECK(r.mdc >= 0);
        if (r.verdict == TML_CMP_INCONCLUSIVE)
            CHECK(strstr(r.next, "runs a side") != NULL);
    }
    /* the MDC: 3 a side with a 2% run-to-run noise sees about 6-12% */
    tml_cmp_run a[3], b[3];
    runs(a, 3, 10, 0.02);
    runs(b, 3, 10, 0.02);
    tml_cmp_result r;
    tml__cmp_decide_n(a, 3, b, 3, NULL, &r);
    CHECK(r.mdc > 0.04 && r.mdc < 0.15);
    CHECK_NEAR(r.effect, 0, 1e-9);
    /* the box and JSON show the runs */
    tml_cmp_run sa, sb;
    tml__cmp_side(a, 3, &sa);
    tml__cmp_side(b, 3, &sb);
    CHECK_STR(sa.label, "3 runs: run0, run1, run2");
    tml_strbuf box = TML_STRBUF_INIT, js = TML_STRBUF_INIT;
    tml__cmp_text(&sa, &sb, &r, &box);
    CHECK(strstr(box.buf, "A (3 runs): 10.00, 10.20, 9.80 ms") != NULL);
    tml__cmp_json(&sa, &sb, &r, box.buf, "2025-01-01T00:00:00Z", &js);
    tml_json *doc = NULL;
    CHECK_EQ_INT(tml__json_parse(js.buf, js.len, &doc, NULL), 0);
    CHECK_STR(tml__json_str(tml__json_path(doc, "test.method")), "welch-t-log");
    const tml_json *ra = tml__json_path(doc, "runs.a");
    CHECK(ra && ra->type == TML_JSON_ARRAY && ra->n == 3);
    CHECK(tml__json_path(doc, "test.mdc_percent") != NULL);
    tml__json_free(doc);
    tml__sb_release(&box);
    tml__sb_release(&js);
}

static void set_load(tml_cmp_run *r, double other, double runq, int gpu_shared)
{
    r->cont.known = 1;
    r->cont.cores = 2;
    r->cont.other_cpu = other;
    r->cont.runq_wait = runq;
    r->cont.training_cpu = 40;
    r->cont.host_cpu = other + 40;
    r->cont.gpu_shared = gpu_shared;
}

/* Differently loaded machines: INCONCLUSIVE, not a REGRESSION (issue 45:
 * quiet vs beside two busy loops was "REGRESSION +124.2%, significant"). */
static void test_contention(void)
{
    tml_cmp_run a = mk(10, NAN, NAN, 1000), b = mk(22.4, NAN, NAN, 1000);
    blocks(&a, 10, 0.2, 0, 20);
    blocks(&b, 22.4, 0.4, 0, 20);
    tml_cmp_result r;
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_REGRESSION);        /* unknown load: as before */
    set_load(&a, 2, 1, -1);
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_REGRESSION);        /* known on one side only */
    set_load(&b, 80, 35, -1);
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_INCONCLUSIVE);
    CHECK(r.load_differs == 1);
    CHECK(strstr(r.why, "differently loaded machines: other processes used 2% vs 80%") != NULL);
    CHECK(strstr(r.next, "interleaved runs a side") != NULL);
    /* a change with the load but beyond what the wait explains stands: A
     * waited 57% of its time for a core, and its 60 ms step with that
     * taken out (25.6 ms) is still 4.9x B's 5.27 ms (a loader fixed,
     * compared beside another test's load) */
    {
        tml_cmp_run x = mk(60.16, NAN, NAN, 1000), y = mk(5.27, NAN, NAN, 1000);
        blocks(&x, 60.16, 1.0, 0, 20);
        blocks(&y, 5.27, 0.1, 0, 20);
        set_load(&x, 86, 57.4, -1);
        set_load(&y, 50, 0.8, -1);
        tml__cmp_decide(&x, &y, NULL, &r);
        CHECK_EQ_INT(r.verdict, TML_CMP_IMPROVEMENT);
        CHECK(r.load_differs == 0);
        CHECK(strstr(r.why, "more than the wait explains") != NULL);
        /* the same loads, a change the wait could make: 2.24x at 57% */
        blocks(&y, 60.16 / 2.24, 0.1, 0, 20);
        y.clock[TML_CMP_CPU].step_ms = 60.16 / 2.24;
        tml__cmp_decide(&x, &y, NULL, &r);
        CHECK_EQ_INT(r.verdict, TML_CMP_INCONCLUSIVE);
        CHECK(r.load_differs == 1);
    }
    /* each rule alone, just past and just within (B's wait for a core,
     * 14%, could make a 2.24x slowdown: 2.24 x 0.86 < TML_CMP_BEYOND_WAIT) */
    set_load(&b, 2 + TML_CMP_LOAD_OTHER_PP - 0.1, 14, -1);
    tml__cmp_decide(&a, &b, NULL, &r);
    /* 26.9% is loaded itself, but a 2.24x change decides even then */
    CHECK(r.load_differs == 0 && r.loaded_single == 0);
    CHECK_EQ_INT(r.verdict, TML_CMP_REGRESSION);
    set_load(&b, 2 + TML_CMP_LOAD_OTHER_PP, 14, -1);
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_INCONCLUSIVE);
    CHECK(r.load_differs == 1);
    set_load(&b, 2, 1 + TML_CMP_LOAD_RUNQ_PP, -1);
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_INCONCLUSIVE);
    CHECK(r.load_differs == 1);
    set_load(&a, 2, 1, 0);
    set_load(&b, 2, 1, 1);
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_INCONCLUSIVE);
    CHECK(strstr(r.why, "B's GPU was shared") != NULL);
    /* one run a side, both loaded alike: the run-to-run noise is unknown
     * (the same script beside busy loops was REGRESSION +24.9%) */
    b = mk(12.49, NAN, NAN, 1000);
    blocks(&b, 12.49, 0.2, 0, 20);
    set_load(&a, 70, 30, -1);
    set_load(&b, 75, 32, -1);
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_INCONCLUSIVE);
    CHECK(r.loaded_single == 1);
    CHECK(strstr(r.why, "One run a side on a loaded machine") != NULL);
    /* ... but a change of 1.5x or more still decides (B 2.24x slower) */
    set_load(&a, 70, 30, -1);
    b = mk(22.4, NAN, NAN, 1000);
    blocks(&b, 22.4, 0.4, 0, 20);
    set_load(&b, 75, 32, -1);
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_REGRESSION);
    CHECK(r.loaded_single == 0);
    b = mk(14.5, NAN, NAN, 1000);                   /* 1.45x: not enough */
    blocks(&b, 14.5, 0.4, 0, 20);
    set_load(&b, 75, 32, -1);
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_INCONCLUSIVE);
    a = mk(10, NAN, NAN, 1000);                     /* the same the other way: 1/1.5 */
    blocks(&a, 10, 0.2, 0, 20);
    set_load(&a, 70, 30, -1);
    b = mk(6.6, NAN, NAN, 1000);
    blocks(&b, 6.6, 0.2, 0, 20);
    set_load(&b, 75, 32, -1);
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_IMPROVEMENT);
    b = mk(22.4, NAN, NAN, 1000);
    blocks(&b, 22.4, 0.4, 0, 20);
    /* both quiet: decided */
    set_load(&a, 3, 1, 0);
    set_load(&b, 5, 2, 0);
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_REGRESSION);
    /* several interleaved runs a side on a loaded machine: decided */
    tml_cmp_run ra[3], rb[3];
    runs(ra, 3, 10, 0.02);
    runs(rb, 3, 13, 0.02);
    for (int i = 0; i < 3; i++) {
        set_load(&ra[i], 70 + i, 30, -1);
        set_load(&rb[i], 72 - i, 31, -1);
    }
    tml__cmp_decide_n(ra, 3, rb, 3, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_REGRESSION);
    /* ... unless the sides' loads differ (medians over the runs) and the
     * slower side is the more loaded one */
    for (int i = 0; i < 3; i++)
        set_load(&ra[i], 5, 1, -1);
    tml__cmp_decide_n(ra, 3, rb, 3, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_INCONCLUSIVE);
    CHECK(r.load_differs == 1);
    /* a change against the load is not the load's: A more loaded, B slower */
    for (int i = 0; i < 3; i++) {
        set_load(&ra[i], 70, 30, -1);
        set_load(&rb[i], 5, 1, -1);
    }
    tml__cmp_decide_n(ra, 3, rb, 3, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_REGRESSION);
    CHECK(strstr(r.why, "A ran on the more loaded machine and was still faster") != NULL);
    /* the load one way by one measure, the other way by the other: undecided */
    for (int i = 0; i < 3; i++) {
        set_load(&ra[i], 70, 1, -1);
        set_load(&rb[i], 5, 30, -1);
    }
    tml__cmp_decide_n(ra, 3, rb, 3, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_INCONCLUSIVE);
    CHECK(r.load_differs == 1);
    /* ... unless the slower side, its wait for a core taken out, is still
     * twice the other: B 4x as slow, 30% of its time waiting */
    runs(rb, 3, 40, 0.02);
    for (int i = 0; i < 3; i++)
        set_load(&rb[i], 5, 30, -1);
    tml__cmp_decide_n(ra, 3, rb, 3, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_REGRESSION);
    CHECK(r.load_differs == 0);
    CHECK(strstr(r.why, "B ran on the machine loaded otherwise (it waited for a core 30%") != NULL);
    /* the machine in the box */
    tml_strbuf box = TML_STRBUF_INIT;
    tml__cmp_text(&a, &b, &r, &box);
    CHECK(strstr(box.buf, "Other processes CPU   3.0%            5.0%            +2.0 pp") != NULL);
    CHECK(strstr(box.buf, "GPU shared            no              no              same") != NULL);
    tml__sb_release(&box);
}

static const char *SUMMARY_W =
    "{\"schema_version\": 1, \"meta\": {\"run_name\": \"w\", \"workload\": {\"script\":"
    " \"train.py\", \"args\": [\"--epochs\", \"1\"], \"world_size\": 2, \"guard\":"
    " {\"schema_version\": 1, \"workload\": {\"name\": \"resnet\", \"parameters\":"
    " {\"batch\": 32, \"amp\": true}}, \"measurement\": {\"start_step\": 10,"
    " \"completed_steps\": 50}}}},"
    " \"contention\": {\"cores\": 2, \"host_cpu_percent\": 99, \"training_cpu_percent\": 48,"
    " \"other_cpu_percent\": 51, \"runq_wait_percent\": 22.5, \"gpu_shared\": null},"
    " \"primary_diagnosis\": {\"label\": \"COMPUTE-BOUND\"},"
    " \"step_time\": {\"window\": {\"window_steps\": 100}, \"by_clock\": {\"cpu\":"
    " {\"step_time_ms\": 10}}}}";

/* Workload and contention read back; a declared workload that differs is
 * INCONCLUSIVE (0.5.0's guard). */
static void test_workload_and_guard(void)
{
    tml_cmp_run a, b;
    char why[256];
    CHECK_EQ_INT(parse(SUMMARY_W, &a, why, sizeof(why)), 0);
    CHECK_STR(a.work.script, "train.py");
    CHECK_STR(a.work.args, "--epochs 1");
    CHECK_EQ_INT(a.work.world_size, 2);
    /* the keys sorted: the same declaration in another order is equal */
    CHECK_STR(a.work.guard, "{\"measurement\":{\"completed_steps\":50,\"start_step\":10},"
              "\"schema_version\":1,\"workload\":{\"name\":\"resnet\",\"parameters\":"
              "{\"amp\":true,\"batch\":32}}}");
    CHECK(a.cont.known && a.cont.gpu_shared == -1);
    CHECK_NEAR(a.cont.other_cpu, 51, 1e-9);
    CHECK_NEAR(a.cont.runq_wait, 22.5, 1e-9);
    b = a;
    tml_cmp_result r;
    b.clock[TML_CMP_CPU].step_ms = 10.1;
    a.cont.known = b.cont.known = 0;
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_EQUIVALENT);
    CHECK(r.guard_differs == 0);
    b.work.guard[0] = '\0';                       /* declared on one side only */
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_INCONCLUSIVE);
    snprintf(b.work.guard, sizeof(b.work.guard), "{\"workload\":{\"name\":\"other\"}}");
    b.clock[TML_CMP_CPU].step_ms = 30;            /* even a large change */
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_INCONCLUSIVE);
    CHECK(r.guard_differs == 1);
    CHECK(strstr(r.why, "declared workloads (traceml.yaml guard:) differ") != NULL);
    tml_strbuf box = TML_STRBUF_INIT;
    tml__cmp_text(&a, &b, &r, &box);
    CHECK(strstr(box.buf, "Script                train.py        train.py        same") != NULL);
    CHECK(strstr(box.buf, "Guard (traceml.yaml)  declared        declared        changed") != NULL);
    CHECK(strstr(box.buf, "Guard B: {\"workload\":{\"name\":\"other\"}}") != NULL);
    tml__sb_release(&box);
    /* the same declaration, but a node of B did not complete (0.5.0's
     * launcher_completion): INCONCLUSIVE, even past the gate */
    snprintf(b.work.guard, sizeof(b.work.guard), "%s", a.work.guard);
    b.work.launch_incomplete = 1;
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_INCONCLUSIVE);
    CHECK(r.guard_differs == 0 && r.launch_incomplete == 1);
    CHECK(strstr(r.why, "did not all report a completed training") != NULL);
    b.work.launch_incomplete = 0;
    tml__cmp_decide(&a, &b, NULL, &r);
    CHECK(r.verdict != TML_CMP_INCONCLUSIVE && r.launch_incomplete == 0);
    /* bad contention figures refuse the file, naming the field */
    const char *bad = "{\"schema_version\": 1, \"primary_diagnosis\": {}, \"step_time\": {},"
                      " \"contention\": {\"other_cpu_percent\": -5}}";
    CHECK_EQ_INT(parse(bad, &a, why, sizeof(why)), TML_EPROTO);
    CHECK(strstr(why, "contention.other_cpu_percent is -5") != NULL);
}

/* "About N interleaved runs a side": N from Student's t at 2N - 2 degrees
 * of freedom, as the minimal detectable change (not the normal quantiles,
 * which promise too few runs where few are needed). */
static void test_runs_needed(void)
{
    /* spread 0.1, a change of 0.1 (log): the normal quantiles say 12 */
    CHECK_EQ_INT(tml__cmp_runs_needed(0.1, 0.1, 3), 14);
    CHECK_EQ_INT(tml__cmp_runs_needed(0.02, log(1.1), 3), 4);   /* never fewer than have + 1 */
    CHECK_EQ_INT(tml__cmp_runs_needed(1.0, 0.001, 3), 999);     /* capped */
    CHECK_EQ_INT(tml__cmp_runs_needed(0.1, 0, 3), 4);           /* no target: the next count */
    /* the smallest such n: n holds the criterion, n - 1 does not */
    static const double cases[][2] = {{0.05, 0.03}, {0.2, 0.1}, {0.01, 0.005}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        double sd = cases[i][0], target = cases[i][1];
        int n = tml__cmp_runs_needed(sd, target, 2);
        for (int k = n - 1; k <= n; k++) {
            double df = 2.0 * k - 2;
            double need = (tml__t_quantile(1 - TML_CMP_ALPHA / 2, df) + tml__t_quantile(0.8, df)) *
                          sd / sqrt((double)k);
            if (k == n)
                CHECK(need <= target);
            else if (k > 2)
                CHECK(need > target);
        }
    }
}

static void dd_item(tml_cmp_dd *d, const char *name, double ms, int op)
{
    tml_cmp_dd_item *v = op ? &d->op[d->nop++] : &d->mod[d->nmod++];
    snprintf(v->name, sizeof(v->name), "%s", name);
    v->ms = ms;
    d->ran = 1;
}

/* Below the phase (judge/compare_dd.c): the modules and operators whose
 * time per profiled step changed most, largest first; a name one run
 * lacks is 0 there unless its list is full (then unknown, ranked last). */
static void test_deep_dive_changes(void)
{
    tml_cmp_dd a, b;
    tml_cmp_dd_diff d;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    tml__cmp_deep_dive(&a, &b, &d);
    CHECK_EQ_INT(d.compared, 0);            /* neither ran one */
    dd_item(&a, "heavy_block", 4.5, 0);
    dd_item(&a, "stem", 0.2, 0);
    dd_item(&a, "aten::mm", 3.0, 1);
    tml__cmp_deep_dive(&a, &b, &d);
    CHECK_EQ_INT(d.compared, 0);            /* only A did */
    dd_item(&b, "heavy_block", 5.0, 0);
    dd_item(&b, "stem", 0.2, 0);
    dd_item(&b, "extra_block", 6.7, 0);
    dd_item(&b, "aten::mm", 8.6, 1);
    tml__cmp_deep_dive(&a, &b, &d);
    CHECK_EQ_INT(d.compared, 1);
    CHECK_EQ_INT(d.nmod, 2);                /* stem did not change */
    CHECK_STR(d.mod[0].name, "extra_block");
    CHECK_NEAR(d.mod[0].a_ms, 0, 0);        /* not in A's list, which is not full */
    CHECK_NEAR(d.mod[0].delta_ms, 6.7, 1e-12);
    CHECK_STR(d.mod[1].name, "heavy_block");
    CHECK_NEAR(d.mod[1].delta_ms, 0.5, 1e-12);
    CHECK_EQ_INT(d.nop, 1);
    CHECK_NEAR(d.op[0].delta_ms, 5.6, 1e-12);
    /* A's list full: a name it lacks is unknown there, and ranks last */
    memset(&a, 0, sizeof(a));
    for (int i = 0; i < TML_CMP_DD_ITEMS; i++) {
        char n[16];
        snprintf(n, sizeof(n), "m%d", i);
        dd_item(&a, n, 10.0 - i, 0);
    }
    memset(&b, 0, sizeof(b));
    dd_item(&b, "m0", 10.0, 0);
    dd_item(&b, "m1", 1.0, 0);
    dd_item(&b, "new", 50.0, 0);
    tml__cmp_deep_dive(&a, &b, &d);
    CHECK_EQ_INT(d.nmod, TML_CMP_DD_CHANGES);
    CHECK_STR(d.mod[0].name, "m1");         /* -8: the largest known change */
    CHECK_NEAR(d.mod[0].delta_ms, -8.0, 1e-12);
    for (size_t i = 1; i < d.nmod; i++)
        CHECK(isnan(d.mod[i].delta_ms) || fabs(d.mod[i].delta_ms) <= fabs(d.mod[i - 1].delta_ms));
}

#define TESTS X(test_runs_needed) X(test_runs_a_side) X(test_contention) X(test_workload_and_guard) \
    X(test_significance_and_gate) X(test_verdict_table) X(test_why_lines) X(test_clock_choice) \
    X(test_custom_gates) X(test_read_summary) X(test_out_of_range) \
    X(test_box_and_json) X(test_deep_dive_changes)
#include "harness.h"
