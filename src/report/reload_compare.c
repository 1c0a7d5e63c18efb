/*
 * reload_compare.c - a final_summary.json read into the run `traceml
 * compare` decides on (tml_cmp_run, judge/compare.h): this TraceML's
 * summary field by field, one TraceML 0.5.0 wrote through the report
 * model (reload.c maps it, json.c prints it in this schema), so that
 * both kinds go through one reader.
 */
#include "report/compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/jsonw.h"
#include "report/reload.h"
#include "report/report.h"
#include "traceml/traceml.h"

#define CMP_SCHEMA_MAX 1

/* Reading is checked: a figure that is present must be a number within
 * its range, or the file is refused naming the field (a hand-edited 3e19
 * steps must not be cast to an integer, nor move a verdict). Absent or
 * null is missing (NAN): the summary writes an unknown figure as null. */
typedef struct reader {
    char *why;
    size_t cap;
    int bad;
} reader;

/* The number at prefix.key of v (key NULL: v itself, named prefix). */
static double num_in(reader *rd, const tml_json *v, const char *prefix, const char *key,
                     double lo, double hi)
{
    const tml_json *n = key ? tml__json_path(v, key) : v;
    if (!n || n->type == TML_JSON_NULL)
        return NAN;
    if (n->type == TML_JSON_NUMBER && isfinite(n->number) && n->number >= lo &&
        n->number <= hi)
        return n->number;
    if (!rd->bad) {
        char val[32];
        if (n->type == TML_JSON_NUMBER)
            snprintf(val, sizeof(val), "%g", n->number);
        else
            snprintf(val, sizeof(val), "not a number");
        snprintf(rd->why, rd->cap, "%s%s%s is %s, not a figure from %g to %g", prefix,
                 key && *prefix ? "." : "", key ? key : "", val, lo, hi);
    }
    rd->bad = 1;
    return NAN;
}

static void str_at(const tml_json *v, const char *path, char *out, size_t cap)
{
    const char *s = tml__json_str(tml__json_path(v, path));
    snprintf(out, cap, "%s", s ? s : "");
}

/* One clock's figures from fig, the object at `at`. */
static void clock_from(reader *rd, const tml_json *fig, const char *at, tml_cmp_clock *k,
                       double noise_fallback)
{
    if (!fig || fig->type != TML_JSON_OBJECT)
        return;
    k->step_ms = num_in(rd, fig, at, "step_time_ms", 0, TML_RL_MAX_MS);
    k->input_ms = num_in(rd, fig, at, "input_wait_ms", 0, TML_RL_MAX_MS);
    k->h2d_ms = num_in(rd, fig, at, "h2d_ms", 0, TML_RL_MAX_MS);
    k->compute_ms = num_in(rd, fig, at, "compute_ms", 0, TML_RL_MAX_MS);
    k->residual_ms = num_in(rd, fig, at, "residual_ms", 0, TML_RL_MAX_MS);
    k->noise_ms = num_in(rd, fig, at, "noise_ms", 0, TML_RL_MAX_MS);
    if (isnan(k->noise_ms))
        k->noise_ms = noise_fallback;
    const tml_json *bl = tml__json_get(fig, "step_time_blocks_ms");
    for (size_t i = 0; bl && bl->type == TML_JSON_ARRAY && i < bl->n &&
                       k->nblocks < TML_CMP_BLOCKS; i++) {
        char item[96];
        snprintf(item, sizeof(item), "%s.step_time_blocks_ms[%zu]", at, i);
        double v = num_in(rd, tml__json_at(bl, i), item, NULL, 0, TML_RL_MAX_MS);
        if (!isnan(v))
            k->blocks_ms[k->nblocks++] = v;
    }
    k->valid = !isnan(k->step_ms);
}

static int check_schema(const tml_json *doc, char *why, size_t cap)
{
    long major;
    if (!doc || doc->type != TML_JSON_OBJECT) {
        snprintf(why, cap, "not a TraceML summary (not a JSON object)");
        return TML_EPROTO;
    }
    const tml_json *sv = tml__json_get(doc, "schema_version");
    if (!sv) {
        snprintf(why, cap, "not a TraceML summary (no schema_version)");
        return TML_EPROTO;
    }
    if (!tml__json_version_major(sv, &major) || major < 1 || major > CMP_SCHEMA_MAX) {
        snprintf(why, cap, "unsupported schema_version (this traceml reads version %d)",
                 CMP_SCHEMA_MAX);
        return TML_EPROTO;
    }
    const tml_json *st = tml__json_get(doc, "step_time");
    if (!st || st->type != TML_JSON_OBJECT || !tml__json_get(doc, "primary_diagnosis")) {
        snprintf(why, cap, "not a TraceML summary (no step_time or primary_diagnosis)");
        return TML_EPROTO;
    }
    return 0;
}

/* step_time: the window and both clocks' figures. */
static void step_time_from(reader *rd, const tml_json *st, tml_cmp_run *r)
{
    double ws = num_in(rd, st, "step_time", "window.window_steps", 0, TML_RL_MAX_COUNT);
    r->window_steps = isnan(ws) ? 0 : (size_t)ws;
    double noise = num_in(rd, st, "step_time", "noise_ms", 0, TML_RL_MAX_MS);
    const tml_json *bc = tml__json_get(st, "by_clock");
    if (bc) {
        clock_from(rd, tml__json_get(bc, "cpu"), "step_time.by_clock.cpu",
                   &r->clock[TML_CMP_CPU], NAN);
        clock_from(rd, tml__json_get(bc, "gpu"), "step_time.by_clock.gpu",
                   &r->clock[TML_CMP_GPU], NAN);
    } else {
        /* An older summary: only the diagnosis clock's figures. */
        char clk[16];
        str_at(st, "window.clock", clk, sizeof(clk));
        int c = strcmp(clk, "gpu") == 0 ? TML_CMP_GPU : TML_CMP_CPU;
        clock_from(rd, tml__json_get(st, "median"), "step_time.median", &r->clock[c], noise);
    }
    if (r->window_steps == 0)
        r->clock[0].valid = r->clock[1].valid = 0;
}

/* The memory, process and system rows (shown; only memory decides). */
static void resources_from(reader *rd, const tml_json *doc, tml_cmp_run *r)
{
    const double B = TML_RL_MAX_BYTES, P = TML_RL_MAX_PERCENT;
    r->peak_reserved_bytes = num_in(rd, doc, "", "step_memory.average.peak_reserved_bytes", 0, B);
    double med = num_in(rd, doc, "", "step_memory.median.peak_reserved_bytes", 0, B);
    double worst = num_in(rd, doc, "", "step_memory.worst.peak_reserved_bytes", 0, B);
    r->mem_skew_percent = med > 0 && !isnan(worst) ? 100.0 * (worst - med) / med : NAN;
    r->proc_cpu_percent = num_in(rd, doc, "", "process.average.cpu_percent", 0, P);
    if (isnan(r->proc_cpu_percent))
        r->proc_cpu_percent = num_in(rd, doc, "", "process.average.cpu_capacity_percent", 0, P);
    r->proc_rss_bytes = num_in(rd, doc, "", "process.average.rss_bytes", 0, B);
    r->sys_cpu_percent = num_in(rd, doc, "", "system.average.cpu_percent", 0, P);
    r->sys_ram_used_bytes = num_in(rd, doc, "", "system.average.ram_used_bytes", 0, B);
    r->gpu_util_percent = num_in(rd, doc, "", "system.average.gpu_util_percent", 0, P);
    double used = num_in(rd, doc, "", "system.average.gpu_memory_used_bytes", 0, B);
    double total = num_in(rd, doc, "", "system.average.gpu_memory_total_bytes", 0, B);
    r->gpu_mem_percent = total > 0 && !isnan(used) ? 100.0 * used / total : NAN;
    r->samples_per_s = num_in(rd, doc, "", "throughput.samples_per_s", 0, TML_RL_MAX_COUNT);
    r->tokens_per_s = num_in(rd, doc, "", "throughput.tokens_per_s", 0, TML_RL_MAX_COUNT);
    r->flops_per_s = num_in(rd, doc, "", "throughput.achieved_flops_per_s", 0, TML_RL_MAX_FLOPS);
    r->mfu_percent = num_in(rd, doc, "", "throughput.mfu_percent", 0, 1e4);
}

/* The top-level "contention" object (absent: unknown). */
static void contention_from(reader *rd, const tml_json *doc, tml_cmp_run *r)
{
    const tml_json *c = tml__json_get(doc, "contention");
    const double P = TML_RL_MAX_PERCENT;
    if (!c || c->type != TML_JSON_OBJECT)
        return;
    tml_cmp_contention *k = &r->cont;
    k->cores = num_in(rd, c, "contention", "cores", 0, 1e6);
    k->host_cpu = num_in(rd, c, "contention", "host_cpu_percent", 0, P);
    k->training_cpu = num_in(rd, c, "contention", "training_cpu_percent", 0, P);
    k->other_cpu = num_in(rd, c, "contention", "other_cpu_percent", 0, P);
    k->runq_wait = num_in(rd, c, "contention", "runq_wait_percent", 0, P);
    const tml_json *g = tml__json_get(c, "gpu_shared");
    k->gpu_shared = g && g->type == TML_JSON_BOOL ? g->boolean : -1;
    k->known = !isnan(k->other_cpu) || !isnan(k->runq_wait) || k->gpu_shared >= 0;
}

/* meta.workload: what ran (absent: unknown). */
static void workload_from(reader *rd, const tml_json *doc, tml_cmp_run *r)
{
    const tml_json *w = tml__json_path(doc, "meta.workload");
    if (!w || w->type != TML_JSON_OBJECT)
        return;
    str_at(w, "script", r->work.script, sizeof(r->work.script));
    const tml_json *args = tml__json_get(w, "args");
    size_t used = 0;
    for (size_t i = 0; args && args->type == TML_JSON_ARRAY && i < args->n; i++) {
        const char *a = tml__json_str(tml__json_at(args, i));
        if (!a || used + 2 >= sizeof(r->work.args))
            continue;
        int n = snprintf(r->work.args + used, sizeof(r->work.args) - used, "%s%s",
                         used ? " " : "", a);
        used = n > 0 ? fmin((double)(used + (size_t)n), sizeof(r->work.args) - 1) : used;
    }
    double ws = num_in(rd, w, "meta.workload", "world_size", 0, TML_RL_MAX_COUNT);
    r->work.world_size = isnan(ws) ? -1 : (long)ws;
    const tml_json *g = tml__json_get(w, "guard");
    if (g && g->type != TML_JSON_NULL) {
        tml_strbuf sb = TML_STRBUF_INIT;
        tml__json_add_canon(&sb, g);
        if (!sb.failed)
            snprintf(r->work.guard, sizeof(r->work.guard), "%s", sb.buf);
        tml__sb_release(&sb);
    }
}

/* One list of deep_dive (modules or operators), per profiled step. */
static size_t dd_items_from(reader *rd, const tml_json *arr, const char *at, double steps,
                            tml_cmp_dd_item *v)
{
    size_t n = 0;
    const tml_json *o;
    for (size_t i = 0; n < TML_CMP_DD_ITEMS && (o = tml__json_at(arr, i)); i++) {
        char item[64];
        snprintf(item, sizeof(item), "deep_dive.%s[%zu]", at, i);
        double ms = num_in(rd, o, item, "ms", 0, TML_RL_MAX_MS);
        const char *name = tml__json_str(tml__json_get(o, "name"));
        if (isnan(ms) || !name)
            continue;
        snprintf(v[n].name, sizeof(v[n].name), "%s", name);
        v[n++].ms = ms / steps;
    }
    return n;
}

/* deep_dive (docs/summary-json.md), when its window ran: compare's
 * below-the-phase lists (judge/compare_dd.c). */
static void deep_dive_from(reader *rd, const tml_json *dd, tml_cmp_run *r)
{
    const char *status = tml__json_str(tml__json_get(dd, "status"));
    if (!dd || !status || strcmp(status, "ran") != 0)
        return;
    double first = num_in(rd, dd, "deep_dive", "first_step", 0, 1e15);
    double last = num_in(rd, dd, "deep_dive", "last_step", 0, 1e15);
    double steps = !isnan(first) && !isnan(last) && last >= first ? last - first + 1 : 1;
    r->dd.nmod = dd_items_from(rd, tml__json_get(dd, "modules"), "modules", steps, r->dd.mod);
    r->dd.nop = dd_items_from(rd, tml__json_get(dd, "operators"), "operators", steps, r->dd.op);
    r->dd.ran = 1;
}

int tml__cmp_run_from_json(const tml_json *doc, tml_cmp_run *r, char *why, size_t cap)
{
    tml__cmp_run_init(r);
    int rc = check_schema(doc, why, cap);
    if (rc < 0)
        return rc;
    str_at(doc, "meta.run_name", r->label, sizeof(r->label));
    str_at(doc, "primary_diagnosis.label", r->primary, sizeof(r->primary));
    static const char *const sec[TML_CMP_SEC_COUNT] = {
        "step_time.diagnosis.label", "step_memory.diagnosis.label",
        "process.diagnosis.label", "system.diagnosis.label"
    };
    for (int i = 0; i < TML_CMP_SEC_COUNT; i++)
        str_at(doc, sec[i], r->diag[i], sizeof(r->diag[i]));
    reader rd = {why, cap, 0};
    step_time_from(&rd, tml__json_get(doc, "step_time"), r);
    resources_from(&rd, doc, r);
    contention_from(&rd, doc, r);
    workload_from(&rd, doc, r);
    deep_dive_from(&rd, tml__json_get(doc, "deep_dive"), r);
    if (rd.bad) {
        tml__cmp_run_init(r);
        return TML_EPROTO;
    }
    return 0;
}

/* A TraceML 0.5.0 summary in this TraceML's schema (reload.h maps it onto
 * the report model, json.c prints that), so that both kinds go through one
 * reader; *conv is the converted tree, freed by the caller. */
static int from_v05(const tml_json *doc, tml_json **conv, char *source, size_t scap,
                    char *why, size_t cap)
{
    tml_report_loaded *l;
    int rc = tml__report_load(doc, NULL, 0, &l, why, cap);
    if (rc < 0)
        return rc;
    tml_strbuf js = TML_STRBUF_INIT;
    tml__report_json(&l->m, "", &js);
    snprintf(source, scap, "TraceML 0.5.0 summary (schema %s): no step-to-step noise, "
             "Untraced time or communication in it", l->schema);
    tml__report_loaded_free(l);
    rc = js.failed ? TML_ENOMEM : tml__json_parse(js.buf, js.len, conv, NULL);
    tml__sb_release(&js);
    if (rc < 0)
        snprintf(why, cap, "%s", rc == TML_ENOMEM ? "out of memory"
                 : "could not be mapped onto this TraceML's summary");
    return rc < 0 ? (rc == TML_ENOMEM ? rc : TML_EPROTO) : 0;
}

int tml__cmp_run_load(const tml_json *doc, tml_cmp_run *r, char *why, size_t cap)
{
    tml_json *conv = NULL;
    char source[sizeof(r->source)] = "";
    int rc = 0;
    if (tml__summary_is_v05(doc))
        rc = from_v05(doc, &conv, source, sizeof(source), why, cap);
    if (rc == 0)
        rc = tml__cmp_run_from_json(conv ? conv : doc, r, why, cap);
    else
        tml__cmp_run_init(r);
    tml__json_free(conv);
    if (rc == 0 && source[0]) {
        /* 0.5.0 kept its guard declaration and topology in run_context */
        snprintf(r->source, sizeof(r->source), "%s", source);
        const tml_json *g = tml__json_path(doc, "run_context.declaration");
        if (g && g->type == TML_JSON_OBJECT) {
            tml_strbuf sb = TML_STRBUF_INIT;
            tml__json_add_canon(&sb, g);
            if (!sb.failed)
                snprintf(r->work.guard, sizeof(r->work.guard), "%s", sb.buf);
            tml__sb_release(&sb);
        }
        double ws;
        if (tml__json_num(tml__json_path(doc, "run_context.execution.expected_world_size"),
                          &ws) && ws >= 1 && ws < 1e9)
            r->work.world_size = (long)ws;
    }
    const char *lc = tml__json_str(
        tml__json_path(doc, "run_context.execution.launcher_completion.status"));
    r->work.launch_incomplete = lc && strcmp(lc, "completed") != 0;
    return rc;
}
