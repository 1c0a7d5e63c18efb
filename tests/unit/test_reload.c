/*
 * test_reload.c - summaries read back into the report model
 * (report/reload.h): TraceML 0.5.0's real final_summary.json files
 * (tests/fixtures/v05, written by 0.5.0 itself) mapped onto this
 * TraceML's model, hostile numbers kept out of it, bad documents refused
 * with a reason; and telemetry.sqlite's digest (store/store.h) for
 * `traceml inspect`. This TraceML's own summaries are read back in
 * test_golden.c (every golden box printed again from its JSON). Run from
 * the repository root.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/json.h"
#include "report/model.h"
#include "report/reload.h"
#include "diag/diag.h"
#include "store/store.h"
#include "traceml/traceml.h"
#include "harness.h"

static tml_json *parse_file(const char *path)
{
    char *buf;
    size_t len;
    tml_json *doc = NULL;
    if (tml__read_file(path, 1 << 24, &buf, &len) < 0)
        return NULL;
    if (tml__json_parse(buf, len, &doc, NULL) < 0)
        doc = NULL;
    free(buf);
    return doc;
}

static tml_json *parse_str(const char *s)
{
    tml_json *doc = NULL;
    return tml__json_parse(s, strlen(s), &doc, NULL) < 0 ? NULL : doc;
}

/* Loads a fixture; NULL (and a failed check) when it does not load. */
static tml_report_loaded *load_fixture(const char *name)
{
    char path[256], why[256] = "";
    tml_report_loaded *l = NULL;
    snprintf(path, sizeof(path), "tests/fixtures/v05/%s.json", name);
    tml_json *doc = parse_file(path);
    CHECK(doc != NULL);
    CHECK(tml__summary_is_v05(doc));
    int rc = tml__report_load(doc, path, 120, &l, why, sizeof(why));
    if (rc != 0)
        fprintf(stderr, "%s: %s\n", path, why);
    CHECK_EQ_INT(rc, 0);
    tml__json_free(doc);
    return l;
}

static char *box_of(const tml_report_loaded *l)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__report_box(&l->m, &sb);
    return tml__sb_detach(&sb, NULL);
}

static void test_v05_input_bound(void)
{
    tml_report_loaded *l = load_fixture("input_bound");
    if (!l)
        return;
    const tml_report_model *m = &l->m;
    CHECK_EQ_INT(l->kind, TML_SUMMARY_V05);
    CHECK_STR(l->schema, "1.9");
    CHECK_STR(l->run.name, "input_bound");
    CHECK_STR(m->verdict.kind, "INPUT_BOUND");
    CHECK_STR(m->verdict.label, "INPUT-BOUND");
    CHECK_EQ_INT(m->verdict.severity, TML_SEV_CRITICAL);
    CHECK_EQ_INT(m->verdict.cause, TML_M_INPUT);
    CHECK_NEAR(m->verdict.share, 0.925, 0.001);
    CHECK_EQ_INT(m->win.nranks, 1);
    CHECK_EQ_INT(m->win.window_steps, 60);
    CHECK_EQ_INT(m->win.clock, TML_CLOCK_CPU);
    CHECK_EQ_INT(m->win.median_rank, 0);
    CHECK_NEAR(m->win.ranks[0].avg_ns[TML_M_STEP] / 1e6, 23.146, 0.01);
    CHECK_NEAR(m->win.ranks[0].avg_ns[TML_M_INPUT] / 1e6, 21.416, 0.01);
    /* what 0.5.0 never measured is missing, never zero */
    CHECK(isnan(m->win.ranks[0].avg_ns[TML_M_UNTRACED]));
    CHECK(isnan(m->win.ranks[0].avg_ns[TML_M_H2D]));
    CHECK(isnan(m->win.ranks[0].step_stddev_ns));
    CHECK(isnan(m->overhead_us));
    CHECK_EQ_INT(m->exit_code, -1);
    CHECK_STR(m->sys.kind, "HIGH_CPU");
    CHECK_EQ_INT(m->sys.severity, TML_SEV_WARNING);
    CHECK_EQ_INT(m->nnodes, 1);
    CHECK_NEAR(m->nodes[0].cpu_percent, 98.2, 0.01);
    CHECK(m->nodes[0].ram_total_bytes > m->nodes[0].ram_used_bytes);
    CHECK_EQ_INT(m->nprocs, 1);
    CHECK(m->procs[0].rss_bytes > 1e8);
    char *box = box_of(l);
    CHECK(box && strstr(box, "| TraceML Run Summary"));
    CHECK(box && strstr(box, "Source: a TraceML 0.5.0 summary (schema 1.9)"));
    CHECK(box && strstr(box, "Verdict: INPUT-BOUND (CRITICAL)"));
    CHECK(box && strstr(box, "◀ cause"));
    CHECK(box && strstr(box, "Warm-up excluded: n/a"));
    free(box);
    tml__report_loaded_free(l);
}

static void test_v05_straggler(void)
{
    tml_report_loaded *l = load_fixture("ddp2_straggler");
    if (!l)
        return;
    const tml_report_model *m = &l->m;
    CHECK_EQ_INT(m->win.nranks, 2);
    CHECK_EQ_INT(m->ranks_reported, 2);
    CHECK_EQ_INT(m->world_size, 2);
    CHECK_EQ_INT(m->active_ranks, 2);
    CHECK_STR(m->verdict.kind, "STRAGGLER");
    CHECK(m->verdict.straggler.valid);
    CHECK_EQ_INT(m->win.ranks[m->verdict.straggler.culprit].rank, 1);
    CHECK_EQ_INT(m->win.ranks[m->verdict.straggler.victim].rank, 0);
    CHECK_NEAR(m->verdict.straggler.cost_ns / 1e6, 16.33, 0.01);
    CHECK_EQ_INT(tml__report_straggler(m), m->verdict.straggler.culprit);
    CHECK_EQ_INT(m->win.ranks[m->win.median_rank].rank, 0);
    char *box = box_of(l);
    CHECK(box && strstr(box, "R1/N0 was the straggler; peers waited 16.3 ms per step"));
    CHECK(box && strstr(box, "STEP TIMING (Median R0/N0), CPU Clock"));
    free(box);
    /* this TraceML's JSON of it (what compare and view --html read) */
    tml_strbuf js = TML_STRBUF_INIT;
    tml__report_json(&l->m, "", &js);
    tml_json *doc = NULL;
    CHECK_EQ_INT(tml__json_parse(js.buf, js.len, &doc, NULL), 0);
    CHECK(!tml__summary_is_v05(doc));
    double ws = 0;
    CHECK(tml__json_num(tml__json_path(doc, "step_time.window.window_steps"), &ws) && ws == 60);
    CHECK_STR(tml__json_str(tml__json_path(doc, "primary_diagnosis.evidence.straggler.culprit.label")),
              "R1/N0");
    tml__json_free(doc);
    tml__sb_release(&js);
    tml__report_loaded_free(l);
}

static void test_v05_watch(void)
{
    tml_report_loaded *l = load_fixture("watch");
    if (!l)
        return;
    CHECK(l->m.watch);
    CHECK_EQ_INT(l->m.ranks_reported, 1);
    CHECK_STR(l->m.verdict.kind, "INSUFFICIENT_STEP_TIME_DATA");
    char *box = box_of(l);
    CHECK(box && strstr(box, "| TraceML Watch Summary"));
    CHECK(box && strstr(box, "SYSTEM METRICS: NORMAL"));
    CHECK(box && !strstr(box, "Verdict:"));
    CHECK(box && !strstr(box, "STEP TIMING"));
    free(box);
    tml__report_loaded_free(l);
}

/* A hand-edited 0.5.0 summary: numbers out of every range, a row key and
 * an idx that name nothing. Everything loads, nothing huge gets in. */
static void test_v05_hostile_numbers(void)
{
    const char *s =
        "{\"schema_version\": 1.9, \"duration_s\": 1e308, \"meta\": {\"world_size\": 1e300},"
        " \"primary_diagnosis\": {\"kind\": \"STRAGGLER\", \"status\": \"STRAGGLER\","
        "  \"severity\": \"crit\"},"
        " \"step_time\": {\"diagnosis\": {\"kind\": \"STRAGGLER\", \"score\": -5,"
        "   \"evidence\": {\"culprit_rank\": 1e30, \"victim_rank\": -1}},"
        "  \"global\": {\"window\": {\"steps_analyzed\": 1e300, \"start_step\": -7,"
        "    \"diagnosis_clock\": \"gpu\"},"
        "   \"median\": {\"step_time_ms\": {\"value\": 1, \"idx\": \"99999999999999999999\"}}},"
        "  \"groups\": {\"rows\": {\"99999999999999999999\": {\"metrics\": {\"step_time_ms\": 1e300}},"
        "   \"3\": {\"identity\": {\"global_rank\": 1e12, \"node_rank\": -4},"
        "          \"metrics\": {\"step_time_ms\": 12.5, \"input_wait_ms\": \"x\","
        "                        \"step_time_cpu_ms\": 1e400}}}}},"
        " \"system\": {\"groups\": {\"rows\": {\"0\": {\"metrics\": {\"ram_bytes\": 1e30,"
        "   \"ram_percent\": 1e-300, \"cpu_percent\": -3}}}}},"
        " \"process\": {\"metadata\": {\"global_ranks_seen\": 1e20}}}";
    tml_json *doc = parse_str(s);
    CHECK(doc != NULL);
    tml_report_loaded *l = NULL;
    char why[256] = "";
    int rc = tml__report_load(doc, NULL, 0, &l, why, sizeof(why));
    CHECK_EQ_INT(rc, 0);
    if (l) {
        const tml_report_model *m = &l->m;
        CHECK(isnan(m->duration_s));
        CHECK_EQ_INT(m->win.window_steps, 0);
        CHECK_EQ_INT(m->win.nranks, 2);
        CHECK(!m->verdict.straggler.valid);
        CHECK_EQ_INT(m->win.median_rank, -1);
        CHECK(m->world_size <= TML_MAX_WORLD_SIZE);
        CHECK(isnan(m->nodes[0].ram_used_bytes) && isnan(m->nodes[0].cpu_percent));
        int found = 0;
        for (size_t i = 0; i < m->win.nranks; i++)
            if (m->win.ranks[i].rank == 3) {      /* 1e12 is no rank: its key is */
                found = 1;
                CHECK_NEAR(m->win.ranks[i].avg_ns[TML_M_STEP], 12.5e6, 1);
                CHECK(isnan(m->win.ranks[i].avg_ns[TML_M_INPUT]));
                CHECK_EQ_INT(m->win.ranks[i].node, 0);
            }
        CHECK(found);
        char *box = box_of(l);
        CHECK(box != NULL);
        free(box);
        tml_strbuf js = TML_STRBUF_INIT;
        tml__report_json(&l->m, "", &js);
        CHECK(!js.failed);
        tml__sb_release(&js);
    }
    tml__report_loaded_free(l);
    tml__json_free(doc);
}

static void test_refused(void)
{
    static const struct { const char *doc, *why; } cases[] = {
        { "[1, 2]", "not a JSON object" },
        { "{\"text\": \"x\"}", "no schema_version" },
        { "{\"schema_version\": 2, \"step_time\": {}, \"primary_diagnosis\": {}}",
          "unsupported schema_version" },
        { "{\"schema_version\": \"x\"}", "unsupported schema_version" },
        { "{\"schema_version\": 1}", "no step_time or primary_diagnosis" },
        { "{\"schema_version\": 1.9, \"step_time\": {\"global\": {}}}",
          "no step_time or primary_diagnosis" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tml_json *doc = parse_str(cases[i].doc);
        tml_report_loaded *l = (tml_report_loaded *)1;
        char why[256] = "";
        CHECK(doc != NULL);
        CHECK_EQ_INT(tml__report_load(doc, NULL, 0, &l, why, sizeof(why)), TML_EPROTO);
        CHECK(l == NULL);
        if (!strstr(why, cases[i].why))
            fprintf(stderr, "case %zu: why \"%s\"\n", i, why);
        CHECK(strstr(why, cases[i].why) != NULL);
        tml__json_free(doc);
    }
}

/* This TraceML's summary with out-of-range figures and references to
 * ranks that are not there. */
static void test_ours_hostile(void)
{
    const char *s =
        "{\"schema_version\": 1, \"status\": \"weird\", \"exit_code\": 1e99,"
        " \"meta\": {\"run_name\": \"h\", \"world_size\": 3, \"missing_ranks\": [2, 1e40, -1],"
        "  \"lost_ranks\": [{\"rank\": 1e20, \"node\": 0, \"last_step\": 1e300}],"
        "  \"thresholds\": {\"input_warn\": 7}},"
        " \"primary_diagnosis\": {\"kind\": \"STRAGGLER\", \"label\": \"STRAGGLER\","
        "  \"evidence\": {\"cause\": \"nonsense\", \"straggler\": {\"score\": 0.5,"
        "   \"culprit\": {\"rank\": 9}, \"victim\": {\"rank\": 0}, \"visible_cost_ms\": 3}}},"
        " \"step_time\": {\"window\": {\"window_steps\": 1e300, \"clock\": \"gpu\"},"
        "  \"median\": {\"rank\": 0}, \"worst\": {\"rank\": 5},"
        "  \"per_rank\": [{\"rank\": 0, \"node\": 0, \"steps\": 10, \"step_time_ms\": 1e300,"
        "                 \"input_wait_ms\": 4}]}}";
    tml_json *doc = parse_str(s);
    tml_report_loaded *l = NULL;
    char why[256] = "";
    CHECK_EQ_INT(tml__report_load(doc, NULL, 0, &l, why, sizeof(why)), 0);
    if (l) {
        const tml_report_model *m = &l->m;
        CHECK_STR(m->status, "completed");
        CHECK_EQ_INT(m->exit_code, -1);
        CHECK_EQ_INT(m->win.window_steps, 0);
        CHECK_EQ_INT(m->win.worst_rank, -1);
        CHECK(!m->verdict.straggler.valid);          /* R9 is not in the window */
        CHECK_EQ_INT(m->verdict.cause, -1);
        CHECK(isnan(m->win.ranks[0].avg_ns[TML_M_STEP]));
        CHECK_NEAR(m->win.ranks[0].avg_ns[TML_M_INPUT], 4e6, 1);
        CHECK_EQ_INT(m->nmissing, 1);
        CHECK_NEAR(m->th.input_warn, 0.10, 1e-9);
        char *box = box_of(l);
        CHECK(box != NULL);
        free(box);
    }
    tml__report_loaded_free(l);
    tml__json_free(doc);
}

/* More nodes than the system section's pick once looked at (it sorted the
 * first 256 with samples, silently): the median and the worst node are
 * over all of them, in the JSON and the box alike. */
static void test_many_nodes(void)
{
    enum { NODES = 300 };
    tml_strbuf s = TML_STRBUF_INIT, js = TML_STRBUF_INIT, box = TML_STRBUF_INIT;
    tml__sb_adds(&s, "{\"schema_version\": 1, \"meta\": {\"run_name\": \"n\", \"nodes\": 300},"
                     " \"primary_diagnosis\": {\"kind\": \"BALANCED\"},"
                     " \"step_time\": {\"per_rank\": []}, \"system\": {\"per_node\": [");
    for (int i = 0; i < NODES; i++)   /* node i at i/10 % CPU: node 299 the busiest */
        tml__sb_addf(&s, "%s{\"node\": %d, \"samples\": 5, \"cpu_percent\": %.1f}",
                     i ? ", " : "", i, i / 10.0);
    tml__sb_adds(&s, "]}}");
    tml_json *doc = parse_str(s.buf), *out = NULL;
    tml_report_loaded *l = NULL;
    char why[256] = "";
    CHECK_EQ_INT(tml__report_load(doc, NULL, 156, &l, why, sizeof(why)), 0);
    if (l) {
        CHECK_EQ_INT(l->m.nnodes, NODES);
        tml__report_box(&l->m, &box);
        tml__report_json(&l->m, box.buf, &js);
        CHECK_EQ_INT(tml__json_parse(js.buf, js.len, &out, NULL), 0);
        double worst = -1, median = -1;
        CHECK(tml__json_num(tml__json_path(out, "system.worst.node"), &worst));
        CHECK(tml__json_num(tml__json_path(out, "system.median.node"), &median));
        CHECK_NEAR(worst, 299, 0);
        CHECK_NEAR(median, 150, 0);    /* the upper median of 300 */
        CHECK(strstr(box.buf, "30%, N299") != NULL);   /* the box's worst CPU */
    }
    tml__json_free(out);
    tml__report_loaded_free(l);
    tml__json_free(doc);
    tml__sb_release(&s);
    tml__sb_release(&js);
    tml__sb_release(&box);
}

/* The machine's contention comes back as written (view --re-render keeps
 * it), out-of-range figures are unknown, and a summary without it (before
 * TraceML 0.6) reloads with every figure unknown; written again, the key
 * is there with nulls. */
static void test_contention_roundtrip(void)
{
#define BASE "{\"schema_version\": 1, \"meta\": {\"run_name\": \"c\"}," \
                 " \"primary_diagnosis\": {\"kind\": \"BALANCED\"}," \
                 " \"step_time\": {\"per_rank\": []}"
    static const char *const docs[2] = {
        BASE ", \"contention\": {\"cores\": 2, \"host_cpu_percent\": 99.5,"
             " \"training_cpu_percent\": 20.25, \"other_cpu_percent\": 79.25,"
             " \"runq_wait_percent\": 1e9, \"gpu_shared\": false}}",
        BASE "}",
    };
#undef BASE
    for (int pass = 0; pass < 2; pass++) {
        tml_json *doc = parse_str(docs[pass]), *out = NULL;
        tml_report_loaded *l = NULL;
        char why[256] = "";
        tml_strbuf js = TML_STRBUF_INIT;
        CHECK_EQ_INT(tml__report_load(doc, NULL, 0, &l, why, sizeof(why)), 0);
        if (l) {
            const tml_contention *c = &l->m.win.contention;
            tml__report_json(&l->m, "", &js);
            CHECK_EQ_INT(tml__json_parse(js.buf, js.len, &out, NULL), 0);
            double v = -1;
            if (!pass) {
                CHECK_EQ_INT(c->cores, 2);
                CHECK_NEAR(c->other_cpu_percent, 79.25, 1e-9);
                CHECK_NEAR(c->training_cpu_percent, 20.25, 1e-9);
                CHECK(isnan(c->runq_wait_percent));        /* 1e9 % is no figure */
                CHECK_EQ_INT(c->gpu_shared, 0);
                CHECK(tml__json_num(tml__json_path(out, "contention.other_cpu_percent"), &v));
                CHECK_NEAR(v, 79.25, 1e-9);
                const tml_json *g = tml__json_path(out, "contention.gpu_shared");
                CHECK(g && g->type == TML_JSON_BOOL && !g->boolean);
            } else {
                CHECK_EQ_INT(c->cores, 0);
                CHECK(isnan(c->other_cpu_percent) && isnan(c->host_cpu_percent));
                CHECK_EQ_INT(c->gpu_shared, -1);
                const tml_json *g = tml__json_path(out, "contention.cores");
                CHECK(g && g->type == TML_JSON_NULL);
                g = tml__json_path(out, "contention.gpu_shared");
                CHECK(g && g->type == TML_JSON_NULL);
            }
        }
        tml__json_free(out);
        tml__report_loaded_free(l);
        tml__json_free(doc);
        tml__sb_release(&js);
    }
}

/* A tune trial's summary (status interrupted, meta.stopped_by "tune")
 * reloads as one (`traceml view` shows tune's stop, not INTERRUPTED);
 * another value is not ours and is dropped. */
static void test_stopped_by_roundtrip(void)
{
    static const char *const docs[2] = {
        "{\"schema_version\": 1, \"status\": \"interrupted\", \"meta\": {\"run_name\": "
        "\"t\", \"stopped_by\": \"tune\"}, \"primary_diagnosis\": {\"kind\": \"BALANCED\"}, "
        "\"step_time\": {\"per_rank\": []}}",
        "{\"schema_version\": 1, \"status\": \"interrupted\", \"meta\": {\"run_name\": "
        "\"t\", \"stopped_by\": \"me\"}, \"primary_diagnosis\": {\"kind\": \"BALANCED\"}, "
        "\"step_time\": {\"per_rank\": []}}",
    };
    for (int pass = 0; pass < 2; pass++) {
        tml_json *doc = parse_str(docs[pass]);
        tml_report_loaded *l = NULL;
        char why[256] = "";
        CHECK_EQ_INT(tml__report_load(doc, NULL, 120, &l, why, sizeof(why)), 0);
        if (l) {
            char *box = box_of(l);
            CHECK_STR(l->run.stopped_by, pass ? "" : "tune");
            CHECK(box && (strstr(box, "Ended: stopped by traceml tune after") != NULL) == !pass);
            CHECK(box && (strstr(box, "Ended: INTERRUPTED") != NULL) == pass);
            free(box);
        }
        tml__report_loaded_free(l);
        tml__json_free(doc);
    }
}

/* Every threshold of TML_THRESHOLDS is written to the summary, read back
 * (an override of each, comm_warn/comm_crit included, survives a reload,
 * so a re-rendered box diagnoses as the run did), and in the schema with
 * its type. */
static void test_thresholds_roundtrip_and_schema(void)
{
    size_t n;
    const tml_threshold_key *k = tml__thresholds_keys(&n);
    CHECK(n >= 21);
    tml_json *doc = parse_str("{\"schema_version\": 1, \"status\": \"completed\", \"meta\": "
                              "{\"run_name\": \"t\"}, \"primary_diagnosis\": {\"kind\": "
                              "\"BALANCED\"}, \"step_time\": {\"per_rank\": []}}");
    tml_report_loaded *l = NULL;
    char why[256] = "";
    CHECK_EQ_INT(tml__report_load(doc, NULL, 120, &l, why, sizeof(why)), 0);
    tml__json_free(doc);
    if (!l)
        return;
    tml_thresholds want;
    tml__thresholds_default(&want);
    for (size_t i = 0; i < n; i++)     /* every one off its default */
        tml__threshold_put(&want, &k[i], k[i].integer ? 7 + (double)i : 0.01 * (double)(i + 1));
    l->m.th = want;
    tml_strbuf js = TML_STRBUF_INIT;
    tml__report_json(&l->m, "", &js);
    tml__report_loaded_free(l);
    doc = js.buf ? parse_str(js.buf) : NULL;
    l = NULL;
    CHECK(doc && tml__report_load(doc, NULL, 120, &l, why, sizeof(why)) == 0);
    for (size_t i = 0; l && i < n; i++)
        if (tml__threshold_get(&l->m.th, &k[i]) != tml__threshold_get(&want, &k[i])) {
            CHECK(!"a threshold does not survive the summary");
            fprintf(stderr, "  %s\n", k[i].key);
        }
    tml__report_loaded_free(l);
    tml__json_free(doc);
    tml__sb_release(&js);

    tml_json *schema = parse_file("docs/summary.schema.json");
    const tml_json *props = tml__json_path(schema, "properties.meta.properties.thresholds.properties");
    CHECK(props != NULL);
    CHECK_EQ_INT(props ? props->n : 0, n);
    for (size_t i = 0; props && i < n; i++) {
        const char *type = tml__json_str(tml__json_get(tml__json_get(props, k[i].key), "type"));
        CHECK_STR(type, k[i].integer ? "integer" : "number");
    }
    tml__json_free(schema);
}

/* ---- telemetry.sqlite's digest ------------------------------------------ */

static void test_store_digest(void)
{
    char dir[] = "/tmp/tml_digest_XXXXXX", path[256], why[256] = "";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/telemetry.sqlite", dir);
    tml_store *s = NULL;
    CHECK_EQ_INT(tml__store_open(path, 1, &s), 0);
    if (!s)
        return;
    tml_run run;
    tml__run_init(&run, "dg", "id7");
    run.world_size = 2;
    run.nnodes = 1;
    run.start_unix_ms = 1700000000000;
    run.end_unix_ms = 1700000002500;
    CHECK_EQ_INT(tml__store_put_run(s, &run), 0);
    CHECK_EQ_INT(tml__store_put_meta(s, "status", "completed"), 0);
    CHECK_EQ_INT(tml__store_put_meta(s, "profile", "watch"), 0);
    for (int r = 0; r < 2; r++) {
        tml_rank_info info;
        memset(&info, 0, sizeof(info));
        info.rank = r;
        info.world_size = 2;
        info.pid = 100 + r;
        snprintf(info.host, sizeof(info.host), "h%d", r);
        CHECK_EQ_INT(tml__store_put_rank(s, &info), 0);
    }
    tml_step_record rec;
    memset(&rec, 0, sizeof(rec));
    for (int i = 0; i < 5; i++) {
        rec.step = (uint64_t)(3 + i);
        rec.start_ns = (int64_t)i * 500000000;
        CHECK_EQ_INT(tml__store_put_steps(s, 1, 0, &rec, 1), 0);
    }
    CHECK_EQ_INT(tml__store_put_sample(s, 1700000000100, 0, -1, "host_cpu_percent", 5), 0);
    tml__store_close(s);

    tml_store_digest d;
    CHECK_EQ_INT(tml__store_digest(path, &d, why, sizeof(why)), 0);
    CHECK_STR(d.run_name, "dg");
    CHECK_STR(d.run_id, "id7");
    CHECK_EQ_INT(d.schema_version, TML_STORE_SCHEMA_VERSION);
    CHECK_EQ_INT(d.world_size, 2);
    CHECK_STR(d.status, "completed");
    CHECK_STR(d.profile, "watch");
    CHECK_EQ_INT(d.rows_steps, 5);
    CHECK_EQ_INT(d.rows_samples, 1);
    CHECK_EQ_INT(d.sample_metrics, 1);
    CHECK_EQ_INT(d.nranks, 2);
    if (d.nranks == 2) {
        CHECK_EQ_INT(d.ranks[0].steps, 0);
        CHECK_EQ_INT(d.ranks[0].first_step, -1);
        CHECK_EQ_INT(d.ranks[1].steps, 5);
        CHECK_EQ_INT(d.ranks[1].first_step, 3);
        CHECK_EQ_INT(d.ranks[1].last_step, 7);
        CHECK_NEAR(d.ranks[1].span_s, 2.0, 1e-9);
        CHECK_STR(d.ranks[1].host, "h1");
    }
    tml__store_digest_release(&d);
    /* read-only and immutable: nothing appears beside a finished file */
    char side[300];
    snprintf(side, sizeof(side), "%s-shm", path);
    CHECK(access(side, F_OK) != 0);

    /* not ours: another SQLite database, and not SQLite at all */
    char other[256];
    snprintf(other, sizeof(other), "%s/other.txt", dir);
    CHECK_EQ_INT(tml__write_file(other, "hello, not a database at all......", 34, 0644), 0);
    CHECK_EQ_INT(tml__store_digest(other, &d, why, sizeof(why)), TML_EPROTO);
    CHECK(strstr(why, "not a SQLite database") != NULL);
    tml__store_digest_release(&d);
    snprintf(other, sizeof(other), "%s/missing.sqlite", dir);
    CHECK(tml__store_digest(other, &d, why, sizeof(why)) < 0);
    tml__store_digest_release(&d);
    tml__run_release(&run);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

#define TESTS X(test_stopped_by_roundtrip) X(test_v05_input_bound) X(test_v05_straggler) X(test_v05_watch) \
    X(test_v05_hostile_numbers) X(test_refused) X(test_ours_hostile) X(test_many_nodes) X(test_contention_roundtrip) X(test_store_digest) \
    X(test_thresholds_roundtrip_and_schema)
#include "harness.h"
