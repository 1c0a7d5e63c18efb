/*
 * deepdive.c - the deep-dive window's rows (deepdive.h): allocation and
 * the one bounded append every side uses (the engine from the public
 * call, the wire's decoder), so a name is cut the same way everywhere.
 */
#include "model/deepdive.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traceml/traceml.h"

static tml_dd_window *with_room(size_t cap)
{
    tml_dd_window *d = calloc(1, sizeof(*d) + cap * sizeof(tml_dd_row));
    if (d)
        d->cap = cap;
    return d;
}

tml_dd_window *tml__dd_new(void)
{
    return with_room(TML_DD_MAX_ROWS);
}

tml_dd_window *tml__dd_copy(const tml_dd_window *d)
{
    size_t n = d->nrows < d->cap ? d->nrows : d->cap;
    tml_dd_window *c = with_room(n);
    if (!c)
        return NULL;
    memcpy(c, d, sizeof(*d));
    c->nrows = c->cap = n;
    if (n)
        memcpy(c->rows, d->rows, n * sizeof(*d->rows));
    return c;
}

void tml__dd_free(tml_dd_window *d)
{
    free(d);
}

int tml__dd_add(tml_dd_window *d, const char *module, const char *op, int64_t self_ns,
                int64_t calls)
{
    if (d->nrows >= d->cap || d->nrows >= TML_DD_MAX_ROWS)
        return TML_EFULL;
    tml_dd_row *r = &d->rows[d->nrows++];
    snprintf(r->module, sizeof(r->module), "%s", module ? module : "");
    snprintf(r->op, sizeof(r->op), "%s", op ? op : "");
    r->self_ns = self_ns < 0 ? 0 : self_ns;
    r->calls = calls < 0 ? 0 : calls;
    return 0;
}
