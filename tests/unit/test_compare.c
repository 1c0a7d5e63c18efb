/*
 * test_compare.c - `traceml compare`'s rules (src/report/compare.c): the
 * verdict on both sides of every gate, the noise rule, the clock choice,
 * INCONCLUSIVE, reading summaries (good and bad), and the box and JSON.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/compare.h"
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
        /* noise: past the gate but within the noise -> equivalent */
        {"time +5% within noise 6ms", 100, 105, 6, NAN, NAN, 100, 100, TML_CMP_EQUIVALENT, 1},
        {"time +5% beyond noise 4ms", 100, 105, 4, NAN, NAN, 100, 100, TML_CMP_REGRESSION, 0},
        {"time -5% within noise", 100, 95, 5.5, NAN, NAN, 100, 100, TML_CMP_EQUIVALENT, 1},
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

    /* the larger of the two noises counts */
    c.clock[TML_CMP_CPU].noise_ms = 1;
    d.clock[TML_CMP_CPU].noise_ms = 6;
    tml__cmp_decide(&c, &d, NULL, &r);
    CHECK_EQ_INT(r.verdict, TML_CMP_EQUIVALENT);
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

static void test_mann_whitney(void)
{
    double a[5] = {1, 2, 3, 4, 5}, b[5] = {6, 7, 8, 9, 10}, c[5] = {3, 3, 3, 3, 3};
    CHECK_NEAR(tml__mann_whitney_p(a, 5, b, 5), 0.0122, 0.0005);   /* U = 0, normal approx */
    CHECK_NEAR(tml__mann_whitney_p(b, 5, a, 5), 0.0122, 0.0005);   /* two-sided */
    CHECK_NEAR(tml__mann_whitney_p(a, 5, a, 5), 1.0, 0.05);
    CHECK_NEAR(tml__mann_whitney_p(c, 5, c, 5), 1.0, 1e-12);       /* all tied */
    double x[20], y[20];
    for (int i = 0; i < 20; i++) {
        x[i] = 100 + i * 0.1;
        y[i] = 110 + i * 0.1;
    }
    CHECK(tml__mann_whitney_p(x, 20, y, 20) < 1e-6);
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
        /* 5% apart but each run spread over +/-20%: past the gate, not significant */
        {"5% in wide noise", 10.0, 10.5, 2.0, 0, TML_CMP_EQUIVALENT,
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

#define TESTS X(test_mann_whitney) X(test_significance_and_gate) X(test_verdict_table) X(test_why_lines) X(test_clock_choice) \
    X(test_custom_gates) X(test_read_summary) X(test_out_of_range) \
    X(test_box_and_json)
#include "harness.h"
