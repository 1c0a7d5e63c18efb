/*
 * live_draw.c - one frame of the terminal view of `traceml run --mode cli`:
 * the header, the verdict with Why, Next and Also, the timing, memory and
 * system panels, the ranks, and the training's last output lines.
 *
 * It draws the /api/live document as it comes (live/snapshot.c computed
 * every figure), so the terminal and the browser dashboard show the same
 * numbers; what it decides is only the layout: which panels fit the
 * terminal's size (side by side from 100 columns, the resources in three
 * lines when the rows are few) and how the verdict's text wraps.
 */
#include "live_draw.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/fmt.h"

/* The rows the timing and resource panels need under the verdict: the
 * timing panel (10), the resources in their compact form (5), 2 of
 * training output. */
#define PANELS_MIN_ROWS (10 + 5 + 2)

static double num_at(const tml_json *v, const char *path)
{
    double d;
    return tml__json_num(tml__json_path(v, path), &d) ? d : NAN;
}

static const char *str_at(const tml_json *v, const char *path)
{
    return tml__json_str(tml__json_path(v, path));
}

/* the view's screen while it draws (one view per process) */
static tml_screen *screen;

static void attron(int attrs)
{
    tml__screen_attron(screen, attrs);
}

static void attroff(int attrs)
{
    tml__screen_attroff(screen, attrs);
}

/* Writes s at (y, x), at most w columns (UTF-8 aware, one column each). */
static void put(int y, int x, int w, const char *s)
{
    int H = tml__screen_rows(screen), W = tml__screen_cols(screen);
    if (y < 0 || y >= H || x >= W || w <= 0 || !s)
        return;
    if (x + w > W)
        w = W - x;
    const char *p = s;
    int cols = 0;
    while (*p && cols < w) {
        p++;
        while ((*p & 0xC0) == 0x80)
            p++;
        cols++;
    }
    tml__screen_put(screen, y, x, s, (size_t)(p - s));
}

static void putf(int y, int x, int w, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void putf(int y, int x, int w, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    put(y, x, w, buf);
}

/* Draws prefix + text from row y, wrapped at word ends to width w over at
 * most maxlines rows (the last one cut), later rows indented by the
 * prefix; returns the rows it took. y < 0 measures without drawing. */
static int put_wrapped(int y, int x, int w, const char *prefix, const char *text, int maxlines)
{
    char buf[1024];
    size_t indent = strlen(prefix);
    snprintf(buf, sizeof(buf), "%s%s", prefix, text);
    const char *p = buf;
    int n = 0;
    while (*p && n < maxlines) {
        size_t lead = n ? indent : 0, avail = (size_t)w > lead + 8 ? (size_t)w - lead : 8;
        size_t take = strlen(p);   /* bytes; UTF-8 text here is mostly ASCII */
        if (take > avail && n + 1 < maxlines) {
            take = avail;
            while (take > 0 && p[take] != ' ')
                take--;
            if (take == 0)
                take = avail;
        }
        if (y >= 0)
            putf(y + n, x + (int)lead, w - (int)lead, "%.*s", (int)take, p);
        p += take;
        while (*p == ' ')
            p++;
        n++;
    }
    return n ? n : 1;
}

/* A sparkline of the last w values of a JSON array (nulls are gaps),
 * scaled from 0 to the largest value shown. */
static void sparkline(int y, int x, int w, const tml_json *arr)
{
    static const char *const blocks[8] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                          "\u2585", "\u2586", "\u2587", "\u2588"};
    static const char ascii[8] = {'_', '.', ':', '-', '=', '+', '*', '#'};
    if (!arr || arr->type != TML_JSON_ARRAY || w <= 0)
        return;
    size_t n = arr->n, from = n > (size_t)w ? n - (size_t)w : 0;
    double mx = 0;
    for (size_t i = from; i < n; i++) {
        double d;
        if (tml__json_num(&arr->items[i], &d) && d > mx)
            mx = d;
    }
    if (mx <= 0)
        return;
    for (size_t i = from; i < n; i++) {
        double d;
        if (!tml__json_num(&arr->items[i], &d)) {
            x = tml__screen_put(screen, y, x, " ", 1);
            continue;
        }
        int k = (int)(d / mx * 7.0 + 0.5);
        k = k < 0 ? 0 : k > 7 ? 7 : k;
        if (tml__screen_utf8(screen))
            x = tml__screen_put(screen, y, x, blocks[k], strlen(blocks[k]));
        else
            x = tml__screen_put(screen, y, x, &ascii[k], 1);
    }
}

static void frame(int y, int x, int h, int w, const char *title)
{
    /* real box-drawing characters: the same on every UTF-8 terminal, and
     * readable in a captured pane or a log of the screen; ASCII elsewhere */
    static const char *const utf8[6] = {"\u250c", "\u2510", "\u2514", "\u2518", "\u2500",
                                        "\u2502"};
    static const char *const ascii[6] = {"+", "+", "+", "+", "-", "|"};
    const char *const *g = tml__screen_utf8(screen) ? utf8 : ascii;
    if (h < 2 || w < 4)
        return;
    tml__screen_fill(screen, y, x, g[0], 1);
    tml__screen_fill(screen, y, x + 1, g[4], w - 2);
    tml__screen_fill(screen, y, x + w - 1, g[1], 1);
    for (int r = 1; r < h - 1; r++) {
        tml__screen_fill(screen, y + r, x, g[5], 1);
        tml__screen_fill(screen, y + r, x + w - 1, g[5], 1);
    }
    tml__screen_fill(screen, y + h - 1, x, g[2], 1);
    tml__screen_fill(screen, y + h - 1, x + 1, g[4], w - 2);
    tml__screen_fill(screen, y + h - 1, x + w - 1, g[3], 1);
    attron(TML_ATTR_BOLD);
    putf(y, x + 2, w - 4, " %s ", title);
    attroff(TML_ATTR_BOLD);
}

/* The colour of a severity (the terminal's own background). */
static int sev_color(const char *sev)
{
    if (!sev)
        return 0;
    if (strcmp(sev, "CRITICAL") == 0)
        return TML_ATTR_RED;
    if (strcmp(sev, "WARNING") == 0)
        return TML_ATTR_YELLOW;
    return TML_ATTR_GREEN;
}

static const tml_json *series_rank_row(const tml_json *doc)
{
    double want = num_at(doc, "series.rank");
    const tml_json *ranks = tml__json_get(doc, "ranks");
    for (size_t i = 0; ranks && i < ranks->n; i++)
        if (num_at(&ranks->items[i], "rank") == want)
            return &ranks->items[i];
    return tml__json_at(ranks, 0);
}

static double gauge(const tml_json *doc, const char *name, const char *who, double id)
{
    const tml_json *g = tml__json_get(doc, "gauges");
    for (size_t i = 0; g && i < g->n; i++) {
        const char *n = str_at(&g->items[i], "name");
        if (n && strcmp(n, name) == 0 && num_at(&g->items[i], who) == id)
            return num_at(&g->items[i], "value");
    }
    return NAN;
}

/* 1 when the ranks of the live JSON run on more than one node: the views
 * then name the node whose system figures they show. */
static int several_nodes(const tml_json *doc)
{
    const tml_json *ranks = tml__json_get(doc, "ranks");
    for (size_t i = 1; ranks && i < ranks->n; i++)
        if (num_at(&ranks->items[i], "node") != num_at(&ranks->items[0], "node"))
            return 1;
    return 0;
}

static int draw_timing(const tml_json *doc, int y, int x, int w)
{
    /* figures and shares of the same rank (the title's), as the box does */
    static const struct {
        const char *label, *avg, *series;
    } rows[] = {
        {"Step Time", "step_time_ms", "series.step_time_ms"},
        {"Input Wait", "input_wait_ms", "series.input_wait_ms"},
        {"H2D", "h2d_ms", "series.h2d_ms"},
        {"Forward", "forward_ms", "series.forward_ms"},
        {"Backward", "backward_ms", "series.backward_ms"},
        {"Optimizer", "optimizer_ms", "series.optimizer_ms"},
        {"Comm", "communication_ms", "series.communication_ms"},   /* when measured */
        {"Residual", "residual_ms", "series.residual_ms"},
    };
    const tml_json *r = series_rank_row(doc);
    int n = (int)(sizeof(rows) / sizeof(rows[0]));
    int comm = !isnan(num_at(r, "communication_ms"));
    int h = n + 3 - !comm;
    char title[96];
    snprintf(title, sizeof(title), "STEP TIMING  rank %.0f, last %.0f steps",
             num_at(doc, "series.rank"), num_at(doc, "window.window_steps"));
    frame(y, x, h, w, title);
    const char *cause = str_at(doc, "verdict.cause");
    attron(TML_ATTR_DIM);
    put(y + 1, x + 2, w - 4, "phase         avg      share  history");
    attroff(TML_ATTR_DIM);
    for (int i = 0, line = y + 2; i < n; i++) {
        char a[32], s[16];
        double val = num_at(r, rows[i].avg), step = num_at(r, "step_time_ms");
        if (!comm && strcmp(rows[i].avg, "communication_ms") == 0)
            continue;
        tml__fmt_ms(val, a, sizeof(a));
        if (i > 0)
            tml__fmt_pct(step > 0 ? 100.0 * val / step : NAN, s, sizeof(s));
        else
            snprintf(s, sizeof(s), " ");
        int is_cause = cause && strncmp(cause, rows[i].avg, strlen(cause)) == 0 &&
                       rows[i].avg[strlen(cause)] == '_';
        if (is_cause)
            attron(TML_ATTR_BOLD);
        putf(line, x + 2, w - 4, "%-11s %9s %7s", rows[i].label, a, s);
        if (is_cause)
            attroff(TML_ATTR_BOLD);
        sparkline(line++, x + 33, w - 35, tml__json_path(doc, rows[i].series));
    }
    return h;
}

static int draw_resources(const tml_json *doc, int y, int x, int w)
{
    const tml_json *r = series_rank_row(doc);
    double rank = num_at(doc, "series.rank");
    char a[32], b[32], c[32], d[32];
    int h = 7;
    frame(y, x, h, w, "STEP MEMORY");
    tml__fmt_bytes(num_at(r, "rss_bytes"), a, sizeof(a));
    putf(y + 1, x + 2, w - 4, "RSS            %10s", a);
    sparkline(y + 1, x + 29, w - 31, tml__json_path(doc, "series.rss_bytes"));
    tml__fmt_bytes(num_at(r, "cuda_allocated_bytes"), a, sizeof(a));
    putf(y + 2, x + 2, w - 4, "CUDA allocated %10s", a);
    sparkline(y + 2, x + 29, w - 31, tml__json_path(doc, "series.cuda_allocated_bytes"));
    tml__fmt_bytes(num_at(r, "cuda_reserved_bytes"), a, sizeof(a));
    putf(y + 3, x + 2, w - 4, "CUDA reserved  %10s", a);
    sparkline(y + 3, x + 29, w - 31, tml__json_path(doc, "series.cuda_reserved_bytes"));
    const char *lab = str_at(doc, "step_memory.label");
    putf(y + 5, x + 2, w - 4, "%s", lab ? lab : "n/a");

    int y2 = y + h;
    int h2 = 7;
    double node = num_at(r, "node");
    char title[64] = "SYSTEM | PROCESS";
    if (several_nodes(doc))
        snprintf(title, sizeof(title), "SYSTEM N%.0f | PROCESS R%.0f/N%.0f", node, rank, node);
    frame(y2, x, h2, w, title);
    tml__fmt_pct(gauge(doc, "traceml_system_cpu_percent", "node", node), a, sizeof(a));
    tml__fmt_bytes(gauge(doc, "traceml_system_ram_used_bytes", "node", node), b, sizeof(b));
    tml__fmt_bytes(gauge(doc, "traceml_system_ram_total_bytes", "node", node), c, sizeof(c));
    putf(y2 + 1, x + 2, w - 4, "CPU %-5s  RAM %s / %s", a, b, c);
    tml__fmt_pct(num_at(doc, "gpu_util_percent"), a, sizeof(a));
    tml__fmt_bytes(gauge(doc, "traceml_system_gpu_memory_used_bytes", "node", node), b, sizeof(b));
    double t = gauge(doc, "traceml_system_gpu_temperature_c", "node", node);
    double p = gauge(doc, "traceml_system_gpu_power_w", "node", node);
    if (isnan(t))
        snprintf(c, sizeof(c), "n/a");
    else
        snprintf(c, sizeof(c), "%.0f C", t);
    if (isnan(p))
        snprintf(d, sizeof(d), "n/a");
    else
        snprintf(d, sizeof(d), "%.0f W", p);
    putf(y2 + 2, x + 2, w - 4, "GPU %-5s  mem %s  %s  %s", a, b, c, d);
    tml__fmt_pct(gauge(doc, "traceml_process_cpu_capacity_percent", "rank", rank), a, sizeof(a));
    tml__fmt_bytes(gauge(doc, "traceml_process_rss_bytes", "rank", rank), b, sizeof(b));
    putf(y2 + 3, x + 2, w - 4, "process CPU %s of capacity  RSS %s", a, b);
    const char *sl = str_at(doc, "system.label"), *pl = str_at(doc, "process.label");
    putf(y2 + 5, x + 2, w - 4, "system %s | process %s", sl ? sl : "n/a", pl ? pl : "n/a");
    return h + h2;
}

/* The resource sections in three lines, when the terminal is too short
 * for their panels (80x24). */
static int draw_resources_compact(const tml_json *doc, int y, int x, int w)
{
    const tml_json *r = series_rank_row(doc);
    double rank = num_at(doc, "series.rank"), node = num_at(r, "node");
    char a[32], b[32], c[32];
    const char *ml = str_at(doc, "step_memory.label"), *sl = str_at(doc, "system.label");
    const char *pl = str_at(doc, "process.label");
    frame(y, x, 5, w, "MEMORY | SYSTEM | PROCESS");
    tml__fmt_bytes(num_at(r, "rss_bytes"), a, sizeof(a));
    tml__fmt_bytes(num_at(r, "cuda_reserved_bytes"), b, sizeof(b));
    putf(y + 1, x + 2, w - 4, "memory  %-12s RSS %s  CUDA reserved %s", ml ? ml : "n/a", a, b);
    tml__fmt_pct(gauge(doc, "traceml_system_cpu_percent", "node", node), a, sizeof(a));
    tml__fmt_bytes(gauge(doc, "traceml_system_ram_used_bytes", "node", node), b, sizeof(b));
    tml__fmt_pct(num_at(doc, "gpu_util_percent"), c, sizeof(c));
    putf(y + 2, x + 2, w - 4, "system  %-12s CPU %s  RAM %s  GPU %s", sl ? sl : "n/a", a, b, c);
    tml__fmt_pct(gauge(doc, "traceml_process_cpu_capacity_percent", "rank", rank), a, sizeof(a));
    tml__fmt_bytes(gauge(doc, "traceml_process_rss_bytes", "rank", rank), b, sizeof(b));
    putf(y + 3, x + 2, w - 4, "process %-12s CPU %s of capacity  RSS %s", pl ? pl : "n/a", a, b);
    return 5;
}

static int draw_ranks(const tml_json *doc, int y, int x, int w, int maxh)
{
    const tml_json *ranks = tml__json_get(doc, "ranks");
    if (!ranks || ranks->n < 2 || maxh < 4)
        return 0;
    int rows = (int)ranks->n;
    if (rows > maxh - 3)
        rows = maxh - 3;
    int h = rows + 3;
    frame(y, x, h, w, "RANKS  live window averages");
    /* several nodes: each rank's node CPU, so every node's load is seen */
    int nodes = several_nodes(doc);
    attron(TML_ATTR_DIM);
    putf(y + 1, x + 2, w - 4,
         "rank         steps    step      p90     input   forward  backward  optimizer%s",
         nodes ? "  node CPU" : "");
    attroff(TML_ATTR_DIM);
    /* the straggler of a straggler verdict, else the slowest rank */
    double strag = num_at(doc, "straggler_rank"), worst = num_at(doc, "worst_rank");
    const char *mark = strag >= 0 ? "  straggler" : "  worst";
    if (strag >= 0)
        worst = strag;
    for (int i = 0; i < rows; i++) {
        const tml_json *r = &ranks->items[i];
        char s[6][32];
        tml__fmt_ms(num_at(r, "step_time_ms"), s[0], 32);
        tml__fmt_ms(num_at(r, "step_time_p90_ms"), s[1], 32);
        tml__fmt_ms(num_at(r, "input_wait_ms"), s[2], 32);
        tml__fmt_ms(num_at(r, "forward_ms"), s[3], 32);
        tml__fmt_ms(num_at(r, "backward_ms"), s[4], 32);
        tml__fmt_ms(num_at(r, "optimizer_ms"), s[5], 32);
        int is_worst = num_at(r, "rank") == worst;
        if (is_worst)
            attron(TML_ATTR_BOLD);
        const char *lab = str_at(r, "label");
        char cpu[32] = "";
        if (nodes) {
            char pct[24];
            tml__fmt_pct(gauge(doc, "traceml_system_cpu_percent", "node", num_at(r, "node")),
                         pct, sizeof(pct));
            snprintf(cpu, sizeof(cpu), " %9s", pct);
        }
        putf(y + 2 + i, x + 2, w - 4, "%-10s %7.0f %8s %8s %9s %9s %9s %10s%s%s",
             lab ? lab : "?", num_at(r, "steps_received"), s[0], s[1], s[2], s[3], s[4], s[5],
             cpu, is_worst ? mark : "");
        if (is_worst)
            attroff(TML_ATTR_BOLD);
    }
    return h;
}

static void draw_output(const tml_out_lines *out, int y, int x, int w, int h)
{
    if (h < 3)
        return;
    frame(y, x, h, w, "TRAINING OUTPUT");
    /* the last lines, the one being written included when non-empty */
    size_t show = tml__out_lines_tail(out, (size_t)(h - 2));
    for (size_t k = 0; k < show; k++)
        put(y + 1 + (int)k, x + 2, w - 4, tml__out_lines_at(out, show, k));
}

/* Any rank has sent a step. */
static int has_steps(const tml_json *doc)
{
    const tml_json *ranks = tml__json_get(doc, "ranks");
    for (size_t i = 0; ranks && i < ranks->n; i++)
        if (num_at(&ranks->items[i], "steps_received") > 0)
            return 1;
    return 0;
}


/* The findings named under the verdict (verdict.also: "Also: ..."), a
 * line each in their severity's colour, at most maxlines. Returns the
 * lines used. */
static int also_rows(const tml_json *doc, int y, int W, int maxlines)
{
    const tml_json *also = tml__json_path(doc, "verdict.also");
    int n = 0;
    for (size_t i = 0; also && also->type == TML_JSON_ARRAY && i < also->n && n < maxlines; i++) {
        const char *label = str_at(&also->items[i], "label");
        const char *sev = str_at(&also->items[i], "severity");
        const char *why = str_at(&also->items[i], "why");
        int col = sev_color(sev);
        attron(col);
        putf(y + n, 1, W - 2, "Also: %s (%s): %s", label ? label : "?", sev ? sev : "INFO",
             why ? why : "");
        attroff(col);
        n++;
    }
    return n;
}

/* The top row: the run, its ranks, the last step, the clock; or why
 * there is nothing to show yet. */
static void draw_header(const tml_live_frame *f, const tml_json *doc, int W)
{
    char hdr[512];
    if (doc) {
        const tml_json *ranks = tml__json_get(doc, "ranks");
        double last = -1;
        for (size_t i = 0; ranks && i < ranks->n; i++) {
            double l = num_at(&ranks->items[i], "last_step");
            if (!isnan(l) && l > last)
                last = l;
        }
        const char *clk = str_at(doc, "window.clock");
        snprintf(hdr, sizeof(hdr), " TraceML live \u00b7 %s \u00b7 %zu rank%s \u00b7 step %.0f "
                 "\u00b7 %.0fs \u00b7 %s clock",
                 f->run_name, ranks ? ranks->n : 0, ranks && ranks->n == 1 ? "" : "s",
                 last < 0 ? 0 : last, num_at(doc, "elapsed_s"),
                 clk && strcmp(clk, "gpu") == 0 ? "GPU" : "CPU");
        double rate = num_at(doc, "throughput.samples_per_s");
        if (!isnan(rate)) {
            char r[48];
            size_t n = strlen(hdr);
            tml__fmt_si(rate, "", " samples/s", r, sizeof(r));
            snprintf(hdr + n, sizeof(hdr) - n, " \u00b7 %s", r);
        }
    } else {
        snprintf(hdr, sizeof(hdr), " TraceML live \u00b7 %s \u00b7 %s", f->run_name,
                 f->status && f->status[0] ? f->status : "waiting for the first steps");
    }
    if (!tml__screen_utf8(screen))
        for (char *p = hdr; *p; p++)
            if ((unsigned char)*p == 0xC2 && (unsigned char)p[1] == 0xB7) {
                p[0] = ' ';
                p[1] = '|';
            }
    attron(TML_ATTR_REVERSE);
    tml__screen_fill(screen, 0, 0, " ", W);
    put(0, 0, W, hdr);
    put(0, W - 14 > 0 ? W - 14 : 0, 14, " q: hide view ");
    attroff(TML_ATTR_REVERSE);
}

/* The verdict from row y, with its Why, Next and Also lines; returns the
 * row after them. */
static int draw_verdict(const tml_json *doc, int y, int W, int H)
{
    const char *label = str_at(doc, "verdict.label");
    const char *sev = str_at(doc, "verdict.severity");
    int col = sev_color(sev);
    attron(TML_ATTR_BOLD | col);
    putf(y, 1, W - 2, "Verdict: %s (%s)", label ? label : "NO DATA", sev ? sev : "INFO");
    attroff(TML_ATTR_BOLD | col);
    attron(TML_ATTR_DIM);
    putf(y, 1 + 14 + (int)strlen(label ? label : "NO DATA") + (int)strlen(sev ? sev : "INFO"),
         W - 40, "over the last %.0f steps", num_at(doc, "window.window_steps"));
    attroff(TML_ATTR_DIM);
    const char *why = str_at(doc, "verdict.why"), *next = str_at(doc, "verdict.next");
    why = why && *why ? why : "-";
    next = next && *next ? next : "-";
    /* Why, Next and what is named under the verdict share the rows the
     * panels leave (PANELS_MIN_ROWS below them): Why first, then Next
     * in full (up to 5 rows, its sentence ending on screen), then the
     * Also lines; a small terminal shows fewer of them. */
    int room = H - y - 2 - (W >= 60 ? PANELS_MIN_ROWS : 0);
    int nwhy = put_wrapped(-1, 1, W - 2, "Why: ", why, 2);
    int nnext = put_wrapped(-1, 1, W - 2, "Next: ", next, 5);
    if (nnext > room - nwhy)
        nnext = room - nwhy > 1 ? room - nwhy : 1;
    y += 1 + put_wrapped(y + 1, 1, W - 2, "Why: ", why, 2);
    y += put_wrapped(y, 1, W - 2, "Next: ", next, nnext);
    y += also_rows(doc, y, W, room - nwhy - nnext);
    return y;
}

/* The timing and resource panels (side by side from 100 columns), then
 * the ranks, from row y when they fit; returns the rows used. */
static int draw_panels(const tml_json *doc, int y, int W, int H)
{
    if (W < 60 || H - y < PANELS_MIN_ROWS)
        return 0;
    int used;
    if (W >= 100 && H - y >= 14 + 3) {
        int lw = W * 58 / 100;
        int h1 = draw_timing(doc, y, 0, lw);
        int h2 = draw_resources(doc, y, lw, W - lw);
        used = h1 > h2 ? h1 : h2;
    } else {
        used = draw_timing(doc, y, 0, W);
        if (H - (y + used) >= 14 + 5)
            used += draw_resources(doc, y + used, 0, W);
        else
            used += draw_resources_compact(doc, y + used, 0, W);
    }
    int maxh = (H - (y + used)) - 6;
    return used + draw_ranks(doc, y + used, 0, W, maxh > 12 ? 12 : maxh);
}

void tml__live_draw(tml_screen *scr, const tml_live_frame *f)
{
    screen = scr;
    tml__screen_erase(screen);
    int W = tml__screen_cols(screen), H = tml__screen_rows(screen);
    const tml_json *doc = f->doc;
    /* no step yet (ranks still starting, records on their way): say so
     * rather than "0 ranks, step 0" while the training prints step 40 */
    if (doc && !has_steps(doc))
        doc = NULL;
    draw_header(f, doc, W);
    int y = 1;
    if (doc)
        y = draw_verdict(doc, y, W, H);
    y += 1;
    if (doc)
        y += draw_panels(doc, y, W, H);
    draw_output(f->output, y, 0, W, H - y);
    tml__screen_refresh(screen);
}
