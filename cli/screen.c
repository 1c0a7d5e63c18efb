/*
 * screen.c - the live view's full-screen terminal, without curses.
 *
 * The view needs little of curses: a grid of characters with bold, dim,
 * reverse and three colours, redrawn each quarter second, a key or two,
 * and resizes. Every terminal it meets (xterm and its kin, tmux, screen,
 * the Linux console, the terminals of IDEs and SSH clients) speaks the
 * same ANSI/VT100 subset for that, so it is written here in a few escape
 * sequences, and TraceML links no ncurses: a static ncurses reads its
 * terminal database at a path compiled into it, which differs between
 * distributions and conda, and a build needed its headers and archives.
 * The terminals that do not speak ANSI announce themselves as TERM=dumb
 * (or are no terminal at all); the view prints plain lines for those.
 *
 * Like curses, the screen keeps two frames: the one being drawn and the
 * one the terminal shows. A refresh compares them row by row and sends,
 * for each row that changed, the run from its first to its last changed
 * cell, with an SGR sequence where the attributes change; an unchanged
 * frame sends nothing. That keeps a redraw every quarter second cheap
 * over SSH.
 *
 * A cell is one code point (the view's text is ASCII, box drawing and
 * block characters, all one column wide). A character a terminal would
 * draw in two columns, or none, would shift the rest of the row, so it
 * is drawn as '?'; so is everything outside ASCII when the locale is not
 * UTF-8, where the boxes are drawn with + - |.
 *
 * The terminal must come back as it was on every way out: tml__screen_end
 * (the view's end, or q), exit() (atexit), Ctrl-Z (SIGTSTP: left, and
 * taken again with a full redraw on SIGCONT), and, when the launcher is
 * killed outright, the drainer process, which writes TML_SCREEN_LEAVE and
 * the saved terminal settings in its stead (drain.c).
 */
#include "screen.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>
#include <wchar.h>

#include "base/fs.h"
#include "base/strbuf.h"

#define ENTER "\033[?1049h\033[?7l\033[?25l\033[0m\033[H\033[2J"

typedef struct cell {
    char glyph[4];
    unsigned char len;    /* bytes in glyph; 0: unknown (redraw it) */
    unsigned char attrs;
} cell;

struct tml_screen {
    int in, out, utf8;
    int rows, cols;
    int attrs;            /* for what is put next */
    int active;           /* the terminal is ours */
    int repaint;          /* the terminal shows an unknown frame: clear it first */
    pid_t owner;
    struct termios saved; /* the terminal's settings before */
    struct termios raw;
    cell *frame, *shown;  /* rows * cols each */
    tml_strbuf out_buf;
    unsigned char keys[64];
    size_t nkeys;
    struct sigaction old_winch, old_tstp;
    int tstp_caught;
};

static tml_screen *the_screen;   /* the one active, for the handlers */
static volatile sig_atomic_t size_changed;

/* ---- signals ------------------------------------------------------- */

static void on_winch(int sig)
{
    (void)sig;
    size_changed = 1;
}

/* Ctrl-Z: the terminal back, stopped; on SIGCONT taken again, repainted
 * (the shell drew on it meanwhile). Only async-signal-safe calls. */
static void on_tstp(int sig)
{
    tml_screen *s = the_screen;
    int saved_errno = errno;
    if (s && s->active) {
        tml__write_all(s->out, TML_SCREEN_LEAVE, sizeof(TML_SCREEN_LEAVE) - 1);
        tcsetattr(s->in, TCSADRAIN, &s->saved);
    }
    struct sigaction dfl, mine;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, &mine);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    raise(sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);   /* stops here until SIGCONT */
    sigaction(sig, &mine, NULL);
    if (s && s->active) {
        tcsetattr(s->in, TCSADRAIN, &s->raw);
        tml__write_all(s->out, ENTER, sizeof(ENTER) - 1);
    }
    size_changed = 1;   /* a full redraw, at whatever size it now has */
    errno = saved_errno;
}

static void at_exit(void)
{
    if (the_screen && the_screen->owner == getpid())
        tml__screen_end(the_screen);
}

static void catch_signals(tml_screen *s)
{
    static int registered;
    if (!registered && atexit(at_exit) == 0)
        registered = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_winch;
    sigaction(SIGWINCH, &sa, &s->old_winch);
    /* Ctrl-Z only where it stops the process (not ignored, not handled) */
    sigaction(SIGTSTP, NULL, &s->old_tstp);
    if (s->old_tstp.sa_handler == SIG_DFL) {
        sa.sa_handler = on_tstp;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGTSTP, &sa, NULL);
        s->tstp_caught = 1;
    }
}

/* ---- the frames ---------------------------------------------------- */

static const cell blank = {{' '}, 1, 0};

/* Takes the terminal's size; both frames reallocated and the next
 * refresh a full one. Keeps the old size when it cannot be read. */
static void take_size(tml_screen *s)
{
    struct winsize ws;
    int rows = s->rows ? s->rows : 24, cols = s->cols ? s->cols : 80;
    if (ioctl(s->out, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
        rows = ws.ws_row;
        cols = ws.ws_col;
    }
    size_t n = (size_t)rows * (size_t)cols;
    if (rows != s->rows || cols != s->cols || !s->frame) {
        cell *f = malloc(n * sizeof(*f)), *sh = malloc(n * sizeof(*sh));
        if (!f || !sh) {
            free(f);
            free(sh);
            return;
        }
        free(s->frame);
        free(s->shown);
        s->frame = f;
        s->shown = sh;
        s->rows = rows;
        s->cols = cols;
    }
    tml__screen_erase(s);
    memset(s->shown, 0, n * sizeof(*s->shown));   /* len 0: sent again */
    s->repaint = 1;
}

tml_screen *tml__screen_new(int in_fd, int out_fd, int utf8)
{
    if (!isatty(in_fd) || !isatty(out_fd) || the_screen)
        return NULL;
    tml_screen *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->in = in_fd;
    s->out = out_fd;
    s->utf8 = utf8;
    s->owner = getpid();
    if (tcgetattr(in_fd, &s->saved) < 0)
        goto fail;
    take_size(s);
    if (!s->frame)
        goto fail;
    /* cbreak: keys as typed, unechoed; ISIG kept, so Ctrl-C interrupts
     * the training as it does without the view */
    s->raw = s->saved;
    s->raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    s->raw.c_cc[VMIN] = 0;
    s->raw.c_cc[VTIME] = 0;
    if (tcsetattr(in_fd, TCSADRAIN, &s->raw) < 0)
        goto fail;
    the_screen = s;
    s->active = 1;
    catch_signals(s);
    size_changed = 0;
    tml__write_all(s->out, ENTER, sizeof(ENTER) - 1);
    return s;
fail:
    free(s->frame);
    free(s->shown);
    free(s);
    return NULL;
}

void tml__screen_end(tml_screen *s)
{
    if (!s || !s->active)
        return;
    s->active = 0;
    sigaction(SIGWINCH, &s->old_winch, NULL);
    if (s->tstp_caught)
        sigaction(SIGTSTP, &s->old_tstp, NULL);
    s->tstp_caught = 0;
    tml__write_all(s->out, TML_SCREEN_LEAVE, sizeof(TML_SCREEN_LEAVE) - 1);
    tcsetattr(s->in, TCSADRAIN, &s->saved);
    the_screen = NULL;
}

void tml__screen_free(tml_screen *s)
{
    if (!s)
        return;
    tml__screen_end(s);
    free(s->frame);
    free(s->shown);
    tml__sb_release(&s->out_buf);
    free(s);
}

int tml__screen_rows(const tml_screen *s)
{
    return s->rows;
}

int tml__screen_cols(const tml_screen *s)
{
    return s->cols;
}

int tml__screen_utf8(const tml_screen *s)
{
    return s->utf8;
}

void tml__screen_erase(tml_screen *s)
{
    size_t n = (size_t)s->rows * (size_t)s->cols;
    for (size_t i = 0; i < n; i++)
        s->frame[i] = blank;
}

void tml__screen_attron(tml_screen *s, int attrs)
{
    s->attrs |= attrs;
}

void tml__screen_attroff(tml_screen *s, int attrs)
{
    s->attrs &= ~attrs;
}

/* The length of the UTF-8 character at p (at most n bytes), 0 when it is
 * not one. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    size_t len = p[0] < 0x80 ? 1 : p[0] >= 0xC2 && p[0] < 0xE0 ? 2
               : p[0] >= 0xE0 && p[0] < 0xF0 ? 3 : p[0] >= 0xF0 && p[0] < 0xF5 ? 4 : 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

/* One column wide on the terminal (glibc's wcwidth, in the UTF-8 locale
 * the view set). */
static int one_column(const char *p, size_t len)
{
    wchar_t wc;
    mbstate_t st;
    memset(&st, 0, sizeof(st));
    size_t r = mbrtowc(&wc, p, len, &st);
    return r == len && wcwidth(wc) == 1;
}

int tml__screen_put(tml_screen *s, int y, int x, const char *text, size_t len)
{
    if (y < 0 || y >= s->rows || x < 0)
        return x;
    const unsigned char *p = (const unsigned char *)text;
    size_t i = 0;
    while (i < len && p[i] && x < s->cols) {
        size_t n = utf8_len(p + i, len - i);
        cell c = {{'?'}, 1, (unsigned char)s->attrs};
        if (n == 1 && p[i] >= 0x20 && p[i] != 0x7f)
            c.glyph[0] = (char)p[i];
        else if (n > 1 && s->utf8 && one_column(text + i, n)) {
            memcpy(c.glyph, p + i, n);
            c.len = (unsigned char)n;
        }
        s->frame[(size_t)y * (size_t)s->cols + (size_t)x++] = c;
        i += n ? n : 1;
    }
    return x;
}

void tml__screen_fill(tml_screen *s, int y, int x, const char *glyph, int n)
{
    size_t len = strlen(glyph);
    for (int i = 0; i < n && x < s->cols; i++)
        x = tml__screen_put(s, y, x, glyph, len);
}

/* ---- refresh ------------------------------------------------------- */

static int same(const cell *a, const cell *b)
{
    return a->len == b->len && a->attrs == b->attrs && memcmp(a->glyph, b->glyph, a->len) == 0;
}

static void add_sgr(tml_strbuf *sb, int attrs)
{
    tml__sb_adds(sb, "\033[0");
    if (attrs & TML_ATTR_BOLD)
        tml__sb_adds(sb, ";1");
    if (attrs & TML_ATTR_DIM)
        tml__sb_adds(sb, ";2");
    if (attrs & TML_ATTR_REVERSE)
        tml__sb_adds(sb, ";7");
    if (attrs & TML_ATTR_RED)
        tml__sb_adds(sb, ";31");
    else if (attrs & TML_ATTR_YELLOW)
        tml__sb_adds(sb, ";33");
    else if (attrs & TML_ATTR_GREEN)
        tml__sb_adds(sb, ";32");
    tml__sb_addc(sb, 'm');
}

void tml__screen_refresh(tml_screen *s)
{
    if (!s->active)
        return;
    tml_strbuf *sb = &s->out_buf;
    tml__sb_reset(sb);
    if (s->repaint)
        tml__sb_adds(sb, "\033[0m\033[H\033[2J");
    s->repaint = 0;
    int attrs = -1;   /* what the terminal has: unknown */
    for (int y = 0; y < s->rows; y++) {
        cell *row = s->frame + (size_t)y * (size_t)s->cols;
        cell *was = s->shown + (size_t)y * (size_t)s->cols;
        int x0 = 0, x1 = s->cols - 1;
        while (x0 < s->cols && same(&row[x0], &was[x0]))
            x0++;
        if (x0 == s->cols)
            continue;
        while (x1 > x0 && same(&row[x1], &was[x1]))
            x1--;
        tml__sb_addf(sb, "\033[%d;%dH", y + 1, x0 + 1);
        for (int x = x0; x <= x1; x++) {
            if (row[x].attrs != attrs) {
                attrs = row[x].attrs;
                add_sgr(sb, attrs);
            }
            tml__sb_add(sb, row[x].glyph, row[x].len);
            was[x] = row[x];
        }
    }
    if (attrs != -1 && attrs != 0)
        tml__sb_adds(sb, "\033[0m");
    if (sb->failed) {   /* out of memory: all of it again next time */
        tml__sb_release(sb);
        memset(s->shown, 0, (size_t)s->rows * (size_t)s->cols * sizeof(*s->shown));
        s->repaint = 1;
        return;
    }
    tml__write_all(s->out, sb->buf, sb->len);
}

/* ---- keys ---------------------------------------------------------- */

/* The bytes of the escape sequence at the start of k (n bytes): ESC [
 * parameters final, ESC O x, or a lone ESC; all of k when incomplete. */
static size_t escape_len(const unsigned char *k, size_t n)
{
    if (n < 2)
        return n;
    if (k[1] == 'O')
        return n < 3 ? n : 3;
    if (k[1] != '[')
        return 1;
    for (size_t i = 2; i < n; i++)
        if (k[i] >= 0x40 && k[i] <= 0x7e)
            return i + 1;
    return n;
}

int tml__screen_key(tml_screen *s)
{
    if (!s->active)
        return TML_KEY_NONE;
    if (size_changed) {
        size_changed = 0;
        take_size(s);
        return TML_KEY_RESIZE;
    }
    for (;;) {
        if (!s->nkeys) {
            ssize_t r = read(s->in, s->keys, sizeof(s->keys));
            if (r <= 0)
                return TML_KEY_NONE;
            s->nkeys = (size_t)r;
        }
        size_t used = s->keys[0] == 0x1b ? escape_len(s->keys, s->nkeys) : 1;
        int key = s->keys[0] == 0x1b ? TML_KEY_NONE : s->keys[0];
        memmove(s->keys, s->keys + used, s->nkeys - used);
        s->nkeys -= used;
        if (key != TML_KEY_NONE)
            return key;
    }
}
