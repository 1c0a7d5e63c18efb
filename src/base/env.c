/*
 * env.c - the table of TraceML's environment variables and the one parser
 * of each type (env.h).
 *
 * Before this table, 21 variables were read in 17 files by 6 parsers that
 * disagreed on what a yes is (TRACEML_HTML_REPORT=false turned the report
 * on). Now a variable is a row of TML_ENV_VARS (env.h), read by its id:
 * docs/cli.md's table and the Python package (traceml_ai._traceml.config)
 * follow it, and tests check that they do (tests/unit/test_env.c: docs/cli.md's rows against the table;
 * tests/e2e/test_python_api.py: the package reads a variable through it).
 */
#include "base/env.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { L = TML_ENV_LAUNCHER, E = TML_ENV_ENGINE, A = TML_ENV_AGGREGATOR };

#define ROW(id, type, def, min, max, sides, key, doc) \
    {"TRACEML_" #id, TML_ENV_##type, def, min, max, sides, key, doc},
static const tml_env_var table[TML_ENV_COUNT] = {TML_ENV_VARS(ROW)};
#undef ROW

const tml_env_var *tml__env_table(size_t *n)
{
    *n = sizeof(table) / sizeof(table[0]);
    return table;
}

const tml_env_var *tml__env_var(tml_env_id id)
{
    return (unsigned)id < TML_ENV_COUNT ? &table[id] : NULL;
}

const char *tml__env_name(tml_env_id id)
{
    const tml_env_var *e = tml__env_var(id);
    return e ? e->name : "TRACEML_?";
}

const tml_env_var *tml__env_find(const char *name)
{
    for (size_t i = 0; name && i < sizeof(table) / sizeof(table[0]); i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

const char *tml__env_type_name(tml_env_type t)
{
    static const char *const names[] = {"bool", "int", "double", "string", "path"};
    return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

int tml__env_yes(const char *v)
{
    return v && *v && strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0 &&
           strcasecmp(v, "no") != 0 && strcasecmp(v, "off") != 0;
}

/* The variable's value when set and not empty. */
static const char *value(const tml_env_var *e)
{
    const char *v = e ? getenv(e->name) : NULL;
    return v && *v ? v : NULL;
}

static const tml_env_var *typed(tml_env_id id, tml_env_type t)
{
    const tml_env_var *e = tml__env_var(id);
    return e && e->type == t ? e : NULL;
}

static void say_bad(char *bad, size_t cap, const tml_env_var *e, const char *v,
                    const char *what)
{
    if (bad && cap)
        snprintf(bad, cap, "%s='%.40s' is not %s from %g to %g; using %s", e->name, v, what,
                 e->min, e->max, e->def);
}

/* The one decimal-integer parser: all of v, no sign games, in [lo, hi]. */
static int parse_long(const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

int tml__env_bool(tml_env_id id)
{
    const tml_env_var *e = typed(id, TML_ENV_BOOL);
    const char *v = value(e);
    return e ? tml__env_yes(v ? v : e->def) : 0;
}

long tml__env_int(tml_env_id id, char *bad, size_t cap)
{
    const tml_env_var *e = typed(id, TML_ENV_INT);
    const char *v = value(e);
    long x = 0, def = 0;
    if (bad && cap)
        bad[0] = '\0';
    if (!e)
        return 0;
    parse_long(e->def, LONG_MIN, LONG_MAX, &def);
    if (!v)
        return def;
    if (parse_long(v, (long)e->min, (long)e->max, &x) == 0)
        return x;
    say_bad(bad, cap, e, v, "an integer");
    return def;
}

double tml__env_double(tml_env_id id, char *bad, size_t cap)
{
    const tml_env_var *e = typed(id, TML_ENV_DOUBLE);
    const char *v = value(e);
    if (bad && cap)
        bad[0] = '\0';
    if (!e)
        return 0;
    double def = strtod(e->def, NULL);
    if (!v)
        return def;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!errno && end != v && !*end && x >= e->min && x <= e->max)
        return x;
    say_bad(bad, cap, e, v, "a number");
    return def;
}

const char *tml__env_str(tml_env_id id)
{
    const tml_env_var *e = tml__env_var(id);
    if (!e || (e->type != TML_ENV_STRING && e->type != TML_ENV_PATH))
        return NULL;
    const char *v = value(e);
    return v ? v : e->def;
}

long tml__env_count(const char *name, long def)
{
    const char *v = getenv(name);
    long x;
    return v && *v && parse_long(v, 0, LONG_MAX, &x) == 0 ? x : def;
}

const char *tml__env_raw(const char *name)
{
    return getenv(name);
}
