/*
 * test_report.c - the box and final_summary.json.
 *
 * The box: every line has the requested display width, borders are where
 * the brief has them, "◀ cause" sits on the cause's line, missing values
 * print n/a, narrow terminals stack the panels. The JSON: it parses (a
 * small strict parser below), "text" equals the box, missing is null and a
 * measured zero is 0.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/run.h"
#include "report/model.h"
#include "report/report.h"
#include "base/json.h"
#include "base/utf8.h"
#include "traceml/traceml.h"
#include "harness.h"

#define MS 1000000LL

/* ---- a strict JSON parser (validation + lookup by dotted path) ---------- */

typedef struct jp {
    const char *s;
    size_t i, n;
    int err;
} jp;

static void ws(jp *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\n' || p->s[p->i] == '\t' ||
                           p->s[p->i] == '\r'))
        p->i++;
}

static void value(jp *p, int depth);

static void string(jp *p)
{
    if (p->i >= p->n || p->s[p->i] != '"') {
        p->err = 1;
        return;
    }
    p->i++;
    while (p->i < p->n && p->s[p->i] != '"') {
        unsigned char c = (unsigned char)p->s[p->i];
        if (c < 0x20) {
            p->err = 1;
            return;
        }
        if (c == '\\') {
            p->i++;
            if (p->i >= p->n) {
                p->err = 1;
                return;
            }
            char e = p->s[p->i];
            if (e == 'u') {
                for (int k = 0; k < 4; k++)
                    if (++p->i >= p->n || !isxdigit((unsigned char)p->s[p->i])) {
                        p->err = 1;
                        return;
                    }
            } else if (!strchr("\"\\/bfnrt", e)) {
                p->err = 1;
                return;
            }
        }
        p->i++;
    }
    if (p->i >= p->n) {
        p->err = 1;
        return;
    }
    p->i++;
}

static void number(jp *p)
{
    size_t st = p->i;
    if (p->i < p->n && p->s[p->i] == '-')
        p->i++;
    if (p->i < p->n && p->s[p->i] == '0')
        p->i++;
    else if (p->i < p->n && p->s[p->i] >= '1' && p->s[p->i] <= '9')
        while (p->i < p->n && isdigit((unsigned char)p->s[p->i]))
            p->i++;
    else {
        p->err = 1;
        return;
    }
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        if (p->i >= p->n || !isdigit((unsigned char)p->s[p->i])) {
            p->err = 1;
            return;
        }
        while (p->i < p->n && isdigit((unsigned char)p->s[p->i]))
            p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        if (p->i >= p->n || !isdigit((unsigned char)p->s[p->i])) {
            p->err = 1;
            return;
        }
        while (p->i < p->n && isdigit((unsigned char)p->s[p->i]))
            p->i++;
    }
    if (p->i == st)
        p->err = 1;
}

static void lit(jp *p, const char *w)
{
    size_t l = strlen(w);
    if (p->n - p->i < l || memcmp(p->s + p->i, w, l) != 0)
        p->err = 1;
    else
        p->i += l;
}

static void value(jp *p, int depth)
{
    ws(p);
    if (p->err || p->i >= p->n || depth > 64) {
        p->err = 1;
        return;
    }
    char c = p->s[p->i];
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        p->i++;
        ws(p);
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            return;
        }
        for (;;) {
            if (c == '{') {
                ws(p);
                string(p);
                ws(p);
                if (p->err || p->i >= p->n || p->s[p->i] != ':') {
                    p->err = 1;
                    return;
                }
                p->i++;
            }
            value(p, depth + 1);
            ws(p);
            if (p->err || p->i >= p->n) {
                p->err = 1;
                return;
            }
            if (p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->s[p->i] == close) {
                p->i++;
                return;
            }
            p->err = 1;
            return;
        }
    }
    if (c == '"')
        string(p);
    else if (c == 't')
        lit(p, "true");
    else if (c == 'f')
        lit(p, "false");
    else if (c == 'n')
        lit(p, "null");
    else
        number(p);
}

static int json_valid(const char *s)
{
    jp p = { s, 0, strlen(s), 0 };
    value(&p, 0);
    ws(&p);
    return !p.err && p.i == p.n;
}

/* Finds the value of a dotted path ("a.b.c", objects only) in valid JSON;
 * returns a pointer to its first character or NULL. */
static const char *json_get(const char *s, const char *path)
{
    jp p = { s, 0, strlen(s), 0 };
    char key[128];
    const char *dot;

    for (;;) {
        dot = strchr(path, '.');
        size_t kl = dot ? (size_t)(dot - path) : strlen(path);
        snprintf(key, sizeof(key), "\"%.*s\"", (int)kl, path);
        ws(&p);
        if (p.i >= p.n || p.s[p.i] != '{')
            return NULL;
        p.i++;
        int found = 0;
        for (;;) {
            ws(&p);
            if (p.i < p.n && p.s[p.i] == '}')
                return NULL;
            size_t ks = p.i;
            string(&p);
            if (p.err)
                return NULL;
            int match = p.i - ks == strlen(key) && memcmp(p.s + ks, key, strlen(key)) == 0;
            ws(&p);
            p.i++;   /* ':' */
            ws(&p);
            if (match) {
                found = 1;
                break;
            }
            value(&p, 0);
            ws(&p);
            if (p.err || p.i >= p.n)
                return NULL;
            if (p.s[p.i] == ',')
                p.i++;
        }
        if (!found)
            return NULL;
        if (!dot)
            return p.s + p.i;
        path = dot + 1;
    }
}

static int json_is(const char *s, const char *path, const char *literal)
{
    const char *v = json_get(s, path);
    if (!v) {
        fprintf(stderr, "no %s in JSON\n", path);
        return 0;
    }
    size_t l = strlen(literal);
    int ok = strncmp(v, literal, l) == 0 && !isalnum((unsigned char)v[l]) && v[l] != '.';
    if (!ok)
        fprintf(stderr, "%s: want %s, got %.20s\n", path, literal, v);
    return ok;
}

/* ---- runs ----------------------------------------------------------- */

static tml_step_record rec(uint64_t step, double input_ms)
{
    tml_step_record r;
    memset(&r, 0, sizeof(r));
    r.step = step;
    r.phase_ns[TML_PHASE_INPUT] = (int64_t)(input_ms * MS);
    r.phase_ns[TML_PHASE_FORWARD] = 24 * MS;
    r.phase_ns[TML_PHASE_BACKWARD] = 38 * MS;
    r.phase_ns[TML_PHASE_OPTIMIZER] = 6 * MS;
    r.traced_ns = 72 * MS;
    r.gpu_traced_ns = -1;
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        r.gpu_phase_ns[p] = -1;
    r.gap_ns = 2 * MS;
    r.rss_bytes = r.cuda_allocated_peak_bytes = r.cuda_reserved_peak_bytes = -1;
    r.observed = TML_STEP_PHASES & ~TML_PHASE_BIT(TML_PHASE_H2D);
    return r;
}

static void make_run(tml_run *run, int nranks, size_t steps, double input_ms, uint32_t instrumented)
{
    tml__run_init(run, "test_run", "abc123");
    for (int k = 0; k < nranks; k++) {
        tml_rank_info info;
        memset(&info, 0, sizeof(info));
        info.rank = k;
        info.node_rank = k / 2;
        info.world_size = nranks;
        info.nnodes = (nranks + 1) / 2;
        info.instrumented = instrumented;
        tml_rank *r = tml__run_rank(run, &info);
        CHECK(r != NULL);
    }
    for (int k = 0; k < nranks; k++) {
        tml_rank *r = tml__run_find(run, k);
        for (size_t i = 0; i < steps; i++) {
            tml_step_record s = rec(i, input_ms);
            CHECK(tml__run_add_steps(r, &s, 1) == 0);
        }
    }
}

static int build(const tml_run *run, int width, tml_strbuf *text, tml_strbuf *json)
{
    tml_report_opts o = { .status = "completed", .exit_code = 0, .duration_s = 12.5,
                          .json_path = "logs/test_run/final_summary.json", .width = width,
                          .generated_at = "2025-01-01T00:00:00Z" };
    return tml__report_build(run, &o, text, json);
}

/* Every line: `width` columns, starting and ending with the border. */
static int check_lines(const char *text, size_t width)
{
    const char *p = text;
    int ok = 1, lineno = 0;
    while (*p) {
        const char *e = strchr(p, '\n');
        if (!e) {
            fprintf(stderr, "box does not end with a newline\n");
            return 0;
        }
        char line[2048];
        size_t len = (size_t)(e - p);
        if (len >= sizeof(line))
            return 0;
        memcpy(line, p, len);
        line[len] = '\0';
        lineno++;
        size_t w = tml__utf8_width(line);
        int border = line[0] == '+';
        int good = w == width &&
                   (border ? line[len - 1] == '+' && strspn(line + 1, "-") == len - 2
                           : line[0] == '|' && line[1] == ' ' && line[len - 1] == '|' && line[len - 2] == ' ');
        if (!good) {
            fprintf(stderr, "line %d (width %zu, want %zu): [%s]\n", lineno, w, width, line);
            ok = 0;
        }
        p = e + 1;
    }
    return ok;
}

/* The line containing needle (copied into out), or 0. */
static int line_with(const char *text, const char *needle, char *out, size_t cap)
{
    const char *h = strstr(text, needle);
    if (!h)
        return 0;
    const char *b = h;
    while (b > text && b[-1] != '\n')
        b--;
    const char *e = strchr(h, '\n');
    size_t len = e ? (size_t)(e - b) : strlen(b);
    if (len >= cap)
        len = cap - 1;
    memcpy(out, b, len);
    out[len] = '\0';
    return 1;
}

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void test_box_layout_default_width(void)
{
    tml_run run;
    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
    char l[2048];

    make_run(&run, 1, 100, 128, TML_PHASES_ALL);
    CHECK(build(&run, 0, &text, &json) == 0);
    CHECK(check_lines(text.buf, TML_REPORT_DEFAULT_WIDTH));
    CHECK(strncmp(text.buf, "+---", 4) == 0);
    CHECK(strstr(text.buf, "| TraceML Run Summary ") != NULL);
    CHECK(strstr(text.buf, "| test_run · 1 rank · 100 common steps · 12.5s ") != NULL);
    CHECK(strstr(text.buf, "| Verdict: INPUT-BOUND (CRITICAL) ") != NULL);
    CHECK(strstr(text.buf, "| Why: Input Wait took 64% of Step Time. ") != NULL);
    CHECK(strstr(text.buf, "| Next: Increase workers, prefetch, or storage throughput. ") != NULL);
    CHECK(strstr(text.buf, "STEP TIMING (Window Average), CPU Clock") != NULL);
    CHECK(strstr(text.buf, "GPU observed") == NULL);   /* no GPU seen */
    /* ◀ cause on the Input Wait line, and only there */
    CHECK(line_with(text.buf, "◀ cause", l, sizeof(l)));
    CHECK(strstr(l, "├─ Input Wait") != NULL);
    CHECK(strstr(l, "128.0 ms") != NULL && strstr(l, "64%") != NULL);
    CHECK_EQ_INT(count_lines_with(text.buf, "◀ cause"), 1);
    /* panels side by side: the step timing and memory titles share a line */
    CHECK(line_with(text.buf, "STEP TIMING", l, sizeof(l)));
    CHECK(strstr(l, " || STEP MEMORY: NO GPU") != NULL);
    CHECK(line_with(text.buf, "SYSTEM METRICS", l, sizeof(l)));
    CHECK(strstr(l, " || PROCESS METRICS: NORMAL") != NULL);
    /* H2D instrumented, never seen: measured zero */
    CHECK(line_with(text.buf, "├─ H2D", l, sizeof(l)));
    CHECK(strstr(l, "0.0 ms") != NULL && strstr(l, " 0%") != NULL);
    CHECK(strstr(text.buf, "DataLoader fetch: 128.0 ms (CPU, supplemental)") != NULL);
    CHECK(strstr(text.buf, "Untraced: 2.0 ms/step between steps, ") != NULL);
    CHECK(strstr(text.buf, "TraceML cost: n/a") != NULL);   /* not measured */
    CHECK(strstr(text.buf, "| Full evidence: logs/test_run/final_summary.json ") != NULL);
    /* unsampled metrics are n/a, never 0 */
    CHECK(line_with(text.buf, "GPU util", l, sizeof(l)));
    CHECK(strstr(l, "n/a") != NULL);
    CHECK(strstr(l, " 0%") == NULL);
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__run_release(&run);
}

static void test_box_missing_is_na(void)
{
    tml_run run;
    tml_strbuf text = TML_STRBUF_INIT;
    char l[2048];

    /* H2D not instrumented: n/a; forward never seen: n/a and INCOMPLETE */
    make_run(&run, 1, 50, 5, TML_PHASES_ALL & ~TML_PHASE_BIT(TML_PHASE_H2D));
    tml_rank *r = tml__run_find(&run, 0);
    for (size_t i = 0; i < r->nsteps; i++)
        r->steps[i].observed &= ~TML_PHASE_BIT(TML_PHASE_FORWARD);
    CHECK(build(&run, 0, &text, NULL) == 0);
    CHECK(check_lines(text.buf, TML_REPORT_DEFAULT_WIDTH));
    CHECK(strstr(text.buf, "Verdict: INCOMPLETE DATA (WARNING)") != NULL);
    CHECK(strstr(text.buf, "Forward was never observed") != NULL);
    CHECK(line_with(text.buf, "├─ H2D", l, sizeof(l)));
    CHECK(strstr(l, "n/a") != NULL);
    CHECK(line_with(text.buf, "│  ├─ Forward", l, sizeof(l)));
    CHECK(strstr(l, "n/a") != NULL);
    CHECK(line_with(text.buf, "└─ Residual", l, sizeof(l)));
    CHECK(strstr(l, "n/a") != NULL);
    CHECK_EQ_INT(count_lines_with(text.buf, "◀ cause"), 0);
    tml__sb_release(&text);
    tml__run_release(&run);
}

static void test_box_narrow_stacks(void)
{
    tml_run run;
    tml_strbuf text = TML_STRBUF_INIT;
    char l[2048];

    make_run(&run, 1, 100, 128, TML_PHASES_ALL);
    for (int width = 60; width < TML_REPORT_STACK_BELOW; width += 7) {
        tml__sb_reset(&text);
        CHECK(build(&run, width, &text, NULL) == 0);
        CHECK(check_lines(text.buf, (size_t)width));
        CHECK(strstr(text.buf, " || ") == NULL);
        CHECK(line_with(text.buf, "STEP TIMING", l, sizeof(l)));
        CHECK(strstr(l, "STEP MEMORY") == NULL);
        CHECK(strstr(text.buf, "| STEP MEMORY: NO GPU") != NULL);
        CHECK(strstr(text.buf, "| PROCESS METRICS: NORMAL") != NULL);
        CHECK(strstr(text.buf, "◀ cause") != NULL);
    }
    /* too narrow is raised to the minimum, not broken */
    tml__sb_reset(&text);
    CHECK(build(&run, 10, &text, NULL) == 0);
    CHECK(check_lines(text.buf, TML_REPORT_MIN_WIDTH));
    /* at and above the limit the panels sit side by side */
    for (int width = TML_REPORT_STACK_BELOW; width <= 200; width += 15) {
        tml__sb_reset(&text);
        CHECK(build(&run, width, &text, NULL) == 0);
        CHECK(check_lines(text.buf, (size_t)width));
        CHECK(strstr(text.buf, " || STEP MEMORY") != NULL);
    }
    tml__sb_release(&text);
    tml__run_release(&run);
}

static void test_box_wraps_long_text(void)
{
    tml_run run;
    tml_strbuf text = TML_STRBUF_INIT;

    /* a long run name and path must wrap, not overflow */
    make_run(&run, 1, 100, 128, TML_PHASES_ALL);
    memset(run.name, 'n', 120);
    run.name[120] = '\0';
    tml_report_opts o = { .duration_s = 1, .width = 80,
                          .json_path = "logs/a/very/long/path/that/goes/on/and/on/and/on/and/on/final_summary.json",
                          .generated_at = "2025-01-01T00:00:00Z" };
    CHECK(tml__report_build(&run, &o, &text, NULL) == 0);
    CHECK(check_lines(text.buf, 80));
    tml__sb_release(&text);
    tml__run_release(&run);
}

static void test_box_multi_rank(void)
{
    tml_run run;
    tml_strbuf text = TML_STRBUF_INIT;

    make_run(&run, 4, 40, 5, TML_PHASES_ALL);
    run.world_size = 5;   /* one rank never reported */
    CHECK(build(&run, 0, &text, NULL) == 0);
    CHECK(check_lines(text.buf, TML_REPORT_DEFAULT_WIDTH));
    CHECK(strstr(text.buf, "test_run · 4/5 ranks · 2/2 nodes · 40 common steps") != NULL);
    CHECK(strstr(text.buf, "Scope: N = node · R = global rank · G = GPU index") != NULL);
    CHECK(strstr(text.buf, "Never reported: R4") != NULL);
    CHECK(strstr(text.buf, "STEP TIMING (Median R") != NULL);
    CHECK(strstr(text.buf, "STEP MEMORY: NO GPU · 4/5 ranks") != NULL);
    CHECK(strstr(text.buf, "SYSTEM METRICS: NORMAL · 2/2 nodes") != NULL);
    CHECK(strstr(text.buf, "median rank avg") != NULL);
    tml__sb_release(&text);
    tml__run_release(&run);
}

/* Models timed though the step did not name them (tml_set_auto_models):
 * every rank's, once, in the box and as meta.also_timed_models; none: no
 * row, an empty array. */
static void test_also_timed_models(void)
{
    tml_run run;
    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;

    make_run(&run, 2, 40, 5, TML_PHASES_ALL);
    CHECK(build(&run, 0, &text, &json) == 0);
    CHECK(strstr(text.buf, "also timed") == NULL);
    CHECK(json_is(json.buf, "meta.also_timed_models", "[]"));
    tml__sb_release(&text);
    tml__sb_release(&json);
    snprintf(run.ranks[0].info.auto_models, TML_AUTO_MODELS_MAX, "Generator");
    snprintf(run.ranks[1].info.auto_models, TML_AUTO_MODELS_MAX, " Generator,Teacher ,,");
    CHECK(build(&run, 0, &text, &json) == 0);
    CHECK(check_lines(text.buf, TML_REPORT_DEFAULT_WIDTH));
    CHECK(strstr(text.buf, "| Models: also timed: Generator, Teacher (found running") != NULL);
    CHECK(json_valid(json.buf));
    const char *v = json_get(json.buf, "meta.also_timed_models");
    const char *g = v ? strstr(v, "\"Generator\",") : NULL, *t = g ? strstr(g, "\"Teacher\"") : NULL;
    CHECK(v && *v == '[' && g && t && t < strchr(v, ']'));
    tml__sb_release(&text);
    tml__sb_release(&json);
    /* a class named with a terminal escape: the box (final_summary.txt,
     * the JSON's "text") holds '?' for each control, still aligned */
    snprintf(run.ranks[1].info.auto_models, TML_AUTO_MODELS_MAX, "Net\x1b[31m\xc2\x9b" "1m\x07");
    CHECK(build(&run, 0, &text, &json) == 0);
    CHECK(check_lines(text.buf, TML_REPORT_DEFAULT_WIDTH));
    CHECK(strstr(text.buf, "also timed: Generator, Net?[31m?1m? (found") != NULL);
    CHECK(strchr(text.buf, 0x1b) == NULL && strchr(text.buf, 0x07) == NULL);
    CHECK(strstr(json.buf, "Net?[31m?1m? (found") != NULL);
    char names[16] = "";
    tml__report_add_models(names, sizeof(names), "Generator, Critic, Teacher");
    CHECK_STR(names, "Generator");     /* what does not fit is left out */
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__run_release(&run);
}

/* A trial of `traceml tune` ends "interrupted" by design: tune stops it
 * once it ran its steps. Marked (run.stopped_by, TRACEML_TUNE_TRIAL in
 * the aggregator), the box says so instead of INTERRUPTED and the JSON
 * keeps it (meta.stopped_by); a run interrupted otherwise is unchanged. */
static void test_stopped_by_tune(void)
{
    tml_run run;
    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
    tml_report_opts o = { .status = "interrupted", .exit_code = 130, .duration_s = 12.5,
                          .width = 120, .generated_at = "2025-01-01T00:00:00Z" };

    make_run(&run, 1, 40, 5, TML_PHASES_ALL);
    CHECK(tml__report_build(&run, &o, &text, &json) == 0);
    CHECK(strstr(text.buf, "| Ended: INTERRUPTED (Ctrl-C or a signal)") != NULL);
    CHECK(json_is(json.buf, "meta.stopped_by", "null"));
    tml__sb_release(&text);
    tml__sb_release(&json);
    snprintf(run.stopped_by, sizeof(run.stopped_by), "tune");
    CHECK(tml__report_build(&run, &o, &text, &json) == 0);
    CHECK(check_lines(text.buf, 120));
    CHECK(strstr(text.buf, "| Ended: stopped by traceml tune after 40 steps (a trial: tune "
                           "stops each trial once it has run its steps)") != NULL);
    CHECK(strstr(text.buf, "INTERRUPTED") == NULL);
    CHECK(json_is(json.buf, "status", "\"interrupted\""));
    CHECK(json_is(json.buf, "meta.stopped_by", "\"tune\""));
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__run_release(&run);
}

static void test_json_valid_and_null_vs_zero(void)
{
    tml_run run;
    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;

    make_run(&run, 1, 100, 128, TML_PHASES_ALL);
    tml__run_find(&run, 0)->stats.overhead_ns_per_step = 8400;
    CHECK(build(&run, 0, &text, &json) == 0);
    CHECK(json_valid(json.buf));
    CHECK(json_is(json.buf, "schema_version", "1"));
    CHECK(json_is(json.buf, "generated_at", "\"2025-01-01T00:00:00Z\""));
    CHECK(json_is(json.buf, "duration_s", "12.500"));
    CHECK(json_is(json.buf, "status", "\"completed\""));
    CHECK(json_is(json.buf, "meta.run_name", "\"test_run\""));
    CHECK(json_is(json.buf, "meta.run_id", "\"abc123\""));
    CHECK(json_is(json.buf, "meta.world_size", "1"));
    CHECK(json_is(json.buf, "meta.gpus_observed", "0"));
    CHECK(json_is(json.buf, "meta.clock", "\"cpu\""));
    CHECK(json_is(json.buf, "meta.common_steps", "100"));
    CHECK(json_is(json.buf, "meta.traceml_overhead_us_per_step", "8.400"));
    CHECK(json_is(json.buf, "primary_diagnosis.kind", "\"INPUT_BOUND\""));
    CHECK(json_is(json.buf, "primary_diagnosis.severity", "\"CRITICAL\""));
    CHECK(json_is(json.buf, "primary_diagnosis.section", "\"step_time\""));
    CHECK(json_is(json.buf, "primary_diagnosis.evidence.cause", "\"input_wait\""));
    CHECK(json_is(json.buf, "primary_diagnosis.evidence.straggler", "null"));
    CHECK(json_is(json.buf, "step_time.average.input_wait_ms", "128.000"));
    CHECK(json_is(json.buf, "step_time.average.step_time_ms", "200.000"));
    /* H2D instrumented, never seen: measured zero is 0, not null */
    CHECK(json_is(json.buf, "step_time.average.h2d_ms", "0.000"));
    CHECK(json_is(json.buf, "step_time.median.rank", "0"));
    CHECK(json_is(json.buf, "step_time.median.label", "\"R0/N0\""));
    CHECK(json_is(json.buf, "step_time.worst.rank", "0"));
    CHECK(json_is(json.buf, "step_time.window.clock", "\"cpu\""));
    CHECK(json_is(json.buf, "step_time.shares_percent.input_wait", "64.00"));
    /* unsampled: null */
    CHECK(json_is(json.buf, "system.average.cpu_percent", "null"));
    CHECK(json_is(json.buf, "system.average.gpu_util_percent", "null"));
    CHECK(json_is(json.buf, "process.average.rss_bytes", "null"));
    CHECK(json_is(json.buf, "step_memory.average.peak_reserved_bytes", "null"));
    CHECK(json_is(json.buf, "step_memory.diagnosis.kind", "\"NO_GPU\""));
    CHECK(json_is(json.buf, "system.diagnosis.kind", "\"NORMAL\""));
    CHECK(json_is(json.buf, "process.diagnosis.kind", "\"NORMAL\""));
    /* "text" is the box, escaped */
    tml_strbuf esc = TML_STRBUF_INIT;
    tml__sb_add_json_str(&esc, text.buf);
    const char *t = json_get(json.buf, "text");
    CHECK(t != NULL && strncmp(t, esc.buf, esc.len) == 0);
    tml__sb_release(&esc);
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__run_release(&run);

    /* H2D not instrumented: null, not 0 */
    make_run(&run, 1, 100, 128, TML_PHASES_ALL & ~TML_PHASE_BIT(TML_PHASE_H2D));
    CHECK(build(&run, 0, NULL, &json) == 0);
    CHECK(json_valid(json.buf));
    CHECK(json_is(json.buf, "step_time.average.h2d_ms", "null"));
    CHECK(json_is(json.buf, "meta.traceml_overhead_us_per_step", "null"));
    tml__sb_release(&json);
    tml__run_release(&run);
}

static void test_json_empty_and_multi(void)
{
    tml_run run;
    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;

    /* nothing at all */
    tml__run_init(&run, "empty", "");
    CHECK(build(&run, 0, &text, &json) == 0);
    CHECK(json_valid(json.buf));
    CHECK(check_lines(text.buf, TML_REPORT_DEFAULT_WIDTH));
    CHECK(json_is(json.buf, "primary_diagnosis.kind", "\"INSUFFICIENT_STEP_TIME_DATA\""));
    CHECK(json_is(json.buf, "step_time.diagnosis.kind", "\"NO_DATA\""));
    CHECK(json_is(json.buf, "meta.run_id", "null"));
    CHECK(json_is(json.buf, "step_time.median.rank", "null"));
    CHECK(json_is(json.buf, "step_time.window.first_step", "null"));
    CHECK(strstr(text.buf, "Verdict: INSUFFICIENT STEP-TIME DATA (INFO)") != NULL);
    CHECK(strstr(text.buf, "| empty · 0 ranks · 0 common steps") != NULL);   /* not "0 rank" */
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__run_release(&run);

    /* a NULL run is an empty one */
    CHECK(build(NULL, 0, &text, &json) == 0);
    CHECK(json_valid(json.buf));
    tml__sb_release(&text);
    tml__sb_release(&json);

    /* several ranks, with a name that needs escaping */
    make_run(&run, 3, 30, 5, TML_PHASES_ALL);
    snprintf(run.name, sizeof(run.name), "we\"ird\\name");
    CHECK(build(&run, 0, &text, &json) == 0);
    CHECK(json_valid(json.buf));
    CHECK(json_is(json.buf, "meta.ranks_reported", "3"));
    CHECK(json_is(json.buf, "meta.nodes", "2"));
    CHECK(json_get(json.buf, "step_time.per_rank") != NULL);
    CHECK(json_is(json.buf, "step_time.straggler.score", "0.0000"));
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__run_release(&run);
}

/* A rank claiming an absurd world size (WORLD_SIZE=2147483647 once made
 * the summary fail or grow past 2.7 GB) is not believed. */
/* What TraceML costs, as the summary says it: the in-step figure, and the
 * background (every rank's shipper + sampler threads, the aggregator
 * process) as a share of one core over the run's duration. */
static void test_overhead_and_background(void)
{
    tml_run run;
    make_run(&run, 2, 50, 5, TML_PHASES_ALL);
    run.ranks[0].stats.overhead_ns_per_step = 2000;
    run.ranks[1].stats.overhead_ns_per_step = 4000;
    run.ranks[0].stats.shipper_cpu_ns = 50000000;      /* 50 ms */
    run.ranks[1].stats.shipper_cpu_ns = 75000000;
    run.aggregator_cpu_ns = 125000000;                 /* 250 ms in all over 12.5 s: 2% */
    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
    CHECK_EQ_INT(build(&run, 156, &text, &json), 0);
    /* 250 ms of background over 100 steps is 2,500 us a step */
    CHECK(strstr(text.buf, "TraceML cost: 2503.0 µs/step (3.0 in step, 2.0% of a core)") != NULL);
    tml_json *doc = NULL;
    CHECK_EQ_INT(tml__json_parse(json.buf, json.len, &doc, NULL), 0);
    double bg = NAN, ov = NAN;
    tml__json_num(tml__json_path(doc, "meta.traceml_background_cpu_percent"), &bg);
    tml__json_num(tml__json_path(doc, "meta.traceml_overhead_us_per_step"), &ov);
    CHECK_NEAR(bg, 2.0, 1e-9);
    CHECK_NEAR(ov, 3.0, 1e-9);
    double total = NAN;
    tml__json_num(tml__json_path(doc, "meta.traceml_overhead_total_us_per_step"), &total);
    CHECK_NEAR(total, 2503.0, 1e-6);
    tml__json_free(doc);
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__run_release(&run);
    /* nothing measured: null, and the box says only what it knows */
    make_run(&run, 1, 20, 5, TML_PHASES_ALL);
    CHECK_EQ_INT(build(&run, 156, &text, &json), 0);
    CHECK(strstr(json.buf, "\"traceml_background_cpu_percent\": null") != NULL);
    CHECK(strstr(text.buf, "of a core") == NULL);
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__run_release(&run);
}

static void test_absurd_world_size(void)
{
    tml_run run;
    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
    make_run(&run, 2, 30, 5, TML_PHASES_ALL);
    run.ranks[0].info.world_size = INT32_MAX;
    run.ranks[1].info.nnodes = INT32_MAX;
    CHECK(build(&run, 0, &text, &json) == 0);
    CHECK(json_is(json.buf, "meta.world_size", "2"));
    CHECK(json_is(json.buf, "meta.nodes", "1"));
    CHECK(json.len < 200000);
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__run_release(&run);
}

static void test_json_parser_rejects_bad(void)
{
    CHECK(json_valid("{\"a\": [1, 2.5, -3e2, null, true, \"x\\n\"]}"));
    CHECK(!json_valid("{\"a\": 1,}"));
    CHECK(!json_valid("{\"a\": nan}"));
    CHECK(!json_valid("{\"a\": 01}"));
    CHECK(!json_valid("{\"a\": \"x"));
    CHECK(!json_valid("{\"a\" 1}"));
    CHECK(!json_valid("{} {}"));
}

static void test_utf8_width(void)
{
    CHECK_EQ_INT(tml__utf8_width(""), 0);
    CHECK_EQ_INT(tml__utf8_width("abc"), 3);
    CHECK_EQ_INT(tml__utf8_width("├─ ◀ · µ"), 8);
    char s[] = "a\x1b]52;c;x\x07" "b\tc\x7f\xc2\x9b" "31m µ ◀\n";
    size_t n = tml__utf8_printable(s, strlen(s));
    CHECK_STR(s, "a?]52;c;x?b\tc??31m µ ◀\n");
    CHECK_EQ_INT(n, strlen(s));
    CHECK_EQ_INT(tml__utf8_printable(s, 0), 0);
}

/* tml_summary_html (src/report/notebook.c): the card's text is escaped,
 * its phases are phases.js's, the notebook's report is in an iframe whose
 * srcdoc holds the page escaped as an attribute; bad input is refused. */
static void test_summary_html_card_and_notebook(void)
{
    const char *json =
        "{\"status\":\"interrupted\",\"duration_s\":2.5,"
        "\"meta\":{\"run_name\":\"a<b>&\\\"c\",\"common_steps\":40,\"partial\":null},"
        "\"primary_diagnosis\":{\"label\":\"INPUT-BOUND\",\"severity\":\"CRITICAL\","
        "\"why\":\"Input Wait took 81% of <Step Time>.\",\"next\":\"try num_workers=2\"},"
        "\"step_time\":{\"window\":{\"clock\":\"cpu\"},\"median\":{\"step_time_ms\":13.2,"
        "\"input_wait_ms\":10.7,\"forward_ms\":0.5,\"communication_ms\":null,"
        "\"shares_percent\":{\"input_wait\":81.0,\"forward\":4.0}}}}";
    char *card = NULL, *nb = NULL, *page = NULL;
    CHECK_EQ_INT(tml_summary_html(json, strlen(json), TML_HTML_CARD, &card), 0);
    CHECK(card && strstr(card, "a&lt;b&gt;&amp;&quot;c"));
    CHECK(card && strstr(card, "of &lt;Step Time&gt;."));
    CHECK(card && strstr(card, ">INPUT-BOUND</span>"));
    CHECK(card && strstr(card, "interrupted &middot; PARTIAL &middot; 40 steps &middot; 2.5s"));
    CHECK(card && strstr(card, "width:81.00%;background:#e15759"));   /* phases.js's Input Wait */
    CHECK(card && strstr(card, ">Input Wait</td><td style=\"text-align:right;padding-left:16px\">10.7 ms"));
    CHECK(card && !strstr(card, "Communication") && !strstr(card, "<script"));
    CHECK_EQ_INT(tml_summary_html(json, strlen(json), TML_HTML_NOTEBOOK, &nb), 0);
    CHECK(nb && strncmp(nb, card, strlen(card)) == 0);
    const char *src = nb ? strstr(nb, "srcdoc=\"") : NULL;
    CHECK(src && strstr(src, "&lt;script type=&quot;application/json&quot; id=&quot;traceml-summary"));
    const char *end = src ? strstr(src + 8, "\"></iframe>") : NULL;   /* no quote before it */
    CHECK(end && !memchr(src + 8, '"', (size_t)(end - src - 8)));
    CHECK_EQ_INT(tml_summary_html(json, strlen(json), TML_HTML_PAGE, &page), 0);
    CHECK(page && strncmp(page, "<!DOCTYPE html>", 15) == 0);
    char *bad = NULL;
    CHECK_EQ_INT(tml_summary_html("[1]", 3, TML_HTML_CARD, &bad), TML_EPROTO);
    CHECK_EQ_INT(tml_summary_html("{", 1, TML_HTML_CARD, &bad), TML_EPROTO);
    CHECK_EQ_INT(tml_summary_html(json, strlen(json), 7, &bad), TML_EINVAL);
    CHECK(bad == NULL);
    tml_free(card);
    tml_free(nb);
    tml_free(page);
}

#define TESTS X(test_box_layout_default_width) X(test_box_missing_is_na) X(test_box_narrow_stacks) \
    X(test_box_wraps_long_text) X(test_box_multi_rank) X(test_also_timed_models) X(test_stopped_by_tune) \
    X(test_json_valid_and_null_vs_zero) \
    X(test_json_empty_and_multi) X(test_overhead_and_background) X(test_absurd_world_size) X(test_json_parser_rejects_bad) X(test_utf8_width) \
    X(test_summary_html_card_and_notebook)
#include "harness.h"

