/*
 * compare.c - the comparison judge/compare.c decided, printed: the
 * "TraceML Compare" box (80 columns) and its JSON (docs/compare.md).
 *
 * The tables of the box and of the JSON come from one list of rows built
 * once, so the two never disagree.
 */
#include "report/compare.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/fmt.h"
#include "base/jsonw.h"
#include "traceml/traceml.h"

#define CMP_WIDTH 80   /* fits an 80-column terminal */

/* ---- the rows of the tables ------------------------------------------- */

typedef enum { R_DIAG, R_MS, R_NOISE, R_BYTES, R_PP, R_COUNT, R_RATE } row_kind;

typedef struct row {
    int section;
    const char *id;            /* JSON metric id */
    char name[48];             /* as printed */
    row_kind kind;
    double a, b;
    const char *sa, *sb;       /* R_DIAG */
    char own_a[48], own_b[48]; /* R_DIAG strings made for the row */
} row;

#define MAX_ROWS 48

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
            snprintf(name, sizeof(name), "%s Step Time", tml__cmp_clock_name(c));
        add_row(rows, &n, sec, row_table[i].id, name, row_table[i].kind,
                field(fa, row_table[i].off), field(fb, row_table[i].off));
    }

    /* throughput, when either run counted it (docs/compare.md) */
    if (!isnan(a->samples_per_s) || !isnan(b->samples_per_s))
        add_row(rows, &n, TML_CMP_SEC_STEP_TIME, "samples_per_s", "Samples/s", R_RATE,
                a->samples_per_s, b->samples_per_s);
    if (!isnan(a->tokens_per_s) || !isnan(b->tokens_per_s))
        add_row(rows, &n, TML_CMP_SEC_STEP_TIME, "tokens_per_s", "Tokens/s", R_RATE,
                a->tokens_per_s, b->tokens_per_s);
    if (!isnan(a->flops_per_s) || !isnan(b->flops_per_s))
        add_row(rows, &n, TML_CMP_SEC_STEP_TIME, "achieved_flops_per_s", "FLOP/s achieved",
                R_RATE, a->flops_per_s, b->flops_per_s);
    if (!isnan(a->mfu_percent) || !isnan(b->mfu_percent))
        add_row(rows, &n, TML_CMP_SEC_STEP_TIME, "mfu_percent", "MFU", R_PP, a->mfu_percent,
                b->mfu_percent);

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
    case R_RATE:
        tml__fmt_si(v, "", "", out, cap);
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
    if (r->kind == R_RATE) {
        snprintf(out, cap, r->a > 0 ? "%+.1f%%" : "n/a", 100.0 * d / r->a);
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

/* ms per profiled step, or "n/a" (not among that run's heaviest 8). */
static void dd_ms(double v, char *out, size_t cap)
{
    if (isnan(v))
        snprintf(out, cap, "n/a");
    else
        snprintf(out, cap, "%.2f ms", v);
}

static void dd_table(tml_strbuf *out, const char *first, const tml_cmp_dd_change *v, size_t n)
{
    table_line(out, first, "A", "B", "Delta");
    for (size_t i = 0; i < n; i++) {
        char va[32], vb[32], dl[32], name[64];
        dd_ms(v[i].a_ms, va, sizeof(va));
        dd_ms(v[i].b_ms, vb, sizeof(vb));
        if (isnan(v[i].delta_ms))
            snprintf(dl, sizeof(dl), "n/a");
        else
            snprintf(dl, sizeof(dl), "%+.2f ms", v[i].delta_ms);
        snprintf(name, sizeof(name), "%s", v[i].name[0] ? v[i].name : "(outside modules)");
        cut(name, 20);
        table_line(out, name, va, vb, dl);
    }
}

/* Below the phase: the modules and operators whose time per profiled
 * step changed most, when both runs have a deep-dive window. */
static void dd_lines(tml_strbuf *out, const tml_cmp_dd_diff *d)
{
    if (!d->compared)
        return;
    line(out, "");
    line(out, "Below the phase (deep dive: self time per profiled step, changed most)");
    if (!d->nmod && !d->nop) {
        line(out, "No module or operator changed.");
        return;
    }
    dd_table(out, "Module", d->mod, d->nmod);
    dd_table(out, "Operator", d->op, d->nop);
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
    text_lines(out, "A: ", tml__cmp_run_name(a, "A"));
    if (a->source[0])
        text_lines(out, "   ", a->source);
    text_lines(out, "B: ", tml__cmp_run_name(b, "B"));
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
        snprintf(l, sizeof(l), "Run medians (%s Step Time)", tml__cmp_clock_name(r->clock));
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
                snprintf(l, sizeof(l), "Step Time (%s comparison clock%s)", tml__cmp_clock_name(r->clock),
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
    dd_lines(out, &r->dd);
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

static void j_dd_list(tml_strbuf *out, const char *key, const tml_cmp_dd_change *v, size_t n)
{
    tml__sb_addf(out, "\"%s\": [", key);
    for (size_t i = 0; i < n; i++) {
        tml__sb_adds(out, i ? ", {\"name\": " : "{\"name\": ");
        tml__json_add_str_or_null(out, v[i].name);
        tml__sb_adds(out, ", \"a_ms\": ");
        tml__json_add_num(out, v[i].a_ms, 3, 0);
        tml__sb_adds(out, ", \"b_ms\": ");
        tml__json_add_num(out, v[i].b_ms, 3, 0);
        tml__sb_adds(out, ", \"delta_ms\": ");
        tml__json_add_num(out, v[i].delta_ms, 3, 0);
        tml__sb_addc(out, '}');
    }
    tml__sb_addc(out, ']');
}

/* "deep_dive": below the phase, null unless both runs have a window. */
static void j_deep_dive(tml_strbuf *out, const tml_cmp_dd_diff *d)
{
    if (!d->compared) {
        tml__sb_adds(out, "null");
        return;
    }
    tml__sb_adds(out, "{");
    j_dd_list(out, "modules", d->mod, d->nmod);
    tml__sb_adds(out, ", ");
    j_dd_list(out, "operators", d->op, d->nop);
    tml__sb_adds(out, "}");
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
            int rel = rw->kind == R_MS || rw->kind == R_BYTES || rw->kind == R_RATE;
            tml__json_add_num(out, rel && rw->a > 0 ? 100.0 * (rw->b - rw->a) / rw->a : NAN, 2, 0);
            tml__sb_addc(out, '}');
        }
        tml__sb_adds(out, "\n    ]");
    }
    tml__sb_adds(out, "\n  },\n  \"deep_dive\": ");
    j_deep_dive(out, &r->dd);
    tml__sb_adds(out, ",\n  \"text\": ");
    tml__json_add_str_or_null(out, text);
    tml__sb_adds(out, "\n}\n");
}

