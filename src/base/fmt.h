/*
 * fmt.h - one way to print a duration, a size and a share, for every view
 * (the box, compare, the evidence lines, the terminal view; the web pages
 * follow the same policy in JavaScript).
 *
 * Unit policy: decimal SI sizes, as the product brief prints them (1 GB =
 * 10^9 bytes, one decimal: "3.2 GB", "412.0 MB"); durations in ms with one
 * decimal, two below 0.1 ms, seconds from 10 s; shares as whole percent,
 * "<1%" for a positive share under 0.5%. Missing (NAN) is "n/a".
 */
#ifndef TML_FMT_H
#define TML_FMT_H

#include <stddef.h>

void tml__fmt_bytes(double bytes, char *out, size_t cap);
void tml__fmt_ms(double ms, char *out, size_t cap);
void tml__fmt_pct(double percent, char *out, size_t cap);

#endif
