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
 * When the terminal cannot do it (not a tty, TERM unset or "dumb"), or is
 * not ours to change (the launcher is not in its foreground process
 * group), the view prints one plain line per interval instead and leaves
 * the training's output alone.
 *
 * This file is the view's life: when to fetch, draw, read keys and the
 * training's output. A frame is drawn by live_draw.c; the output panel's
 * lines are kept by live_lines.c.
 */
#include "live_view.h"
#include "drain.h"
#include "live_draw.h"

#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
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
#include "base/fs.h"
#include "base/strbuf.h"

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
    tml_out_lines output; /* the training output panel's lines (live_lines.h) */
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

/* ---- training output ----------------------------------------------- */

static void show_output(void *ctx, const char *p, size_t n)
{
    tml_live_view *v = ctx;
    if (v->hidden || !v->full)
        tml__write_all(1, p, n);
    else
        tml__out_lines_feed(&v->output, p, n);
}

/* What the training wrote since the last call, from the tail of
 * training_output.log (the drainer writes it, drain.c). */
static void read_output(tml_live_view *v)
{
    if (v->draining)
        tml__drain_pump(&v->drain, show_output, v);
}

/* ---- life cycle ---------------------------------------------------- */

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
    /* a launcher outside the terminal's foreground job (run by `timeout`,
     * `nohup ... &`, a CI wrapper, or put in the background) would be
     * stopped by SIGTTOU at its first change to the terminal's modes, and
     * the training with it: it leaves the terminal alone */
    /* a notebook's `!traceml run` (ipykernel's pexpect, Colab): a pseudo
     * terminal whose output goes into the cell, which draws no cursor
     * moves: plain lines */
    if (can && (getenv("JPY_PARENT_PID") || getenv("COLAB_RELEASE_TAG"))) {
        tml__cli_warn("in a notebook cell: the live view prints plain lines");
        can = 0;
    }
    if (can && tcgetpgrp(0) != getpgrp()) {
        tml__cli_warn("not the terminal's foreground job (timeout, nohup ... &, a job in the "
                      "background): the live view prints plain lines");
        can = 0;
    }
    if (can) {
        setlocale(LC_ALL, "");
        const char *cs = nl_langinfo(CODESET);
        v->utf8 = cs && strcmp(cs, "UTF-8") == 0;
        if (tml__out_lines_init(&v->output) == 0 && v->out_path[0])   /* the panel's lines come through the log */
            start_full_screen(v);
    }
    if (!v->full && !o->force_plain && can)
        tml__cli_warn("the terminal cannot show the live view (TERM=%s); printing plain lines",
                      term);
    return v;
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

static void draw(const tml_live_view *v)
{
    tml_live_frame f = {.doc = v->doc, .run_name = v->run_name, .status = v->status_msg,
                        .output = &v->output};
    tml__live_draw(v->scr, &f);
}

static void plain_line(tml_live_view *v)
{
    if (!v->doc)
        return;
    const tml_json *ranks = tml__json_get(v->doc, "ranks");
    uint64_t steps = 0;
    for (size_t i = 0; ranks && i < ranks->n; i++) {
        double s;
        if (tml__json_num(tml__json_path(&ranks->items[i], "steps_received"), &s) &&
            !isnan(s) && (uint64_t)s > steps)
            steps = (uint64_t)s;
    }
    if (steps == v->last_plain_steps)
        return;   /* nothing new: no line */
    v->last_plain_steps = steps;
    const char *line = tml__json_str(tml__json_path(v->doc, "line"));
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
    int64_t now = tml__mono_ms();
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

/* The panel's last lines, so the terminal keeps the training's end. */
static void print_last_output(const tml_live_view *v)
{
    size_t show = tml__out_lines_tail(&v->output, 10);
    if (!show)
        return;
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__sb_addf(&sb, "traceml: the training's last output (all of it: %s):\n",
                 v->out_path[0] ? v->out_path : "not saved");
    for (size_t k = 0; k < show; k++)
        tml__sb_addf(&sb, "  %s\n", tml__out_lines_at(&v->output, show, k));
    if (!sb.failed)
        tml__write_all(1, sb.buf, sb.len);
    tml__sb_release(&sb);
}

void tml__view_end(tml_live_view *v)
{
    if (!v || v->ended)
        return;
    /* what the training printed last: the drainer ends once every writer
     * has closed the pty, which the training's descendants may delay (wait
     * a little, not forever) */
    int64_t until = tml__mono_ms() + 300;
    read_output(v);
    while (v->draining && !tml__drain_done(&v->drain) && tml__mono_ms() < until) {
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
    if (v->full && !v->hidden)
        print_last_output(v);
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
    tml__out_lines_release(&v->output);
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
