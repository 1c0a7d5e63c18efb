/*
 * fmt.h - one way to print a duration, a size and a share, for every view
 * (the box, compare, the evidence lines, the terminal view; the web pages
 * follow the same policy in JavaScript).
 *
 * Unit policy: decimal SI sizes, as the product brief prints them (1 GB =
 * 10^9 bytes, one decimal: "3.2 GB", "412.0 MB"); durations in ms with one
 * decimal, two below 0.1 ms, seconds from 10 s; shares as whole percent,
 * "<1%" for a positive share under 0.5%; rates to three digits with an
 * SI prefix ("1.77k samples/s", "895 MFLOP/s"). Missing (NAN) is "n/a".
 */
#ifndef TML_FMT_H
#define TML_FMT_H

#include <stddef.h>

void tml__fmt_bytes(double bytes, char *out, size_t cap);
void tml__fmt_ms(double ms, char *out, size_t cap);
void tml__fmt_pct(double percent, char *out, size_t cap);
/* v to three digits, an SI prefix and the unit; sep goes between the
 * number and a prefix ("": "1.77k samples/s" with unit " samples/s";
 * " ": "895 MFLOP/s" with unit "FLOP/s"). */
void tml__fmt_si(double v, const char *sep, const char *unit, char *out, size_t cap);

#endif
