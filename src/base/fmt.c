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

void tml__fmt_si(double v, const char *sep, const char *unit, char *out, size_t cap)
{
    static const char pre[] = "\0kMGTPE";
    int k = 0;
    if (isnan(v)) {
        snprintf(out, cap, "n/a");
        return;
    }
    while (v >= 999.5 && k < 6) {
        v /= 1000;
        k++;
    }
    int digits = v < 9.995 ? 2 : v < 99.95 ? 1 : 0;
    if (k)
        snprintf(out, cap, "%.*f%s%c%s", digits, v, sep, pre[k], unit);
    else
        snprintf(out, cap, "%.*f%s%s", digits, v, sep, unit);
}
