/*
 * reload_deepdive.c - a summary's "deep_dive" object back into the
 * report model's tml_report_dd (docs/summary-json.md), for `traceml view
 * --re-render` and `traceml compare` (reload.c, reload_compare.c).
 *
 * Input rules as in reload.c: a number outside its range is missing (0
 * here: a time the file does not give is no time), the lists are cut to
 * TML_DD_TOP, names to their fields; nothing is ranked again.
 */
#include "report/reload.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"

static double num0(const tml_json *o, const char *key, double hi)
{
    double v = tml__rl_num(o, key, 0, hi);
    return isnan(v) ? 0 : v;
}

static void name_of(const tml_json *o, const char *key, char *dst, size_t cap)
{
    const char *s = tml__json_str(tml__json_get(o, key));
    snprintf(dst, cap, "%s", s ? s : "");
}

static size_t items_of(const tml_json *arr, tml_dd_item *v)
{
    size_t n = 0;
    const tml_json *o;
    for (size_t i = 0; n < TML_DD_TOP && (o = tml__json_at(arr, i)); i++) {
        if (o->type != TML_JSON_OBJECT)
            continue;
        tml_dd_item *it = &v[n++];
        memset(it, 0, sizeof(*it));
        name_of(o, "name", it->name, sizeof(it->name));
        name_of(o, "top_operator", it->op, sizeof(it->op));
        it->ns = num0(o, "ms", 1e9) * 1e6;
        it->pct = num0(o, "percent", 100);
        it->calls = (int64_t)num0(o, "calls", 1e15);
    }
    return n;
}

static void spread_of(const tml_json *o, tml_report_dd *dd)
{
    if (!o || o->type != TML_JSON_OBJECT)
        return;
    name_of(o, "module", dd->spread.name, sizeof(dd->spread.name));
    dd->spread_slow_rank = (int32_t)num0(o, "slow_rank", TML_MAX_WORLD_SIZE);
    dd->spread_fast_rank = (int32_t)num0(o, "fast_rank", TML_MAX_WORLD_SIZE);
    dd->spread_slow_ns = num0(o, "slow_ms", 1e9) * 1e6;
    dd->spread_fast_ns = num0(o, "fast_ms", 1e9) * 1e6;
}

void tml__rl_deep_dive(tml_report_dd *dd, const tml_json *o)
{
    memset(dd, 0, sizeof(*dd));
    if (!o || o->type != TML_JSON_OBJECT)
        return;
    const char *status = tml__json_str(tml__json_get(o, "status"));
    dd->present = 1;
    dd->ran = status && strcmp(status, "ran") == 0;
    name_of(o, "reason", dd->skipped, sizeof(dd->skipped));
    dd->steps_left_out = (size_t)num0(o, "steps_excluded", 1e15);
    dd->rank = (int32_t)num0(o, "rank", TML_MAX_WORLD_SIZE);
    dd->nranks = (size_t)num0(o, "ranks", TML_MAX_WORLD_SIZE);
    dd->first_step = (uint64_t)num0(o, "first_step", 1e15);
    dd->last_step = (uint64_t)num0(o, "last_step", 1e15);
    dd->wall_ns = num0(o, "window_ms", 1e9) * 1e6;
    dd->total_ns = num0(o, "profiled_ms", 1e9) * 1e6;
    const char *acts = tml__json_str(tml__json_get(o, "activities"));
    dd->cuda = acts && strstr(acts, "cuda") != NULL;
    dd->depth = (int)num0(o, "module_level", 16);
    dd->nmodules = items_of(tml__json_get(o, "modules"), dd->modules);
    dd->nops = items_of(tml__json_get(o, "operators"), dd->ops);
    spread_of(tml__json_get(o, "spread"), dd);
}
