/*
 * deepdive.c - the deep dive's part of the report model (model.h,
 * tml_report_dd; docs/deep-dive.md): where the compute of the profiled
 * window went, ranked.
 *
 * A rank sends rows of (module path, operator, self time, calls)
 * (model/deepdive.h). A module's time is the self time of every operator
 * under it, its submodules' included, so the report ranks modules at one
 * level of the model: its children ("heavy_block", "stem"), or, while a
 * level holds one module only (a model wrapped in a "backbone"), the level
 * below, since "100% in backbone" says nothing. Percentages are of the
 * window's profiled self time, what runs outside any module (loss,
 * optimizer) included, so they add up to 100 with the "" row.
 *
 * With several ranks, the figures shown are the lowest rank's, and the
 * module whose time differs most between two ranks is the spread: a
 * COMPUTE STRAGGLER's culprit, named.
 */
#include "report/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DD_MAX_DEPTH 4

/* The first `depth` dot-separated parts of path, into out. */
static void prefix(const char *path, int depth, char *out, size_t cap)
{
    size_t n = 0;
    for (int d = 0; path[n] && d < depth; d++) {
        n += strcspn(path + n, ".");
        if (d + 1 < depth && path[n] == '.')
            n++;
    }
    if (n && path[n - 1] == '.')
        n--;
    snprintf(out, cap, "%.*s", (int)n, path);
}

/* The level at which the modules are ranked (the file's essay). */
static int module_depth(const tml_dd_window *d)
{
    int depth = 1;
    for (; depth < DD_MAX_DEPTH; depth++) {
        char first[TML_DD_NAME] = "", name[TML_DD_NAME];
        int distinct = 0, deeper = 0;
        for (size_t i = 0; i < d->nrows && distinct < 2; i++) {
            if (!d->rows[i].module[0])
                continue;
            prefix(d->rows[i].module, depth, name, sizeof(name));
            if (!first[0])
                snprintf(first, sizeof(first), "%s", name);
            else if (strcmp(first, name) != 0)
                distinct = 2;
            distinct += distinct == 0;
            deeper |= strlen(d->rows[i].module) > strlen(name);
        }
        if (distinct != 1 || !deeper)
            break;
    }
    return depth;
}

/* The entry of v[0..*n) named name (op "" for modules), added when new
 * and there is room (cap), else NULL. */
static tml_dd_item *item(tml_dd_item *v, size_t *n, size_t cap, const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(v[i].name, name) == 0)
            return &v[i];
    if (*n >= cap)
        return NULL;
    tml_dd_item *it = &v[(*n)++];
    memset(it, 0, sizeof(*it));
    snprintf(it->name, sizeof(it->name), "%s", name);
    return it;
}

static void sort_items(tml_dd_item *v, size_t n)
{
    for (size_t i = 1; i < n; i++)      /* insertion sort: at most 256 */
        for (size_t j = i; j > 0 && v[j].ns > v[j - 1].ns; j--) {
            tml_dd_item t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
}

/* Every module of d at `depth`, with its time and its heaviest operator,
 * heaviest first, into v (TML_DD_MAX_ROWS room); returns their count. */
static size_t modules_of(const tml_dd_window *d, int depth, tml_dd_item *v)
{
    size_t n = 0, at[TML_DD_MAX_ROWS];   /* row i's module: v[at[i]] */
    double best[TML_DD_MAX_ROWS] = {0};  /* per module: its heaviest operator's time */
    for (size_t i = 0; i < d->nrows; i++) {
        char name[TML_DD_NAME];
        prefix(d->rows[i].module, depth, name, sizeof(name));
        tml_dd_item *it = item(v, &n, TML_DD_MAX_ROWS, name);
        at[i] = (size_t)(it - v);
        it->ns += (double)d->rows[i].self_ns;
        it->calls += d->rows[i].calls;
    }
    for (size_t i = 0; i < d->nrows; i++) {
        double op_ns = 0;   /* row i's operator in its module, over every row */
        for (size_t j = 0; j < d->nrows; j++)
            if (at[j] == at[i] && strcmp(d->rows[j].op, d->rows[i].op) == 0)
                op_ns += (double)d->rows[j].self_ns;
        /* a folded row names no operator: the last choice */
        int other = strcmp(d->rows[i].op, TML_DD_OTHER) == 0;
        int cur_other = strcmp(v[at[i]].op, TML_DD_OTHER) == 0;
        if (other && v[at[i]].op[0] && !cur_other)
            continue;
        if (op_ns > best[at[i]] || !v[at[i]].op[0] || (cur_other && !other)) {
            best[at[i]] = op_ns;
            snprintf(v[at[i]].op, sizeof(v[at[i]].op), "%s", d->rows[i].op);
        }
    }
    sort_items(v, n);
    return n;
}

static size_t ops_of(const tml_dd_window *d, tml_dd_item *v)
{
    size_t n = 0;
    for (size_t i = 0; i < d->nrows; i++) {
        tml_dd_item *it = item(v, &n, TML_DD_MAX_ROWS, d->rows[i].op);
        if (it) {
            it->ns += (double)d->rows[i].self_ns;
            it->calls += d->rows[i].calls;
        }
    }
    sort_items(v, n);
    return n;
}

static void top(tml_dd_item *dst, size_t *ndst, const tml_dd_item *v, size_t n, double total)
{
    *ndst = n < TML_DD_TOP ? n : TML_DD_TOP;
    for (size_t i = 0; i < *ndst; i++) {
        dst[i] = v[i];
        dst[i].pct = total > 0 ? 100.0 * v[i].ns / total : 0;
    }
}

/* One module's time in rank r's window at depth (0 when absent). */
static double module_ns(const tml_dd_window *d, int depth, const char *name)
{
    double ns = 0;
    for (size_t i = 0; i < d->nrows; i++) {
        char p[TML_DD_NAME];
        prefix(d->rows[i].module, depth, p, sizeof(p));
        if (strcmp(p, name) == 0)
            ns += (double)d->rows[i].self_ns;
    }
    return ns;
}

/* One module, compared between its slowest and fastest rank: the widest
 * gap so far wins. */
static void spread_one(tml_report_dd *dd, const tml_run *run, const char *name, double *best)
{
    double hi = -1, lo = -1;
    int32_t hr = -1, lr = -1;
    for (size_t i = 0; i < run->nranks; i++) {
        const tml_dd_window *d = run->ranks[i].deep_dive;
        if (!d || !d->nrows)
            continue;
        double ns = module_ns(d, dd->depth, name);
        if (hi < 0 || ns > hi)
            hi = ns, hr = run->ranks[i].info.rank;
        if (lo < 0 || ns < lo)
            lo = ns, lr = run->ranks[i].info.rank;
    }
    if (hr < 0 || hr == lr || hi - lo <= *best)
        return;
    *best = hi - lo;
    memset(&dd->spread, 0, sizeof(dd->spread));
    snprintf(dd->spread.name, sizeof(dd->spread.name), "%s", name);
    dd->spread.ns = hi - lo;
    dd->spread_slow_rank = hr;
    dd->spread_fast_rank = lr;
    dd->spread_slow_ns = hi;
    dd->spread_fast_ns = lo;
}

/* Across the ranks that ran a window, every module of any of them (one
 * rank's extra work is in a module the others may not run at all). */
static void spread(tml_report_dd *dd, const tml_run *run)
{
    double best = 0;
    for (size_t i = 0; i < run->nranks; i++) {
        const tml_dd_window *d = run->ranks[i].deep_dive;
        for (size_t k = 0; d && k < d->nrows; k++) {
            char name[TML_DD_NAME];
            prefix(d->rows[k].module, dd->depth, name, sizeof(name));
            if (name[0])
                spread_one(dd, run, name, &best);
        }
    }
}

/* The part of what the peers waited per step a module's spread must
 * explain to be named: a module 0.2 ms apart over the window beside a
 * 50 ms wait is noise, not the straggler's cause. */
#define SPREAD_EXPLAINS 0.25

/* A straggler (COMPUTE STRAGGLER, or one no traced phase explains) whose
 * ranks' windows differ in one module, slower on the culprit by a quarter
 * of the peers' wait per step at least: the verdict's Next names it first
 * (the rule itself never sees modules). */
static void name_the_straggler(tml_report_model *m)
{
    const tml_report_dd *dd = &m->dd;
    tml_diagnosis *v = &m->verdict;
    int c = tml__report_straggler(m);
    if (!dd->spread.name[0] || c < 0 ||
        (strcmp(v->kind, "COMPUTE_STRAGGLER") != 0 && strcmp(v->kind, "STRAGGLER") != 0))
        return;
    double steps = (double)(dd->last_step - dd->first_step + 1);
    if (m->win.ranks[c].rank != dd->spread_slow_rank ||
        !(dd->spread.ns / steps >= SPREAD_EXPLAINS * v->straggler.cost_ns))
        return;
    char head[2 * TML_DD_NAME + 128];
    int n = snprintf(head, sizeof(head), "Inspect %s on rank %d: the deep dive measured %.1f ms "
                     "there against %.1f ms on rank %d over steps %llu-%llu. ", dd->spread.name,
                     (int)dd->spread_slow_rank, dd->spread_slow_ns / 1e6,
                     dd->spread_fast_ns / 1e6, (int)dd->spread_fast_rank,
                     (unsigned long long)dd->first_step, (unsigned long long)dd->last_step);
    size_t cap = sizeof(v->next), h = n < 0 ? 0 : (size_t)n;
    if (h >= sizeof(head) || h >= cap)
        return;
    size_t keep = strnlen(v->next, cap - 1);
    if (keep > cap - 1 - h)
        keep = cap - 1 - h;     /* the old advice's tail goes first */
    memmove(v->next + h, v->next, keep);
    memcpy(v->next, head, h);
    v->next[h + keep] = '\0';
}

void tml__report_deep_dive(tml_report_model *m)
{
    tml_dd_item *v = calloc(TML_DD_MAX_ROWS, sizeof(*v));
    tml_report_dd *dd = &m->dd;
    const tml_run *run = m->run;
    const tml_dd_window *shown = NULL, *skipped = NULL;
    memset(dd, 0, sizeof(*dd));
    for (size_t i = 0; i < run->nranks; i++) {
        const tml_dd_window *d = run->ranks[i].deep_dive;
        if (d && d->nrows) {
            dd->nranks++;
            if (!shown || run->ranks[i].info.rank < dd->rank) {
                shown = d;
                dd->rank = run->ranks[i].info.rank;
            }
        } else if (d && !skipped) {
            skipped = d;
        }
    }
    dd->steps_left_out = m->win.deep_dive_steps;
    if (!shown || !v) {
        dd->present = skipped != NULL;
        if (skipped)
            snprintf(dd->skipped, sizeof(dd->skipped), "%s",
                     skipped->skipped[0] ? skipped->skipped : "no operator was profiled");
        free(v);
        return;     /* without memory for v: no deep dive in the report */
    }
    dd->present = dd->ran = 1;
    dd->first_step = shown->first_step;
    dd->last_step = shown->last_step;
    dd->wall_ns = (double)shown->wall_ns;
    dd->cuda = shown->cuda;
    for (size_t i = 0; i < shown->nrows; i++)
        dd->total_ns += (double)shown->rows[i].self_ns;
    dd->depth = module_depth(shown);
    size_t n = modules_of(shown, dd->depth, v);
    top(dd->modules, &dd->nmodules, v, n, dd->total_ns);
    if (dd->nranks > 1)
        spread(dd, run);
    name_the_straggler(m);
    memset(v, 0, TML_DD_MAX_ROWS * sizeof(*v));
    n = ops_of(shown, v);
    top(dd->ops, &dd->nops, v, n, dd->total_ns);
    free(v);
}
