/*
 * test_live.c - the live views' model and server: the live verdict over
 * the last 100 steps (both sides of the step-time thresholds), the live
 * JSON and Prometheus renderings, and the HTTP server against real sockets
 * (endpoints, refusals, keep-alive, SSE, slow and silent clients).
 */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "model/run.h"
#include "live/live.h"
#include "report/model.h"
#include "report/report.h"
#include "base/json.h"

#define MS 1000000LL

/* A rank's steps: input wait, forward, backward, optimizer (ms). */
static void add_steps(tml_run *run, int32_t rank, size_t n, double in, double fw, double bw,
                      double op, uint64_t first)
{
    tml_rank_info info;
    memset(&info, 0, sizeof(info));
    info.rank = rank;
    info.world_size = 2;
    info.nnodes = 1;
    info.instrumented = TML_PHASES_ALL;
    snprintf(info.host, sizeof(info.host), "host%d", (int)rank);
    tml_rank *r = tml__run_rank(run, &info);
    for (size_t i = 0; i < n; i++) {
        tml_step_record s;
        memset(&s, 0, sizeof(s));
        s.step = first + i;
        s.start_ns = (int64_t)(first + i) * 100 * MS;
        s.phase_ns[TML_PHASE_INPUT] = (int64_t)(in * MS);
        s.phase_ns[TML_PHASE_FORWARD] = (int64_t)(fw * MS);
        s.phase_ns[TML_PHASE_BACKWARD] = (int64_t)(bw * MS);
        s.phase_ns[TML_PHASE_OPTIMIZER] = (int64_t)(op * MS);
        s.traced_ns = (int64_t)((fw + bw + op) * MS);
        s.gpu_traced_ns = -1;
        for (int p = 0; p < TML_PHASE_COUNT; p++)
            s.gpu_phase_ns[p] = -1;
        s.gap_ns = i ? 0 : -1;
        s.rss_bytes = (int64_t)(100 + i) << 20;
        s.cuda_allocated_peak_bytes = -1;
        s.cuda_reserved_peak_bytes = -1;
        s.observed = TML_STEP_PHASES & ~TML_PHASE_BIT(TML_PHASE_H2D);
        tml__run_add_steps(r, &s, 1);
    }
}

static void test_verdict_thresholds(void)
{
    /* Input Wait share around the 10% / 20% thresholds (compute = 10 ms). */
    static const struct {
        double input_ms;
        const char *kind;
        const char *severity;
    } rows[] = {
        {0.0, "COMPUTE_BOUND", "INFO"},          /* 0% */
        {1.0, "COMPUTE_BOUND", "INFO"},          /* 9.1%: below the warning */
        {1.2, "INPUT_BOUND", "WARNING"},         /* 10.7% */
        {2.4, "INPUT_BOUND", "WARNING"},         /* 19.4% */
        {2.6, "INPUT_BOUND", "CRITICAL"},        /* 20.6% */
        {40.0, "INPUT_BOUND", "CRITICAL"},       /* 80% */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        tml_run run;
        tml__run_init(&run, "thr", "id");
        add_steps(&run, 0, 150, rows[i].input_ms, 3, 6, 1, 0);
        tml_live_snap snap;
        CHECK_EQ_INT(tml__live_snap_build(&run, NULL, &snap, NULL), 0);
        CHECK_STR(snap.verdict.kind, rows[i].kind);
        CHECK_STR(tml__severity_name(snap.verdict.severity), rows[i].severity);
        CHECK_EQ_INT(snap.window_steps, 100);
        tml__live_snap_release(&snap);
        tml__run_release(&run);
    }
}

static void test_window_is_recent(void)
{
    /* 3000 input-bound steps, then 300 compute-only ones: the live view
     * must say what happens now, not what happened on average. */
    tml_run run;
    tml__run_init(&run, "recent", "id");
    add_steps(&run, 0, 3000, 50, 3, 6, 1, 0);
    tml_rank *r = &run.ranks[0];
    size_t before = r->nsteps;
    add_steps(&run, 0, 300, 0, 3, 6, 1, 3000);
    CHECK_EQ_INT(r->nsteps, before + 300);
    tml_live_snap snap;
    tml_strbuf sum = TML_STRBUF_INIT;
    CHECK_EQ_INT(tml__live_snap_build(&run, NULL, &snap, &sum), 0);
    CHECK_STR(snap.verdict.kind, "COMPUTE_BOUND");
    CHECK_EQ_INT(snap.first_step, 3200);
    CHECK_EQ_INT(snap.last_step, 3299);
    CHECK(snap.common_steps <= TML_LIVE_TAIL);
    CHECK_EQ_INT(snap.npoints, TML_LIVE_HISTORY);
    CHECK_EQ_INT(snap.points[snap.npoints - 1].step, 3299);
    CHECK_NEAR(snap.points[0].ms[TML_LS_STEP], 10.0, 1e-6);
    CHECK(isnan(snap.points[0].ms[TML_LS_H2D]) == 0);   /* instrumented: measured zero */
    CHECK_NEAR(snap.points[0].ms[TML_LS_H2D], 0.0, 1e-9);
    CHECK_EQ_INT(snap.ranks[0].steps_received, 3300);
    /* the summary over the same live window is a final_summary.json */
    tml_json *doc = NULL;
    CHECK_EQ_INT(tml__json_parse(sum.buf, sum.len, &doc, NULL), 0);
    double ws = 0;
    CHECK(tml__json_num(tml__json_path(doc, "meta.window_steps"), &ws));
    CHECK_NEAR(ws, 100, 0);
    CHECK_STR(tml__json_str(tml__json_path(doc, "primary_diagnosis.kind")), "COMPUTE_BOUND");
    tml__json_free(doc);
    tml__sb_release(&sum);
    tml__live_snap_release(&snap);
    tml__run_release(&run);
}

/* A long run (its middle no longer in memory) next to a rank that said
 * hello and sent nothing yet: the live window is the recent tail alone,
 * the received counts are the whole run's, and the empty rank is no
 * NULL + 0 (clang's UBSan, make ubsan). */
static void test_long_run_and_empty_rank(void)
{
    tml_run run;
    tml__run_init(&run, "long", "id");
    add_steps(&run, 0, 20000, 5, 3, 6, 1, 0);
    add_steps(&run, 1, 0, 0, 0, 0, 0, 0);
    CHECK(run.ranks[0].past_steps > 0);
    CHECK(run.ranks[1].steps == NULL);
    tml_live_snap snap;
    tml_strbuf sum = TML_STRBUF_INIT;
    CHECK_EQ_INT(tml__live_snap_build(&run, NULL, &snap, &sum), 0);
    CHECK(snap.common_steps <= TML_LIVE_TAIL);
    CHECK_EQ_INT(snap.last_step, 19999);
    CHECK_EQ_INT(snap.ranks[0].steps_received, 20000);
    CHECK_EQ_INT(snap.ranks[1].steps_received, 0);
    tml__sb_release(&sum);
    tml__live_snap_release(&snap);
    tml__run_release(&run);
}

/* One truth across views (a 2-rank input straggler, 100 steps, so the
 * live window is the whole run): the box's Input Wait row, the JSON's
 * median rank and its shares, the live JSON's rank rows (which the
 * terminal view divides) and the straggler marker all agree. */
static void test_views_agree_on_a_straggler(void)
{
    tml_run run;
    tml__run_init(&run, "agree", "id");
    add_steps(&run, 0, 100, 1, 10, 20, 2, 0);     /* waits in backward for R1 */
    add_steps(&run, 1, 100, 20, 10, 1, 2, 0);     /* the slow loader */
    run.ranks[0].steps[0].gap_ns = -1;
    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT, live = TML_STRBUF_INIT;
    tml_report_opts o;
    memset(&o, 0, sizeof(o));
    o.generated_at = "2026-01-01T00:00:00Z";
    CHECK_EQ_INT(tml__report_build(&run, &o, &text, &json), 0);
    tml_json *doc = NULL;
    CHECK_EQ_INT(tml__json_parse(json.buf, json.len, &doc, NULL), 0);
    const tml_json *med = tml__json_path(doc, "step_time.median");
    double in_ms = NAN, st_ms = NAN, share = NAN, medrank = NAN;
    tml__json_num(tml__json_get(med, "input_wait_ms"), &in_ms);
    tml__json_num(tml__json_get(med, "step_time_ms"), &st_ms);
    tml__json_num(tml__json_path(med, "shares_percent.input_wait"), &share);
    tml__json_num(tml__json_get(med, "rank"), &medrank);
    CHECK_NEAR(share, 100.0 * in_ms / st_ms, 0.01);
    /* the box prints the same rank's row with the same share */
    char row[64];
    snprintf(row, sizeof(row), "%.0f%%", share);
    const char *line = strstr(text.buf, "├─ Input Wait");
    CHECK(line != NULL);
    if (line) {
        const char *eol = strchr(line, '\n');
        char buf[256];
        snprintf(buf, sizeof(buf), "%.*s", (int)(eol - line), line);
        CHECK(strstr(buf, row) != NULL);
    }
    CHECK(strstr(text.buf, "Straggler: R1/N0 · peers wait") != NULL);
    CHECK(strstr(text.buf, "Slowest rank") == NULL);
    /* the live view: the same rank's figures, the straggler marked */
    tml_live_snap snap;
    CHECK_EQ_INT(tml__live_snap_build(&run, NULL, &snap, NULL), 0);
    tml__live_json(&snap, &live);
    tml_json *ld = NULL;
    CHECK_EQ_INT(tml__json_parse(live.buf, live.len, &ld, NULL), 0);
    double strag = NAN;
    tml__json_num(tml__json_get(ld, "straggler_rank"), &strag);
    CHECK_NEAR(strag, 1, 0);
    const tml_json *ranks = tml__json_get(ld, "ranks");
    for (size_t i = 0; ranks && i < ranks->n; i++) {
        double r = NAN, li = NAN, ls = NAN;
        tml__json_num(tml__json_get(&ranks->items[i], "rank"), &r);
        if (r != medrank)
            continue;
        tml__json_num(tml__json_get(&ranks->items[i], "input_wait_ms"), &li);
        tml__json_num(tml__json_get(&ranks->items[i], "step_time_ms"), &ls);
        CHECK_NEAR(100.0 * li / ls, share, 0.01);
    }
    tml__json_free(ld);
    tml__json_free(doc);
    tml__live_snap_release(&snap);
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__sb_release(&live);
    tml__run_release(&run);
}

static void test_json(void)
{
    tml_run run;
    tml__run_init(&run, "json", "abc");
    add_steps(&run, 0, 120, 8, 0.5, 1, 0.3, 0);
    add_steps(&run, 1, 120, 8, 0.5, 1, 0.3, 0);
    tml_live_snap snap;
    tml_live_build_opts o;
    memset(&o, 0, sizeof(o));
    o.seq = 42;
    /* elapsed on the monotonic clock; the wall clock (a day ahead) is the
     * time shown, never a duration */
    o.start_mono_ns = 1000000000;
    o.now_mono_ns = 6000000000;
    o.now_unix_ms = 1700000000000 + 86400000;
    CHECK_EQ_INT(tml__live_snap_build(&run, &o, &snap, NULL), 0);
    tml_strbuf js = TML_STRBUF_INIT;
    tml__live_json(&snap, &js);
    CHECK(memchr(js.buf, '\n', js.len) == NULL);   /* one SSE data line */
    tml_json *doc = NULL;
    CHECK_EQ_INT(tml__json_parse(js.buf, js.len, &doc, NULL), 0);
    double d = 0;
    CHECK(tml__json_num(tml__json_get(doc, "seq"), &d) && d == 42);
    CHECK(tml__json_num(tml__json_get(doc, "elapsed_s"), &d) && d == 5.0);
    CHECK(tml__json_num(tml__json_get(doc, "unix_ms"), &d) && d == 1700086400000.0);
    CHECK_STR(tml__json_str(tml__json_get(doc, "schema")), "traceml.live/1");
    CHECK_STR(tml__json_str(tml__json_path(doc, "verdict.kind")), "INPUT_BOUND");
    CHECK_STR(tml__json_str(tml__json_path(doc, "verdict.cause")), "input_wait");
    CHECK(tml__json_num(tml__json_path(doc, "shares_percent.input_wait"), &d) && d > 80);
    const tml_json *ranks = tml__json_get(doc, "ranks");
    CHECK(ranks && ranks->n == 2);
    CHECK_STR(tml__json_str(tml__json_get(tml__json_at(ranks, 1), "label")), "R1/N0");
    CHECK(tml__json_num(tml__json_get(tml__json_at(ranks, 0), "input_wait_ms"), &d) &&
          fabs(d - 8) < 1e-3);
    /* missing is null: no CUDA figures */
    const tml_json *v = tml__json_get(tml__json_at(ranks, 0), "cuda_reserved_bytes");
    CHECK(v && v->type == TML_JSON_NULL);
    const tml_json *series = tml__json_path(doc, "series.step_time_ms");
    CHECK(series && series->n == 120);
    CHECK(tml__json_at(tml__json_path(doc, "series.cuda_allocated_bytes"), 0)->type ==
          TML_JSON_NULL);
    const char *line = tml__json_str(tml__json_get(doc, "line"));
    CHECK(line && strstr(line, "INPUT-BOUND (CRITICAL)") && strstr(line, "input 8"));
    tml__json_free(doc);
    tml__sb_release(&js);
    tml__live_snap_release(&snap);

    /* an empty run is still valid JSON with a NO DATA verdict */
    tml_run empty;
    tml__run_init(&empty, "empty", "");
    CHECK_EQ_INT(tml__live_snap_build(&empty, NULL, &snap, NULL), 0);
    tml__live_json(&snap, &js);
    CHECK_EQ_INT(tml__json_parse(js.buf, js.len, &doc, NULL), 0);
    CHECK(tml__json_path(doc, "window.first_step")->type == TML_JSON_NULL);
    CHECK(tml__json_get(doc, "run_id")->type == TML_JSON_NULL);
    tml__json_free(doc);
    tml__sb_release(&js);
    tml__live_snap_release(&snap);
    tml__run_release(&empty);
    tml__run_release(&run);
}

/* Prometheus text format 0.0.4, line by line; every family has a
 * non-empty # HELP right before its # TYPE. */
static int prom_valid(const char *text, char *why, size_t cap)
{
    char typed[64][96], helped[96] = "";
    size_t ntyped = 0;
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, '\n');
        if (!e) {
            snprintf(why, cap, "no final newline");
            return 0;
        }
        size_t l = (size_t)(e - p);
        char line[2048];
        if (l >= sizeof(line)) {
            snprintf(why, cap, "line too long");
            return 0;
        }
        memcpy(line, p, l);
        line[l] = '\0';
        p = e + 1;
        if (strncmp(line, "# HELP ", 7) == 0) {
            char word[8];
            if (sscanf(line + 7, "%95s %7s", helped, word) != 2) {
                snprintf(why, cap, "HELP without text: %.160s", line);
                return 0;
            }
            continue;
        }
        if (strncmp(line, "# TYPE ", 7) == 0) {
            char name[96], type[32];
            if (sscanf(line + 7, "%95s %31s", name, type) != 2 ||
                (strcmp(type, "gauge") && strcmp(type, "counter"))) {
                snprintf(why, cap, "bad TYPE: %.160s", line);
                return 0;
            }
            if (strcmp(helped, name) != 0) {
                snprintf(why, cap, "no HELP before: %.160s", line);
                return 0;
            }
            helped[0] = '\0';
            if (ntyped < 64)
                snprintf(typed[ntyped++], 96, "%s", name);
            continue;
        }
        /* name{labels} value */
        size_t i = 0;
        if (!((line[0] >= 'a' && line[0] <= 'z') || line[0] == '_')) {
            snprintf(why, cap, "bad name: %.160s", line);
            return 0;
        }
        while (line[i] && line[i] != '{' && line[i] != ' ')
            i++;
        char name[96];
        snprintf(name, sizeof(name), "%.*s", (int)i, line);
        int found = 0;
        for (size_t k = 0; k < ntyped; k++)
            found |= strcmp(typed[k], name) == 0;
        if (!found) {
            snprintf(why, cap, "sample before its TYPE: %.160s", line);
            return 0;
        }
        if (line[i] == '{') {
            i++;
            while (line[i] != '}') {   /* label="value" */
                while (line[i] && line[i] != '=')
                    i++;
                if (line[i] != '=' || line[i + 1] != '"') {
                    snprintf(why, cap, "bad label: %.160s", line);
                    return 0;
                }
                i += 2;
                while (line[i] && line[i] != '"') {
                    if (line[i] == '\\')
                        i++;
                    i++;
                }
                if (line[i] != '"') {
                    snprintf(why, cap, "unterminated label: %.160s", line);
                    return 0;
                }
                i++;
                if (line[i] == ',')
                    i++;
                else if (line[i] != '}') {
                    snprintf(why, cap, "bad label list: %.160s", line);
                    return 0;
                }
            }
            i++;
        }
        if (line[i] != ' ') {
            snprintf(why, cap, "no value: %.160s", line);
            return 0;
        }
        char *end;
        double v = strtod(line + i + 1, &end);
        if (*end || end == line + i + 1 || isnan(v)) {
            snprintf(why, cap, "bad value: %.160s", line);
            return 0;
        }
    }
    return 1;
}

/* Throughput over the live window: the ranks' samples per second of wall
 * time, summed; in the live JSON, /metrics and the text line, and absent
 * where nothing was counted. */
static void test_throughput(void)
{
    tml_run run;
    tml__run_init(&run, "tp", "id2");
    add_steps(&run, 0, 120, 0.2, 3, 6, 0.6, 0);
    add_steps(&run, 1, 120, 0.2, 3, 6, 0.6, 0);
    tml_live_snap snap;
    tml_strbuf prom = TML_STRBUF_INIT;
    CHECK_EQ_INT(tml__live_snap_build(&run, NULL, &snap, NULL), 0);
    CHECK(isnan(snap.samples_per_s));
    tml__live_prometheus(&snap, &prom);
    CHECK(strstr(prom.buf, "traceml_samples_per_second{") == NULL);
    tml__sb_release(&prom);
    tml__live_snap_release(&snap);
    for (size_t i = 0; i < run.nranks; i++)
        for (size_t k = 0; k < run.ranks[i].nsteps; k++) {
            run.ranks[i].steps[k].samples = 16;
            run.ranks[i].steps[k].tokens = 16 * 32;
        }
    CHECK_EQ_INT(tml__live_snap_build(&run, NULL, &snap, NULL), 0);
    /* 16 samples a rank per 9.8 ms step (no time between steps), 2 ranks */
    CHECK_NEAR(snap.samples_per_s, 2 * 16 / 9.8e-3, 1e-6);
    CHECK_NEAR(snap.tokens_per_s, 32 * snap.samples_per_s, 1e-6);
    CHECK(isnan(snap.flops_per_s) && isnan(snap.mfu));
    tml_strbuf js = TML_STRBUF_INIT;
    tml__live_json(&snap, &js);
    tml_json *doc = NULL;
    double d = 0;
    CHECK_EQ_INT(tml__json_parse(js.buf, js.len, &doc, NULL), 0);
    CHECK(tml__json_num(tml__json_path(doc, "throughput.samples_per_s"), &d) &&
          fabs(d - snap.samples_per_s) < 1e-3);
    CHECK(tml__json_path(doc, "throughput.mfu_percent")->type == TML_JSON_NULL);
    CHECK(strstr(tml__json_str(tml__json_get(doc, "line")), "3.27k samples/s") != NULL);
    tml__json_free(doc);
    tml__live_prometheus(&snap, &prom);
    CHECK(strstr(prom.buf, "traceml_samples_per_second{") != NULL);
    CHECK(strstr(prom.buf, "traceml_mfu_ratio{") == NULL);
    tml__sb_release(&prom);
    tml__sb_release(&js);
    tml__live_snap_release(&snap);
    tml__run_release(&run);
}

/* The latest deep-dive window is in the live JSON (the dashboard's
 * table) once a rank sent one, whether or not its steps are in the
 * live window; absent before. */
static void test_deep_dive_in_live_json(void)
{
    tml_run run;
    tml__run_init(&run, "dd", "abc");
    add_steps(&run, 0, 400, 0, 5, 10, 1, 0);
    tml_live_snap snap;
    tml_strbuf js = TML_STRBUF_INIT;
    CHECK_EQ_INT(tml__live_snap_build(&run, NULL, &snap, NULL), 0);
    tml__live_json(&snap, &js);
    CHECK(strstr(js.buf, "\"deep_dive\"") == NULL);
    tml__live_snap_release(&snap);
    tml_dd_window *d = tml__dd_new();
    d->first_step = 20;
    d->last_step = 22;
    tml__dd_add(d, "heavy_block.0", "aten::mm", 9 * MS, 3);
    tml__dd_add(d, "stem", "aten::addmm", 1 * MS, 3);
    run.ranks[0].deep_dive = d;
    CHECK_EQ_INT(tml__live_snap_build(&run, NULL, &snap, NULL), 0);
    tml__sb_reset(&js);
    tml__live_json(&snap, &js);
    tml_json *doc = NULL;
    CHECK_EQ_INT(tml__json_parse(js.buf, js.len, &doc, NULL), 0);
    CHECK_STR(tml__json_str(tml__json_path(doc, "deep_dive.status")), "ran");
    const tml_json *m0 = tml__json_at(tml__json_path(doc, "deep_dive.modules"), 0);
    CHECK_STR(tml__json_str(tml__json_get(m0, "name")), "heavy_block");
    double pct = 0;
    CHECK(tml__json_num(tml__json_get(m0, "percent"), &pct) && fabs(pct - 90) < 0.05);
    tml__json_free(doc);
    tml__sb_release(&js);
    tml__live_snap_release(&snap);
    tml__run_release(&run);
}

static void test_prometheus(void)
{
    tml_run run;
    tml__run_init(&run, "we\"ird\\name", "id1");
    add_steps(&run, 0, 120, 8, 0.5, 1, 0.3, 0);
    add_steps(&run, 1, 120, 4, 0.5, 1, 0.3, 0);
    /* what a sampler sends: node 0's CPU and its GPU's utilisation, rank
     * 1's CUDA reserved bytes (its temperature never sampled) */
    static const struct { int32_t rank; int32_t gpu; uint32_t metric; double v; } smp[] = {
        {0, -1, TML_S_HOST_CPU_PERCENT, 50}, {0, 0, TML_S_GPU_UTIL_PERCENT, 12.5},
        {1, -1, TML_S_PROC_CUDA_RESERVED, 2048},
    };
    for (int t = 0; t < 3; t++)
        for (size_t k = 0; k < sizeof(smp) / sizeof(smp[0]); k++) {
            tml_sample x = { 1000 + t * 500, 0, smp[k].rank, smp[k].gpu, smp[k].metric,
                             smp[k].v };
            CHECK_EQ_INT(tml__series_add(&run.samples, &x), 0);
        }
    tml_live_snap snap;
    CHECK_EQ_INT(tml__live_snap_build(&run, NULL, &snap, NULL), 0);
    CHECK_NEAR(snap.gpu_util_percent, 12.5, 1e-9);
    CHECK_STR(snap.sys.label, "LOW GPU UTIL");
    /* gauges: every number of the rows, by the JSON's keys; missing ones absent */
    int cpu = 0, util = 0, reserved = 0, rss = 0;
    for (size_t i = 0; i < snap.ngauges; i++) {
        const tml_live_gauge *g = &snap.gauges[i];
        CHECK(!isnan(g->value));
        cpu += strcmp(g->name, "traceml_system_cpu_percent") == 0 && g->value == 50;
        util += strcmp(g->name, "traceml_system_gpu_util_percent") == 0 && g->value == 12.5 &&
                strcmp(g->who, "node") == 0 && g->id == 0;
        reserved += strcmp(g->name, "traceml_process_cuda_reserved_bytes") == 0 &&
                    g->value == 2048 && g->id == 1;
        rss += strcmp(g->name, "traceml_step_memory_rss_bytes") == 0;
    }
    CHECK(cpu == 1 && util == 1 && reserved == 1 && rss == 2);
    tml_strbuf prom = TML_STRBUF_INIT;
    tml__live_prometheus(&snap, &prom);
    char why[256] = "";
    int ok = prom_valid(prom.buf, why, sizeof(why));
    if (!ok)
        fprintf(stderr, "prometheus: %s\n", why);
    CHECK(ok);
    CHECK(strstr(prom.buf, "run=\"we\\\"ird\\\\name\"") != NULL);
    CHECK(strstr(prom.buf, "traceml_verdict{run=\"we\\\"ird\\\\name\",kind=\"INPUT_BOUND\"") !=
          NULL);
    CHECK(strstr(prom.buf, ",rank=\"1\",node=\"0\",phase=\"input_wait\"} 0.004\n") != NULL);
    CHECK(strstr(prom.buf, "traceml_system_gpu_util_percent{run=\"we\\\"ird\\\\name\",node=\"0\"} 12.5\n") != NULL);
    CHECK(strstr(prom.buf, "traceml_system_cpu_percent{") != NULL);
    CHECK(strstr(prom.buf, "traceml_process_cuda_reserved_bytes{") != NULL);
    CHECK(strstr(prom.buf, "gpu_temperature") == NULL);   /* null: absent, never 0 */
    CHECK(strstr(prom.buf, "cuda_allocated_bytes{") == NULL);
    CHECK(strstr(prom.buf, "NaN") == NULL && strstr(prom.buf, "nan") == NULL);
    tml__sb_release(&prom);
    tml__live_snap_release(&snap);
    tml__run_release(&run);
    /* every number a section gauge can be has its own HELP line */
    tml_report_model m;
    tml_report_rows rows[TML_REPORT_ROWS];
    memset(&m, 0, sizeof(m));
    tml__report_rows(&m, rows);
    size_t fields = 0;
    for (int s = 0; s < TML_REPORT_ROWS; s++)
        for (size_t k = 0; k < rows[s].nfields; k++, fields++) {
            char name[96];
            snprintf(name, sizeof(name), "traceml_%s_%s", rows[s].section, rows[s].fields[k].key);
            if (!tml__live_gauge_help(name))
                fprintf(stderr, "no HELP for %s\n", name);
            CHECK(tml__live_gauge_help(name) != NULL);
        }
    CHECK(fields >= 29);
}

/* ---- the server over real sockets ---------------------------------- */

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void send_str(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* Reads until `until` appears (or EOF / timeout); returns what came. */
static char *read_until(int fd, const char *until, size_t *len)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    for (;;) {
        char buf[4096];
        ssize_t r = recv(fd, buf, sizeof(buf), 0);
        if (r <= 0)
            break;
        tml__sb_add(&sb, buf, (size_t)r);
        if (until && strstr(sb.buf, until))
            break;
    }
    if (!sb.buf)
        tml__sb_adds(&sb, "");
    return tml__sb_detach(&sb, len);
}

static char *request(int port, const char *req, size_t *len)
{
    int fd = dial(port);
    if (fd < 0)
        return NULL;
    send_str(fd, req, strlen(req));
    char *r = read_until(fd, NULL, len);
    close(fd);
    return r;
}

static void test_server_endpoints(void)
{
    tml_live_server *s = NULL;
    tml_live_server_opts o;
    memset(&o, 0, sizeof(o));
    CHECK_EQ_INT(tml__live_server_new(&o, &s), 0);
    if (!s)
        return;
    int port = tml__live_server_port(s);
    size_t len;
    char *r = request(port, "GET /api/live HTTP/1.0\r\n\r\n", &len);
    CHECK(r && strncmp(r, "HTTP/1.1 503", 12) == 0);   /* nothing published yet */
    free(r);
    tml__live_server_publish(s, "{\"seq\":1}", "{\"summary\":1}", "# TYPE a gauge\na 1\n");
    r = request(port, "GET /api/live HTTP/1.0\r\n\r\n", &len);
    CHECK(r && strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0);
    CHECK(r && strstr(r, "Content-Type: application/json\r\n") && strstr(r, "\r\n\r\n{\"seq\":1}"));
    free(r);
    r = request(port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", &len);
    CHECK(r && strstr(r, "text/plain; version=0.0.4") && strstr(r, "\r\n\r\n# TYPE a gauge\na 1\n"));
    free(r);
    r = request(port, "GET /api/summary HTTP/1.0\r\n\r\n", &len);
    CHECK(r && strstr(r, "{\"summary\":1}"));
    free(r);
    r = request(port, "HEAD /api/live HTTP/1.0\r\n\r\n", &len);
    CHECK(r && strstr(r, "Content-Length: 9\r\n") && strstr(r, "\r\n\r\n")[4] == '\0');
    free(r);
    r = request(port, "GET / HTTP/1.0\r\n\r\n", &len);
    CHECK(r && strncmp(r, "HTTP/1.1 200", 12) == 0 && strstr(r, "text/html"));
    free(r);
    r = request(port, "GET /nope HTTP/1.0\r\n\r\n", &len);
    CHECK(r && strncmp(r, "HTTP/1.1 404", 12) == 0);
    free(r);
    /* refusals */
    r = request(port, "POST /api/live HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\nabc", &len);
    CHECK(r && strncmp(r, "HTTP/1.1 405", 12) == 0);
    free(r);
    r = request(port, "\x16\x03\x01\x00\xa5garbage", &len);
    CHECK(r && strncmp(r, "HTTP/1.1 400", 12) == 0);
    free(r);
    r = request(port, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n", &len);
    CHECK(r && strncmp(r, "HTTP/1.1 413", 12) == 0);
    free(r);
    char *big = malloc(20000);
    int n = snprintf(big, 20000, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ");
    memset(big + n, 'a', 19000);
    memcpy(big + n + 19000, "\r\n\r\n", 5);
    r = request(port, big, &len);
    CHECK(r && strncmp(r, "HTTP/1.1 431", 12) == 0);
    free(r);
    free(big);
    /* keep-alive: two requests, one connection, pipelined */
    int fd = dial(port);
    const char *two = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                      "GET /api/live HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    send_str(fd, two, strlen(two));
    r = read_until(fd, NULL, &len);
    CHECK(r && strstr(r, "\r\n\r\nok\n") && strstr(r, "{\"seq\":1}"));
    free(r);
    close(fd);
    /* two keep-alive requests in one packet, then a third on the same
     * connection: each answered (the slot once stayed stuck after two) */
    fd = dial(port);
    const char *pair = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                       "GET /api/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    send_str(fd, pair, strlen(pair));
    r = read_until(fd, "{\"seq\":1}", &len);
    CHECK(r && strstr(r, "\r\n\r\nok\n") && strstr(r, "{\"seq\":1}"));
    free(r);
    const char *third = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    send_str(fd, third, strlen(third));
    r = read_until(fd, "\r\n\r\nok\n", &len);
    CHECK(r && strstr(r, "HTTP/1.1 200") && strstr(r, "\r\n\r\nok\n"));
    free(r);
    close(fd);
    /* bound to loopback: a Host that is not a loopback name is refused
     * (DNS rebinding); loopback names with a port, and no Host, are fine */
    r = request(port, "GET /api/summary HTTP/1.1\r\nHost: evil.example:8765\r\n\r\n", &len);
    CHECK(r && strncmp(r, "HTTP/1.1 403", 12) == 0 && !strstr(r, "summary"));
    free(r);
    r = request(port, "GET /api/summary HTTP/1.1\r\nHost: localhost:8765\r\n"
                      "Connection: close\r\n\r\n", &len);
    CHECK(r && strstr(r, "{\"summary\":1}"));
    free(r);
    tml_live_server_stats st;
    tml__live_server_stats(s, &st);
    CHECK(st.refused >= 4);
    tml__live_server_free(s);
}

static void test_server_sse(void)
{
    tml_live_server *s = NULL;
    tml_live_server_opts o;
    memset(&o, 0, sizeof(o));
    CHECK_EQ_INT(tml__live_server_new(&o, &s), 0);
    if (!s)
        return;
    int port = tml__live_server_port(s);
    tml__live_server_publish(s, "{\"n\":1}", "{\n\"s\":1\n}", "m 1\n");
    int fd = dial(port);
    send_str(fd, "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 42);
    size_t len;
    char *r = read_until(fd, "data: }\n\n", &len);
    CHECK(r && strstr(r, "Content-Type: text/event-stream"));
    CHECK(r && strstr(r, "event: live\nid: 1\ndata: {\"n\":1}\n\n"));
    CHECK(r && strstr(r, "event: summary\ndata: {\ndata: \"s\":1\ndata: }\n\n"));
    free(r);
    tml__live_server_publish(s, "{\"n\":2}", NULL, NULL);
    r = read_until(fd, "data: }\n\n", &len);
    CHECK(r && strstr(r, "event: live\nid: 2\ndata: {\"n\":2}\n\n"));
    free(r);
    close(fd);
    tml__live_server_free(s);
}

static void test_server_misbehaving_clients(void)
{
    tml_live_server *s = NULL;
    tml_live_server_opts o;
    memset(&o, 0, sizeof(o));
    o.max_clients = 4;
    o.request_timeout_ms = 300;
    o.stall_timeout_ms = 600;
    o.max_pending_bytes = 256 * 1024;
    CHECK_EQ_INT(tml__live_server_new(&o, &s), 0);
    if (!s)
        return;
    int port = tml__live_server_port(s);
    tml__live_server_publish(s, "{}", "{}", "m 1\n");

    /* slowloris: half a head, then silence -> 408 and closed */
    int slow = dial(port);
    send_str(slow, "GET / HTTP/1.1\r\nHo", 18);
    /* a stream client that never reads */
    int deaf = dial(port);
    int rcv = 4096;
    setsockopt(deaf, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    send_str(deaf, "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 42);
    usleep(100 * 1000);

    /* big updates: publishing never waits for the deaf client */
    /* (more than the kernel's socket buffers can absorb on loopback) */
    size_t bl = 256 * 1024;
    char *blob = malloc(bl + 1);
    memset(blob, 'x', bl);
    blob[0] = '"';
    blob[bl - 1] = '"';
    blob[bl] = '\0';
    /* publishing copies only: were it to wait for the deaf client it
     * would never return, and the alarm ends the test (no timing here,
     * a sanitizer build on a busy machine is slow but never stuck) */
    alarm(120);
    for (int i = 0; i < 80; i++) {
        tml__live_server_publish(s, blob, NULL, NULL);
        usleep(5 * 1000);
    }
    alarm(0);
    free(blob);

    /* a well-behaved client is still served meanwhile */
    size_t len;
    char *r = request(port, "GET /healthz HTTP/1.0\r\n\r\n", &len);
    CHECK(r && strstr(r, "\r\n\r\nok\n"));
    free(r);

    /* the slowloris got 408 and was closed */
    r = read_until(slow, NULL, &len);
    CHECK(r && strncmp(r, "HTTP/1.1 408", 12) == 0);
    free(r);
    close(slow);

    /* the deaf client lost updates, then its connection */
    usleep(900 * 1000);
    tml__live_server_publish(s, "{}", NULL, NULL);
    usleep(300 * 1000);
    tml_live_server_stats st;
    tml__live_server_stats(s, &st);
    CHECK(st.events_dropped > 0);
    if (st.timeouts < 2)
        fprintf(stderr, "timeouts %llu dropped %llu sent %llu\n", (unsigned long long)st.timeouts, (unsigned long long)st.events_dropped, (unsigned long long)st.events_sent);
    CHECK(st.timeouts >= 2);
    close(deaf);

    /* too many clients: the extra one gets 503, the others stay */
    int held[4];
    for (int i = 0; i < 4; i++)
        held[i] = dial(port);
    usleep(100 * 1000);
    r = request(port, "GET /healthz HTTP/1.0\r\n\r\n", &len);
    CHECK(r && strncmp(r, "HTTP/1.1 503", 12) == 0);
    free(r);
    for (int i = 0; i < 4; i++)
        close(held[i]);
    usleep(100 * 1000);
    r = request(port, "GET /healthz HTTP/1.0\r\n\r\n", &len);
    CHECK(r && strstr(r, "\r\n\r\nok\n"));
    free(r);
    tml__live_server_free(s);
}

static void test_server_bind_errors(void)
{
    tml_live_server *a = NULL, *b = NULL;
    tml_live_server_opts o;
    memset(&o, 0, sizeof(o));
    o.bind_addr = "not an address";
    CHECK_EQ_INT(tml__live_server_new(&o, &a), TML_EINVAL);
    CHECK(a == NULL);
    o.bind_addr = NULL;
    CHECK_EQ_INT(tml__live_server_new(&o, &a), 0);
    o.port = tml__live_server_port(a);
    CHECK_EQ_INT(tml__live_server_new(&o, &b), TML_ECONN);   /* port taken */
    CHECK(b == NULL);
    tml__live_server_free(a);
    tml__live_server_free(NULL);
}

#define TESTS X(test_throughput) X(test_verdict_thresholds) X(test_window_is_recent) X(test_long_run_and_empty_rank) X(test_views_agree_on_a_straggler) X(test_json) \
    X(test_deep_dive_in_live_json) X(test_prometheus) X(test_server_endpoints) X(test_server_sse) \
    X(test_server_misbehaving_clients) X(test_server_bind_errors)
#include "harness.h"

