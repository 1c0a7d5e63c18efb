/*
 * live_lines.c - the training's last output lines for the live view's
 * panel. The training's output is a terminal's: progress bars rewrite
 * their line with a bare CR and colour with escape sequences, so the
 * panel keeps what a terminal would show of each line, in plain text,
 * in a ring of fixed-size lines (the log file keeps every byte).
 */
#include "live_lines.h"

#include <stdlib.h>

int tml__out_lines_init(tml_out_lines *o)
{
    *o = (tml_out_lines){0};
    o->lines = calloc(TML_OUT_LINES, sizeof(*o->lines));
    return o->lines ? 0 : -1;
}

void tml__out_lines_release(tml_out_lines *o)
{
    free(o->lines);
    o->lines = NULL;
}

static char *cur_line(const tml_out_lines *o)
{
    return o->lines[o->head];
}

static void new_line(tml_out_lines *o)
{
    o->head = (o->head + 1) % TML_OUT_LINES;
    o->lines[o->head][0] = '\0';
    o->col = 0;
    if (o->nlines < TML_OUT_LINES)
        o->nlines++;
}

/* 1 when c belongs to an escape sequence (o->esc says where in one). */
static int in_escape(tml_out_lines *o, unsigned char c)
{
    if (o->esc == 1) {   /* after ESC */
        o->esc = c == '[' ? 2 : c == ']' ? 3 : 0;
    } else if (o->esc == 2) {   /* CSI: parameters until a final byte */
        if (c >= 0x40 && c <= 0x7e)
            o->esc = 0;
    } else if (o->esc == 3) {   /* OSC: until BEL (or ESC \) */
        if (c == 0x07 || c == 0x1b)
            o->esc = c == 0x1b ? 1 : 0;
    } else {
        return 0;
    }
    return 1;
}

void tml__out_lines_feed(tml_out_lines *o, const char *p, size_t n)
{
    if (!o->lines)
        return;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (in_escape(o, c))
            continue;
        if (c == 0x1b) {
            o->esc = 1;
        } else if (c == '\n') {
            new_line(o);
        } else if (c == '\r') {
            o->col = 0;
            cur_line(o)[0] = '\0';
        } else if (c == '\t') {
            do {
                if (o->col < TML_OUT_COLS - 1)
                    cur_line(o)[o->col++] = ' ';
            } while (o->col % 8 && o->col < TML_OUT_COLS - 1);
            cur_line(o)[o->col] = '\0';
        } else if (c >= 0x20 && c != 0x7f) {
            if (o->col < TML_OUT_COLS - 1) {
                cur_line(o)[o->col++] = (char)c;
                cur_line(o)[o->col] = '\0';
            }
        }
    }
}

size_t tml__out_lines_tail(const tml_out_lines *o, size_t max)
{
    if (!o->lines)
        return 0;
    size_t have = o->nlines + (cur_line(o)[0] ? 1 : 0);
    return have < max ? have : max;
}

const char *tml__out_lines_at(const tml_out_lines *o, size_t show, size_t k)
{
    size_t skip_cur = cur_line(o)[0] ? 0 : 1;   /* the line being written, when empty */
    size_t back = skip_cur + (show - 1 - k);
    return o->lines[(o->head + TML_OUT_LINES - back) % TML_OUT_LINES];
}
