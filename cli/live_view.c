/*
 * live_view.c - the terminal view of `traceml run --mode cli`.
 *
 * The launcher draws it, not the aggregator: the launcher owns the terminal
 * and the training's output, while the aggregator owns the data. The view
 * asks the aggregator's live server for /api/live once per interval (a
 * loopback HTTP GET that takes well under a millisecond) and draws the JSON
 * it gets, so the terminal view and the browser dashboard show the very same
 * numbers, computed once, in C, by live/snapshot.c.
 *
 * Full screen draws on screen.c, the few escape sequences every ANSI
 * terminal knows (no curses): each refresh erases and redraws everything
 * and the screen sends the rows that changed, which is what makes it cheap
 * over SSH; a resize (SIGWINCH, which the screen turns into
 * TML_KEY_RESIZE) is just the next redraw at the new size.
 *
 * The training writes into a pseudo-terminal, so Python keeps its terminal
 * buffering and progress bars draw; but the view does not read that pty.
 * A drainer process (drain.c) does, into <run_dir>/training_output.log,
 * and the view tails the file: each poll reads the bytes appended since
 * the last one, so the panel still shows lines as they are printed, while
 * a launcher that is stopped or killed never blocks the training's
 * writes nor turns them into EIO (if the launcher dies, the drainer goes
 * on printing to the terminal). In the panel escape sequences are dropped
 * and a bare CR (progress bars) rewrites the current line; the file keeps
 * everything, since the full-screen view does not leave it in the
 * terminal's scrollback. When the view is hidden (q) the tail goes to the
 * terminal instead of the panel.
 *
 * When the terminal cannot do it (not a tty, TERM unset or "dumb") the
 * view prints one plain line per interval instead and leaves the
 * training's output alone.
 */
#include "live_view.h"
#include "drain.h"

#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "screen.h"
#include "base/json.h"
#include "base/fmt.h"
#include "base/fs.h"
#include "base/strbuf.h"

/* The rows the timing and resource panels need under the verdict: the
 * timing panel (10), the resources in their compact form (5), 2 of
 * training output. */
#define PANELS_MIN_ROWS (10 + 5 + 2)
#define OUT_LINES 1000
#define OUT_COLS 400

struct tml_live_view {
    int live_port, interval_ms;
    int full;             /* drawing full screen now */
    int hidden;           /* q was pressed */
    int ended;
    int utf8;
    tml_screen *scr;      /* full screen (screen.h) */
    int draining;         /* the training's output comes through drain */
    tml_drain drain;      /* its pty, drainer and training_output.log (drain.h) */
    char run_name[128];
    char out_path[4200];
    int64_t next_fetch_ms, next_draw_ms;
    tml_json *doc;        /* the last /api/live */
    char status_msg[160];
    uint64_t last_plain_steps;
    /* training output: a ring of lines, the last one being written */
    char (*lines)[OUT_COLS];
    size_t nlines, head;  /* head: index of the line being written */
    size_t col;
    int esc;              /* inside an escape sequence: 1 after ESC, 2 in CSI, 3 in OSC */
};

/* ---- data ---------------------------------------------------------- */

/* GET path from the live server; the body as a parsed JSON document. */
static tml_json *fetch_json(int port, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    struct timeval tv = {0, 500000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    tml_strbuf resp = TML_STRBUF_INIT;
    tml_json *doc = NULL;
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
        goto done;
    char req[256];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
        goto done;
    for (;;) {
        if (tml__sb_grow(&resp, 65536) < 0 || resp.len > (64u << 20))
            goto done;
        ssize_t r = recv(fd, resp.buf + resp.len, 65536, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            goto done;
        if (r == 0)
            break;
        resp.len += (size_t)r;
    }
    if (!resp.len || strncmp(resp.buf, "HTTP/1.1 200", 12) != 0)
        goto done;
    resp.buf[resp.len] = '\0';
    const char *body = strstr(resp.buf, "\r\n\r\n");
    if (!body)
        goto done;
    body += 4;
    tml__json_parse(body, resp.len - (size_t)(body - resp.buf), &doc, NULL);
done:
    close(fd);
    tml__sb_release(&resp);
    return doc;
}

static double num_at(const tml_json *v, const char *path)
{
    double d;
    return tml__json_num(tml__json_path(v, path), &d) ? d : NAN;
}

static const char *str_at(const tml_json *v, const char *path)
{
    return tml__json_str(tml__json_path(v, path));
}

/* ---- training output ----------------------------------------------- */

static char *cur_line(tml_live_view *v)
{
    return v->lines[v->head];
}

static void new_line(tml_live_view *v)
{
    v->head = (v->head + 1) % OUT_LINES;
    v->lines[v->head][0] = '\0';
    v->col = 0;
    if (v->nlines < OUT_LINES)
        v->nlines++;
}

/* Feeds output bytes into the line ring: escape sequences dropped, CR
 * rewrites the line, tabs expanded, other controls dropped. */
static void feed_output(tml_live_view *v, const char *p, size_t n)
{
    if (!v->lines)
        return;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (v->esc == 1) {   /* after ESC */
            v->esc = c == '[' ? 2 : c == ']' ? 3 : 0;
            continue;
        }
        if (v->esc == 2) {   /* CSI: parameters until a final byte */
            if (c >= 0x40 && c <= 0x7e)
                v->esc = 0;
            continue;
        }
        if (v->esc == 3) {   /* OSC: until BEL (or ESC \) */
            if (c == 0x07 || c == 0x1b)
                v->esc = c == 0x1b ? 1 : 0;
            continue;
        }
        if (c == 0x1b) {
            v->esc = 1;
        } else if (c == '\n') {
            new_line(v);
        } else if (c == '\r') {
            v->col = 0;
            cur_line(v)[0] = '\0';
        } else if (c == '\t') {
            do {
                if (v->col < OUT_COLS - 1)
                    cur_line(v)[v->col++] = ' ';
            } while (v->col % 8 && v->col < OUT_COLS - 1);
            cur_line(v)[v->col] = '\0';
        } else if (c >= 0x20 && c != 0x7f) {
            if (v->col < OUT_COLS - 1) {
                cur_line(v)[v->col++] = (char)c;
                cur_line(v)[v->col] = '\0';
            }
        }
    }
}

static void show_output(void *ctx, const char *p, size_t n)
{
    tml_live_view *v = ctx;
    if (v->hidden || !v->full)
        tml__write_all(1, p, n);
    else
        feed_output(v, p, n);
}

/* What the training wrote since the last call, from the tail of
 * training_output.log (the drainer writes it, drain.c). */
static void read_output(tml_live_view *v)
{
    if (v->draining)
        tml__drain_pump(&v->drain, show_output, v);
}

/* ---- drawing ------------------------------------------------------- */

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

/* prefix + text wrapped at spaces over at most maxlines lines (the last
 * one cut), continuation lines indented under the text. Lines used. */
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
static void sparkline(tml_live_view *v, int y, int x, int w, const tml_json *arr)
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
        if (v->utf8)
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

static int draw_timing(tml_live_view *v, const tml_json *doc, int y, int x, int w)
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
        sparkline(v, line++, x + 33, w - 35, tml__json_path(doc, rows[i].series));
    }
    return h;
}

static int draw_resources(tml_live_view *v, const tml_json *doc, int y, int x, int w)
{
    const tml_json *r = series_rank_row(doc);
    double rank = num_at(doc, "series.rank");
    char a[32], b[32], c[32], d[32];
    int h = 7;
    frame(y, x, h, w, "STEP MEMORY");
    tml__fmt_bytes(num_at(r, "rss_bytes"), a, sizeof(a));
    putf(y + 1, x + 2, w - 4, "RSS            %10s", a);
    sparkline(v, y + 1, x + 29, w - 31, tml__json_path(doc, "series.rss_bytes"));
    tml__fmt_bytes(num_at(r, "cuda_allocated_bytes"), a, sizeof(a));
    putf(y + 2, x + 2, w - 4, "CUDA allocated %10s", a);
    sparkline(v, y + 2, x + 29, w - 31, tml__json_path(doc, "series.cuda_allocated_bytes"));
    tml__fmt_bytes(num_at(r, "cuda_reserved_bytes"), a, sizeof(a));
    putf(y + 3, x + 2, w - 4, "CUDA reserved  %10s", a);
    sparkline(v, y + 3, x + 29, w - 31, tml__json_path(doc, "series.cuda_reserved_bytes"));
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

static void draw_output(tml_live_view *v, int y, int x, int w, int h)
{
    if (h < 3)
        return;
    frame(y, x, h, w, "TRAINING OUTPUT");
    int rows = h - 2;
    /* the last `rows` lines, the one being written included when non-empty */
    size_t have = v->nlines + 1;
    size_t skip_cur = cur_line(v)[0] == '\0' ? 1 : 0;
    size_t avail = have - skip_cur;
    size_t show = avail < (size_t)rows ? avail : (size_t)rows;
    for (size_t k = 0; k < show; k++) {
        size_t back = skip_cur + (show - 1 - k);
        size_t idx = (v->head + OUT_LINES - back) % OUT_LINES;
        put(y + 1 + (int)k, x + 2, w - 4, v->lines[idx]);
    }
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

static void draw(tml_live_view *v)
{
    screen = v->scr;
    tml__screen_erase(screen);
    int W = tml__screen_cols(screen), H = tml__screen_rows(screen);
    const tml_json *doc = v->doc;
    char hdr[512];
    /* no step yet (ranks still starting, records on their way): say so
     * rather than "0 ranks, step 0" while the training prints step 40 */
    if (doc && !has_steps(doc))
        doc = NULL;
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
                 v->run_name, ranks ? ranks->n : 0, ranks && ranks->n == 1 ? "" : "s",
                 last < 0 ? 0 : last, num_at(doc, "elapsed_s"),
                 clk && strcmp(clk, "gpu") == 0 ? "GPU" : "CPU");
    } else {
        snprintf(hdr, sizeof(hdr), " TraceML live \u00b7 %s \u00b7 %s", v->run_name,
                 v->status_msg[0] ? v->status_msg : "waiting for the first steps");
    }
    if (!v->utf8)
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

    int y = 1;
    if (doc) {
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
    }
    y += 1;
    int rest = H - y;
    if (doc && W >= 60 && rest >= PANELS_MIN_ROWS) {
        int used;
        if (W >= 100 && rest >= 14 + 3) {
            int lw = W * 58 / 100;
            int h1 = draw_timing(v, doc, y, 0, lw);
            int h2 = draw_resources(v, doc, y, lw, W - lw);
            used = h1 > h2 ? h1 : h2;
        } else {
            used = draw_timing(v, doc, y, 0, W);
            if (H - (y + used) >= 14 + 5)
                used += draw_resources(v, doc, y + used, 0, W);
            else
                used += draw_resources_compact(doc, y + used, 0, W);
        }
        y += used;
        int maxh = (H - y) - 6;
        y += draw_ranks(doc, y, 0, W, maxh > 12 ? 12 : maxh);
    }
    draw_output(v, y, 0, W, H - y);
    tml__screen_refresh(screen);
}

/* ---- life cycle ---------------------------------------------------- */

static int64_t now_ms(void)
{
    return tml__mono_ms();
}

static void size_pty(tml_live_view *v)
{
    if (!v->draining)
        return;
    struct winsize ws;
    memset(&ws, 0, sizeof(ws));
    if (v->full && !v->hidden) {
        int cols = tml__screen_cols(v->scr), rows = tml__screen_rows(v->scr);
        ws.ws_col = (unsigned short)(cols > 8 ? cols - 4 : 4);
        ws.ws_row = (unsigned short)(rows > 4 ? rows : 4);
    } else {
        ws.ws_col = 80;
        ws.ws_row = 24;
        struct winsize real;
        if (ioctl(1, TIOCGWINSZ, &real) == 0 && real.ws_col)
            ws = real;
    }
    tml__drain_resize(&v->drain, &ws);
}

/* Full screen, with the training's output through a pty and its drainer;
 * neither when either cannot be had. */
static void start_full_screen(tml_live_view *v)
{
    struct termios before;
    int have_tty = tcgetattr(1, &before) == 0;
    v->scr = tml__screen_new(0, 1, v->utf8);
    if (!v->scr)
        return;
    if (tml__drain_start(&v->drain, v->out_path, have_tty ? &before : NULL,
                         TML_SCREEN_LEAVE) < 0) {
        tml__screen_free(v->scr);
        v->scr = NULL;
        return;
    }
    v->full = v->draining = 1;
    size_pty(v);
}

tml_live_view *tml__view_new(const tml_view_opts *o)
{
    tml_live_view *v = calloc(1, sizeof(*v));
    if (!v)
        return NULL;
    v->live_port = o->live_port;
    v->interval_ms = o->interval_ms > 0 ? o->interval_ms : 1000;
    snprintf(v->run_name, sizeof(v->run_name), "%s", o->run_name ? o->run_name : "run");
    if (o->run_dir)
        snprintf(v->out_path, sizeof(v->out_path), "%s/training_output.log", o->run_dir);

    const char *term = getenv("TERM");
    int can = !o->force_plain && isatty(0) && isatty(1) && term && *term &&
              strcmp(term, "dumb") != 0;
    if (can) {
        setlocale(LC_ALL, "");
        const char *cs = nl_langinfo(CODESET);
        v->utf8 = cs && strcmp(cs, "UTF-8") == 0;
        v->lines = calloc(OUT_LINES, sizeof(*v->lines));
        if (v->lines && v->out_path[0])   /* the panel's lines come through the log */
            start_full_screen(v);
    }
    if (!v->full && !o->force_plain && can)
        tml__cli_warn("the terminal cannot show the live view (TERM=%s); printing plain lines",
                      term);
    return v;
}

int tml__view_fullscreen(const tml_live_view *v)
{
    return v && v->full;
}

int tml__view_child_fd(const tml_live_view *v)
{
    return v && v->draining ? v->drain.slave : -1;
}

void tml__view_started(tml_live_view *v)
{
    if (v && v->draining)
        tml__drain_started(&v->drain);
}

static void fetch(tml_live_view *v)
{
    if (v->live_port <= 0) {
        snprintf(v->status_msg, sizeof(v->status_msg), "no live data (aggregator not running)");
        return;
    }
    tml_json *doc = fetch_json(v->live_port, "/api/live");
    if (doc) {
        tml__json_free(v->doc);
        v->doc = doc;
        v->status_msg[0] = '\0';
    } else {
        snprintf(v->status_msg, sizeof(v->status_msg), "live data unavailable");
    }
}

static void plain_line(tml_live_view *v)
{
    if (!v->doc)
        return;
    const tml_json *ranks = tml__json_get(v->doc, "ranks");
    uint64_t steps = 0;
    for (size_t i = 0; ranks && i < ranks->n; i++) {
        double s = num_at(&ranks->items[i], "steps_received");
        if (!isnan(s) && (uint64_t)s > steps)
            steps = (uint64_t)s;
    }
    if (steps == v->last_plain_steps)
        return;   /* nothing new: no line */
    v->last_plain_steps = steps;
    const char *line = str_at(v->doc, "line");
    if (line) {
        fflush(stdout);
        tml__write_all(1, line, strlen(line));
        tml__write_all(1, "\n", 1);
    }
}

void tml__view_poll(tml_live_view *v, int timeout_ms)
{
    if (!v || v->ended) {
        tml__sleep_ms(timeout_ms);
        return;
    }
    if (v->full && !v->hidden) {   /* a key, or the time */
        struct pollfd pf = {0, POLLIN, 0};
        poll(&pf, 1, timeout_ms);
    } else {
        tml__sleep_ms(timeout_ms);
    }
    read_output(v);
    int64_t now = now_ms();
    int redraw = 0;
    if (v->full && !v->hidden) {
        int ch;
        while ((ch = tml__screen_key(v->scr)) != TML_KEY_NONE) {
            if (ch == 'q' || ch == 'Q') {
                v->hidden = 1;
                tml__screen_end(v->scr);
                if (v->draining)
                    tml__drain_set_screen(&v->drain, 0);
                size_pty(v);
                const char msg[] = "traceml: live view hidden; training continues, "
                                   "the summary follows at the end.\n";
                tml__write_all(1, msg, sizeof(msg) - 1);
                return;
            }
            if (ch == TML_KEY_RESIZE) {
                size_pty(v);
                redraw = 1;
            }
        }
    }
    if (now >= v->next_fetch_ms) {
        v->next_fetch_ms = now + v->interval_ms;
        if (!v->hidden)
            fetch(v);
        redraw = 1;
        if (!v->full)
            plain_line(v);
    }
    if (v->full && !v->hidden && (redraw || now >= v->next_draw_ms)) {
        v->next_draw_ms = now + 250;   /* output shows within a quarter second */
        draw(v);
    }
}

void tml__view_end(tml_live_view *v)
{
    if (!v || v->ended)
        return;
    /* what the training printed last: the drainer ends once every writer
     * has closed the pty, which the training's descendants may delay (wait
     * a little, not forever) */
    int64_t until = now_ms() + 300;
    read_output(v);
    while (v->draining && !tml__drain_done(&v->drain) && now_ms() < until) {
        tml__sleep_ms(5);
        read_output(v);
    }
    if (v->full && !v->hidden) {
        v->next_fetch_ms = 0;
        fetch(v);
        draw(v);
        tml__screen_end(v->scr);
    }
    v->ended = 1;
    if (v->full && !v->hidden) {
        /* the panel's last lines, so the terminal keeps the training's end */
        size_t have = v->nlines + (cur_line(v)[0] ? 1 : 0);
        size_t show = have < 10 ? have : 10;
        if (show) {
            tml_strbuf sb = TML_STRBUF_INIT;
            tml__sb_addf(&sb, "traceml: the training's last output (all of it: %s):\n",
                         v->out_path[0] ? v->out_path : "not saved");
            size_t skip_cur = cur_line(v)[0] ? 0 : 1;
            for (size_t k = 0; k < show; k++) {
                size_t back = skip_cur + (show - 1 - k);
                tml__sb_addf(&sb, "  %s\n", v->lines[(v->head + OUT_LINES - back) % OUT_LINES]);
            }
            if (!sb.failed)
                tml__write_all(1, sb.buf, sb.len);
            tml__sb_release(&sb);
        }
    }
    if (v->draining) {
        tml__drain_release(&v->drain);
        v->draining = 0;
    }
}

void tml__view_free(tml_live_view *v)
{
    if (!v)
        return;
    tml__view_end(v);
    tml__screen_free(v->scr);
    tml__json_free(v->doc);
    free(v->lines);
    free(v);
}

tml_live_view *tml__view_start(const char *mode, int port_wanted, int port_got,
                               const char *bind, int interval_ms, const tml_cli_run *r)
{
    if (!mode || strcmp(mode, "summary") == 0 || port_wanted < 0)
        return NULL;
    if (strcmp(mode, "dashboard") == 0) {
        const char *addr = bind && *bind ? bind : "127.0.0.1";
        if (port_got <= 0) {
            tml__cli_warn("the dashboard could not listen on %s:%d (port in use? see "
                          "%s/traceml.log); training continues without it "
                          "(try --dashboard-port)", addr, port_wanted, r->dir);
            return NULL;
        }
        char host[256] = "this-machine";
        if (gethostname(host, sizeof(host) - 1) != 0)
            snprintf(host, sizeof(host), "this-machine");
        int wildcard = strcmp(addr, "0.0.0.0") == 0;
        fprintf(stderr, "traceml: live dashboard: http://%s:%d/  (also /metrics, "
                "/api/live, /api/summary)\n", wildcard ? host : addr, port_got);
        if (!wildcard)
            fprintf(stderr, "traceml: from another machine: ssh -N -L %d:127.0.0.1:%d %s  "
                    "then open http://localhost:%d/\n", port_got, port_got, host, port_got);
        fflush(stderr);
        return NULL;
    }
    tml_view_opts o;
    memset(&o, 0, sizeof(o));
    o.live_port = port_got;
    o.interval_ms = interval_ms;
    o.run_dir = r->dir;
    o.run_name = r->name;
    return tml__view_new(&o);
}
