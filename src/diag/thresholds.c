/*
 * thresholds.c - reading threshold overrides ("input_warn=0.15,...").
 *
 * Defaults live with the rules (diag.c); this file only parses the user's
 * overrides (the edges read $TRACEML_THRESHOLDS and hand it down). The
 * parse is all or nothing: a typo in one key must not leave a half-applied configuration
 * that silently diagnoses with some defaults and some overrides, so the
 * result is built in a copy and committed only when every item was valid.
 */
#include "diag/diag.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct key {
    const char *name;
    size_t off;
    int integer;
} key;

#define FRAC(f) { #f, offsetof(tml_thresholds, f), 0 }
static const key keys[] = {
    FRAC(input_warn), FRAC(input_crit),
    FRAC(h2d_warn), FRAC(h2d_crit),
    FRAC(residual_warn), FRAC(residual_crit),
    FRAC(comm_warn), FRAC(comm_crit),
    { "compute", offsetof(tml_thresholds, compute_min), 0 },
    { "compute_other", offsetof(tml_thresholds, compute_other_max), 0 },
    FRAC(straggler_warn), FRAC(straggler_crit), FRAC(straggler_coverage),
    { "straggler_min_steps", offsetof(tml_thresholds, straggler_crit_min_steps), 1 },
    { "min_steps", offsetof(tml_thresholds, min_steps), 1 },
    FRAC(mem_pressure_warn), FRAC(mem_pressure_crit),
    { "mem_min_steps", offsetof(tml_thresholds, mem_min_steps), 1 },
    { "creep_mb", offsetof(tml_thresholds, creep_mb), 1 },
    FRAC(untraced_warn), FRAC(untraced_crit),
};
#undef FRAC

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
        if (strlen(keys[i].name) != klen || memcmp(keys[i].name, item, klen) != 0)
            continue;
        char *end = NULL;
        errno = 0;
        if (keys[i].integer) {
            if (val[0] == '-' || val[0] == '+')
                return TML_EINVAL;
            unsigned long long x = strtoull(val, &end, 10);
            if (errno || end == val || *end || x < 1 || x > 1000000000ULL)
                return TML_EINVAL;
            *(size_t *)(void *)((char *)t + keys[i].off) = (size_t)x;
        } else {
            double x = strtod(val, &end);
            if (errno || end == val || *end || !isfinite(x) || x < 0.0 || x > 1.0)
                return TML_EINVAL;
            *(double *)(void *)((char *)t + keys[i].off) = x;
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
