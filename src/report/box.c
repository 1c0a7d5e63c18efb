/*
 * box.c - the boxed run summary, as the brief shows it.
 *
 * The box is what users read first and paste into issues, so its shape is
 * fixed: borders of '+', '-' and '|', the title and header line, the
 * Verdict / Why / Next block, then two rows of side-by-side panels joined
 * by "||" (STEP TIMING | STEP MEMORY, SYSTEM METRICS | PROCESS METRICS) and
 * the path of the full evidence.
 *
 * Width is counted in display columns, one per code point: the tree and
 * arrow characters (├ │ └ ─ ◀ ·) are multi-byte in UTF-8 but one column
 * on a terminal, so padding by bytes would break the right border. Every
 * line of the box has exactly the requested width; text that does not fit
 * is wrapped at spaces (continuation lines indented), never cut. Below
 * TML_REPORT_STACK_BELOW columns the two panels of a row are printed one
 * under the other instead of side by side.
 *
 * Numbers: milliseconds with one decimal, integer percentages ("<1%" for a
 * non-zero share that rounds to 0), "n/a" for anything missing.
 */
#include "report/model.h"
#include "gpu/peak.h"
#include "diag/window.h"
#include "base/fmt.h"
#include "base/utf8.h"
#include "base/env.h"

#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_BYTES 640
#define PANEL_LINES 48

typedef struct panel {
    char line[PANEL_LINES][LINE_MAX_BYTES];
    int n;
} panel;

/* Appends s to dst (cap bytes), padded with spaces to `width` columns,
 * right-aligned when `right`. */
static void cell(char *dst, size_t cap, const char *s, size_t width, int right)
{
    size_t len = strlen(dst), w = tml__utf8_width(s), pad = w < width ? width - w : 0;
    size_t slen = strlen(s);

    if (right)
        for (; pad && len + 1 < cap; pad--)
            dst[len++] = ' ';
    if (len + slen >= cap)
        slen = cap - len - 1;
    memcpy(dst + len, s, slen);
    len += slen;
    for (; pad && len + 1 < cap; pad--)
        dst[len++] = ' ';
    dst[len] = '\0';
}

static char *padd(panel *p)
{
    if (p->n >= PANEL_LINES)
        return p->line[PANEL_LINES - 1];
    p->line[p->n][0] = '\0';
    return p->line[p->n++];
}

static void padd_text(panel *p, const char *s)
{
    char *l = padd(p);
    snprintf(l, LINE_MAX_BYTES, "%s", s);
}

/* Durations are ns here; base/fmt.h prints them. */
static void fmt_ms(double ns, char *out, size_t cap)
{
    tml__fmt_ms(ns / 1e6, out, cap);
}

/* part's share of whole; empty when part is missing, n/a without a whole. */
static void fmt_pct(double part, double whole, char *out, size_t cap)
{
    if (isnan(part) || isnan(whole) || !(whole > 0)) {
        snprintf(out, cap, "%s", isnan(part) ? "" : "n/a");
        return;
    }
    tml__fmt_pct(100.0 * part / whole, out, cap);
}


static void fmt_rank(const tml_rank_window *r, char *out, size_t cap)
{
    snprintf(out, cap, "R%d/N%d", (int)r->rank, (int)r->node);
}

/* ---- the box's lines ------------------------------------------------ */

static void border(tml_strbuf *sb, int width)
{
    tml__sb_addc(sb, '+');
    for (int i = 0; i < width - 2; i++)
        tml__sb_addc(sb, '-');
    tml__sb_adds(sb, "+\n");
}

/* "| s<pad> |" with s exactly fitting (callers wrap first). */
static void row(tml_strbuf *sb, int width, const char *s)
{
    char l[LINE_MAX_BYTES * 2] = "";
    cell(l, sizeof(l), s, (size_t)width - 4, 0);
    tml__sb_adds(sb, "| ");
    tml__sb_adds(sb, l);
    tml__sb_adds(sb, " |\n");
}

/* Byte offset in s after `cols` code points. */
static size_t byte_at_col(const char *s, size_t cols)
{
    size_t i = 0, c = 0;
    while (s[i]) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (c == cols)
                break;
            c++;
        }
        i++;
    }
    return i;
}

/*
 * Splits text into lines of at most `width` columns at spaces; a word
 * longer than a line is split hard. Continuation lines start with `indent`
 * spaces. Calls emit(ctx, line) for each.
 */
typedef void (*emit_fn)(void *ctx, const char *line);

static void wrap(const char *text, size_t width, size_t indent, emit_fn emit, void *ctx)
{
    char line[LINE_MAX_BYTES * 2];
    const char *s = text;
    size_t lead = 0;

    if (indent >= width)
        indent = 0;
    do {
        size_t avail = width - lead;
        size_t w = tml__utf8_width(s);
        size_t take;
        if (w <= avail) {
            take = strlen(s);
        } else {
            size_t limit = byte_at_col(s, avail);
            take = limit;
            while (take > 0 && s[take] != ' ')
                take--;
            if (take == 0)
                take = limit;   /* one long word: split it */
        }
        if (take >= sizeof(line) - lead - 1)
            take = sizeof(line) - lead - 1;
        memset(line, ' ', lead);
        memcpy(line + lead, s, take);
        line[lead + take] = '\0';
        size_t end = lead + take;
        while (end > lead && line[end - 1] == ' ')
            line[--end] = '\0';
        emit(ctx, line);
        s += take;
        while (*s == ' ')
            s++;
        lead = indent;
    } while (*s);
}

typedef struct row_ctx {
    tml_strbuf *sb;
    int width;
} row_ctx;

static void emit_row(void *ctx, const char *line)
{
    row_ctx *c = ctx;
    row(c->sb, c->width, line);
}

static void text_row(tml_strbuf *sb, int width, const char *prefix, const char *text)
{
    char l[LINE_MAX_BYTES * 2];
    row_ctx c = { sb, width };
    snprintf(l, sizeof(l), "%s%s", prefix, text);
    wrap(l, (size_t)width - 4, strlen(prefix), emit_row, &c);
}

typedef struct panel_ctx {
    panel *p;
} panel_ctx;

static void emit_panel(void *ctx, const char *line)
{
    panel_ctx *c = ctx;
    padd_text(c->p, line);
}

/* Re-flows every line of `in` to `width` columns into `out`. */
static void relayout(const panel *in, size_t width, panel *out)
{
    panel_ctx c = { out };
    out->n = 0;
    for (int i = 0; i < in->n; i++) {
        if (in->line[i][0] == '\0')
            padd_text(out, "");
        else
            wrap(in->line[i], width, 2, emit_panel, &c);
    }
}

/* The panels are some tens of KiB: on the heap, not on a thread's stack. */
typedef struct panels_mem {
    panel left, right, scratch_l, scratch_r;
} panels_mem;

/* A row of two panels, side by side or stacked. */
static void panels(tml_strbuf *sb, int width, panels_mem *pm)
{
    const panel *left = &pm->left, *right = &pm->right;
    panel *sl = &pm->scratch_l, *sr = &pm->scratch_r;

    size_t inner = (size_t)width - 4;

    if (width < TML_REPORT_STACK_BELOW) {
        relayout(left, inner, sl);
        for (int i = 0; i < sl->n; i++)
            row(sb, width, sl->line[i]);
        row(sb, width, "");
        relayout(right, inner, sr);
        for (int i = 0; i < sr->n; i++)
            row(sb, width, sr->line[i]);
        return;
    }
    size_t lw = (inner - 4) / 2, rw = inner - 4 - lw;
    relayout(left, lw, sl);
    relayout(right, rw, sr);
    int n = sl->n > sr->n ? sl->n : sr->n;
    for (int i = 0; i < n; i++) {
        char l[LINE_MAX_BYTES * 3] = "";
        cell(l, sizeof(l), i < sl->n ? sl->line[i] : "", lw, 0);
        cell(l, sizeof(l), " || ", 4, 0);
        cell(l, sizeof(l), i < sr->n ? sr->line[i] : "", rw, 0);
        row(sb, width, l);
    }
}

/* ---- panels --------------------------------------------------------- */

#define NAME_W 22
#define VAL_W 10
#define PCT_W 6

static void timing_line(panel *p, const char *name, double ns, double step_ns, int cause)
{
    char v[32], pc[16];
    char *l = padd(p);
    fmt_ms(ns, v, sizeof(v));
    fmt_pct(ns, step_ns, pc, sizeof(pc));
    cell(l, LINE_MAX_BYTES, name, NAME_W, 0);
    cell(l, LINE_MAX_BYTES, v, VAL_W, 1);
    cell(l, LINE_MAX_BYTES, pc, PCT_W, 1);
    if (cause)
        cell(l, LINE_MAX_BYTES, "  ◀ cause", 0, 0);
    /* no trailing spaces: the panel pads */
    size_t e = strlen(l);
    while (e && l[e - 1] == ' ')
        l[--e] = '\0';
}

static const char *clock_name(const tml_report_model *m)
{
    return m->win.clock == TML_CLOCK_GPU ? "GPU Clock" : "CPU Clock";
}

/* Across ranks: the straggler a straggler verdict names, else the slowest
 * rank against the median one (SPEC 3.3). */
static void rank_skew_line(const tml_report_model *m, panel *p)
{
    const tml_window *w = &m->win;
    char t[LINE_MAX_BYTES], rk[32], v[32];
    int culprit = tml__report_straggler(m);
    if (culprit >= 0) {
        fmt_rank(&w->ranks[culprit], rk, sizeof(rk));
        snprintf(t, sizeof(t), "Straggler: %s · peers wait %.1f ms per step for it", rk,
                 m->verdict.straggler.cost_ns / 1e6);
        padd_text(p, t);
        return;
    }
    if (w->worst_rank < 0 || isnan(w->skew)) {
        padd_text(p, "Slowest rank: n/a");
        return;
    }
    fmt_rank(&w->ranks[w->worst_rank], rk, sizeof(rk));
    fmt_ms(w->ranks[w->worst_rank].avg_ns[TML_M_STEP], v, sizeof(v));
    snprintf(t, sizeof(t), "Slowest rank: %s %s · skew +%.0f%% vs median", rk, v,
             w->skew * 100.0);
    padd_text(p, t);
}

/* Communication beside the breakdown: in flight (overlapped or not), the
 * bytes and the bandwidth they imply. */
static void comm_line(const tml_rank_window *r, panel *p)
{
    char t[LINE_MAX_BYTES], v[32], b[32], bw[48] = "";
    fmt_ms(r->avg_ns[TML_M_COMM_TOTAL], v, sizeof(v));
    tml__fmt_bytes(r->comm_bytes_per_step, b, sizeof(b));
    if (!isnan(r->comm_bytes_per_s))
        snprintf(bw, sizeof(bw), " at %.1f MB/s", r->comm_bytes_per_s / 1e6);
    snprintf(t, sizeof(t), "Communication: %s in flight, %s/step%s (CPU)", v, b, bw);
    padd_text(p, t);
}

/* Throughput, and FLOPs with MFU where counted (docs/summary-json.md). */
static void throughput_lines(const tml_report_model *m, panel *p)
{
    const tml_window *w = &m->win;
    char t[LINE_MAX_BYTES], a[48], b[48];
    if (isnan(w->samples_per_s))
        return;
    tml__fmt_si(w->samples_per_s, "", " samples/s", a, sizeof(a));
    int n = snprintf(t, sizeof(t), "Throughput: %s", a);
    if (!isnan(w->tokens_per_s) && n > 0 && (size_t)n < sizeof(t)) {
        tml__fmt_si(w->tokens_per_s, "", " tokens/s", b, sizeof(b));
        n += snprintf(t + n, sizeof(t) - (size_t)n, " · %s", b);
    }
    if (m->active_ranks > 1 && n > 0 && (size_t)n < sizeof(t))
        snprintf(t + n, sizeof(t) - (size_t)n, " (all ranks)");
    padd_text(p, t);
    if (isnan(w->flops_per_s))
        return;
    tml__fmt_si(w->flops_per_s, " ", "FLOP/s", a, sizeof(a));
    const char *by = w->flops_how & TML_FLOPS_COUNTED ? "FlopCounterMode" : "given";
    if (!isnan(w->mfu))
        snprintf(t, sizeof(t), "FLOPs: %s achieved · MFU %.1f%% of the %s peak (%s)", a,
                 100.0 * w->mfu, tml__flops_dtype(w->flops_how), by);
    else
        snprintf(t, sizeof(t), "FLOPs: %s achieved (%s; no MFU: no peak for this device)", a,
                 by);
    padd_text(p, t);
}

static void step_panel(const tml_report_model *m, panel *p)
{
    const tml_window *w = &m->win;
    const tml_rank_window *r = w->median_rank >= 0 ? &w->ranks[w->median_rank] : NULL;
    static const struct { const char *name; tml_metric m; } tree[] = {
        { "Step Time", TML_M_STEP },
        { "├─ Input Wait", TML_M_INPUT },
        { "├─ Compute", TML_M_COMPUTE },
        { "│  ├─ Forward", TML_M_FORWARD },
        { "│  ├─ Backward", TML_M_BACKWARD },
        { "│  └─ Optimizer", TML_M_OPTIMIZER },
        { "├─ Communication", TML_M_COMM },   /* only in runs that communicate */
        { "├─ H2D", TML_M_H2D },
        { "└─ Residual", TML_M_RESIDUAL },
    };
    char t[LINE_MAX_BYTES], rk[32], v[32];
    int cause = tml__diag_is_cause(&m->verdict) ? m->verdict.cause : -1;

    p->n = 0;
    if (m->active_ranks > 1 && r) {
        fmt_rank(r, rk, sizeof(rk));
        snprintf(t, sizeof(t), "STEP TIMING (Median %s), %s", rk, clock_name(m));
    } else {
        snprintf(t, sizeof(t), "STEP TIMING (Window Average), %s", clock_name(m));
    }
    padd_text(p, t);
    double step = r ? r->avg_ns[TML_M_STEP] : NAN;
    int comm = r && !isnan(r->avg_ns[TML_M_COMM]);
    for (size_t i = 0; i < sizeof(tree) / sizeof(tree[0]); i++)
        if (tree[i].m != TML_M_COMM || comm)
            timing_line(p, tree[i].name, r ? r->avg_ns[tree[i].m] : NAN, step,
                        cause == (int)tree[i].m);
    fmt_ms(r ? r->avg_ns[TML_M_FETCH_CPU] : NAN, v, sizeof(v));
    snprintf(t, sizeof(t), "DataLoader fetch: %s (CPU, supplemental)", v);
    padd_text(p, t);
    if (comm)
        comm_line(r, p);
    fmt_ms(r ? r->avg_ns[TML_M_UNTRACED] : NAN, v, sizeof(v));
    char epochs[64] = "";
    if (w->between_epochs_ns >= TML_EPOCH_MIN_WAIT_MS * 1e6)
        snprintf(epochs, sizeof(epochs), " + %.2f s before each epoch",
                 w->between_epochs_ns / 1e9);
    if (r && !isnan(r->avg_ns[TML_M_UNTRACED]) && !isnan(m->st.untraced_wall))
        snprintf(t, sizeof(t), "Untraced: %s/step between steps%s, %.0f%% of wall-clock", v,
                 epochs, 100.0 * m->st.untraced_wall);
    else if (r && !isnan(r->avg_ns[TML_M_UNTRACED]))
        snprintf(t, sizeof(t), "Untraced: %s/step between steps", v);
    else
        snprintf(t, sizeof(t), "Untraced: n/a");
    padd_text(p, t);

    throughput_lines(m, p);
    if (m->active_ranks > 1)
        rank_skew_line(m, p);

    /* what TraceML costs: in the step, and (when measured) its background
     * CPU on a line of its own (docs/summary-json.md) */
    int own_line = !isnan(m->overhead_us) && !isnan(m->background_cpu_percent);
    char ov[64];
    if (isnan(m->overhead_us))
        snprintf(ov, sizeof(ov), "n/a");
    else
        snprintf(ov, sizeof(ov), "%.1f µs/step", m->overhead_us);
    int n = m->warmup_unknown ? snprintf(t, sizeof(t), "Warm-up excluded: n/a")
            : snprintf(t, sizeof(t), "Warm-up excluded: %zu step%s", w->warmup_steps,
                       w->warmup_steps == 1 ? "" : "s");
    if (w->epoch_start_steps && n > 0 && (size_t)n < sizeof(t))
        n += snprintf(t + n, sizeof(t) - (size_t)n, " · epoch starts: %zu (%.0f ms each)",
                      w->epoch_start_steps, w->epoch_start_wait_ns / 1e6);
    if (!own_line && n > 0 && (size_t)n < sizeof(t))
        n += snprintf(t + n, sizeof(t) - (size_t)n, " · TraceML cost: %s", ov);
    uint64_t dropped = m->records_dropped + m->events_dropped;
    if (dropped && n > 0 && (size_t)n < sizeof(t))
        snprintf(t + n, sizeof(t) - (size_t)n, " · dropped: %llu", (unsigned long long)dropped);
    padd_text(p, t);
    if (w->limited_by) {   /* fewer steps than asked, and why (docs/design.md "Memory") */
        if (strcmp(w->limited_by, "ranks") == 0)
            snprintf(t, sizeof(t), "Window: last %zu steps (%zu ranks: %d steps x ranks at most)",
                     w->window_steps, (size_t)m->active_ranks, TML_WINDOW_CELLS);
        else
            snprintf(t, sizeof(t), "Window: last %zu steps, what each rank keeps within %s",
                     w->window_steps, tml__env_name(TML_ENV_MEMORY_MB));
        padd_text(p, t);
    }
    if (own_line) {
        snprintf(t, sizeof(t), "TraceML cost: %.1f µs/step (%.1f in step, %.1f%% of a core)",
                 m->overhead_total_us, m->overhead_us, m->background_cpu_percent);
        padd_text(p, t);
    }
}

/* A metrics table: header row plus rows of label / value(s). */
#define LABEL_W 20
#define COL_W 16
#define COL2_W 20

static void table_header(panel *p, const char *first, int multi, const char *what)
{
    char *l = padd(p);
    char a[48], b[48];
    cell(l, LINE_MAX_BYTES, first, LABEL_W, 0);
    if (multi) {
        snprintf(a, sizeof(a), "median %s avg", what);
        snprintf(b, sizeof(b), "worst %s avg", what);
        cell(l, LINE_MAX_BYTES, a, COL_W, 1);
        cell(l, LINE_MAX_BYTES, "  ", 2, 0);
        cell(l, LINE_MAX_BYTES, b, 0, 0);
    } else {
        cell(l, LINE_MAX_BYTES, "avg", COL_W, 1);
    }
}

static void table_row(panel *p, const char *label, const char *med, const char *worst)
{
    char *l = padd(p);
    cell(l, LINE_MAX_BYTES, label, LABEL_W, 0);
    cell(l, LINE_MAX_BYTES, med, COL_W, 1);
    if (worst) {
        cell(l, LINE_MAX_BYTES, "  ", 2, 0);
        cell(l, LINE_MAX_BYTES, worst, 0, 0);
    }
    size_t e = strlen(l);
    while (e && l[e - 1] == ' ')
        l[--e] = '\0';
}

static void count_suffix(char *out, size_t cap, int32_t got, int32_t want, const char *what)
{
    snprintf(out, cap, " · %d/%d %s", (int)got, (int)want, what);
}

/* A step memory row's field k: "n/a", the bytes, or with the rank's name. */
static void memory_value(const tml_report_rows *r, int idx, size_t k, int with_rank,
                         char *out, size_t cap)
{
    if (idx < 0) {
        snprintf(out, cap, "n/a");
        return;
    }
    const tml_mem_row *row = (const tml_mem_row *)r->rows + idx;
    double v = tml__report_field(row, &r->fields[k]);
    char b[32];
    tml__fmt_bytes(v, b, sizeof(b));
    if (with_rank && !isnan(v))
        snprintf(out, cap, "%s, R%d/N%d", b, (int)row->rank, (int)row->node);
    else
        snprintf(out, cap, "%s", b);
}

static void memory_panel(const tml_report_model *m, panel *p)
{
    const tml_report_rows *r = &m->rows[0];
    int multi = m->active_ranks > 1 || m->ranks_reported > 1;
    char t[LINE_MAX_BYTES], suf[64] = "";
    /* the window's peaks: the first three fields of step_memory's rows */
    static const char *const labels[] = { "Allocated", "Reserved", "RSS" };

    p->n = 0;
    if (multi)
        count_suffix(suf, sizeof(suf), (int32_t)m->active_ranks, m->world_size, "ranks");
    snprintf(t, sizeof(t), "STEP MEMORY: %s%s", m->mem.label, suf);
    padd_text(p, t);
    if (strcmp(m->mem.kind, "BALANCED") != 0) {
        snprintf(t, sizeof(t), "Evidence: %s", m->mem.why);
        padd_text(p, t);
    } else {
        padd_text(p, "");
    }
    padd_text(p, "");
    table_header(p, "avg per-step peak", multi, "rank");
    for (size_t k = 0; k < sizeof(labels) / sizeof(labels[0]); k++) {
        char a[96], b[96];
        memory_value(r, r->field[k].median, k, 0, a, sizeof(a));
        if (multi) {
            memory_value(r, r->field[k].worst, k, 1, b, sizeof(b));
            table_row(p, labels[k], a, b);
        } else {
            table_row(p, labels[k], a, NULL);
        }
    }
}

/* A resource row's value in a column: "n/a", "18%", "6.2 GB (19%)", ...
 * `kind`: 0 percent, 1 bytes with an optional share of `of`, 2 degrees C,
 * 3 watts, 4 plain bytes. */
static void res_value(double v, double of, int kind, char *out, size_t cap)
{
    char b[32];
    if (isnan(v)) {
        snprintf(out, cap, "n/a");
        return;
    }
    switch (kind) {
    case 0:
        snprintf(out, cap, "%.0f%%", v);
        break;
    case 1:
        tml__fmt_bytes(v, b, sizeof(b));
        if (of > 0)
            snprintf(out, cap, "%s (%.0f%%)", b, 100.0 * v / of);
        else
            snprintf(out, cap, "%s", b);
        break;
    case 2:
        snprintf(out, cap, "%.0fC", v);
        break;
    case 3:
        snprintf(out, cap, "%.0fW", v);
        break;
    default:
        tml__fmt_bytes(v, out, cap);
        break;
    }
}

/* A SYSTEM / PROCESS METRICS row: its label, the field of the section's
 * rows it shows (by key) and the one its share is of (NULL none), and how
 * it reads (res_value's kind). */
typedef struct res_def {
    const char *label, *key, *of;
    int kind;
} res_def;

/* The index of field `key` in r's table, -1 none. */
static int field_of(const tml_report_rows *r, const char *key)
{
    for (size_t k = 0; key && k < r->nfields; k++)
        if (strcmp(r->fields[k].key, key) == 0)
            return (int)k;
    return -1;
}

/* Field k of row idx; NAN without the field. */
static double res_at(const tml_report_rows *r, int idx, int k)
{
    return k < 0 ? NAN : tml__report_field((const char *)r->rows + (size_t)idx * r->row_size,
                                           &r->fields[k]);
}

/* One resource row over several places (the model's rows m->rows[1] or
 * [2]): the median place's value (upper median, a real place) and the
 * worst (largest) with its name, as the model picked them. */
static void res_row(panel *p, const tml_report_model *m, const tml_report_rows *r,
                    const res_def *d, int multi)
{
    char med[96], worst[96], v[64];
    int k = field_of(r, d->key), of = field_of(r, d->of);
    tml_report_pick pk = k >= 0 ? r->field[k] : (tml_report_pick){ -1, -1 };
    if (pk.median < 0) {
        table_row(p, d->label, "n/a", multi ? "n/a" : NULL);
        return;
    }
    res_value(res_at(r, pk.median, k), res_at(r, pk.median, of), d->kind, med, sizeof(med));
    if (!multi) {
        table_row(p, d->label, med, NULL);
        return;
    }
    res_value(res_at(r, pk.worst, k), res_at(r, pk.worst, of), d->kind, v, sizeof(v));
    if (r == &m->rows[1])
        snprintf(worst, sizeof(worst), "%s, N%d", v, (int)m->nodes[pk.worst].node);
    else
        snprintf(worst, sizeof(worst), "%s, R%d/N%d", v, (int)m->procs[pk.worst].rank,
                 (int)m->procs[pk.worst].node);
    table_row(p, d->label, med, worst);
}

/* The top of the SYSTEM / PROCESS METRICS panels: title with its
 * diagnosis, the evidence line, and the table header. */
static void resource_head(panel *p, const char *title, const tml_diagnosis *d, int multi,
                          int reported, int expected, const char *plural, const char *unit)
{
    char t[LINE_MAX_BYTES], suf[64] = "";
    p->n = 0;
    if (multi)
        count_suffix(suf, sizeof(suf), reported, expected, plural);
    snprintf(t, sizeof(t), "%s: %s%s", title, d->label, suf);
    padd_text(p, t);
    snprintf(t, sizeof(t), "Evidence: %s", d->why);
    padd_text(p, t);
    padd_text(p, "");
    table_header(p, "", multi, unit);
}

static void system_panel(const tml_report_model *m, panel *p)
{
    static const res_def rows[] = {
        { "CPU", "cpu_percent", NULL, 0 },
        { "RAM used", "ram_used_bytes", "ram_total_bytes", 1 },
        { "GPU util", "gpu_util_percent", NULL, 0 },
        { "GPU memory/device", "gpu_memory_used_bytes", "gpu_memory_total_bytes", 1 },
        { "GPU temperature", "gpu_temperature_c", NULL, 2 },
        { "GPU power", "gpu_power_w", NULL, 3 },
    };
    int multi = m->nodes_expected > 1;
    resource_head(p, "SYSTEM METRICS", &m->sys, multi, m->nodes_reported, m->nodes_expected,
                  "nodes", "node");
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        res_row(p, m, &m->rows[1], &rows[i], multi);
}

static void process_panel(const tml_report_model *m, panel *p)
{
    static const res_def rows[] = {
        { "CPU capacity", "cpu_capacity_percent", NULL, 0 },
        { "RSS used", "rss_bytes", "host_ram_total_bytes", 1 },
        { "CUDA allocated", "cuda_allocated_bytes", NULL, 4 },
        { "CUDA reserved", "cuda_reserved_bytes", "device_total_bytes", 1 },
    };
    int multi = m->active_ranks > 1 || m->ranks_reported > 1;
    resource_head(p, "PROCESS METRICS", &m->proc, multi, m->ranks_reported, m->world_size,
                  "ranks", "rank");
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        res_row(p, m, &m->rows[2], &rows[i], multi);
}

/* ---- the box -------------------------------------------------------- */

/* Ranks whose connection ended without a goodbye: they died mid-run (or
 * were cut off), so the window stops at the last step they reported. */
static void lost_ranks_row(const tml_report_model *m, tml_strbuf *sb, int width)
{
    char l[LINE_MAX_BYTES] = "";
    size_t n = 0;
    for (size_t i = 0; i < m->run->nranks && n + 64 < sizeof(l); i++) {
        const tml_rank *r = &m->run->ranks[i];
        if (!r->lost)
            continue;
        int w;
        if (r->nsteps)
            w = snprintf(l + n, sizeof(l) - n, "%sR%d/N%d after step %llu", n ? ", " : "",
                         (int)r->info.rank, (int)r->info.node_rank,
                         (unsigned long long)r->steps[r->nsteps - 1].step);
        else
            w = snprintf(l + n, sizeof(l) - n, "%sR%d/N%d before any step", n ? ", " : "",
                         (int)r->info.rank, (int)r->info.node_rank);
        if (w > 0)
            n += (size_t)w;
    }
    if (n)
        text_row(sb, width, "Lost (no goodbye): ", l);
}

/* The straggler's per-step evidence: how often the same rank was the
 * culprit, and the score behind the verdict. */
static void straggler_row(const tml_report_model *m, tml_strbuf *sb, int width)
{
    const tml_straggler *s = &m->verdict.straggler;
    char l[LINE_MAX_BYTES], cr[32], vr[32];
    if (!tml__diag_is_cause(&m->verdict) || !s->valid || s->culprit < 0 || s->victim < 0)
        return;
    fmt_rank(&m->win.ranks[s->culprit], cr, sizeof(cr));
    fmt_rank(&m->win.ranks[s->victim], vr, sizeof(vr));
    if (s->culprit_steps == 0)   /* a summary read back that did not count them */
        snprintf(l, sizeof(l), "%s was the straggler; peers waited %.1f ms per step for it "
                 "(score %.2f of %s's Step Time).", cr, s->cost_ns / 1e6, s->score, vr);
    else
        snprintf(l, sizeof(l), "%s was the straggler in %zu of %zu window steps; peers "
                 "waited %.1f ms per step for it (score %.2f of %s's Step Time).", cr,
                 s->culprit_steps, m->win.window_steps, s->cost_ns / 1e6, s->score, vr);
    text_row(sb, width, "Evidence: ", l);
}

static void header_line(const tml_report_model *m, char *out, size_t cap)
{
    size_t n = 0;
    int w;
#define ADD(...) do { w = snprintf(out + n, cap - n, __VA_ARGS__); \
    if (w > 0 && (size_t)w < cap - n) n += (size_t)w; } while (0)
    ADD("%s", m->run->name[0] ? m->run->name : "(unnamed run)");
    if (m->world_size <= 1 && m->ranks_reported <= 1)
        ADD(" · %d rank%s", (int)m->ranks_reported, m->ranks_reported == 1 ? "" : "s");
    else
        ADD(" · %d/%d ranks", (int)m->ranks_reported, (int)m->world_size);
    if (m->gpus_observed > 0)
        ADD(" · %d GPU%s observed", (int)m->gpus_observed, m->gpus_observed == 1 ? "" : "s");
    if (m->nodes_expected > 1)
        ADD(" · %d/%d nodes", (int)m->nodes_reported, (int)m->nodes_expected);
    if (!m->watch)   /* a watch run traces no step */
        ADD(" · %zu common step%s", m->win.common_steps, m->win.common_steps == 1 ? "" : "s");
    if (isnan(m->duration_s))
        ADD(" · n/a");
    else
        ADD(" · %.1fs", m->duration_s);
#undef ADD
}

/* The name of a signal a rank dies of at exit (glibc's sigabbrev_np is
 * 2.32's: the wheel runs on 2.28). */
static const char *signal_abbrev(int sig)
{
    switch (sig) {
    case SIGABRT: return "ABRT";
    case SIGSEGV: return "SEGV";
    case SIGBUS:  return "BUS";
    case SIGILL:  return "ILL";
    case SIGFPE:  return "FPE";
    case SIGKILL: return "KILL";
    case SIGTERM: return "TERM";
    case SIGINT:  return "INT";
    default:      return NULL;
    }
}

/* The ranks that died of a signal at exit, after their goodbye: "R1/N0
 * aborted at exit (SIGABRT)", ... into out; 0 when there is none. */
static size_t exit_deaths(const tml_report_model *m, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < m->run->nranks && n + 64 < cap; i++) {
        const tml_rank *r = &m->run->ranks[i];
        if (r->exit_signal <= 0)
            continue;
        const char *name = signal_abbrev(r->exit_signal);
        int w = snprintf(out + n, cap - n, "%sR%d/N%d %s at exit (SIG%s)", n ? ", " : "",
                         (int)r->info.rank, (int)r->info.node_rank,
                         r->exit_signal == SIGABRT ? "aborted" : "died", name ? name : "?");
        if (w > 0)
            n += (size_t)w;
    }
    return n;
}

/* How the run ended, unless it completed (or still runs). */
static void ended_row(const tml_report_model *m, tml_strbuf *sb, int width)
{
    char l[LINE_MAX_BYTES], deaths[LINE_MAX_BYTES / 2];
    if (strcmp(m->status, "failed") == 0 && exit_deaths(m, deaths, sizeof(deaths))) {
        int whole = m->nmissing == 0;   /* and none lost: every rank said goodbye */
        for (size_t i = 0; i < m->run->nranks; i++)
            whole = whole && !m->run->ranks[i].lost;
        if (whole)
            snprintf(l, sizeof(l), "FAILED with exit code %d after the training: every rank "
                     "finished its steps and said goodbye, then %s", m->exit_code, deaths);
        else
            snprintf(l, sizeof(l), "FAILED with exit code %d; %s, after its last step",
                     m->exit_code, deaths);
    } else if (strcmp(m->status, "failed") == 0) {
        if (m->exit_code < 0)   /* a summary read back that does not say */
            snprintf(l, sizeof(l), "FAILED (exit code not recorded)");
        else if (m->exit_code > 128 && m->exit_code < 160)
            snprintf(l, sizeof(l), "FAILED: the training died of signal %d (exit code %d)",
                     m->exit_code - 128, m->exit_code);
        else
            snprintf(l, sizeof(l), "FAILED with exit code %d", m->exit_code);
    } else if (strcmp(m->status, "interrupted") == 0 && strcmp(m->run->stopped_by, "tune") == 0) {
        snprintf(l, sizeof(l), "stopped by traceml tune after %zu step%s (a trial: tune stops "
                 "each trial once it has run its steps)", m->win.common_steps,
                 m->win.common_steps == 1 ? "" : "s");
    } else if (strcmp(m->status, "interrupted") == 0) {
        snprintf(l, sizeof(l), "INTERRUPTED (Ctrl-C or a signal): the figures cover the "
                 "steps that arrived");
    } else {
        return;
    }
    text_row(sb, width, "Ended: ", l);
}

/* Steps that zero-edit tracing found, not the script: said, with how. */
static void detection_row(const tml_report_model *m, tml_strbuf *sb, int width)
{
    const char *how = m->step_detection;
    if (how && strcmp(how, "automatic") == 0)
        text_row(sb, width, "Steps: ", "found automatically (the script has no trace_step): "
                 "one step per optimizer.step(), models found from the optimizers' "
                 "parameters; wrap the step in traceml.trace_step() to mark it yourself");
}

/* Models the step did not name whose forward was timed too (a GAN traced
 * as trace_step(D): its generator), named. */
static void also_timed_row(const tml_report_model *m, tml_strbuf *sb, int width)
{
    char l[LINE_MAX_BYTES];
    if (!m->also_timed[0])
        return;
    snprintf(l, sizeof(l), "also timed: %s (found running in the step; its forward is in "
             "Forward)", m->also_timed);
    text_row(sb, width, "Models: ", l);
}

/* One conflict's line: processes that claimed the same rank (never
 * merged), a second live connection of one identity, a restarted rank. */
static void conflict_line(const tml_rank_conflict *c, char *l, size_t cap)
{
    if (c->kind == TML_CONFLICT_RESTARTED)
        snprintf(l, cap, "rank %d restarted: pid %d on %s is a new process (incarnation %u, "
                 "e.g. after os.exec*); both processes' steps are kept, the new one's from "
                 "step %llu on", (int)c->claimed, (int)c->pid, c->host, (unsigned)c->incarnation,
                 (unsigned long long)c->first_step);
    else if (c->kind == TML_CONFLICT_SECOND_CONNECTION)
        snprintf(l, cap, "rank %d (pid %d on %s) connected twice at once from two process "
                 "images; the second is shown as R%d", (int)c->claimed, (int)c->first_pid,
                 c->first_host, (int)c->reported_as);
    else
        snprintf(l, cap, "rank %d was claimed by pid %d on %s and pid %d on %s; "
                 "the second is shown as R%d (set RANK/WORLD_SIZE per process, or use "
                 "traceml run --nproc-per-node)", (int)c->claimed, (int)c->first_pid,
                 c->first_host, (int)c->pid, c->host, (int)c->reported_as);
}

static void conflict_rows(const tml_run *run, tml_strbuf *sb, int width)
{
    char l[LINE_MAX_BYTES];
    size_t shown = run->nconflicts < 3 ? run->nconflicts : 3;
    for (size_t i = 0; i < shown; i++) {
        conflict_line(&run->conflicts[i], l, sizeof(l));
        text_row(sb, width, "CONFLICT: ", l);
    }
    if (run->nconflicts > shown) {
        snprintf(l, sizeof(l), "%zu more conflicts: ranks claimed twice or restarted "
                 "(traceml.log)", run->nconflicts - shown);
        text_row(sb, width, "CONFLICT: ", l);
    }
}

/* The title, the header line and the lines under it (how the run ended,
 * where its data came from, what is missing), between borders. */
static void header_rows(const tml_report_model *m, tml_strbuf *sb, int width)
{
    char l[LINE_MAX_BYTES];
    border(sb, width);
    text_row(sb, width, "", m->watch ? "TraceML Watch Summary" : "TraceML Run Summary");
    header_line(m, l, sizeof(l));
    text_row(sb, width, "", l);
    ended_row(m, sb, width);
    detection_row(m, sb, width);
    also_timed_row(m, sb, width);
    if (m->source)
        text_row(sb, width, "Source: ", m->source);
    if (m->not_saved)
        text_row(sb, width, "NOT SAVED: ", m->not_saved);
    if (m->run->partial[0])
        text_row(sb, width, "PARTIAL: ", m->run->partial);
    conflict_rows(m->run, sb, width);
    border(sb, width);
}

/* Ranks that never reported, and ranks that reported but sent no step. */
static void missing_rows(const tml_report_model *m, tml_strbuf *sb, int width)
{
    char miss[LINE_MAX_BYTES] = "";
    size_t n = 0;
    for (size_t i = 0; i < m->nmissing && n + 16 < sizeof(miss); i++) {
        int w = snprintf(miss + n, sizeof(miss) - n, "%sR%d", i ? ", " : "", (int)m->missing_ranks[i]);
        if (w > 0)
            n += (size_t)w;
    }
    /* after a clean exit they did not die: they never reported */
    int clean = strcmp(m->status, "completed") == 0 && m->exit_code == 0;
    if (m->nmissing && clean && n + 64 < sizeof(miss))
        snprintf(miss + n, sizeof(miss) - n, " (the training exited 0: not a crash)");
    if (m->nmissing)
        text_row(sb, width, clean ? "Never reported: " : "Missing ranks: ", miss);
    n = 0;
    miss[0] = '\0';
    for (size_t i = 0; i < m->win.nranks && n + 16 < sizeof(miss); i++) {
        if (m->win.ranks[i].nsteps || m->win.common_steps == 0)
            continue;
        int w = snprintf(miss + n, sizeof(miss) - n, "%sR%d/N%d", n ? ", " : "",
                         (int)m->win.ranks[i].rank, (int)m->win.ranks[i].node);
        if (w > 0)
            n += (size_t)w;
    }
    if (n)
        text_row(sb, width, "No steps from: ", miss);
}

/* The machine around the training, when it matters (m->machine). */
static void contention_row(const tml_report_model *m, tml_strbuf *sb, int width)
{
    if (m->machine[0])
        text_row(sb, width, "Machine: ", m->machine);
}

/* Verdict / Why / Next and, on several ranks, who is missing and who
 * straggled. */
/* "Deep dive (steps 20-22, left out): 91% in heavy_block (aten::addmm),
 * 6% in stem" (docs/deep-dive.md): the heaviest modules of 1% or more;
 * without module scopes, the operators. */
static void deep_dive_list(const tml_report_dd *dd, char *l, size_t cap)
{
    int any = 0;
    size_t n = 0;
    for (size_t i = 0; i < dd->nmodules && any < 3 && n < cap; i++) {
        const tml_dd_item *it = &dd->modules[i];
        if (!it->name[0] || it->pct < 1)
            continue;
        n += (size_t)snprintf(l + n, cap - n, any ? ", %.0f%% in %s" : "%.0f%% in %s (%s)",
                              it->pct, it->name, it->op);
        any++;
    }
    for (size_t i = 0; !any && i < dd->nops && i < 3 && n < cap; i++)
        n += (size_t)snprintf(l + n, cap - n, "%s%.0f%% %s", i ? ", " : "no module scopes: ",
                              dd->ops[i].pct, dd->ops[i].name);
    /* much outside any module (a rank waiting in DDP's all-reduce, a heavy
     * loss or optimizer): said, or the modules' shares look too small */
    for (size_t i = 0; any && i < dd->nmodules && n < cap; i++)
        if (!dd->modules[i].name[0] && dd->modules[i].pct >= 25)
            n += (size_t)snprintf(l + n, cap - n, "; %.0f%% outside modules (%s)",
                                  dd->modules[i].pct, dd->modules[i].op);
}

static void deep_dive_rows(const tml_report_model *m, tml_strbuf *sb, int width)
{
    const tml_report_dd *dd = &m->dd;
    char l[LINE_MAX_BYTES], head[96];
    if (!dd->present)
        return;
    if (!dd->ran) {
        snprintf(l, sizeof(l), "skipped: %s", dd->skipped);
        text_row(sb, width, "Deep dive: ", l);
        return;
    }
    l[0] = '\0';
    deep_dive_list(dd, l, sizeof(l));
    snprintf(head, sizeof(head), "Deep dive (steps %llu-%llu, left out): ",
             (unsigned long long)dd->first_step, (unsigned long long)dd->last_step);
    text_row(sb, width, head, l);
    /* a straggler's Next names it already (deepdive.c) */
    const char *kind = m->verdict.kind ? m->verdict.kind : "";
    if (dd->spread.name[0] && strcmp(kind, "COMPUTE_STRAGGLER") && strcmp(kind, "STRAGGLER")) {
        snprintf(l, sizeof(l), "%s takes %.1f ms on rank %d, %.1f ms on rank %d (steps %llu-%llu)",
                 dd->spread.name, dd->spread_slow_ns / 1e6, (int)dd->spread_slow_rank,
                 dd->spread_fast_ns / 1e6, (int)dd->spread_fast_rank,
                 (unsigned long long)dd->first_step, (unsigned long long)dd->last_step);
        text_row(sb, width, "Compute spread: ", l);
    }
}

static void verdict_rows(const tml_report_model *m, tml_strbuf *sb, int width)
{
    char l[LINE_MAX_BYTES];
    int multi = m->ranks_reported > 1 || m->world_size > 1;
    snprintf(l, sizeof(l), "%s (%s)", m->verdict.label, tml__severity_name(m->verdict.severity));
    text_row(sb, width, "Verdict: ", l);
    text_row(sb, width, "Why: ", m->verdict.why);
    if (m->verdict.next[0])
        text_row(sb, width, "Next: ", m->verdict.next);
    for (size_t i = 0; i < m->nalso; i++) {
        const tml_diagnosis *d = m->also[i];
        snprintf(l, sizeof(l), "%s (%s): %s", d->label, tml__severity_name(d->severity), d->why);
        text_row(sb, width, "Also: ", l);
    }
    deep_dive_rows(m, sb, width);
    contention_row(m, sb, width);
    if (multi) {
        text_row(sb, width, "", "Scope: N = node · R = global rank · G = GPU index");
        missing_rows(m, sb, width);
        straggler_row(m, sb, width);
    }
    lost_ranks_row(m, sb, width);
}

/* `traceml watch`: no step was traced, so no verdict is claimed; the
 * resource panels, and how to get step timing. */
static void watch_rows(const tml_report_model *m, tml_strbuf *sb, int width)
{
    text_row(sb, width, "Watch: ", "system and process metrics only (traceml watch): no step "
             "is traced, so there is no step-time verdict.");
    contention_row(m, sb, width);
    if (m->ranks_reported > 1 || m->world_size > 1) {
        text_row(sb, width, "", "Scope: N = node · R = global rank");
        missing_rows(m, sb, width);
    }
    lost_ranks_row(m, sb, width);
}

void tml__report_box(const tml_report_model *m, tml_strbuf *sb)
{
    int width = m->width;
    panels_mem *pm = malloc(sizeof(*pm));

    if (!pm) {
        sb->failed = 1;
        return;
    }
    header_rows(m, sb, width);
    row(sb, width, "");
    if (m->watch) {
        watch_rows(m, sb, width);
    } else {
        verdict_rows(m, sb, width);
        row(sb, width, "");
        step_panel(m, &pm->left);
        memory_panel(m, &pm->right);
        panels(sb, width, pm);
    }
    row(sb, width, "");
    system_panel(m, &pm->left);
    process_panel(m, &pm->right);
    panels(sb, width, pm);
    free(pm);
    row(sb, width, "");
    if (m->watch && m->verdict.next[0])
        text_row(sb, width, "Next: ", m->verdict.next);
    row(sb, width, "");
    if (m->json_path) {
        text_row(sb, width, "Full evidence: ", m->json_path);
    }
    border(sb, width);
}
