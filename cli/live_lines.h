/*
 * live_lines.h - the training's last output lines, as the live view's
 * panel shows them (live_lines.c).
 *
 *     tml_out_lines o;
 *     if (tml__out_lines_init(&o) == 0) {
 *         tml__out_lines_feed(&o, bytes, n);          // as the training writes
 *         size_t show = tml__out_lines_tail(&o, 10);  // at most the last 10
 *         for (size_t k = 0; k < show; k++)
 *             puts(tml__out_lines_at(&o, show, k));    // oldest first
 *     }
 *     tml__out_lines_release(&o);
 *
 * Ownership: the lines are the struct's; a returned line stays valid until
 * the next feed.
 */
#ifndef TML_CLI_LIVE_LINES_H
#define TML_CLI_LIVE_LINES_H

#include <stddef.h>

#define TML_OUT_LINES 1000   /* lines kept */
#define TML_OUT_COLS 400     /* bytes a line, the rest cut */

typedef struct tml_out_lines {
    char (*lines)[TML_OUT_COLS];   /* a ring of lines, the last one being written */
    size_t nlines, head;           /* head: index of the line being written */
    size_t col;
    int esc;   /* inside an escape sequence: 1 after ESC, 2 in CSI, 3 in OSC */
} tml_out_lines;

/* 0, or -1 out of memory (o then keeps nothing: feeds are dropped). */
int tml__out_lines_init(tml_out_lines *o);
void tml__out_lines_release(tml_out_lines *o);
/* Output bytes into the lines: escape sequences dropped, CR rewrites the
 * line, tabs expanded, other controls dropped. */
void tml__out_lines_feed(tml_out_lines *o, const char *p, size_t n);
/* How many lines to show, at most max: the finished ones and the one
 * being written when it is not empty. */
size_t tml__out_lines_tail(const tml_out_lines *o, size_t max);
/* The k-th (oldest first) of the last `show` lines (show from _tail). */
const char *tml__out_lines_at(const tml_out_lines *o, size_t show, size_t k);

#endif
