/*
 * utf8.h - display width of UTF-8 text, for the box and the terminal view.
 */
#ifndef TML_UTF8_H
#define TML_UTF8_H

#include <stddef.h>

/* Columns: one per code point (the box draws no wide characters). */
size_t tml__utf8_width(const char *s);

#endif
