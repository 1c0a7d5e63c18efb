/*
 * test_golden.c - golden tests: a recorded run in, the expected box out.
 *
 * Every tests/golden/<name>.steps is a run written in the small text format
 * below; the test builds the run (model/run.h), calls tml__report_build() with
 * a fixed generated_at and duration, and compares the box with
 * tests/golden/<name>.txt byte for byte; then reads its final_summary.json
 * back (report/reload.h) and checks that the box printed again from it is
 * the same (`traceml view --re-render`). Run from the repository root.
 *
 *   TML_GOLDEN_UPDATE=1    rewrite every <name>.txt from the current output
 *   TML_GOLDEN_JSON_DIR=D  also write D/<name>.json (tests/e2e/test_schema.py
 *                          validates those against docs/summary.schema.json)
 *
 * The .steps format, one directive per line, '#' starts a comment:
 *
 *   run NAME [world_size N] [nnodes N] [id ID]
 *   duration SECONDS                 run duration shown in the header
 *   width COLUMNS                    box width (default: the report's)
 *   window N                         window cap (default 10000)
 *   thresholds SPEC                  TRACEML_THRESHOLDS-style overrides
 *   expect KIND                      the primary diagnosis kind (checked)
 *   watch                            a `traceml watch` run (the watch box)
 *   rank R [node N] [local L] [instrumented LIST] [overhead_ns N]
 *        [records_dropped N] [events_dropped N]
 *                                    LIST: all, none, or input,h2d,forward,
 *                                    backward,optimizer joined by commas
 *   steps R FIRST COUNT KEY=VALUE... COUNT records for rank R with step ids
 *                                    FIRST..FIRST+COUNT-1, appended in order
 *
 * Step keys, durations in milliseconds (a phase given is observed, a phase
 * not given is not): input h2d fwd bwd opt; extra (traced time no phase
 * covers, i.e. residual; default 0); traced (the bracket's traced time,
 * default h2d+fwd+bwd+opt+extra); gap (untraced gap before the step;
 * default: none, -1); gpu=1 (GPU figures equal to the CPU ones); rss_mb,
 * alloc_mb, reserved_mb (per-step memory); aborted=1; samples, tokens,
 * gflops (the step's FLOPs, counted by FlopCounterMode in 16-bit) and
 * peak_tflops (the device's peak).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "model/run.h"
#include "report/model.h"
#include "report/reload.h"
#include "report/report.h"
#include "harness.h"

typedef struct golden {
    tml_run run;
    double duration_s;
    int width;
    size_t window;
    int has_th;
    tml_thresholds th;
    char expect[64];
} golden;

static int parse_ll(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_d(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static int64_t ms_ns(double ms)
{
    return (int64_t)(ms * 1e6 + (ms >= 0 ? 0.5 : -0.5));
}

static int parse_phases(const char *s, uint32_t *mask)
{
    static const char *names[TML_PHASE_COUNT] = { "input", "h2d", "forward", "backward", "optimizer" };
    char buf[128];
    *mask = 0;
    if (strcmp(s, "all") == 0) {
        *mask = TML_PHASES_ALL;
        return 0;
    }
    if (strcmp(s, "none") == 0)
        return 0;
    snprintf(buf, sizeof(buf), "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int p = 0; p < TML_PHASE_COUNT; p++)
            if (strcmp(t, names[p]) == 0) {
                *mask |= TML_PHASE_BIT(p);
                found = 1;
            }
        if (!found)
            return -1;
    }
    return 0;
}

static int do_rank(golden *g, char **tok, int n)
{
    tml_rank_info info;
    long long v;
    memset(&info, 0, sizeof(info));
    info.instrumented = TML_PHASES_ALL;
    info.world_size = g->run.world_size;
    info.nnodes = g->run.nnodes;
    if (n < 2 || parse_ll(tok[1], &v))
        return -1;
    info.rank = (int32_t)v;
    tml_rank_stats st = { 0, 0, 0, -1, 0 };
    for (int i = 2; i + 1 < n; i += 2) {
        const char *k = tok[i], *val = tok[i + 1];
        if (strcmp(k, "instrumented") == 0) {
            if (parse_phases(val, &info.instrumented))
                return -1;
            continue;
        }
        if (parse_ll(val, &v))
            return -1;
        if (strcmp(k, "node") == 0) info.node_rank = (int32_t)v;
        else if (strcmp(k, "local") == 0) info.local_rank = (int32_t)v;
        else if (strcmp(k, "overhead_ns") == 0) st.overhead_ns_per_step = v;
        else if (strcmp(k, "records_dropped") == 0) st.records_dropped = (uint64_t)v;
        else if (strcmp(k, "events_dropped") == 0) st.events_dropped = (uint64_t)v;
        else return -1;
    }
    tml_rank *r = tml__run_rank(&g->run, &info);
    if (!r)
        return -1;
    r->stats = st;
    return 0;
}

static int do_steps(golden *g, char **tok, int n)
{
    long long rank, first, count;
    if (n < 4 || parse_ll(tok[1], &rank) || parse_ll(tok[2], &first) || parse_ll(tok[3], &count) ||
        count < 0)
        return -1;
    tml_rank *r = tml__run_find(&g->run, (int32_t)rank);
    if (!r)
        return -1;
    tml_step_record t;
    memset(&t, 0, sizeof(t));
    t.gap_ns = -1;
    t.gpu_traced_ns = -1;
    t.rss_bytes = t.cuda_allocated_peak_bytes = t.cuda_reserved_peak_bytes = -1;
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        t.gpu_phase_ns[p] = -1;
    static const char *pk[TML_PHASE_COUNT] = { "input", "h2d", "fwd", "bwd", "opt", "comm" };
    double extra = 0, traced = -1;
    int gpu = 0;
    for (int i = 4; i < n; i++) {
        char *eq = strchr(tok[i], '=');
        double v;
        if (!eq)
            return -1;
        *eq = '\0';
        const char *k = tok[i];
        if (parse_d(eq + 1, &v))
            return -1;
        int done = 0;
        for (int p = 0; p < TML_PHASE_COUNT; p++)
            if (strcmp(k, pk[p]) == 0) {
                t.phase_ns[p] = ms_ns(v);
                t.observed |= TML_PHASE_BIT(p);
                done = 1;
            }
        if (done) continue;
        if (strcmp(k, "extra") == 0) extra = v;
        else if (strcmp(k, "traced") == 0) traced = v;
        else if (strcmp(k, "gap") == 0) t.gap_ns = ms_ns(v);
        else if (strcmp(k, "gpu") == 0) gpu = v != 0;
        else if (strcmp(k, "rss_mb") == 0) t.rss_bytes = (int64_t)(v * 1e6);
        else if (strcmp(k, "alloc_mb") == 0) t.cuda_allocated_peak_bytes = (int64_t)(v * 1e6);
        else if (strcmp(k, "reserved_mb") == 0) t.cuda_reserved_peak_bytes = (int64_t)(v * 1e6);
        else if (strcmp(k, "inflight") == 0) t.comm_ns = ms_ns(v);
        else if (strcmp(k, "comm_mb") == 0) t.comm_bytes = (int64_t)(v * 1e6);
        else if (strcmp(k, "aborted") == 0) t.flags = v != 0 ? TML_STEP_ABORTED : 0;
        else if (strcmp(k, "samples") == 0) t.samples = (int64_t)v;
        else if (strcmp(k, "tokens") == 0) t.tokens = (int64_t)v;
        else if (strcmp(k, "gflops") == 0) t.flops = (int64_t)(v * 1e9);
        else if (strcmp(k, "peak_tflops") == 0) t.peak_flops = (int64_t)(v * 1e12);
        else return -1;
    }
    t.traced_ns = traced >= 0 ? ms_ns(traced)
                  : t.phase_ns[TML_PHASE_H2D] + t.phase_ns[TML_PHASE_FORWARD] +
                    t.phase_ns[TML_PHASE_BACKWARD] + t.phase_ns[TML_PHASE_OPTIMIZER] +
                    t.phase_ns[TML_PHASE_COMM] + ms_ns(extra);
    if (gpu) {
        t.gpu_traced_ns = t.traced_ns;
        for (int p = 0; p < TML_PHASE_COUNT; p++)
            t.gpu_phase_ns[p] = t.phase_ns[p];
    }
    if (t.flops > 0)
        t.flops_how = TML_FLOPS_COUNTED | TML_FLOPS_16BIT;
    for (long long i = 0; i < count; i++) {
        t.step = (uint64_t)(first + i);
        t.start_ns = (int64_t)t.step * 1000000000LL;
        if (tml__run_add_steps(r, &t, 1) < 0)
            return -1;
    }
    return 0;
}

static int load(const char *path, golden *g)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int lineno = 0;

    memset(g, 0, sizeof(*g));
    tml__run_init(&g->run, "golden", "golden-id");
    g->duration_s = 10.0;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        char *tok[32];
        int n = 0;
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        for (char *save = NULL, *t = strtok_r(line, " \t\r\n", &save); t && n < 32;
             t = strtok_r(NULL, " \t\r\n", &save))
            tok[n++] = t;
        if (n == 0)
            continue;
        int bad = 0;
        long long v = 0;
        if (strcmp(tok[0], "run") == 0 && n >= 2) {
            snprintf(g->run.name, sizeof(g->run.name), "%s", tok[1]);
            for (int i = 2; i + 1 < n; i += 2) {
                if (strcmp(tok[i], "id") == 0) {
                    snprintf(g->run.id, sizeof(g->run.id), "%s", tok[i + 1]);
                    continue;
                }
                if (parse_ll(tok[i + 1], &v)) bad = 1;
                else if (strcmp(tok[i], "world_size") == 0) g->run.world_size = (int32_t)v;
                else if (strcmp(tok[i], "nnodes") == 0) g->run.nnodes = (int32_t)v;
                else bad = 1;
            }
        } else if (strcmp(tok[0], "duration") == 0 && n == 2) {
            bad = parse_d(tok[1], &g->duration_s);
        } else if (strcmp(tok[0], "width") == 0 && n == 2) {
            bad = parse_ll(tok[1], &v);
            g->width = (int)v;
        } else if (strcmp(tok[0], "window") == 0 && n == 2) {
            bad = parse_ll(tok[1], &v) || v < 0;
            g->window = (size_t)v;
        } else if (strcmp(tok[0], "thresholds") == 0 && n == 2) {
            tml__thresholds_default(&g->th);
            bad = tml__thresholds_parse(&g->th, tok[1]) != 0;
            g->has_th = 1;
        } else if (strcmp(tok[0], "watch") == 0 && n == 1) {
            g->run.watch = 1;
        } else if (strcmp(tok[0], "expect") == 0 && n == 2) {
            snprintf(g->expect, sizeof(g->expect), "%s", tok[1]);
        } else if (strcmp(tok[0], "rank") == 0) {
            bad = do_rank(g, tok, n);
        } else if (strcmp(tok[0], "steps") == 0) {
            bad = do_steps(g, tok, n);
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "%s:%d: bad line\n", path, lineno);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    tml_strbuf sb = TML_STRBUF_INIT;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        tml__sb_add(&sb, buf, n);
    fclose(f);
    return tml__sb_detach(&sb, NULL);
}

static int spit(const char *path, const char *s, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = fwrite(s, 1, len, f) == len;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The JSON read back (report/reload.h) and printed again at the same
 * width must give the same box: `traceml view --re-render` of a summary
 * shows what the run showed. 1 when it does not. */
static int reread(const char *name, const tml_strbuf *json, const char *text,
                  const char *evidence, int width)
{
    tml_json *doc = NULL;
    tml_report_loaded *l = NULL;
    char why[256] = "";
    tml_strbuf box = TML_STRBUF_INIT;
    int fail = 1;
    if (tml__json_parse(json->buf, json->len, &doc, NULL) < 0 ||
        tml__report_load(doc, evidence, width, &l, why, sizeof(why)) < 0) {
        fprintf(stderr, "golden %s: summary not read back (%s)\n", name, why);
        goto out;
    }
    tml__report_box(&l->m, &box);
    fail = !box.buf || strcmp(box.buf, text) != 0;
    if (fail)
        fprintf(stderr, "golden %s: re-rendered box differs; got:\n%s\n", name,
                box.buf ? box.buf : "(none)");
out:
    tml__sb_release(&box);
    tml__report_loaded_free(l);
    tml__json_free(doc);
    return fail;
}

static int run_case(const char *dir, const char *name)
{
    char path[512], want_path[512], jpath[512], evidence[256];
    golden g;
    int fail = 0;
    const char *upd = getenv("TML_GOLDEN_UPDATE");
    const char *jdir = getenv("TML_GOLDEN_JSON_DIR");

    snprintf(path, sizeof(path), "%s/%s.steps", dir, name);
    snprintf(want_path, sizeof(want_path), "%s/%s.txt", dir, name);
    if (load(path, &g) < 0) {
        tml__run_release(&g.run);
        fprintf(stderr, "golden %s: cannot load %s\n", name, path);
        return 1;
    }
    snprintf(evidence, sizeof(evidence), "logs/%s/final_summary.json", g.run.name);
    tml_report_opts o = { .status = "completed", .exit_code = 0, .duration_s = g.duration_s,
                          .json_path = evidence, .width = g.width,
                          .th = g.has_th ? &g.th : NULL, .window_steps = g.window,
                          .generated_at = "2025-01-01T00:00:00Z" };
    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
    if (tml__report_build(&g.run, &o, &text, &json) != 0) {
        fprintf(stderr, "golden %s: report failed\n", name);
        fail = 1;
        goto done;
    }
    if (g.expect[0]) {
        char needle[128];
        snprintf(needle, sizeof(needle), "\"primary_diagnosis\": {\n    \"kind\": \"%s\"", g.expect);
        if (!strstr(json.buf, needle)) {
            fprintf(stderr, "golden %s: primary diagnosis is not %s\n", name, g.expect);
            fail = 1;
        }
    }
    if (reread(name, &json, text.buf, evidence, g.width))
        fail = 1;
    if (jdir && *jdir) {
        snprintf(jpath, sizeof(jpath), "%s/%s.json", jdir, name);
        if (spit(jpath, json.buf, json.len) < 0) {
            fprintf(stderr, "golden %s: cannot write %s\n", name, jpath);
            fail = 1;
        }
    }
    if (upd && strcmp(upd, "1") == 0) {
        if (spit(want_path, text.buf, text.len) < 0) {
            fprintf(stderr, "golden %s: cannot write %s\n", name, want_path);
            fail = 1;
        }
        goto done;
    }
    char *want = slurp(want_path);
    if (!want) {
        fprintf(stderr, "golden %s: missing %s (run with TML_GOLDEN_UPDATE=1)\n", name, want_path);
        fail = 1;
    } else if (strcmp(want, text.buf) != 0) {
        /* Show the first differing line. */
        const char *a = want, *b = text.buf;
        int ln = 1;
        while (*a && *a == *b) {
            if (*a == '\n')
                ln++;
            a++;
            b++;
        }
        fprintf(stderr, "golden %s: differs from %s at line %d; got:\n%s\n", name, want_path, ln,
                text.buf);
        fail = 1;
    }
    free(want);
done:
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__run_release(&g.run);
    return fail;
}

static size_t ncases;

static void test_golden_cases(void)
{
    const char *dir = "tests/golden";
    DIR *d = opendir(dir);
    char *names[256];
    size_t n = 0;

    CHECK(d != NULL);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len > 6 && strcmp(e->d_name + len - 6, ".steps") == 0 && n < 256)
            names[n++] = strndup(e->d_name, len - 6);
    }
    closedir(d);
    qsort(names, n, sizeof(names[0]), cmp_str);
    for (size_t i = 0; i < n; i++) {
        int fail = run_case(dir, names[i]);
        if (fail)
            fprintf(stderr, "FAIL golden %s\n", names[i]);
        CHECK(fail == 0);
        free(names[i]);
    }
    ncases = n;
}

static void test_golden_required_cases(void)
{
    static const char *required[] = {
        "tests/golden/input_bound.steps", "tests/golden/balanced.steps",
        "tests/golden/incomplete_forward.steps", "tests/golden/input_straggler_2rank.steps",
    };
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        FILE *f = fopen(required[i], "r");
        CHECK(f != NULL);
        if (f)
            fclose(f);
    }
    CHECK(ncases >= 4);
}

#define TESTS X(test_golden_cases) X(test_golden_required_cases)
#include "harness.h"
