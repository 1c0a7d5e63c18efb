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
    if (rc == 0)
        snprintf(r->source, sizeof(r->source), "%s", source);
    return rc;
}

/* ---- the verdict ------------------------------------------------------ */

static const char *run_name(const tml_cmp_run *r, const char *which)
{
    return r->label[0] ? r->label : which;
}

static int pick_clock(const tml_cmp_run *a, const tml_cmp_run *b)
{
    if (a->clock[TML_CMP_GPU].valid && b->clock[TML_CMP_GPU].valid)
        return TML_CMP_GPU;
    if (a->clock[TML_CMP_CPU].valid && b->clock[TML_CMP_CPU].valid)
        return TML_CMP_CPU;
    return -1;
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

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

double tml__mann_whitney_p(const double *a, size_t n, const double *b, size_t m)
{
    typedef struct { double v; int from_a; } obs;
    size_t total = n + m;
    if (n == 0 || m == 0)
        return NAN;
    obs *x = malloc(total * sizeof(*x));
    if (!x)
        return NAN;
    for (size_t i = 0; i < total; i++) {
        x[i].v = i < n ? a[i] : b[i - n];
        x[i].from_a = i < n;
    }
    qsort(x, total, sizeof(*x), cmp_dbl);   /* the value comes first */
    double rank_a = 0, ties = 0;
    for (size_t i = 0; i < total;) {
        size_t j = i;
        while (j < total && x[j].v == x[i].v)
            j++;
        double rank = (double)(i + 1 + j) / 2.0, t = (double)(j - i);
        for (size_t k = i; k < j; k++)
            rank_a += x[k].from_a ? rank : 0;
        ties += t * t * t - t;
        i = j;
    }
    free(x);
    double nn = (double)n, mm = (double)m, tt = (double)total;
    double u = rank_a - nn * (nn + 1) / 2, mu = nn * mm / 2;
    double var = nn * mm / 12.0 * ((tt + 1) - ties / (tt * (tt - 1)));
    if (!(var > 0))
        return 1.0;
    double z = (fabs(u - mu) - 0.5) / sqrt(var);
    return erfc((z > 0 ? z : 0) / sqrt(2.0));
}

static double median_copy(const double *v, size_t n)
{
    double t[TML_CMP_BLOCKS];
    memcpy(t, v, n * sizeof(*t));
    qsort(t, n, sizeof(*t), cmp_dbl);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
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

/* What happened to step time, in one true sentence: which of significance
 * and the gate held. d is B - A of the window averages. */
static void time_sentence(const tml_cmp_result *r, double d, char *t, size_t cap)
{
    const char *clk = clock_name(r->clock);
    double gate = 100.0 * r->gates.step_time;
    if (!r->tested) {
        double tp = 100.0 * r->time_change;
        if (r->time_moved)
            snprintf(t, cap, "%s Step Time %s by %.1f%%.", clk,
                     d > 0 ? "increased" : "decreased", fabs(tp));
        else if (r->within_noise)
            snprintf(t, cap, "%s Step Time changed by %+.1f%% (%+.2f ms), less than the runs' "
                     "step-to-step noise (+/-%.2f ms).", clk, tp, d, r->noise_ms);
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

void tml__cmp_decide(const tml_cmp_run *a, const tml_cmp_run *b, const tml_cmp_gates *gates,
                     tml_cmp_result *out)
{
    memset(out, 0, sizeof(*out));
    if (gates)
        out->gates = *gates;
    else
        tml__cmp_gates_default(&out->gates);
    out->time_a_ms = out->time_b_ms = out->time_change = out->noise_ms = NAN;
    out->mem_change = NAN;
    out->clock = pick_clock(a, b);

    /* Memory is a secondary signal: compared when both runs have it. */
    double ma = a->peak_reserved_bytes, mb = b->peak_reserved_bytes;
    if (!isnan(ma) && !isnan(mb) && ma > 0) {
        out->mem_compared = 1;
        out->mem_change = (mb - ma) / ma;
        if (fabs(out->mem_change) >= out->gates.memory)
            out->mem_moved = out->mem_change > 0 ? 1 : -1;
    }

    /* Step time is the primary signal: without it there is no verdict. */
    if (out->clock < 0 || !usable(a) || !usable(b)) {
        inconclusive(a, b, out);
        return;
    }
    if (!(a->clock[out->clock].step_ms > 0) || isnan(b->clock[out->clock].step_ms)) {
        out->verdict = TML_CMP_INCONCLUSIVE;
        snprintf(out->why, sizeof(out->why), "A's step time is zero: no change can be measured.");
        return;
    }
    const tml_cmp_clock *ka = &a->clock[out->clock], *kb = &b->clock[out->clock];
    out->time_a_ms = ka->step_ms;
    out->time_b_ms = kb->step_ms;
    double d = kb->step_ms - ka->step_ms;
    out->time_change = d / ka->step_ms;
    if (!isnan(ka->noise_ms) || !isnan(kb->noise_ms))
        out->noise_ms = fmax(isnan(ka->noise_ms) ? 0 : ka->noise_ms,
                             isnan(kb->noise_ms) ? 0 : kb->noise_ms);
    if (!significance_test(ka, kb, out) && fabs(out->time_change) >= out->gates.step_time) {
        if (!isnan(out->noise_ms) && fabs(d) < out->noise_ms)
            out->within_noise = 1;
        else
            out->time_moved = d > 0 ? 1 : -1;
    }

    char t[320];
    time_sentence(out, d, t, sizeof(t));
    double mp = 100.0 * out->mem_change;
    const char *mdir = out->mem_change > 0 ? "increased" : "decreased";
    char *w = out->why;
    size_t cap = sizeof(out->why);

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
}

/* ---- the rows of the tables ------------------------------------------- */

typedef enum { R_DIAG, R_MS, R_NOISE, R_BYTES, R_PP } row_kind;

typedef struct row {
    int section;
    const char *id;            /* JSON metric id */
    char name[48];             /* as printed */
    row_kind kind;
    double a, b;
    const char *sa, *sb;       /* R_DIAG */
} row;

#define MAX_ROWS 24

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
    char buf[1024];
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

void tml__cmp_text(const tml_cmp_run *a, const tml_cmp_run *b, const tml_cmp_result *r,
                   tml_strbuf *out)
{
    static const char *const titles[TML_CMP_SEC_COUNT] = {
        NULL, "Step Memory", "Process", "System"
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

    for (int s = 0; s < TML_CMP_SEC_COUNT; s++) {
        line(out, "");
        if (s == TML_CMP_SEC_STEP_TIME) {
            if (r->clock >= 0)
                snprintf(l, sizeof(l), "Step Time (%s comparison clock)", clock_name(r->clock));
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
            char va[64], vb[64], dl[96];
            fmt_value(&rows[i], rows[i].a, rows[i].sa, va, sizeof(va));
            fmt_value(&rows[i], rows[i].b, rows[i].sb, vb, sizeof(vb));
            fmt_delta(&rows[i], dl, sizeof(dl));
            table_line(out, rows[i].name, va, vb, dl);
        }
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

void tml__cmp_json(const tml_cmp_run *a, const tml_cmp_run *b, const tml_cmp_result *r,
                   const char *text, const char *generated_at, tml_strbuf *out)
{
    static const char *const sec_key[TML_CMP_SEC_COUNT] = {
        "step_time", "step_memory", "process", "system"
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
    tml__sb_addf(out, ",\n  \"within_noise\": %s,\n  \"test\": ",
                 r->within_noise ? "true" : "false");
    if (r->tested) {
        tml__sb_addf(out, "{\"method\": \"mann-whitney-u\", \"on\": \"step_time_blocks_ms\", "
                     "\"blocks_a\": %zu, \"blocks_b\": %zu, \"median_a_ms\": ", r->blocks_a,
                     r->blocks_b);
        tml__json_add_num(out, r->center_a_ms, 3, 0);
        tml__sb_adds(out, ", \"median_b_ms\": ");
        tml__json_add_num(out, r->center_b_ms, 3, 0);
        tml__sb_adds(out, ", \"change_percent\": ");
        tml__json_add_num(out, 100.0 * r->effect, 2, 0);
        tml__sb_addf(out, ", \"p_value\": %.3g, \"alpha\": %g, \"significant\": %s, "
                     "\"past_gate\": %s}", r->p_value, TML_CMP_ALPHA,
                     r->significant ? "true" : "false", r->past_gate ? "true" : "false");
    } else {
        tml__sb_adds(out, "null");
    }
    tml__sb_adds(out, ",\n  \"peak_reserved_change_percent\": ");
    tml__json_add_num(out, r->mem_compared ? 100.0 * r->mem_change : NAN, 2, 0);
    tml__sb_adds(out, ",\n  \"primary_diagnosis\": {\"a\": ");
    tml__json_add_str_or_null(out, a->primary);
    tml__sb_adds(out, ", \"b\": ");
    tml__json_add_str_or_null(out, b->primary);
    tml__sb_addf(out, ", \"changed\": %s},\n  \"sections\": {",
                 a->primary[0] && b->primary[0] && strcmp(a->primary, b->primary) != 0
                 ? "true" : "false");
    for (int s = 0; s < TML_CMP_SEC_COUNT; s++) {
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
            int dec = rw->kind == R_BYTES ? 0 : rw->kind == R_PP ? 2 : 3;
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
