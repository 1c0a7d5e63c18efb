/*
 * test_results.c - what a run's results become beyond the box: the per-step
 * series in final_summary.json (decimation, missing = null), the bounded
 * system timeline, the Chrome trace, the HTML page's escaping, the flat
 * tracker dict, and the summary so far over the wire (SUMMARY_REQ ->
 * SUMMARY through a real aggregator socket).
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agg/agg.h"
#include "model/run.h"
#include "agg/server.h"
#include "model/sample.h"
#include "model/timeline.h"
#include "core/client.h"
#include "report/chrome_trace.h"
#include "report/compare.h"
#include "report/flat.h"
#include "report/html.h"
#include "report/report.h"
#include "traceml/traceml.h"
#include "base/json.h"
#include "base/strbuf.h"
#include "wire/wire.h"

#include "harness.h"

/* A run of `ranks` ranks x `steps` steps; phase p of step i lasts
 * (p + 1) ms (+ rank ms of input), bwd missing when no_bwd. */

static void make_run(tml_run *run, int ranks, size_t steps, int no_bwd, int gpu_every)
{
    tml__run_init(run, "unit", "id0");
    tml_step_record *recs = calloc(steps, sizeof(*recs));
    for (int r = 0; r < ranks; r++) {
        tml_rank_info info;
        memset(&info, 0, sizeof(info));
        info.rank = r;
        info.world_size = ranks;
        info.instrumented = TML_PHASES_ALL;
        tml_rank *rk = tml__run_rank(run, &info);
        int64_t t = 1000000;
        for (size_t i = 0; i < steps; i++) {
            tml_step_record *s = &recs[i];
            memset(s, 0, sizeof(*s));
            s->step = i;
            s->observed = TML_STEP_PHASES & ~(no_bwd ? TML_PHASE_BIT(TML_PHASE_BACKWARD) : 0u);
            for (int p = 0; p < TML_PHASE_COUNT; p++)
                s->phase_ns[p] = (s->observed & TML_PHASE_BIT(p)) ? (p + 1) * 1000000LL : 0;
            s->phase_ns[TML_PHASE_INPUT] += r * 1000000LL;
            s->traced_ns = 20000000;
            s->start_ns = t + s->phase_ns[TML_PHASE_INPUT];
            t = s->start_ns + s->traced_ns + 500000;
            s->gap_ns = i ? 500000 : -1;
            s->gpu_traced_ns = gpu_every && i % (size_t)gpu_every == 0 ? -1 : (gpu_every ? 10000000 : -1);
            for (int p = 0; p < TML_PHASE_COUNT; p++)
                s->gpu_phase_ns[p] = s->gpu_traced_ns < 0 ? -1 : 1000000;
            s->rss_bytes = 1000 + (int64_t)i;
            s->cuda_allocated_peak_bytes = s->cuda_reserved_peak_bytes = -1;
            s->flags = i == 5 ? TML_STEP_ABORTED : 0;
        }
        tml__run_add_steps(rk, recs, steps);
    }
    free(recs);
}

static tml_json *summary_of(const tml_run *run, int series)
{
    tml_strbuf json = TML_STRBUF_INIT;
    tml_report_opts o;
    memset(&o, 0, sizeof(o));
    o.generated_at = "2025-01-01T00:00:00Z";
    o.series = series;
    CHECK_EQ_INT(tml__report_build(run, &o, NULL, &json), 0);
    tml_json *doc = NULL;
    tml_json_error err = {0, NULL};
    if (tml__json_parse(json.buf, json.len, &doc, &err) < 0)
        fprintf(stderr, "bad JSON: %s at %zu\n", err.msg, err.offset);
    tml__sb_release(&json);
    return doc;
}

static void test_series_small_run(void)
{
    tml_run run;
    make_run(&run, 2, 30, 0, 0);
    tml_json *doc = summary_of(&run, 1);
    CHECK(doc != NULL);
    const tml_json *s = tml__json_get(doc, "series");
    CHECK(s && s->type == TML_JSON_OBJECT);
    double v;
    CHECK(tml__json_num(tml__json_get(s, "bucket_steps"), &v) && v == 1);
    CHECK_STR(tml__json_str(tml__json_get(s, "clock")), "cpu");
    const tml_json *steps = tml__json_get(s, "step");
    CHECK(steps && steps->n == 30);
    const tml_json *r1 = tml__json_at(tml__json_get(s, "ranks"), 1);
    CHECK_STR(tml__json_str(tml__json_get(r1, "label")), "R1/N0");
    const tml_json *in = tml__json_get(r1, "input_wait_ms");
    CHECK(in && in->n == 30);
    CHECK(tml__json_num(tml__json_at(in, 0), &v) && fabs(v - 2.0) < 1e-9);   /* 1 ms + rank 1 */
    /* the aborted step 5 is a gap */
    CHECK(tml__json_at(in, 5)->type == TML_JSON_NULL);
    const tml_json *st = tml__json_get(r1, "step_time_ms");
    CHECK(tml__json_num(tml__json_at(st, 0), &v) && fabs(v - 22.0) < 1e-9);
    /* untraced: no gap before the first step */
    CHECK(tml__json_at(tml__json_get(r1, "untraced_ms"), 0)->type == TML_JSON_NULL);
    CHECK(tml__json_num(tml__json_at(tml__json_get(r1, "untraced_ms"), 1), &v) && fabs(v - 0.5) < 1e-9);
    /* never sampled: a null array, not zeros */
    CHECK(tml__json_get(r1, "peak_reserved_bytes")->type == TML_JSON_NULL);
    CHECK(tml__json_get(r1, "rss_bytes")->type == TML_JSON_ARRAY);
    /* step_time noise and per-clock figures */
    CHECK(tml__json_num(tml__json_path(doc, "step_time.noise_ms"), &v) && v >= 0);
    CHECK(tml__json_path(doc, "step_time.by_clock.gpu")->type == TML_JSON_NULL);
    CHECK(tml__json_num(tml__json_path(doc, "step_time.by_clock.cpu.step_time_ms"), &v));
    tml__json_free(doc);
    /* without opts.series: null */
    doc = summary_of(&run, 0);
    CHECK(tml__json_get(doc, "series")->type == TML_JSON_NULL);
    tml__json_free(doc);
    tml__run_release(&run);
}

/* Step ids spanning nearly 2^64 (a custom client, a rebuilt database
 * with step -1) once overflowed the bucket width: the report failed. */
static void test_series_extreme_step_ids(void)
{
    tml_run run;
    make_run(&run, 1, 30, 0, 0);
    run.ranks[0].steps[0].step = 0;
    run.ranks[0].steps[29].step = UINT64_MAX;
    for (int k = 0; k < 2; k++) {
        if (k == 1)
            run.ranks[0].steps[29].step = UINT64_MAX - 1;
        tml_json *doc = summary_of(&run, 1);
        CHECK(doc != NULL);
        const tml_json *s = tml__json_get(doc, "series");
        CHECK(s && s->type == TML_JSON_OBJECT);
        const tml_json *steps = tml__json_get(s, "step");
        CHECK(steps && steps->n >= 2 && steps->n <= 1000);
        tml__json_free(doc);
    }
    tml__run_release(&run);
}

static void test_series_is_bounded_and_missing_is_null(void)
{
    tml_run run;
    make_run(&run, 8, 10000, 1, 0);
    tml_json *doc = summary_of(&run, 1);
    const tml_json *s = tml__json_get(doc, "series");
    double bucket;
    CHECK(tml__json_num(tml__json_get(s, "bucket_steps"), &bucket) && bucket == 20);
    size_t nb = tml__json_get(s, "step")->n;
    CHECK(nb == 500);
    const tml_json *ranks = tml__json_get(s, "ranks");
    CHECK(ranks->n == 8);
    for (size_t i = 0; i < ranks->n; i++) {
        const tml_json *r = tml__json_at(ranks, i);
        CHECK(tml__json_get(r, "backward_ms")->type == TML_JSON_NULL);   /* never observed */
        CHECK(tml__json_get(r, "residual_ms")->type == TML_JSON_NULL);   /* compute incomplete */
        CHECK(tml__json_get(r, "forward_ms")->n == nb);
    }
    /* a bucket is the mean of its steps: rss 1000 + i over steps 0..19 */
    double v;
    CHECK(tml__json_num(tml__json_at(tml__json_get(tml__json_at(ranks, 0), "rss_bytes"), 0), &v) &&
          fabs(v - 1010) < 1);   /* mean of 1000..1019 = 1009.5, written without decimals */
    tml__json_free(doc);
    tml__run_release(&run);

    /* 100 ranks: at most 64 in the series, the rest counted */
    make_run(&run, 100, 50, 0, 0);
    doc = summary_of(&run, 1);
    s = tml__json_get(doc, "series");
    CHECK(tml__json_get(s, "ranks")->n == 64);
    CHECK(tml__json_num(tml__json_get(s, "ranks_omitted"), &v) && v == 36);
    CHECK(tml__json_get(s, "step")->n == 50);     /* 4000 / 64 = 62 points >= 50 steps */
    tml__json_free(doc);
    tml__run_release(&run);
}

static void test_series_gpu_clock(void)
{
    /* GPU figures on every step: the series is on the GPU clock; the
     * CPU-clock figures stay in step_time.by_clock.cpu */
    tml_run run;
    make_run(&run, 1, 20, 0, 1000);
    for (size_t i = 0; i < run.ranks[0].nsteps; i++) {
        run.ranks[0].steps[i].gpu_traced_ns = 10000000;
        for (int p = 0; p < TML_PHASE_COUNT; p++)
            run.ranks[0].steps[i].gpu_phase_ns[p] = 1000000;
    }
    tml_json *doc = summary_of(&run, 1);
    CHECK_STR(tml__json_str(tml__json_path(doc, "series.clock")), "gpu");
    double g, c;
    CHECK(tml__json_num(tml__json_path(doc, "step_time.by_clock.gpu.step_time_ms"), &g));
    CHECK(tml__json_num(tml__json_path(doc, "step_time.by_clock.cpu.step_time_ms"), &c));
    CHECK(fabs(g - 11.0) < 1e-6);    /* 1 ms input + 10 ms traced */
    CHECK(fabs(c - 21.0) < 1e-6);    /* 1 ms input + 20 ms traced */
    tml__json_free(doc);
    tml__run_release(&run);
}

static void test_timeline_bounded(void)
{
    tml_timeline *tl = NULL;
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__timeline_json(tl, &sb);
    CHECK_STR(sb.buf, "null");
    tml__sb_reset(&sb);
    /* 1000 s of samples at 1 Hz: buckets merge to stay <= 240 */
    for (int i = 0; i < 1000; i++) {
        tml_sample v[3] = {
            {1700000000000LL + i * 1000LL, 0, 0, -1, TML_S_HOST_CPU_PERCENT, 50.0},
            {1700000000000LL + i * 1000LL, 0, 0, -1, TML_S_HOST_RAM_USED_BYTES, 25.0},
            {1700000000000LL + i * 1000LL, 0, 0, -1, TML_S_HOST_RAM_TOTAL_BYTES, 100.0},
        };
        CHECK_EQ_INT(tml__timeline_add(&tl, v, 3), 0);
    }
    tml__timeline_json(tl, &sb);
    tml_json *doc = NULL;
    CHECK_EQ_INT(tml__json_parse(sb.buf, sb.len, &doc, NULL), 0);
    double b, v;
    CHECK(tml__json_num(tml__json_get(doc, "bucket_s"), &b) && b == 8.0);
    size_t n = tml__json_get(doc, "t_s")->n;
    CHECK(n <= TML_TIMELINE_POINTS && n >= 120);
    const tml_json *node = tml__json_at(tml__json_get(doc, "nodes"), 0);
    CHECK(tml__json_num(tml__json_at(tml__json_get(node, "cpu_percent"), 3), &v) && v == 50.0);
    CHECK(tml__json_num(tml__json_at(tml__json_get(node, "ram_used_percent"), 3), &v) && v == 25.0);
    CHECK(tml__json_get(node, "gpu_util_percent")->type == TML_JSON_NULL);
    tml__json_free(doc);
    tml__sb_release(&sb);
    tml__timeline_free(tl);
}

static void test_chrome_trace_two_ranks(void)
{
    tml_run run;
    make_run(&run, 2, 10, 0, 0);
    tml_strbuf sb = TML_STRBUF_INIT;
    size_t n = 0;
    CHECK_EQ_INT(tml__chrome_trace(&run, &sb, &n), 0);
    tml_json *doc = NULL;
    CHECK_EQ_INT(tml__json_parse(sb.buf, sb.len, &doc, NULL), 0);
    const tml_json *ev = tml__json_get(doc, "traceEvents");
    size_t steps = 0, threads = 0, phases = 0;
    double min_ts = 1e300;
    for (size_t i = 0; i < ev->n; i++) {
        const tml_json *e = tml__json_at(ev, i);
        const char *ph = tml__json_str(tml__json_get(e, "ph"));
        const char *name = tml__json_str(tml__json_get(e, "name"));
        double ts;
        if (strcmp(ph, "M") == 0) {
            threads += strcmp(name, "thread_name") == 0;
            continue;
        }
        CHECK(tml__json_num(tml__json_get(e, "ts"), &ts));
        if (ts < min_ts)
            min_ts = ts;
        const char *cat = tml__json_str(tml__json_get(e, "cat"));
        steps += strcmp(cat, "step") == 0;
        phases += strcmp(cat, "phase") == 0;
    }
    CHECK_EQ_INT(threads, 2);
    CHECK_EQ_INT(steps, 20);
    CHECK_EQ_INT(phases, 20 * 4);            /* h2d, forward, backward, optimizer */
    CHECK(min_ts == 0);                       /* times from the earliest event */
    double dur;
    /* rank 1's step 0: 2 ms input + 20 ms traced = 22 ms = 22000 us */
    for (size_t i = 0; i < ev->n; i++) {
        const tml_json *e = tml__json_at(ev, i);
        if (strcmp(tml__json_str(tml__json_get(e, "name")), "Step 0") == 0) {
            double tid;
            tml__json_num(tml__json_get(e, "tid"), &tid);
            tml__json_num(tml__json_get(e, "dur"), &dur);
            CHECK(fabs(dur - (tid == 1 ? 22000 : 21000)) < 1e-6);
        }
        if (strcmp(tml__json_str(tml__json_get(e, "name")), "Step 5 (aborted)") == 0)
            CHECK(tml__json_path(e, "args.aborted")->boolean == 1);
    }
    CHECK(n == ev->n - 5);                    /* every slice counted (5 metadata events) */
    tml__json_free(doc);
    tml__sb_release(&sb);
    tml__run_release(&run);
}

/* A hand-made telemetry.sqlite may hold any int64: the export bounds
 * them instead of overflowing (UBSan checks this test). */
static void test_chrome_trace_extreme_values(void)
{
    tml_run run;
    make_run(&run, 1, 3, 0, 0);
    tml_step_record *s = run.ranks[0].steps;
    s[0].start_ns = INT64_MIN;
    s[0].phase_ns[TML_PHASE_INPUT] = INT64_MAX;
    s[0].gap_ns = INT64_MAX;
    s[1].start_ns = INT64_MAX;
    s[1].traced_ns = INT64_MAX;
    s[1].phase_ns[TML_PHASE_FORWARD] = INT64_MAX;
    s[1].observed = TML_STEP_PHASES;
    tml_strbuf sb = TML_STRBUF_INIT;
    size_t n = 0;
    CHECK_EQ_INT(tml__chrome_trace(&run, &sb, &n), 0);
    tml_json *doc = NULL;
    CHECK_EQ_INT(tml__json_parse(sb.buf, sb.len, &doc, NULL), 0);
    tml__json_free(doc);
    tml__sb_release(&sb);
    tml__run_release(&run);
}

static void test_html_escapes_and_inlines(void)
{
    const char *json = "{\"schema_version\": 1, \"text\": \"a </script><script>alert(1)</script> <!-- b\"}";
    tml_strbuf sb = TML_STRBUF_INIT;
    CHECK_EQ_INT(tml__html_render(json, strlen(json), &sb), 0);
    CHECK(strstr(sb.buf, "alert(1)</script>") == NULL);
    CHECK(strstr(sb.buf, "<\\/script><script>alert(1)<\\/script> \\u003c!-- b") != NULL);
    CHECK(strstr(sb.buf, "<!DOCTYPE html>") == sb.buf);
    /* dygraphs inlined (its code, licence, version) and our renderer using it */
    CHECK(strstr(sb.buf, "<meta name=\"generator\" content=\"TraceML ") != NULL);
    CHECK(strstr(sb.buf, ", dygraphs 2.") != NULL);
    CHECK(strstr(sb.buf, "<!-- dygraphs (https://dygraphs.com/), inlined:") != NULL);
    CHECK(strstr(sb.buf, ".Dygraph=") != NULL);           /* the library's UMD export */
    CHECK(strstr(sb.buf, "new Dygraph(") != NULL);        /* web/report.js */
    CHECK(strstr(sb.buf, ".dygraph-legend") != NULL);     /* its stylesheet */
    CHECK(strstr(sb.buf, "uPlot") == NULL && strstr(sb.buf, "uplot") == NULL);
    CHECK(strstr(sb.buf, "<script src") == NULL && strstr(sb.buf, "<link") == NULL);
    /* "</script" (any case) only where the three script elements close:
     * data, dygraphs, the renderer. dygraphs' code has "</div>" and
     * "</span>" in its strings: harmless inside <script>. */
    size_t scripts = 0;
    for (const char *p = sb.buf; *p; p++)
        scripts += strncasecmp(p, "</script", 8) == 0;
    CHECK_EQ_INT(scripts, 3);
    const char *data = strstr(sb.buf, "<script type=\"application/json\" id=\"traceml-summary\">");
    const char *lib = strstr(sb.buf, "-->\n<script>\n");
    const char *ours = lib ? strstr(lib + 1, "</script>\n<script>\n") : NULL;
    CHECK(data != NULL && lib != NULL && ours != NULL && data < lib);
    CHECK(ours != NULL && strstr(ours, "new Dygraph(") != NULL);     /* the renderer comes last */
    tml__sb_release(&sb);
}

static void test_flatten(void)
{
    const char *j = "{\"schema_version\": 1, \"text\": \"box\", \"generated_at\": \"t\","
                    " \"duration_s\": null, \"status\": \"running\","
                    " \"meta\": {\"common_steps\": 12, \"clock\": \"cpu\", \"thresholds\": {}},"
                    " \"primary_diagnosis\": {\"kind\": \"INPUT_BOUND\", \"evidence\": {}},"
                    " \"step_time\": {\"diagnosis\": {\"label\": \"INPUT-BOUND\", \"kind\": \"INPUT_BOUND\","
                    "   \"severity\": \"CRITICAL\"}, \"skew_percent\": 1.5, \"noise_ms\": 0.125,"
                    "   \"average\": {\"step_time_ms\": 14.25, \"h2d_ms\": null, \"skew_percent\": 2},"
                    "   \"shares_percent\": {\"input_wait\": 76.5, \"h2d\": null}},"
                    " \"process\": \"not an object\"}";
    char *out = NULL;
    CHECK_EQ_INT(tml_summary_flatten(j, strlen(j), &out), 0);
    tml_json *doc = NULL;
    CHECK_EQ_INT(tml__json_parse(out, strlen(out), &doc, NULL), 0);
    double v;
    CHECK_EQ_INT(doc->n, 14);     /* the 13 below and the odd top-level "process" string */
    CHECK_STR(tml__json_str(tml__json_get(doc, "traceml/process")), "not an object");
    CHECK(tml__json_num(tml__json_get(doc, "traceml/schema_version"), &v) && v == 1);
    CHECK_STR(tml__json_str(tml__json_get(doc, "traceml/status")), "running");
    CHECK(tml__json_get(doc, "traceml/text") == NULL);
    CHECK(tml__json_get(doc, "traceml/generated_at") == NULL);
    CHECK(tml__json_get(doc, "traceml/duration_s") == NULL);      /* null: left out */
    CHECK(tml__json_num(tml__json_get(doc, "traceml/meta/common_steps"), &v) && v == 12);
    CHECK_STR(tml__json_str(tml__json_get(doc, "traceml/primary/kind")), "INPUT_BOUND");
    CHECK_STR(tml__json_str(tml__json_get(doc, "traceml/step_time/diagnosis")), "INPUT-BOUND");
    /* TraceML 0.5.0's status (the label) and severity (crit, warn, info) */
    CHECK_STR(tml__json_str(tml__json_get(doc, "traceml/step_time/status")), "INPUT-BOUND");
    CHECK_STR(tml__json_str(tml__json_get(doc, "traceml/step_time/severity")), "crit");
    CHECK(tml__json_num(tml__json_get(doc, "traceml/step_time/noise_ms"), &v) && v == 0.125);
    CHECK(tml__json_num(tml__json_get(doc, "traceml/step_time/step_time_ms"), &v) && v == 14.25);
    /* average's skew_percent replaces the section's, in place */
    CHECK(tml__json_num(tml__json_get(doc, "traceml/step_time/skew_percent"), &v) && v == 2);
    CHECK(tml__json_num(tml__json_get(doc, "traceml/step_time/input_wait_share_percent"), &v) &&
          v == 76.5);
    CHECK(tml__json_get(doc, "traceml/step_time/h2d_share_percent") == NULL);
    tml__json_free(doc);
    tml_free(out);
    CHECK_EQ_INT(tml_summary_flatten("[1]", 3, &out), TML_EPROTO);
    CHECK_EQ_INT(tml_summary_flatten("{", 1, &out), TML_EPROTO);
}

static void test_wire_summary_roundtrip(void)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__wire_summary(&sb, 0, "{\"a\": 1}", 8);
    tml_frame_header h;
    CHECK_EQ_INT(tml__wire_header((const uint8_t *)sb.buf, sb.len, &h), 0);
    CHECK_EQ_INT(h.type, TML_FRAME_SUMMARY);
    int32_t st;
    const char *j;
    size_t jl;
    CHECK_EQ_INT(tml__wire_parse_summary((const uint8_t *)sb.buf + TML_WIRE_HEADER, h.len, &st,
                                         &j, &jl), 0);
    CHECK_EQ_INT(st, 0);
    CHECK(jl == 8 && memcmp(j, "{\"a\": 1}", 8) == 0);
    CHECK_EQ_INT(tml__wire_parse_summary((const uint8_t *)"ab", 2, &st, &j, &jl), TML_EPROTO);
    /* too large for a frame: an error status, no payload */
    tml__sb_reset(&sb);
    char *big = malloc(TML_WIRE_MAX_PAYLOAD);
    memset(big, 'x', TML_WIRE_MAX_PAYLOAD);
    tml__wire_summary(&sb, 0, big, TML_WIRE_MAX_PAYLOAD);
    free(big);
    CHECK_EQ_INT(tml__wire_header((const uint8_t *)sb.buf, sb.len, &h), 0);
    CHECK_EQ_INT(h.len, 4);
    tml__wire_parse_summary((const uint8_t *)sb.buf + TML_WIRE_HEADER, h.len, &st, &j, &jl);
    CHECK_EQ_INT(st, TML_EFULL);
    tml__sb_release(&sb);
}

/* ---- the summary so far through a real aggregator socket -------------- */

static volatile sig_atomic_t stop_loop;

static void *server_loop(void *arg)
{
    tml_server *srv = arg;
    while (!stop_loop) {
        tml_server_cmd cmd;
        tml__server_poll(srv, 10, &cmd);
    }
    return NULL;
}

/* A full disk (here: a file size limit) stops telemetry.sqlite; the run
 * goes on in memory and its summary says that the telemetry stops short.
 * In a child process, so the limit binds nothing else. */
static void test_store_full_is_not_silent(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        char dir[] = "/tmp/tml_test_full_XXXXXX";
        if (!mkdtemp(dir))
            _exit(2);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {256 * 1024, 256 * 1024};
        setrlimit(RLIMIT_FSIZE, &rl);
        tml_agg_opts ao = {.run_name = "full", .run_id = "run0", .run_dir = dir};
        tml_agg *agg = NULL;
        if (tml__agg_new(&ao, &agg) < 0)
            _exit(3);
        tml_rank_info info;
        memset(&info, 0, sizeof(info));
        info.world_size = 1;
        info.pid = 7;
        info.instrumented = TML_PHASES_ALL;
        tml__agg_hello(agg, &info, 0, NULL);
        tml_step_record r[100];
        for (uint64_t b = 0; b < 100; b++) {
            for (int i = 0; i < 100; i++) {
                memset(&r[i], 0, sizeof(r[i]));
                r[i].step = b * 100 + (uint64_t)i;
                r[i].traced_ns = 1000000;
                r[i].gpu_traced_ns = r[i].gap_ns = -1;
                for (int p = 0; p < TML_PHASE_COUNT; p++)
                    r[i].gpu_phase_ns[p] = -1;
                r[i].rss_bytes = r[i].cuda_allocated_peak_bytes = r[i].cuda_reserved_peak_bytes = -1;
                r[i].observed = TML_STEP_PHASES;
            }
            tml__agg_steps(agg, 0, r, 100);
        }
        char *text = NULL;
        tml__agg_finalize(agg, "completed", 0, 120, &text);
        int ok = text && strstr(text, "PARTIAL: telemetry.sqlite could not be written after") &&
                 strstr(tml__agg_run(agg)->partial, "this summary is whole");
        free(text);
        tml__agg_free(agg);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            ok = 0;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void feed_steps(tml_agg *agg, uint64_t n)
{
    tml_rank_info info;
    memset(&info, 0, sizeof(info));
    info.world_size = 1;
    info.pid = 7;
    info.instrumented = TML_PHASES_ALL;
    tml__agg_hello(agg, &info, 0, NULL);
    tml_step_record r;
    for (uint64_t i = 0; i < n; i++) {
        memset(&r, 0, sizeof(r));
        r.step = i;
        r.traced_ns = 1000000;
        r.gpu_traced_ns = r.gap_ns = -1;
        for (int p = 0; p < TML_PHASE_COUNT; p++)
            r.gpu_phase_ns[p] = -1;
        r.rss_bytes = r.cuda_allocated_peak_bytes = r.cuda_reserved_peak_bytes = -1;
        r.observed = TML_STEP_PHASES;
        tml__agg_steps(agg, 0, &r, 1);
    }
}

static char *slurp_file(const char *dir, const char *name, size_t *len)
{
    char path[512], *buf = NULL;
    FILE *f;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    *len = 0;
    if (!(f = fopen(path, "rb")))
        return NULL;
    buf = calloc(1, 1 << 22);
    *len = buf ? fread(buf, 1, (1 << 22) - 1, f) : 0;
    fclose(f);
    return buf;
}

/* A run folder that cannot take the summary files (a full disk; here a file
 * size limit, EFBIG) costs the files, never the summary: finalize returns
 * TML_EIO with the whole box, which says what was not saved and why; the
 * files of an earlier finalize stay as they were. With room for the box but
 * not the JSON, the box on disk says that the JSON is missing. In a child,
 * so the limit binds nothing else. */
static void test_summary_survives_unwritable_folder(void)
{
    char dir[] = "/tmp/tml_test_unsaved_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    pid_t pid = fork();
    if (pid == 0) {
        tml_agg_opts ao = {.run_name = "full", .run_id = "run0", .run_dir = dir};
        tml_agg *agg = NULL;
        char *text = NULL, *json0, *txt0, *json1, *txt1, want[256];
        size_t json0_len, txt0_len, json1_len, txt1_len;
        CHECK_EQ_INT(tml__agg_new(&ao, &agg), 0);
        feed_steps(agg, 3000);
        CHECK_EQ_INT(tml__agg_finalize(agg, "completed", 0, 120, &text), 0);
        CHECK_STR(tml__agg_not_saved(agg), "");
        CHECK(text && !strstr(text, "NOT SAVED"));
        free(text);
        json0 = slurp_file(dir, "final_summary.json", &json0_len);
        txt0 = slurp_file(dir, "final_summary.txt", &txt0_len);
        CHECK(json0 && txt0 && json0_len > txt0_len + 4096);

        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl;
        getrlimit(RLIMIT_FSIZE, &rl);
        rl.rlim_cur = 1024;   /* neither file fits (the soft limit: it can rise again) */
        CHECK_EQ_INT(setrlimit(RLIMIT_FSIZE, &rl), 0);
        CHECK_EQ_INT(tml__agg_finalize(agg, "completed", 0, 120, &text), TML_EIO);
        snprintf(want, sizeof(want), "NOT SAVED: final_summary.json, final_summary.txt: File "
                 "too large (%s/)", dir);
        CHECK_STR(tml__agg_not_saved(agg), want + strlen("NOT SAVED: "));
        CHECK(text && strstr(text, "3000 common steps") && strstr(text, "NOT SAVED: "));
        CHECK(text && !strstr(text, "Full evidence:"));   /* no path to a missing file */
        json1 = slurp_file(dir, "final_summary.json", &json1_len);
        txt1 = slurp_file(dir, "final_summary.txt", &txt1_len);
        CHECK(json1 && json1_len == json0_len && memcmp(json0, json1, json0_len) == 0);
        CHECK(txt1 && txt1_len == txt0_len && memcmp(txt0, txt1, txt0_len) == 0);
        free(text);
        free(json1);
        free(txt1);

        rl.rlim_cur = txt0_len + 2048;   /* room for the box only */
        CHECK_EQ_INT(setrlimit(RLIMIT_FSIZE, &rl), 0);
        CHECK_EQ_INT(tml__agg_finalize(agg, "completed", 0, 120, &text), TML_EIO);
        snprintf(want, sizeof(want), "final_summary.json: File too large (%s/)", dir);
        CHECK_STR(tml__agg_not_saved(agg), want);
        txt1 = slurp_file(dir, "final_summary.txt", &txt1_len);
        CHECK(text && txt1 && strcmp(text, txt1) == 0);   /* the box on disk is the printed one */
        CHECK(txt1 && strstr(txt1, "NOT SAVED: final_summary.json: File too large"));
        json1 = slurp_file(dir, "final_summary.json", &json1_len);
        CHECK(json1 && json1_len == json0_len && memcmp(json0, json1, json0_len) == 0);
        free(text);
        free(json0);
        free(txt0);
        free(json1);
        free(txt1);
        tml__agg_free(agg);
        _exit(harness_failures ? 1 : 0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* Records no rank can measure (a step of 1e18 ns, a negative phase, a
 * byte count of 9e18) are dropped by the aggregator and logged: the
 * summary it writes stays one that `view` and `compare` read back (before,
 * a noise of 4.9e11 ms reached final_summary.json; fuzz_report found it). */
static void test_impossible_records_dropped(void)
{
    char dir[] = "/tmp/tml_test_impossible_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    tml_agg_opts ao = {.run_name = "odd", .run_id = "run0", .run_dir = dir};
    tml_agg *agg = NULL;
    CHECK_EQ_INT(tml__agg_new(&ao, &agg), 0);
    feed_steps(agg, 40);
    tml_step_record bad[5], good;
    good = tml__agg_run(agg)->ranks[0].steps[39];
    for (int i = 0; i < 5; i++) {
        bad[i] = good;
        bad[i].step = 40 + (uint64_t)i;
    }
    CHECK(tml__record_possible(&good));
    bad[0].phase_ns[TML_PHASE_FORWARD] = 1000000000000000000LL;
    bad[1].traced_ns = -5;
    bad[2].gpu_phase_ns[TML_PHASE_H2D] = -2;
    bad[3].cuda_reserved_peak_bytes = INT64_MAX;
    bad[4].start_ns = INT64_MIN;
    for (int i = 0; i < 5; i++)
        CHECK(!tml__record_possible(&bad[i]));
    good.step = 45;
    tml_step_record mixed[7] = {bad[0], bad[1], good, bad[2], bad[3], bad[4], good};
    mixed[6].step = 46;
    CHECK_EQ_INT(tml__agg_steps(agg, 0, mixed, 7), 0);
    CHECK_EQ_INT(tml__agg_run(agg)->ranks[0].nsteps, 42);
    size_t len = 0;
    char *log = slurp_file(dir, "traceml.log", &len);
    CHECK(log && strstr(log, "rank 0 sent 5 step records with impossible figures"));
    free(log);
    CHECK_EQ_INT(tml__agg_finalize(agg, "completed", 0, 100, NULL), 0);
    char *js = slurp_file(dir, "final_summary.json", &len);
    tml_json *doc = NULL;
    tml_cmp_run cr;
    char why[256] = "";
    CHECK(js && tml__json_parse(js, len, &doc, NULL) == 0);
    CHECK_EQ_INT(tml__cmp_run_load(doc, &cr, why, sizeof(why)), 0);
    if (why[0])
        fprintf(stderr, "%s\n", why);
    CHECK_EQ_INT(cr.window_steps, 42);
    tml__json_free(doc);
    free(js);
    tml__agg_free(agg);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* Samples no sampler can take (a CPU of 3e62%, NaN, a GPU at 150%, an
 * unknown metric) are dropped and logged: the summary keeps figures its
 * readers read back (before, compare refused what the aggregator wrote:
 * process.average.cpu_percent 2.97e+62; fuzz_report found it). */
static void test_impossible_samples_dropped(void)
{
    char dir[] = "/tmp/tml_test_samples_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    tml_agg_opts ao = {.run_name = "odd", .run_id = "run0", .run_dir = dir};
    tml_agg *agg = NULL;
    CHECK_EQ_INT(tml__agg_new(&ao, &agg), 0);
    feed_steps(agg, 40);
    const int64_t ts = 1735689600000LL;
    tml_sample v[] = {
        {ts, 0, 0, -1, TML_S_PROC_CPU_PERCENT, 2.96745e62},
        {ts, 0, 0, -1, TML_S_PROC_CPU_PERCENT, 120},
        {ts, 0, 0, -1, TML_S_HOST_CPU_PERCENT, NAN},
        {ts, 0, 0, 0, TML_S_GPU_UTIL_PERCENT, 150},
        {ts, 0, 0, -1, 999, 1},
        {ts, 0, 0, -1, TML_S_PROC_RSS_BYTES, -1e9},
        {-5, 0, 0, -1, TML_S_PROC_RSS_BYTES, 1e9},
        {ts, 0, 0, -1, TML_S_PROC_RSS_BYTES, 1e9},
    };
    size_t n = sizeof(v) / sizeof(v[0]), possible = 0;
    for (size_t i = 0; i < n; i++)
        possible += (size_t)tml__sample_possible(&v[i]);
    CHECK_EQ_INT(possible, 2);
    CHECK_EQ_INT(tml__agg_samples(agg, v, n), 0);
    size_t len = 0;
    char *log = slurp_file(dir, "traceml.log", &len);
    CHECK(log && strstr(log, "dropped 6 resource samples with impossible values"));
    free(log);
    CHECK_EQ_INT(tml__agg_finalize(agg, "completed", 0, 100, NULL), 0);
    char *js = slurp_file(dir, "final_summary.json", &len);
    tml_json *doc = NULL;
    tml_cmp_run cr;
    char why[256] = "";
    CHECK(js && tml__json_parse(js, len, &doc, NULL) == 0);
    CHECK_EQ_INT(tml__cmp_run_load(doc, &cr, why, sizeof(why)), 0);
    if (why[0])
        fprintf(stderr, "%s\n", why);
    CHECK_NEAR(cr.proc_cpu_percent, 120, 1e-9);
    tml__json_free(doc);
    free(js);
    tml__agg_free(agg);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

static void test_server_answers_summary(void)
{
    char dir[] = "/tmp/tml_test_results_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    tml_agg_opts ao = {.run_name = "live", .run_id = "run0", .run_dir = dir};
    tml_agg *agg = NULL;
    CHECK_EQ_INT(tml__agg_new(&ao, &agg), 0);
    tml_server_opts so;
    memset(&so, 0, sizeof(so));
    so.run_id = "run0";
    so.secret = "sekrit";
    so.control_fd = -1;
    tml_server *srv = NULL;
    CHECK_EQ_INT(tml__server_new(&so, agg, &srv), 0);
    pthread_t th;
    stop_loop = 0;
    pthread_create(&th, NULL, server_loop, srv);

    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", tml__server_port(srv));
    tml_hello hello;
    memset(&hello, 0, sizeof(hello));
    snprintf(hello.run_id, sizeof(hello.run_id), "run0");
    snprintf(hello.secret, sizeof(hello.secret), "sekrit");
    hello.info.world_size = 1;
    hello.info.instrumented = TML_PHASES_ALL;
    int fd = tml__client_connect(addr, &hello, 1000, NULL);
    CHECK(fd >= 0);
    /* many steps first, so the answer (with per-rank rows) is sizeable and
     * the request is served after them */
    tml_run tmp;
    make_run(&tmp, 1, 3000, 0, 0);
    for (size_t off = 0; off < 3000; off += 1000) {
        tml_strbuf sb = TML_STRBUF_INIT;
        tml__wire_steps(&sb, tmp.ranks[0].steps + off, 1000);
        CHECK_EQ_INT(tml__client_send(fd, sb.buf, sb.len), 0);
        tml__sb_release(&sb);
    }
    tml__run_release(&tmp);
    char *json = NULL;
    CHECK_EQ_INT(tml__client_summary(fd, 3000, &json), 0);
    tml_json *doc = NULL;
    CHECK(json && tml__json_parse(json, strlen(json), &doc, NULL) == 0);
    double v;
    CHECK_STR(tml__json_str(tml__json_get(doc, "status")), "running");
    CHECK(tml__json_num(tml__json_path(doc, "meta.common_steps"), &v) && v == 2999);  /* 1 aborted */
    CHECK(tml__json_get(doc, "series")->type == TML_JSON_NULL);
    tml__json_free(doc);
    free(json);
    /* asking changed nothing on disk */
    char path[200];
    snprintf(path, sizeof(path), "%s/final_summary.json", dir);
    CHECK(access(path, F_OK) != 0);
    /* and the connection still carries steps */
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__wire_stats(&sb, TML_FRAME_BYE, &(tml_rank_stats){0, 0, 3000, -1, 0});
    CHECK_EQ_INT(tml__client_send(fd, sb.buf, sb.len), 0);
    tml__sb_release(&sb);
    close(fd);
    stop_loop = 1;
    pthread_join(th, NULL);
    tml__server_free(srv);
    tml__agg_free(agg);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

#define TESTS X(test_series_small_run) X(test_series_extreme_step_ids) \
    X(test_series_is_bounded_and_missing_is_null) X(test_series_gpu_clock) \
    X(test_timeline_bounded) X(test_chrome_trace_two_ranks) X(test_chrome_trace_extreme_values) \
    X(test_html_escapes_and_inlines) X(test_flatten) X(test_wire_summary_roundtrip) \
    X(test_store_full_is_not_silent) X(test_summary_survives_unwritable_folder) \
    X(test_server_answers_summary) X(test_impossible_records_dropped) \
    X(test_impossible_samples_dropped)
#include "harness.h"

