/*
 * compare_dd.c - `traceml compare` below the phase (docs/compare.md,
 * docs/deep-dive.md): when both runs have a deep-dive window, which
 * modules and which operators changed their time most.
 *
 * Times are per profiled step, so a window of 3 steps compares with one of
 * 5. A summary keeps each run's top 8 of each: a name missing from one
 * run's list is 0 there when that list is not full (the run has fewer
 * than 8: the name did not run), unknown (NAN) when it is full (it ran,
 * below the 8th); an unknown change ranks after every known one. Pure: no
 * I/O, tested by a table (tests/unit/test_compare.c).
 */
#include "judge/compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* name's time in v, 0 when absent from a list that is not full, else NAN. */
static double time_of(const tml_cmp_dd_item *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return v[i].ms;
    return n < TML_CMP_DD_ITEMS ? 0 : NAN;
}

/* 1 when change x ranks before y: known before unknown, then by |delta|. */
static int before(const tml_cmp_dd_change *x, const tml_cmp_dd_change *y)
{
    if (isnan(x->delta_ms) != isnan(y->delta_ms))
        return !isnan(x->delta_ms);
    return fabs(x->delta_ms) > fabs(y->delta_ms);
}

/* Keeps the TML_CMP_DD_CHANGES largest changes of c in out (sorted). */
static void keep(tml_cmp_dd_change *out, size_t *n, const tml_cmp_dd_change *c)
{
    size_t at = *n;
    while (at > 0 && before(c, &out[at - 1]))
        at--;
    if (at >= TML_CMP_DD_CHANGES)
        return;
    size_t last = *n < TML_CMP_DD_CHANGES ? *n : TML_CMP_DD_CHANGES - 1;
    memmove(&out[at + 1], &out[at], (last - at) * sizeof(*out));
    out[at] = *c;
    if (*n < TML_CMP_DD_CHANGES)
        (*n)++;
}

static int seen(const tml_cmp_dd_change *out, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(out[i].name, name) == 0)
            return 1;
    return 0;
}

/* Every name of a's and b's lists, once each, its change kept when large. */
static void diff_lists(const tml_cmp_dd_item *a, size_t na, const tml_cmp_dd_item *b, size_t nb,
                       tml_cmp_dd_change *out, size_t *n)
{
    tml_cmp_dd_change all[2 * TML_CMP_DD_ITEMS];
    size_t m = 0;
    *n = 0;
    for (size_t i = 0; i < na + nb; i++) {
        const char *name = i < na ? a[i].name : b[i - na].name;
        if (seen(all, m, name))
            continue;
        tml_cmp_dd_change *c = &all[m++];
        snprintf(c->name, sizeof(c->name), "%s", name);
        c->a_ms = time_of(a, na, name);
        c->b_ms = time_of(b, nb, name);
        c->delta_ms = c->b_ms - c->a_ms;
        if (c->delta_ms != 0)   /* NAN too: unknown is shown, after the known */
            keep(out, n, c);
    }
}

void tml__cmp_deep_dive(const tml_cmp_dd *a, const tml_cmp_dd *b, tml_cmp_dd_diff *out)
{
    memset(out, 0, sizeof(*out));
    if (!a->ran || !b->ran)
        return;
    out->compared = 1;
    diff_lists(a->mod, a->nmod, b->mod, b->nmod, out->mod, &out->nmod);
    diff_lists(a->op, a->nop, b->op, b->nop, out->op, &out->nop);
}
