/*
 * fmt.c - durations, sizes and shares as every view prints them (fmt.h).
 */
#include "base/fmt.h"

#include <math.h>
#include <stdio.h>

void tml__fmt_bytes(double b, char *out, size_t cap)
{
    double m = fabs(b);
    if (isnan(b))
        snprintf(out, cap, "n/a");
    else if (m >= 1e9)
        snprintf(out, cap, "%.1f GB", b / 1e9);
    else if (m >= 1e6)
        snprintf(out, cap, "%.1f MB", b / 1e6);
    else if (m >= 1e3)
        snprintf(out, cap, "%.1f KB", b / 1e3);
    else
        snprintf(out, cap, "%.0f B", b);
}

void tml__fmt_ms(double ms, char *out, size_t cap)
{
    double m = fabs(ms);
    if (isnan(ms))
        snprintf(out, cap, "n/a");
    else if (m >= 10000)
        snprintf(out, cap, "%.1f s", ms / 1000.0);
    else if (m != 0 && m < 0.1)
        snprintf(out, cap, "%.2f ms", ms);
    else
        snprintf(out, cap, "%.1f ms", ms);
}

void tml__fmt_pct(double p, char *out, size_t cap)
{
    if (isnan(p))
        snprintf(out, cap, "n/a");
    else if (p > 0 && p < 0.5)
        snprintf(out, cap, "<1%%");
    else
        snprintf(out, cap, "%.0f%%", p);
}
