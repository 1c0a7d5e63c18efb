/*
 * utf8.h - display width of UTF-8 text, for the box and the terminal view.
 */
#ifndef TML_UTF8_H
#define TML_UTF8_H

#include <stddef.h>

/* Columns: one per code point (the box draws no wide characters). */
size_t tml__utf8_width(const char *s);
/* Makes s[0..n) safe to print to a terminal, in place: each control
 * character (C0 but newline and tab, DEL, and the C1 controls U+0080 to
 * U+009F, two bytes in UTF-8) becomes one '?', which is one column as the
 * control was in tml__utf8_width. Returns the new length (at most n) and
 * ends the text with a NUL there when n was not 0. Text a user named
 * (a model's class, a hand-edited summary) must not drive the terminal
 * that prints it, today or when a file holding it is cat'ed. */
size_t tml__utf8_printable(char *s, size_t n);

#endif
