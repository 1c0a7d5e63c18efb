/*
 * compare.c - two run summaries in, one verdict out (SPEC 6).
 *
 * The question a user asks after changing something is "did it help?", and
 * the honest answers are five: IMPROVEMENT, REGRESSION, MIXED (time and
 * memory moved in opposite directions), EQUIVALENT and INCONCLUSIVE (the
 * runs cannot be compared: one has no step-time window). The rules:
 *
 *  - Clock. Step times are compared on a clock both runs have: the GPU
 *    clock when both summaries carry GPU figures, else the CPU clock. Each
 *    summary has its figures on both clocks where it can (step_time.
 *    by_clock), so a GPU run can still be compared with a CPU-clock run.
 *  - Gates. Step time moves when it changes by at least 3%; peak reserved
 *    memory when it changes by at least 10% (both configurable).
 *  - Significance. Step time moves only when the change is both
 *    significant and past the gate, and the Why says which held. Each
 *    summary carries the Step Time medians of up to 20 consecutive blocks
 *    of its window (step_time.by_clock.*.step_time_blocks_ms): steps next to
 *    each other are not independent (epoch starts, drifting load) and a few
 *    slow ones inflate a standard deviation, while block medians are nearly
 *    independent and robust. The two runs' block medians go through a
 *    two-sided Mann-Whitney U test (significant at p < 0.01), and the
 *    effect the gate sees is the change of their medians. Two runs of the
 *    same script on a busy machine may differ significantly by 1-2%: the
 *    gate keeps that EQUIVALENT; a real slowdown moves every block. A
 *    summary without block medians (older TraceML) falls back to the
 *    window averages, with a change smaller than the larger step-to-step
 *    standard deviation called noise.
 *  - Verdict. Neither moved: EQUIVALENT. Opposite directions: MIXED.
 *    Otherwise the direction that moved: faster or smaller is IMPROVEMENT.
 *
 * The tables of the box and of the JSON come from one list of rows built
 * once, so the two never disagree.
 */
#include "report/compare.h"
#include "base/fmt.h"
#include "base/jsonw.h"
#include "base/stats.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/reload.h"
#include "report/report.h"
#include "traceml/traceml.h"

#define CMP_WIDTH 80   /* fits an 80-column terminal */
#define CMP_SCHEMA_MAX 1

void tml__cmp_gates_default(tml_cmp_gates *g)
{
    g->step_time = 0.03;
    g->memory = 0.10;
}

const char *tml__cmp_verdict_name(tml_cmp_verdict v)
{
    switch (v) {
    case TML_CMP_EQUIVALENT: return "EQUIVALENT";
    case TML_CMP_IMPROVEMENT: return "IMPROVEMENT";
    case TML_CMP_REGRESSION: return "REGRESSION";
    case TML_CMP_MIXED: return "MIXED";
    case TML_CMP_INCONCLUSIVE: return "INCONCLUSIVE";
    }
    return "INCONCLUSIVE";
}

static const char *clock_name(int c)
{
    return c == TML_CMP_GPU ? "GPU" : "CPU";
}

void tml__cmp_run_init(tml_cmp_run *r)
{
    memset(r, 0, sizeof(*r));
    for (int c = 0; c < 2; c++) {
        tml_cmp_clock *k = &r->clock[c];
        k->step_ms = k->input_ms = k->h2d_ms = k->compute_ms = k->residual_ms = NAN;
        k->noise_ms = NAN;
    }
    r->peak_reserved_bytes = r->mem_skew_percent = NAN;
    r->proc_cpu_percent = r->proc_rss_bytes = NAN;
    r->sys_cpu_percent = r->sys_ram_used_bytes = r->gpu_util_percent = r->gpu_mem_percent = NAN;
    r->cont.cores = r->cont.host_cpu = r->cont.training_cpu = r->cont.other_cpu = NAN;
    r->cont.runq_wait = NAN;
    r->cont.gpu_shared = -1;
    r->work.world_size = -1;
}

/* ---- reading a summary ------------------------------------------------ */

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

/* ---- the verdict ------------------------------------------------------ */

static const char *run_name(const tml_cmp_run *r, const char *which)
{
    return r->label[0] ? r->label : which;
}

static int usable(const tml_cmp_run *r)
{
    return r->window_steps >= 2 && (r->clock[0].valid || r->clock[1].valid);
}

static void inconclusive(const tml_cmp_run *a, const tml_cmp_run *b, tml_cmp_result *out)
{
    out->verdict = TML_CMP_INCONCLUSIVE;
    if (usable(a) && usable(b)) {
        snprintf(out->why, sizeof(out->why),
                 "The runs have no step-time clock in common: step time cannot be compared.");
        return;
    }
    const tml_cmp_run *bad = usable(a) ? b : a;
    const char *which = bad == a ? "A" : "B";
    if (bad->window_steps == 0 || !(bad->clock[0].valid || bad->clock[1].valid))
        snprintf(out->why, sizeof(out->why),
                 "%s (%s) has no step-time window (%s): step time cannot be compared.",
                 which, run_name(bad, which), bad->primary[0] ? bad->primary : "no data");
    else
        snprintf(out->why, sizeof(out->why),
                 "%s (%s) has %zu step%s in its window: too few to compare.", which,
                 run_name(bad, which), bad->window_steps, bad->window_steps == 1 ? "" : "s");
}

static double median_copy(const double *v, size_t n)
{
    double t[TML_CMP_BLOCKS];
    memcpy(t, v, n * sizeof(*t));
    return tml__median(t, n);
}

/* The test on the block medians when both runs have them; 1 when it ran
 * (out->time_moved set by it). */
static int significance_test(const tml_cmp_clock *ka, const tml_cmp_clock *kb,
                             tml_cmp_result *out)
{
    if (ka->nblocks < TML_CMP_MIN_BLOCKS || kb->nblocks < TML_CMP_MIN_BLOCKS)
        return 0;
    double ca = median_copy(ka->blocks_ms, ka->nblocks);
    double cb = median_copy(kb->blocks_ms, kb->nblocks);
    if (!(ca > 0))
        return 0;
    out->tested = 1;
    out->blocks_a = ka->nblocks;
    out->blocks_b = kb->nblocks;
    out->center_a_ms = ca;
    out->center_b_ms = cb;
    out->effect = (cb - ca) / ca;
    out->p_value = tml__mann_whitney_p(ka->blocks_ms, ka->nblocks, kb->blocks_ms, kb->nblocks);
    out->significant = out->p_value < TML_CMP_ALPHA;
    out->past_gate = fabs(out->effect) >= out->gates.step_time;
    if (out->significant && out->past_gate)
        out->time_moved = out->effect > 0 ? 1 : -1;
    return 1;
}

/* ---- a side of several runs ------------------------------------------- */


/* The median over the runs of the double at off of each (run or clock). */
static double med_field(const tml_cmp_run *runs, size_t n, size_t off)
{
    double v[TML_CMP_MAX_RUNS];
    for (size_t i = 0; i < n; i++)
        v[i] = *(const double *)(const void *)((const char *)&runs[i] + off);
    return tml__median(v, n);
}

void tml__cmp_side(const tml_cmp_run *runs, size_t n, tml_cmp_run *out)
{
    if (n > TML_CMP_MAX_RUNS)
        n = TML_CMP_MAX_RUNS;
    if (n <= 1) {
        if (n == 1)
            *out = runs[0];
        else
            tml__cmp_run_init(out);
        return;
    }
    *out = runs[0];
    size_t used = (size_t)snprintf(out->label, sizeof(out->label), "%zu runs:", n);
    for (size_t i = 0; i < n && used < sizeof(out->label); i++)
        used += (size_t)snprintf(out->label + used, sizeof(out->label) - used, "%s %s",
                                 i ? "," : "", runs[i].label[0] ? runs[i].label : "?");
    out->path[0] = '\0';
    out->window_steps = runs[0].window_steps;
    for (size_t i = 1; i < n; i++)
        if (runs[i].window_steps < out->window_steps)
            out->window_steps = runs[i].window_steps;
    for (int c = 0; c < 2; c++) {
        tml_cmp_clock *k = &out->clock[c];
        k->nblocks = 0;
        k->valid = 1;
        for (size_t i = 0; i < n; i++)
            k->valid &= runs[i].clock[c].valid;
#define MED_CLOCK(f) k->f = med_field(runs, n, offsetof(tml_cmp_run, clock) + \
                                      c * sizeof(tml_cmp_clock) + offsetof(tml_cmp_clock, f))
        MED_CLOCK(step_ms);
        MED_CLOCK(input_ms);
        MED_CLOCK(h2d_ms);
        MED_CLOCK(compute_ms);
        MED_CLOCK(residual_ms);
        MED_CLOCK(noise_ms);
#undef MED_CLOCK
    }
#define MED(f) out->f = med_field(runs, n, offsetof(tml_cmp_run, f))
    MED(peak_reserved_bytes);
    MED(mem_skew_percent);
    MED(proc_cpu_percent);
    MED(proc_rss_bytes);
    MED(sys_cpu_percent);
    MED(sys_ram_used_bytes);
    MED(gpu_util_percent);
    MED(gpu_mem_percent);
    MED(cont.cores);
    MED(cont.host_cpu);
    MED(cont.training_cpu);
    MED(cont.other_cpu);
    MED(cont.runq_wait);
#undef MED
    out->cont.known = 0;
    out->cont.gpu_shared = -1;
    for (size_t i = 0; i < n; i++) {
        out->cont.known |= runs[i].cont.known;
        if (runs[i].cont.gpu_shared >= 0)
            out->cont.gpu_shared = out->cont.gpu_shared == 1 ? 1 : runs[i].cont.gpu_shared;
    }
    /* a diagnosis the runs disagree on is shown as the first run's */
}

/* ---- the verdict ------------------------------------------------------ */

static double run_center(const tml_cmp_run *r, int c)
{
    const tml_cmp_clock *k = &r->clock[c];
    return k->nblocks ? median_copy(k->blocks_ms, k->nblocks) : k->step_ms;
}

/* Welch's t-test on the logs of the runs' centers; 0, or -1 (why set)
 * when a run has no positive step time. */
static int run_test(const tml_cmp_run *a, size_t na, const tml_cmp_run *b, size_t nb,
                    tml_cmp_result *out)
{
    double la[TML_CMP_MAX_RUNS], lb[TML_CMP_MAX_RUNS], ma = 0, mb = 0, va = 0, vb = 0;
    for (size_t i = 0; i < na + nb; i++) {
        const tml_cmp_run *r = i < na ? &a[i] : &b[i - na];
        double c = run_center(r, out->clock);
        if (!(c > 0)) {
            snprintf(out->why, sizeof(out->why), "%s (%s) has no positive step time: no "
                     "change can be measured.", i < na ? "A" : "B", run_name(r, "?"));
            return -1;
        }
        if (i < na) {
            out->run_a_ms[i] = c;
            ma += (la[i] = log(c)) / (double)na;
        } else {
            out->run_b_ms[i - na] = c;
            mb += (lb[i - na] = log(c)) / (double)nb;
        }
    }
    for (size_t i = 0; i < na; i++)
        va += (la[i] - ma) * (la[i] - ma) / (na > 1 ? (double)(na - 1) : 1);
    for (size_t i = 0; i < nb; i++)
        vb += (lb[i] - mb) * (lb[i] - mb) / (nb > 1 ? (double)(nb - 1) : 1);
    /* one run on a side: its noise taken as the other side's */
    out->run_noise_a = na > 1 ? sqrt(va) : NAN;
    out->run_noise_b = nb > 1 ? sqrt(vb) : NAN;
    if (na < 2)
        va = vb;
    if (nb < 2)
        vb = va;
    double sa = va / (double)na, sb = vb / (double)nb, se2 = sa + sb;
    double df;
    if (na > 1 && nb > 1)
        df = se2 > 0 ? se2 * se2 / (sa * sa / (double)(na - 1) + sb * sb / (double)(nb - 1))
                     : (double)(na + nb - 2);
    else
        df = (double)((na > 1 ? na : nb) - 1);
    out->run_tested = 1;
    out->t_df = df;
    out->center_a_ms = out->time_a_ms = exp(ma);
    out->center_b_ms = out->time_b_ms = exp(mb);
    out->effect = out->time_change = exp(mb - ma) - 1;
    if (se2 > 0) {
        out->p_value = tml__t_p2((mb - ma) / sqrt(se2), df);
        out->mdc = exp((tml__t_quantile(1 - TML_CMP_ALPHA / 2, df) +
                        tml__t_quantile(0.8, df)) * sqrt(se2)) - 1;
    } else {
        out->p_value = mb == ma ? 1 : 0;
        out->mdc = 0;
    }
    out->significant = out->p_value < TML_CMP_ALPHA;
    out->past_gate = fabs(out->effect) >= out->gates.step_time;
    if (out->significant && out->past_gate)
        out->time_moved = out->effect > 0 ? 1 : -1;
    else if (!out->significant &&
             (out->past_gate || !(out->mdc <= TML_CMP_MDC_GATES * out->gates.step_time)))
        out->undecided = 1;
    return 0;
}

static void run_sentence(const tml_cmp_result *r, char *t, size_t cap)
{
    const char *clk = clock_name(r->clock);
    double gate = 100.0 * r->gates.step_time, ep = 100.0 * r->effect;
    char head[200], see[96];
    snprintf(head, sizeof(head), "%s Step Time %s %.1f%% (geometric mean of %zu vs %zu run "
             "medians: %.2f -> %.2f ms)", clk,
             r->time_moved ? (ep > 0 ? "increased by" : "decreased by") : "changed by",
             r->time_moved ? fabs(ep) : ep, r->runs_a, r->runs_b, r->center_a_ms,
             r->center_b_ms);
    snprintf(see, sizeof(see), "these runs can detect a change of %.1f%% or more",
             100.0 * r->mdc);
    if (r->time_moved)
        snprintf(t, cap, "%s: significant (Welch t on log run medians, p = %.2g) and past "
                 "the %.0f%% gate; %s.", head, r->p_value, gate, see);
    else if (r->significant)
        snprintf(t, cap, "%s: significant (Welch t, p = %.2g) but within the %.0f%% gate.",
                 head, r->p_value, gate);
    else if (r->past_gate)
        snprintf(t, cap, "%s: past the %.0f%% gate but not significant (Welch t, p = %.2g): "
                 "the runs overlap; %s.", head, gate, r->p_value, see);
    else
        snprintf(t, cap, "%s: within the %.0f%% gate and not significant (Welch t, p = %.2g); "
                 "%s.", head, gate, r->p_value, see);
}

/* What happened to step time with one run a side, in one true sentence:
 * which of significance and the gate held. d is B - A of the window
 * averages. */
static void time_sentence(const tml_cmp_result *r, double d, char *t, size_t cap)
{
    const char *clk = clock_name(r->clock);
    double gate = 100.0 * r->gates.step_time;
    if (r->run_tested) {
        run_sentence(r, t, cap);
        return;
    }
    if (!r->tested) {
        double tp = 100.0 * r->time_change;
        if (r->time_moved)
            snprintf(t, cap, "%s Step Time %s by %.1f%%.", clk,
                     d > 0 ? "increased" : "decreased", fabs(tp));
        else if (r->within_noise)
            snprintf(t, cap, "%s Step Time changed by %+.1f%% (%+.2f ms), past the %.0f%% gate "
                     "but within the runs' step-to-step noise (+/-%.2f ms): one run a side "
                     "cannot tell the two apart.", clk, tp, d, gate, r->noise_ms);
        else
            snprintf(t, cap, "%s Step Time changed by %+.1f%%, within the %.0f%% gate.", clk,
                     tp, gate);
        return;
    }
    double ep = 100.0 * r->effect;
    if (r->time_moved)
        snprintf(t, cap, "%s Step Time %s by %.1f%% (median of %zu vs %zu blocks: %.2f -> "
                 "%.2f ms): significant (Mann-Whitney p = %.2g) and past the %.0f%% gate.",
                 clk, ep > 0 ? "increased" : "decreased", fabs(ep), r->blocks_a, r->blocks_b,
                 r->center_a_ms, r->center_b_ms, r->p_value, gate);
    else if (r->significant)
        snprintf(t, cap, "%s Step Time changed by %+.1f%%: significant (Mann-Whitney p = %.2g) "
                 "but within the %.0f%% gate.", clk, ep, r->p_value, gate);
    else if (r->past_gate)
        snprintf(t, cap, "%s Step Time changed by %+.1f%%, past the %.0f%% gate but not "
                 "significant (Mann-Whitney p = %.2g): the runs' step times overlap.", clk, ep,
                 gate, r->p_value);
    else
        snprintf(t, cap, "%s Step Time changed by %+.1f%%: within the %.0f%% gate and not "
                 "significant (Mann-Whitney p = %.2g).", clk, ep, gate, r->p_value);
}

/* One run a side on its own (SPEC 6's block test); d as above. */
static double single_time(const tml_cmp_run *a, const tml_cmp_run *b, tml_cmp_result *out)
{
    const tml_cmp_clock *ka = &a->clock[out->clock], *kb = &b->clock[out->clock];
    out->time_a_ms = ka->step_ms;
    out->time_b_ms = kb->step_ms;
    double d = kb->step_ms - ka->step_ms;
    out->time_change = d / ka->step_ms;
    if (!isnan(ka->noise_ms) || !isnan(kb->noise_ms))
        out->noise_ms = fmax(isnan(ka->noise_ms) ? 0 : ka->noise_ms,
                             isnan(kb->noise_ms) ? 0 : kb->noise_ms);
    if (significance_test(ka, kb, out)) {
        /* past the gate, not significant: not evidence of no change */
        out->undecided = !out->significant && out->past_gate;
    } else if (fabs(out->time_change) >= out->gates.step_time) {
        /* a shift of the median held against the steps' spread proves
         * nothing either way: past the gate and within it is undecided */
        if (!isnan(out->noise_ms) && fabs(d) < out->noise_ms)
            out->within_noise = out->undecided = 1;
        else
            out->time_moved = d > 0 ? 1 : -1;
    }
    return d;
}

static int loaded(const tml_cmp_contention *c)
{
    return c->other_cpu >= TML_CMP_LOAD_OTHER_PP || c->runq_wait >= TML_CMP_LOAD_RUNQ_PP;
}

static void fmt_pct(double v, char *out, size_t cap)
{
    if (isnan(v))
        snprintf(out, cap, "n/a");
    else
        snprintf(out, cap, "%.0f%%", v);
}

/* The machines the sides ran on: differently loaded, or (one run a side)
 * loaded at all. Sets out->load_differs / loaded_single; t gets the
 * sentence. */
static void load_rule(const tml_cmp_run *sa, const tml_cmp_run *sb, size_t na, size_t nb,
                      tml_cmp_result *out, char *t, size_t cap)
{
    const tml_cmp_contention *ca = &sa->cont, *cb = &sb->cont;
    char oa[16], ob[16], qa[16], qb[16];
    t[0] = '\0';
    if (!ca->known || !cb->known)
        return;
    fmt_pct(ca->other_cpu, oa, sizeof(oa));
    fmt_pct(cb->other_cpu, ob, sizeof(ob));
    fmt_pct(ca->runq_wait, qa, sizeof(qa));
    fmt_pct(cb->runq_wait, qb, sizeof(qb));
    int gpu = ca->gpu_shared >= 0 && cb->gpu_shared >= 0 && ca->gpu_shared != cb->gpu_shared;
    /* which side the load weighed on: +1 B, -1 A, 2 both ways */
    int dir = 0;
    double dv[3] = {cb->other_cpu - ca->other_cpu, cb->runq_wait - ca->runq_wait,
                    gpu ? cb->gpu_shared - ca->gpu_shared : 0};
    double lim[3] = {TML_CMP_LOAD_OTHER_PP, TML_CMP_LOAD_RUNQ_PP, 1};
    for (int i = 0; i < 3; i++)
        if (fabs(dv[i]) >= lim[i]) {
            int s = dv[i] > 0 ? 1 : -1;
            dir = dir == 0 || dir == s ? s : 2;
        }
    if (dir == 1 || dir == -1) {
        /* a change against the load (the more loaded side was the faster)
         * is not the load's doing: at least that large a change is real */
        if (out->time_moved == -dir && !out->undecided) {
            snprintf(t, cap, "%s ran on the more loaded machine and was still faster.",
                     dir > 0 ? "B" : "A");
            return;
        }
        /* a change with the load, but larger than the load could make it:
         * the slower side's step time with all its wait for a core taken
         * out is still the other's times TML_CMP_BEYOND_WAIT */
        double ratio = 1 + (out->tested ? out->effect : out->time_change);
        double w = (dir > 0 ? cb->runq_wait : ca->runq_wait) / 100.0;
        double slow = dir > 0 ? ratio : 1 / ratio;
        if (!gpu && out->time_moved == dir && !out->undecided && w >= 0 && w < 1 &&
            slow * (1 - w) >= TML_CMP_BEYOND_WAIT) {
            snprintf(t, cap, "%s ran on the more loaded machine (it waited for a core %.0f%% "
                     "of its time), but was %.2fx as slow: more than the wait explains.",
                     dir > 0 ? "B" : "A", 100 * w, slow);
            return;
        }
    }
    if (dir) {
        out->load_differs = 1;
        snprintf(t, cap, "A and B ran on differently loaded machines: other processes used "
                 "%s vs %s of the cores, the training waited for a core %s vs %s of its "
                 "time%s.", oa, ob, qa, qb,
                 gpu ? (ca->gpu_shared ? "; A's GPU was shared, B's not"
                                       : "; B's GPU was shared, A's not") : "");
    } else if (na == 1 && nb == 1 && (loaded(ca) || loaded(cb)) &&
               !(out->time_moved &&
                 fabs(log1p(out->tested ? out->effect : out->time_change)) >= log(TML_CMP_LOADED_FACTOR))) {
        out->loaded_single = 1;
        snprintf(t, cap, "One run a side on a loaded machine (other processes used %s and %s "
                 "of the cores, the training waited for a core %s and %s of its time): its "
                 "run-to-run noise is unknown, and only a change of %.1fx or more decides.",
                 oa, ob, qa, qb, TML_CMP_LOADED_FACTOR);
    }
}

static void guard_rule(const tml_cmp_run *a, size_t na, const tml_cmp_run *b, size_t nb,
                       tml_cmp_result *out)
{
    int any = 0;
    for (size_t i = 0; i < na + nb; i++) {
        const tml_cmp_run *r = i < na ? &a[i] : &b[i - na];
        any |= r->work.guard[0] != '\0';
        if (strcmp(r->work.guard, a[0].work.guard) != 0)
            out->guard_differs = 1;
    }
    if (!any)
        out->guard_differs = 0;
    for (size_t i = 0; any && i < na + nb; i++)
        out->launch_incomplete |= (i < na ? &a[i] : &b[i - na])->work.launch_incomplete;
}

static const tml_cmp_run *first_unusable(const tml_cmp_run *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!usable(&r[i]))
            return &r[i];
    return &r[0];
}


/* Interleaved runs a side that would see a change of target (a log
 * ratio) at TML_CMP_ALPHA with 80% power, the runs' log centers spreading
 * by s = sqrt(var_a + var_b): the smallest n past have with
 * (t(1 - alpha/2) + t(0.8)) * s / sqrt(n) <= target at 2n - 2 degrees of
 * freedom, as the minimal detectable change is computed; at most 999. */
int tml__cmp_runs_needed(double s, double target, size_t have)
{
    for (int n = (int)(have < 1 ? 1 : have) + 1; n < 999; n++) {
        double df = 2.0 * n - 2;
        double k = tml__t_quantile(1 - TML_CMP_ALPHA / 2, df) + tml__t_quantile(0.8, df);
        if (!(target > 0) || k * s / sqrt((double)n) <= target)
            return n;
    }
    return 999;
}

/* The verdict and its Why / Next once step time (d: B - A with one run a
 * side) and memory are known: the guard and load rules first. */
static void settle(const tml_cmp_run *a, size_t na, const tml_cmp_run *b, size_t nb,
                   const tml_cmp_run *sa, const tml_cmp_run *sb, double d, tml_cmp_result *out)
{
    char t[400], load[320];
    time_sentence(out, d, t, sizeof(t));
    guard_rule(a, na, b, nb, out);
    load_rule(sa, sb, na, nb, out, load, sizeof(load));
    double mp = 100.0 * out->mem_change;
    const char *mdir = out->mem_change > 0 ? "increased" : "decreased";
    char *w = out->why;
    size_t cap = sizeof(out->why);
    static const char more[] = "Run 3 or more interleaved runs a side (baseline, candidate, "
                               "baseline, ...) on one machine, or on a quiet runner: traceml "
                               "compare --baseline A1 A2 A3 --candidate B1 B2 B3.";

    if (out->guard_differs) {
        out->verdict = TML_CMP_INCONCLUSIVE;
        snprintf(w, cap, "The declared workloads (traceml.yaml guard:) differ: the runs did "
                 "not run the same thing. %s", t);
        snprintf(out->next, sizeof(out->next), "Compare runs of one declared workload (the "
                 "same traceml.yaml guard: on both sides).");
        return;
    }
    if (out->launch_incomplete) {   /* TraceML 0.5.0's rule for guarded runs */
        out->verdict = TML_CMP_INCONCLUSIVE;
        snprintf(w, cap, "A guarded run's nodes did not all report a completed training "
                 "(its manifest's guard.training): it did not run its declared workload to "
                 "the end. %s", t);
        snprintf(out->next, sizeof(out->next), "Compare guarded runs whose every node ended "
                 "with exit code 0.");
        return;
    }
    if (out->load_differs || out->loaded_single) {
        out->verdict = TML_CMP_INCONCLUSIVE;
        out->time_moved = 0;
        snprintf(w, cap, "%s %s", load, t);
        snprintf(out->next, sizeof(out->next), "%s", more);
        return;
    }
    if (out->undecided && !out->mem_moved) {
        out->verdict = TML_CMP_INCONCLUSIVE;
        snprintf(w, cap, "%s", t);
        if (out->run_tested) {
            /* runs a side that would see the larger of the change and the gate */
            double s = sqrt(((isnan(out->run_noise_a) ? 0 : out->run_noise_a * out->run_noise_a) +
                             (isnan(out->run_noise_b) ? 0 : out->run_noise_b * out->run_noise_b)));
            double target = log(1 + fmax(fabs(out->effect), out->gates.step_time));
            snprintf(out->next, sizeof(out->next), "About %d interleaved runs a side, or a "
                     "quieter machine, would decide it.",
                     tml__cmp_runs_needed(s, target, na > nb ? na : nb));
        } else {
            snprintf(out->next, sizeof(out->next), "%s", more);
        }
        return;
    }

    int dir = out->time_moved ? out->time_moved : out->mem_moved;
    if (out->time_moved && out->mem_moved && out->time_moved != out->mem_moved)
        out->verdict = TML_CMP_MIXED;
    else if (dir)
        out->verdict = dir < 0 ? TML_CMP_IMPROVEMENT : TML_CMP_REGRESSION;
    else
        out->verdict = TML_CMP_EQUIVALENT;
    if (out->mem_moved && !out->time_moved)
        snprintf(w, cap, "Peak reserved memory %s by %.1f%%. %s", mdir, fabs(mp), t);
    else if (out->mem_moved)
        snprintf(w, cap, "%s Peak reserved memory %s by %.1f%%.", t, mdir, fabs(mp));
    else if (out->mem_compared)
        snprintf(w, cap, "%s Peak reserved memory %+.1f%%, within the %.0f%% gate.", t, mp,
                 100.0 * out->gates.memory);
    else
        snprintf(w, cap, "%s", t);
    if (load[0]) {   /* the load differed, against the change */
        size_t n = strlen(w);
        snprintf(w + n, cap - n, " %s", load);
    }
}

void tml__cmp_decide(const tml_cmp_run *a, const tml_cmp_run *b, const tml_cmp_gates *gates,
                     tml_cmp_result *out)
{
    tml__cmp_decide_n(a, 1, b, 1, gates, out);
}

void tml__cmp_decide_n(const tml_cmp_run *a, size_t na, const tml_cmp_run *b, size_t nb,
                       const tml_cmp_gates *gates, tml_cmp_result *out)
{
    memset(out, 0, sizeof(*out));
    if (gates)
        out->gates = *gates;
    else
        tml__cmp_gates_default(&out->gates);
    out->time_a_ms = out->time_b_ms = out->time_change = out->noise_ms = NAN;
    out->mem_change = out->mdc = out->run_noise_a = out->run_noise_b = out->t_df = NAN;
    out->p_value = out->effect = out->center_a_ms = out->center_b_ms = NAN;
    na = na > TML_CMP_MAX_RUNS ? TML_CMP_MAX_RUNS : na;
    nb = nb > TML_CMP_MAX_RUNS ? TML_CMP_MAX_RUNS : nb;
    out->runs_a = na;
    out->runs_b = nb;
    out->ra = a;
    out->rb = b;
    out->clock = -1;
    if (na == 0 || nb == 0) {
        out->verdict = TML_CMP_INCONCLUSIVE;
        snprintf(out->why, sizeof(out->why), "A side has no runs.");
        return;
    }
    tml_cmp_run sa, sb;
    tml__cmp_side(a, na, &sa);
    tml__cmp_side(b, nb, &sb);
    /* a clock every run has */
    for (int c = TML_CMP_GPU; c >= TML_CMP_CPU && out->clock < 0; c--) {
        int all = 1;
        for (size_t i = 0; i < na + nb; i++)
            all &= (i < na ? &a[i] : &b[i - na])->clock[c].valid;
        if (all)
            out->clock = c;
    }

    /* Memory is a secondary signal: compared when both runs have it. */
    double ma = sa.peak_reserved_bytes, mb = sb.peak_reserved_bytes;
    if (!isnan(ma) && !isnan(mb) && ma > 0) {
        out->mem_compared = 1;
        out->mem_change = (mb - ma) / ma;
        if (fabs(out->mem_change) >= out->gates.memory)
            out->mem_moved = out->mem_change > 0 ? 1 : -1;
    }

    /* Step time is the primary signal: without it there is no verdict. */
    const tml_cmp_run *ua = first_unusable(a, na), *ub = first_unusable(b, nb);
    if (out->clock < 0 || !usable(ua) || !usable(ub)) {
        inconclusive(ua, ub, out);
        return;
    }
    double d = 0;
    if (na == 1 && nb == 1) {
        if (!(a->clock[out->clock].step_ms > 0) || isnan(b->clock[out->clock].step_ms)) {
            out->verdict = TML_CMP_INCONCLUSIVE;
            snprintf(out->why, sizeof(out->why),
                     "A's step time is zero: no change can be measured.");
            return;
        }
        d = single_time(a, b, out);
    } else if (run_test(a, na, b, nb, out) < 0) {
        out->verdict = TML_CMP_INCONCLUSIVE;
        return;
    }

    settle(a, na, b, nb, &sa, &sb, d, out);
}


/* ---- the rows of the tables ------------------------------------------- */

typedef enum { R_DIAG, R_MS, R_NOISE, R_BYTES, R_PP, R_COUNT } row_kind;

typedef struct row {
    int section;
    const char *id;            /* JSON metric id */
    char name[48];             /* as printed */
    row_kind kind;
    double a, b;
    const char *sa, *sb;       /* R_DIAG */
    char own_a[48], own_b[48]; /* R_DIAG strings made for the row */
} row;

#define MAX_ROWS 40

static row *add_row(row *rows, size_t *n, int section, const char *id, const char *name,
                    row_kind kind, double a, double b)
{
    row *r = &rows[(*n)++];
    memset(r, 0, sizeof(*r));
    r->section = section;
    r->id = id;
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->kind = kind;
    r->a = a;
    r->b = b;
    return r;
}

static void add_diag(row *rows, size_t *n, int section, const char *id, const char *name,
                     const char *a, const char *b)
{
    row *r = add_row(rows, n, section, id, name, R_DIAG, NAN, NAN);
    r->sa = a;
    r->sb = b;
}

/* The tables' rows, in order: each section's diagnosis (R_DIAG), then its
 * figures, each a double of the run (or, of_clock, of the compared
 * clock's figures) at off. */
static const struct {
    int section;
    const char *id, *name;
    row_kind kind;
    int of_clock;
    size_t off;
} row_table[] = {
    {TML_CMP_SEC_STEP_TIME, "step_time_diagnosis", "Step time diagnosis", R_DIAG, 0, 0},
    {TML_CMP_SEC_STEP_TIME, "step_time_ms", "Step Time", R_MS, 1,
     offsetof(tml_cmp_clock, step_ms)},
    {TML_CMP_SEC_STEP_TIME, "input_wait_ms", "Input", R_MS, 1, offsetof(tml_cmp_clock, input_ms)},
    {TML_CMP_SEC_STEP_TIME, "h2d_ms", "H2D", R_MS, 1, offsetof(tml_cmp_clock, h2d_ms)},
    {TML_CMP_SEC_STEP_TIME, "compute_ms", "Compute", R_MS, 1,
     offsetof(tml_cmp_clock, compute_ms)},
    {TML_CMP_SEC_STEP_TIME, "residual_ms", "Residual", R_MS, 1,
     offsetof(tml_cmp_clock, residual_ms)},
    {TML_CMP_SEC_STEP_TIME, "noise_ms", "Step-to-step noise", R_NOISE, 1,
     offsetof(tml_cmp_clock, noise_ms)},
    {TML_CMP_SEC_STEP_MEMORY, "step_memory_diagnosis", "Step memory diagnosis", R_DIAG, 0, 0},
    {TML_CMP_SEC_STEP_MEMORY, "peak_reserved_bytes", "Peak reserved", R_BYTES, 0,
     offsetof(tml_cmp_run, peak_reserved_bytes)},
    {TML_CMP_SEC_STEP_MEMORY, "memory_skew_percent", "Memory skew", R_PP, 0,
     offsetof(tml_cmp_run, mem_skew_percent)},
    {TML_CMP_SEC_PROCESS, "process_diagnosis", "Process diagnosis", R_DIAG, 0, 0},
    {TML_CMP_SEC_PROCESS, "process_cpu_percent", "Process CPU avg", R_PP, 0,
     offsetof(tml_cmp_run, proc_cpu_percent)},
    {TML_CMP_SEC_PROCESS, "process_rss_bytes", "Process RSS avg", R_BYTES, 0,
     offsetof(tml_cmp_run, proc_rss_bytes)},
    {TML_CMP_SEC_SYSTEM, "system_diagnosis", "System diagnosis", R_DIAG, 0, 0},
    {TML_CMP_SEC_SYSTEM, "system_cpu_percent", "System CPU avg", R_PP, 0,
     offsetof(tml_cmp_run, sys_cpu_percent)},
    {TML_CMP_SEC_SYSTEM, "system_ram_used_bytes", "System RAM avg", R_BYTES, 0,
     offsetof(tml_cmp_run, sys_ram_used_bytes)},
    {TML_CMP_SEC_SYSTEM, "gpu_util_percent", "GPU util avg", R_PP, 0,
     offsetof(tml_cmp_run, gpu_util_percent)},
    {TML_CMP_SEC_SYSTEM, "gpu_memory_percent", "GPU memory avg", R_PP, 0,
     offsetof(tml_cmp_run, gpu_mem_percent)},
};

static double field(const void *base, size_t off)
{
    return *(const double *)(const void *)((const char *)base + off);
}

static size_t build_rows(const tml_cmp_run *a, const tml_cmp_run *b, const tml_cmp_result *res,
                         row *rows)
{
    size_t n = 0;
    int c = res->clock >= 0 ? res->clock : TML_CMP_CPU;
    const tml_cmp_clock *ka = &a->clock[c], *kb = &b->clock[c];
    char name[48];

    for (size_t i = 0; i < sizeof(row_table) / sizeof(row_table[0]); i++) {
        int sec = row_table[i].section;
        if (row_table[i].kind == R_DIAG) {
            add_diag(rows, &n, sec, row_table[i].id, row_table[i].name, a->diag[sec],
                     b->diag[sec]);
            continue;
        }
        const void *fa = a, *fb = b;
        if (row_table[i].of_clock) {
            fa = ka;
            fb = kb;
        }
        snprintf(name, sizeof(name), "%s", row_table[i].name);
        if (strcmp(row_table[i].id, "step_time_ms") == 0)   /* named after its clock */
            snprintf(name, sizeof(name), "%s Step Time", clock_name(c));
        add_row(rows, &n, sec, row_table[i].id, name, row_table[i].kind,
                field(fa, row_table[i].off), field(fb, row_table[i].off));
    }

    /* what ran (strings compared as they are) */
    add_diag(rows, &n, TML_CMP_SEC_WORKLOAD, "script", "Script", a->work.script, b->work.script);
    add_diag(rows, &n, TML_CMP_SEC_WORKLOAD, "args", "Arguments", a->work.args, b->work.args);
    row *ws = add_row(rows, &n, TML_CMP_SEC_WORKLOAD, "world_size", "World size", R_DIAG, NAN,
                      NAN);
    if (a->work.world_size >= 0)
        snprintf(ws->own_a, sizeof(ws->own_a), "%ld", a->work.world_size);
    if (b->work.world_size >= 0)
        snprintf(ws->own_b, sizeof(ws->own_b), "%ld", b->work.world_size);
    ws->sa = ws->own_a;
    ws->sb = ws->own_b;
    row *gd = add_row(rows, &n, TML_CMP_SEC_WORKLOAD, "guard", "Guard (traceml.yaml)", R_DIAG,
                      NAN, NAN);
    snprintf(gd->own_a, sizeof(gd->own_a), "%s", a->work.guard[0] ? "declared" : "none");
    snprintf(gd->own_b, sizeof(gd->own_b), "%s", b->work.guard[0] ? "declared" : "none");
    gd->sa = a->work.guard[0] ? a->work.guard : "none";
    gd->sb = b->work.guard[0] ? b->work.guard : "none";

    /* the machine each side shared (the top-level "contention") */
    static const struct { const char *id, *name; size_t off; } cont_rows[] = {
        {"other_cpu_percent", "Other processes CPU", offsetof(tml_cmp_run, cont.other_cpu)},
        {"runq_wait_percent", "Run-queue wait", offsetof(tml_cmp_run, cont.runq_wait)},
        {"training_cpu_percent", "Training CPU", offsetof(tml_cmp_run, cont.training_cpu)},
        {"host_cpu_percent", "Host CPU", offsetof(tml_cmp_run, cont.host_cpu)},
    };
    for (size_t i = 0; i < sizeof(cont_rows) / sizeof(cont_rows[0]); i++)
        add_row(rows, &n, TML_CMP_SEC_MACHINE, cont_rows[i].id, cont_rows[i].name, R_PP,
                field(a, cont_rows[i].off), field(b, cont_rows[i].off));
    add_row(rows, &n, TML_CMP_SEC_MACHINE, "cores", "Cores", R_COUNT, a->cont.cores,
            b->cont.cores);
    row *gs = add_row(rows, &n, TML_CMP_SEC_MACHINE, "gpu_shared", "GPU shared", R_DIAG, NAN,
                      NAN);
    snprintf(gs->own_a, sizeof(gs->own_a), "%s", a->cont.gpu_shared < 0 ? "" :
             a->cont.gpu_shared ? "yes" : "no");
    snprintf(gs->own_b, sizeof(gs->own_b), "%s", b->cont.gpu_shared < 0 ? "" :
             b->cont.gpu_shared ? "yes" : "no");
    gs->sa = gs->own_a;
    gs->sb = gs->own_b;
    return n;
}

/* ---- formatting ------------------------------------------------------- */


static void fmt_value(const row *r, double v, const char *s, char *out, size_t cap)
{
    if (isnan(v) && (r->kind == R_NOISE || r->kind == R_PP)) {
        snprintf(out, cap, "n/a");
        return;
    }
    switch (r->kind) {
    case R_DIAG:
        snprintf(out, cap, "%s", s && *s ? s : "n/a");
        break;
    case R_MS:
        tml__fmt_ms(v, out, cap);
        break;
    case R_NOISE:
        snprintf(out, cap, "+/-%.2f ms", v);
        break;
    case R_BYTES:
        tml__fmt_bytes(v, out, cap);
        break;
    case R_PP:
        snprintf(out, cap, "%.1f%%", v);
        break;
    case R_COUNT:
        if (isnan(v))
            snprintf(out, cap, "n/a");
        else
            snprintf(out, cap, "%.0f", v);
        break;
    }
}

static int diag_known(const char *s)
{
    return s && *s;
}

static void fmt_delta(const row *r, char *out, size_t cap)
{
    double d = r->b - r->a;
    char pct[32] = "";
    if (r->kind == R_DIAG) {
        if (!diag_known(r->sa) || !diag_known(r->sb))
            snprintf(out, cap, "n/a");
        else
            snprintf(out, cap, "%s", strcmp(r->sa, r->sb) == 0 ? "same" : "changed");
        return;
    }
    if (r->kind == R_NOISE) {
        snprintf(out, cap, "%s", "");
        return;
    }
    if (isnan(r->a) || isnan(r->b)) {
        snprintf(out, cap, "n/a");
        return;
    }
    if ((r->kind == R_MS || r->kind == R_BYTES) && r->a > 0)
        snprintf(pct, sizeof(pct), " (%+.1f%%)", 100.0 * d / r->a);
    if (r->kind == R_MS) {
        char v[32];
        if (d != 0 && fabs(d) < 0.1)
            snprintf(v, sizeof(v), "%+.2f ms", d);
        else
            snprintf(v, sizeof(v), "%+.1f ms", d);
        snprintf(out, cap, "%s%s", v, pct);
    } else if (r->kind == R_BYTES) {
        char v[32];
        tml__fmt_bytes(fabs(d), v, sizeof(v));
        snprintf(out, cap, "%s%s%s", d > 0 ? "+" : d < 0 ? "-" : "", v, pct);
    } else if (r->kind == R_COUNT) {
        snprintf(out, cap, "%+.0f", d);
    } else {
        snprintf(out, cap, "%+.1f pp", d);
    }
}

/* ---- the box ---------------------------------------------------------- */

static void border(tml_strbuf *sb)
{
    tml__sb_addc(sb, '+');
    for (int i = 0; i < CMP_WIDTH - 2; i++)
        tml__sb_addc(sb, '-');
    tml__sb_adds(sb, "+\n");
}

/* One line, cut to fit (callers wrap long text first). */
static void line(tml_strbuf *sb, const char *s)
{
    size_t inner = CMP_WIDTH - 4, w = 0, i = 0;
    tml__sb_adds(sb, "| ");
    for (; s[i] && w < inner; i++) {
        tml__sb_addc(sb, s[i]);
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            w++;
    }
    /* finish a UTF-8 sequence that was cut */
    while (s[i] && ((unsigned char)s[i] & 0xC0) == 0x80)
        tml__sb_addc(sb, s[i++]);
    for (; w < inner; w++)
        tml__sb_addc(sb, ' ');
    tml__sb_adds(sb, " |\n");
}

/* prefix + text wrapped at spaces; continuation lines indented. */
static void text_lines(tml_strbuf *sb, const char *prefix, const char *text)
{
    char buf[1400];
    size_t inner = CMP_WIDTH - 4, indent = strlen(prefix);
    snprintf(buf, sizeof(buf), "%s%s", prefix, text);
    const char *s = buf;
    size_t lead = 0;
    do {
        char l[256];
        size_t avail = inner - lead, take = strlen(s);
        if (take > avail) {
            take = avail;
            while (take > 0 && s[take] != ' ')
                take--;
            if (take == 0)
                take = avail;
        }
        memset(l, ' ', lead);
        memcpy(l + lead, s, take);
        l[lead + take] = '\0';
        line(sb, l);
        s += take;
        while (*s == ' ')
            s++;
        lead = indent < inner / 2 ? indent : 0;
    } while (*s);
}

static void table_line(tml_strbuf *sb, const char *c0, const char *c1, const char *c2,
                       const char *c3)
{
    char l[256];
    snprintf(l, sizeof(l), "%-21s %-15s %-15s %s", c0, c1, c2, c3);
    line(sb, l);
}

/* Whether a shown-only section has anything to show (older summaries
 * have neither workload nor contention). */
static int section_known(const row *rows, size_t n, int s)
{
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        if (r->section != s)
            continue;
        if (r->kind == R_DIAG ? (diag_known(r->sa) && strcmp(r->sa, "none") != 0) ||
                                (diag_known(r->sb) && strcmp(r->sb, "none") != 0)
                              : !isnan(r->a) || !isnan(r->b))
            return 1;
    }
    return 0;
}

/* A value cut to the table's column (the JSON has it whole). */
static void cut(char *v, size_t w)
{
    if (strlen(v) > w) {
        v[w - 1] = '~';
        v[w] = '\0';
    }
}

/* The runs of a side and their centers, one line each side. */
static void runs_lines(tml_strbuf *out, const char *side, const tml_cmp_run *runs, size_t n,
                       const double *ms, double noise)
{
    char l[1200], nz[48] = "";
    size_t used = 0;
    if (!isnan(noise))
        snprintf(nz, sizeof(nz), "; run-to-run noise +/-%.1f%%", 100.0 * noise);
    for (size_t i = 0; i < n && used + 32 < sizeof(l); i++)
        used += (size_t)snprintf(l + used, sizeof(l) - used, "%s%.2f", i ? ", " : "", ms[i]);
    snprintf(l + used, sizeof(l) - used, " ms%s", nz);
    char prefix[48];
    snprintf(prefix, sizeof(prefix), "%s (%zu run%s): ", side, n, n == 1 ? "" : "s");
    text_lines(out, prefix, l);
    (void)runs;
}

void tml__cmp_text(const tml_cmp_run *a, const tml_cmp_run *b, const tml_cmp_result *r,
                   tml_strbuf *out)
{
    static const char *const titles[TML_CMP_SEC_ALL] = {
        NULL, "Step Memory", "Process", "System", "Workload (what ran)",
        "Machine (what else ran: % of the host's cores)"
    };
    row rows[MAX_ROWS];
    size_t n = build_rows(a, b, r, rows);
    char l[512];

    border(out);
    line(out, "TraceML Compare");
    border(out);
    line(out, "");
    text_lines(out, "A: ", run_name(a, "A"));
    if (a->source[0])
        text_lines(out, "   ", a->source);
    text_lines(out, "B: ", run_name(b, "B"));
    if (b->source[0])
        text_lines(out, "   ", b->source);
    line(out, "Delta: B - A");
    snprintf(l, sizeof(l), "%s -> %s (%s)", a->primary[0] ? a->primary : "n/a",
             b->primary[0] ? b->primary : "n/a",
             !a->primary[0] || !b->primary[0] ? "n/a"
             : strcmp(a->primary, b->primary) == 0 ? "same" : "changed");
    text_lines(out, "Primary diagnosis: ", l);
    line(out, "");
    snprintf(l, sizeof(l), "Verdict: %s", tml__cmp_verdict_name(r->verdict));
    line(out, l);
    text_lines(out, "Why: ", r->why);
    if (r->next[0])
        text_lines(out, "Next: ", r->next);
    if (r->run_tested) {
        line(out, "");
        snprintf(l, sizeof(l), "Run medians (%s Step Time)", clock_name(r->clock));
        line(out, l);
        runs_lines(out, "A", r->ra, r->runs_a, r->run_a_ms, r->run_noise_a);
        runs_lines(out, "B", r->rb, r->runs_b, r->run_b_ms, r->run_noise_b);
    }

    for (int s = 0; s < TML_CMP_SEC_ALL; s++) {
        if (s >= TML_CMP_SEC_COUNT && !section_known(rows, n, s))
            continue;
        line(out, "");
        if (s == TML_CMP_SEC_STEP_TIME) {
            if (r->clock >= 0)
                snprintf(l, sizeof(l), "Step Time (%s comparison clock%s)", clock_name(r->clock),
                         r->runs_a > 1 || r->runs_b > 1 ? ", medians over the runs" : "");
            else
                snprintf(l, sizeof(l), "Step Time (no comparable clock)");
            line(out, l);
        } else {
            line(out, titles[s]);
        }
        table_line(out, "Metric", "A", "B", "Delta");
        for (size_t i = 0; i < n; i++) {
            if (rows[i].section != s)
                continue;
            char va[600], vb[600], dl[96];
            int own = strcmp(rows[i].id, "guard") == 0;
            const char *xa = own ? rows[i].own_a : rows[i].sa;
            const char *xb = own ? rows[i].own_b : rows[i].sb;
            if (strcmp(rows[i].id, "script") == 0) {   /* its file name; JSON: the path */
                xa = xa && strrchr(xa, '/') ? strrchr(xa, '/') + 1 : xa;
                xb = xb && strrchr(xb, '/') ? strrchr(xb, '/') + 1 : xb;
            }
            fmt_value(&rows[i], rows[i].a, xa, va, sizeof(va));
            fmt_value(&rows[i], rows[i].b, xb, vb, sizeof(vb));
            if (s == TML_CMP_SEC_WORKLOAD) {
                cut(va, 15);
                cut(vb, 15);
            }
            fmt_delta(&rows[i], dl, sizeof(dl));
            table_line(out, rows[i].name, va, vb, dl);
        }
    }
    if (r->guard_differs) {
        line(out, "");
        text_lines(out, "Guard A: ", a->work.guard[0] ? a->work.guard : "none");
        text_lines(out, "Guard B: ", b->work.guard[0] ? b->work.guard : "none");
    }
    border(out);
}

/* ---- JSON ------------------------------------------------------------- */

static void j_run(tml_strbuf *sb, const char *key, const tml_cmp_run *r)
{
    tml__sb_addf(sb, "  \"%s\": {\"run_name\": ", key);
    tml__json_add_str_or_null(sb, r->label);
    tml__sb_adds(sb, ", \"path\": ");
    tml__json_add_str_or_null(sb, r->path);
    tml__sb_adds(sb, ", \"source\": ");
    tml__json_add_str_or_null(sb, r->source);
    tml__sb_adds(sb, ", \"primary_diagnosis\": ");
    tml__json_add_str_or_null(sb, r->primary);
    tml__sb_addf(sb, ", \"window_steps\": %zu},\n", r->window_steps);
}

/* The figures both tests' JSON objects have: the sides' centers and the
 * effect; then the decision, closing the object. */
static void test_common(const tml_cmp_result *r, tml_strbuf *out)
{
    tml__json_add_num(out, r->center_a_ms, 3, 0);
    tml__sb_adds(out, ", \"median_b_ms\": ");
    tml__json_add_num(out, r->center_b_ms, 3, 0);
    tml__sb_adds(out, ", \"change_percent\": ");
    tml__json_add_num(out, 100.0 * r->effect, 2, 0);
}

static void test_verdict(const tml_cmp_result *r, tml_strbuf *out)
{
    tml__sb_addf(out, ", \"p_value\": %.3g, \"alpha\": %g, \"significant\": %s, "
                 "\"past_gate\": %s}", r->p_value, TML_CMP_ALPHA,
                 r->significant ? "true" : "false", r->past_gate ? "true" : "false");
}

/* "runs" and "test" of BASE.json. */
static void j_runs_and_test(tml_strbuf *out, const tml_cmp_result *r)
{
    for (int side = 0; side < 2; side++) {
        const tml_cmp_run *rr = side ? r->rb : r->ra;
        size_t nr = side ? r->runs_b : r->runs_a;
        tml__sb_addf(out, "%s\"%s\": [", side ? ", " : "", side ? "b" : "a");
        for (size_t i = 0; rr && i < nr; i++) {
            tml__sb_adds(out, i ? ", {\"run_name\": " : "{\"run_name\": ");
            tml__json_add_str_or_null(out, rr[i].label);
            tml__sb_adds(out, ", \"path\": ");
            tml__json_add_str_or_null(out, rr[i].path);
            tml__sb_adds(out, ", \"median_ms\": ");
            tml__json_add_num(out, r->run_tested ? (side ? r->run_b_ms[i] : r->run_a_ms[i])
                              : r->clock >= 0 ? rr[i].clock[r->clock].step_ms : NAN, 3, 0);
            tml__sb_addc(out, '}');
        }
        tml__sb_addc(out, ']');
    }
    tml__sb_adds(out, "},\n  \"test\": ");
    if (r->run_tested) {
        tml__sb_addf(out, "{\"method\": \"welch-t-log\", \"on\": \"run_medians\", "
                     "\"runs_a\": %zu, \"runs_b\": %zu, \"median_a_ms\": ", r->runs_a,
                     r->runs_b);
        test_common(r, out);
        tml__sb_adds(out, ", \"run_noise_a_percent\": ");
        tml__json_add_num(out, 100.0 * r->run_noise_a, 2, 0);
        tml__sb_adds(out, ", \"run_noise_b_percent\": ");
        tml__json_add_num(out, 100.0 * r->run_noise_b, 2, 0);
        tml__sb_adds(out, ", \"df\": ");
        tml__json_add_num(out, r->t_df, 2, 0);
        tml__sb_adds(out, ", \"mdc_percent\": ");
        tml__json_add_num(out, 100.0 * r->mdc, 2, 0);
        test_verdict(r, out);
    } else if (r->tested) {
        tml__sb_addf(out, "{\"method\": \"mann-whitney-u\", \"on\": \"step_time_blocks_ms\", "
                     "\"blocks_a\": %zu, \"blocks_b\": %zu, \"median_a_ms\": ", r->blocks_a,
                     r->blocks_b);
        test_common(r, out);
        test_verdict(r, out);
    } else {
        tml__sb_adds(out, "null");
    }
}

void tml__cmp_json(const tml_cmp_run *a, const tml_cmp_run *b, const tml_cmp_result *r,
                   const char *text, const char *generated_at, tml_strbuf *out)
{
    static const char *const sec_key[TML_CMP_SEC_ALL] = {
        "step_time", "step_memory", "process", "system", "workload", "machine"
    };
    row rows[MAX_ROWS];
    size_t n = build_rows(a, b, r, rows);

    tml__sb_adds(out, "{\n  \"schema_version\": 1,\n  \"kind\": \"traceml_compare\",\n");
    tml__sb_adds(out, "  \"generated_at\": ");
    tml__json_add_str_or_null(out, generated_at);
    tml__sb_addf(out, ",\n  \"traceml_version\": \"%s\",\n", TML_VERSION_STRING);
    j_run(out, "a", a);
    j_run(out, "b", b);
    tml__sb_addf(out, "  \"verdict\": \"%s\",\n  \"why\": ", tml__cmp_verdict_name(r->verdict));
    tml__json_add_str_or_null(out, r->why);
    tml__sb_adds(out, ",\n  \"clock\": ");
    tml__json_add_str_or_null(out, r->clock < 0 ? NULL : r->clock == TML_CMP_GPU ? "gpu" : "cpu");
    tml__sb_adds(out, ",\n  \"gates\": {\"step_time_percent\": ");
    tml__json_add_num(out, 100.0 * r->gates.step_time, 2, 0);
    tml__sb_adds(out, ", \"peak_reserved_percent\": ");
    tml__json_add_num(out, 100.0 * r->gates.memory, 2, 0);
    tml__sb_adds(out, "},\n  \"step_time_a_ms\": ");
    tml__json_add_num(out, r->time_a_ms, 3, 0);
    tml__sb_adds(out, ",\n  \"step_time_b_ms\": ");
    tml__json_add_num(out, r->time_b_ms, 3, 0);
    tml__sb_adds(out, ",\n  \"step_time_change_percent\": ");
    tml__json_add_num(out, 100.0 * r->time_change, 2, 0);
    tml__sb_adds(out, ",\n  \"noise_ms\": ");
    tml__json_add_num(out, r->noise_ms, 3, 0);
    tml__sb_addf(out, ",\n  \"within_noise\": %s,\n  \"next\": ",
                 r->within_noise ? "true" : "false");
    tml__json_add_str_or_null(out, r->next);
    tml__sb_addf(out, ",\n  \"contention_differs\": %s, \"loaded_single_run\": %s, "
                 "\"guard_differs\": %s, \"launch_incomplete\": %s,\n  \"runs\": {",
                 r->load_differs ? "true" : "false", r->loaded_single ? "true" : "false",
                 r->guard_differs ? "true" : "false", r->launch_incomplete ? "true" : "false");
    j_runs_and_test(out, r);
    tml__sb_adds(out, ",\n  \"peak_reserved_change_percent\": ");
    tml__json_add_num(out, r->mem_compared ? 100.0 * r->mem_change : NAN, 2, 0);
    tml__sb_adds(out, ",\n  \"primary_diagnosis\": {\"a\": ");
    tml__json_add_str_or_null(out, a->primary);
    tml__sb_adds(out, ", \"b\": ");
    tml__json_add_str_or_null(out, b->primary);
    tml__sb_addf(out, ", \"changed\": %s},\n  \"sections\": {",
                 a->primary[0] && b->primary[0] && strcmp(a->primary, b->primary) != 0
                 ? "true" : "false");
    for (int s = 0; s < TML_CMP_SEC_ALL; s++) {
        tml__sb_addf(out, "%s\n    \"%s\": [", s ? "," : "", sec_key[s]);
        int first = 1;
        for (size_t i = 0; i < n; i++) {
            const row *rw = &rows[i];
            if (rw->section != s)
                continue;
            tml__sb_addf(out, "%s\n      {\"metric\": \"%s\", \"label\": ", first ? "" : ",",
                         rw->id);
            first = 0;
            tml__json_add_str_or_null(out, rw->name);
            if (rw->kind == R_DIAG) {
                tml__sb_adds(out, ", \"a\": ");
                tml__json_add_str_or_null(out, rw->sa);
                tml__sb_adds(out, ", \"b\": ");
                tml__json_add_str_or_null(out, rw->sb);
                tml__sb_addf(out, ", \"changed\": %s}",
                             diag_known(rw->sa) && diag_known(rw->sb) &&
                             strcmp(rw->sa, rw->sb) != 0 ? "true" : "false");
                continue;
            }
            int dec = rw->kind == R_BYTES || rw->kind == R_COUNT ? 0 : rw->kind == R_PP ? 2 : 3;
            tml__sb_adds(out, ", \"a\": ");
            tml__json_add_num(out, rw->a, dec, 0);
            tml__sb_adds(out, ", \"b\": ");
            tml__json_add_num(out, rw->b, dec, 0);
            tml__sb_adds(out, ", \"delta\": ");
            tml__json_add_num(out, rw->kind == R_NOISE ? NAN : rw->b - rw->a, dec, 0);
            tml__sb_adds(out, ", \"delta_percent\": ");
            tml__json_add_num(out, (rw->kind == R_MS || rw->kind == R_BYTES) && rw->a > 0
                       ? 100.0 * (rw->b - rw->a) / rw->a : NAN, 2, 0);
            tml__sb_addc(out, '}');
        }
        tml__sb_adds(out, "\n    ]");
    }
    tml__sb_adds(out, "\n  },\n  \"text\": ");
    tml__json_add_str_or_null(out, text);
    tml__sb_adds(out, "\n}\n");
}
