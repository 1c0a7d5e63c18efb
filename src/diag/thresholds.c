/*
 * thresholds.c - reading threshold overrides ("input_warn=0.15,...").
 *
 * The thresholds' list is diag.h's TML_THRESHOLDS; this file makes its
 * table and defaults and parses the user's overrides (the edges read
 * $TRACEML_THRESHOLDS and hand it down). The
 * parse is all or nothing: a typo in one key must not leave a half-applied configuration
 * that silently diagnoses with some defaults and some overrides, so the
 * result is built in a copy and committed only when every item was valid.
 */
#include "diag/diag.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A field's type follows its kind: every field is in the list once. */
#define SIZE(key, field, integer, def) +sizeof(((tml_thresholds *)0)->field)
_Static_assert(0 TML_THRESHOLDS(SIZE) == sizeof(tml_thresholds),
               "every field of tml_thresholds has its line in TML_THRESHOLDS");
#undef SIZE

#define KEY(key, field, integer, def) {#key, offsetof(tml_thresholds, field), integer},
static const tml_threshold_key keys[] = {TML_THRESHOLDS(KEY)};
#undef KEY

const tml_threshold_key *tml__thresholds_keys(size_t *n)
{
    *n = sizeof(keys) / sizeof(keys[0]);
    return keys;
}

double tml__threshold_get(const tml_thresholds *t, const tml_threshold_key *k)
{
    const char *p = (const char *)t + k->off;
    return k->integer ? (double)*(const size_t *)(const void *)p : *(const double *)(const void *)p;
}

void tml__threshold_put(tml_thresholds *t, const tml_threshold_key *k, double v)
{
    char *p = (char *)t + k->off;
    if (k->integer)
        *(size_t *)(void *)p = (size_t)v;
    else
        *(double *)(void *)p = v;
}

void tml__thresholds_default(tml_thresholds *t)
{
#define DEF(key, field, integer, def) t->field = def;
    TML_THRESHOLDS(DEF)
#undef DEF
}

static int is_space(char c)
{
    return c == ' ' || c == '\t';
}

int tml__thresholds_set(tml_thresholds *t, const char *item, size_t n)
{
    char val[64];
    const char *eq;

    while (n && is_space(*item)) {
        item++;
        n--;
    }
    while (n && is_space(item[n - 1]))
        n--;
    if (n == 0)
        return 0;               /* empty item: "a=1,,b=2" or a trailing comma */
    eq = memchr(item, '=', n);
    if (!eq)
        return TML_EINVAL;
    size_t klen = (size_t)(eq - item);
    while (klen && is_space(item[klen - 1]))
        klen--;
    const char *v = eq + 1;
    size_t vlen = n - (size_t)(v - item);
    while (vlen && is_space(*v)) {
        v++;
        vlen--;
    }
    if (vlen == 0 || vlen >= sizeof(val))
        return TML_EINVAL;
    memcpy(val, v, vlen);
    val[vlen] = '\0';

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (strlen(keys[i].key) != klen || memcmp(keys[i].key, item, klen) != 0)
            continue;
        char *end = NULL;
        errno = 0;
        if (keys[i].integer) {
            if (val[0] == '-' || val[0] == '+')
                return TML_EINVAL;
            unsigned long long x = strtoull(val, &end, 10);
            if (errno || end == val || *end || x < 1 || x > 1000000000ULL)
                return TML_EINVAL;
            tml__threshold_put(t, &keys[i], (double)x);
        } else {
            double x = strtod(val, &end);
            if (errno || end == val || *end || !isfinite(x) || x < 0.0 || x > 1.0)
                return TML_EINVAL;
            tml__threshold_put(t, &keys[i], x);
        }
        return 0;
    }
    return TML_EINVAL;
}

int tml__thresholds_parse(tml_thresholds *t, const char *spec)
{
    tml_thresholds c = *t;

    if (!spec)
        return 0;
    const char *p = spec;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (tml__thresholds_set(&c, p, n) < 0)
            return TML_EINVAL;
        if (!comma)
            break;
        p = comma + 1;
    }
    if (c.input_warn > c.input_crit || c.h2d_warn > c.h2d_crit ||
        c.residual_warn > c.residual_crit || c.straggler_warn > c.straggler_crit ||
        c.comm_warn > c.comm_crit ||
        c.mem_pressure_warn > c.mem_pressure_crit || c.untraced_warn > c.untraced_crit)
        return TML_EINVAL;
    *t = c;
    return 0;
}
