/*
 * rows.c - reading a double across rows (diag.h): the largest of a field
 * over a section's rows, which the rules (resources.c) and the report
 * model (report/derive.c) both name as "worst".
 */
#include "diag/diag.h"

#include <math.h>
#include <string.h>

static double at(const void *rows, size_t i, size_t stride, size_t off)
{
    double v;
    memcpy(&v, (const char *)rows + i * stride + off, sizeof(v));
    return v;
}

int tml__rows_argmax(const void *rows, size_t n, size_t stride, size_t off, size_t per,
                     double *max)
{
    int best = -1;
    double bv = NAN;
    for (size_t i = 0; i < n; i++) {
        double x = at(rows, i, stride, off);
        if (per != TML_ROWS_PLAIN) {
            double d = at(rows, i, stride, per);
            x = d > 0 ? x / d : NAN;
        }
        if (!isnan(x) && (best < 0 || x > bv)) {
            best = (int)i;
            bv = x;
        }
    }
    if (max)
        *max = bv;
    return best;
}
