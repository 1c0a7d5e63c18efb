/*
 * env.c - the table of TraceML's environment variables and the one parser
 * of each type (env.h).
 *
 * Before this table, 21 variables were read in 17 files by 6 parsers that
 * disagreed on what a yes is (TRACEML_HTML_REPORT=false turned the report
 * on). Now a variable is a row here: docs/cli.md's table and the Python
 * package (traceml_ai._traceml.config) follow it, and tests check that
 * they do (tests/unit/test_env.c: docs/cli.md's rows against the table;
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

static const tml_env_var table[] = {
    /* where the ranks report (traceml run sets them; traceml serve prints them) */
    {"TRACEML_ADDR", TML_ENV_STRING, NULL, 0, 0, E, NULL,
     "host:port of the aggregator to report to; unset: an aggregator in the process"},
    {"TRACEML_RUN_ID", TML_ENV_STRING, NULL, 0, 0, E, NULL,
     "the run's id, sent in each rank's hello (set by traceml run, printed by serve)"},
    {"TRACEML_SECRET", TML_ENV_STRING, NULL, 0, 0, L | E | A, NULL,
     "the run's secret: the key of the hello's HMAC; several nodes: the same on each"},
    {"TRACEML_AGGREGATOR_HOST", TML_ENV_STRING, NULL, 0, 0, E, NULL,
     "TraceML 0.5.0's direct launch: the host of `traceml serve` to report to [127.0.0.1]"},
    {"TRACEML_AGGREGATOR_PORT", TML_ENV_STRING, NULL, 0, 0, E, NULL,
     "TraceML 0.5.0's direct launch: its port [29765]"},
    {"TRACEML_SECRET_WAIT_S", TML_ENV_INT, "60", 0, 3600, L, NULL,
     "seconds a follower node waits for node 0's secret file"},
    {"TRACEML_RUN_NAME", TML_ENV_STRING, NULL, 0, 0, L | E, "run-name",
     "the run's name (default: <script stem>_<time>)"},
    {"TRACEML_SESSION_ID", TML_ENV_STRING, NULL, 0, 0, E, NULL,
     "TraceML 0.5.0's name for the run's name (set by traceml run; read when TRACEML_RUN_NAME is not)"},
    {"TRACEML_LOGS_DIR", TML_ENV_PATH, "logs", 0, 0, E, "logs-dir",
     "the folder run folders are made in"},
    {"TRACEML_RUN_DIR", TML_ENV_PATH, NULL, 0, 0, E, NULL,
     "the run folder traceml run made (absolute)"},
    {"TRACEML_NNODES", TML_ENV_INT, "1", 0, 1 << 20, E, "nnodes",
     "the number of nodes of the run (else SLURM_NNODES)"},
    {"TRACEML_DISABLED", TML_ENV_BOOL, "0", 0, 0, L | E, "disable-traceml",
     "on: TraceML does nothing, the script runs untouched"},
    {"TRACEML_INTERVAL", TML_ENV_DOUBLE, "1", 0.01, 3600, E | A, "interval",
     "seconds between resource samples"},
    {"TRACEML_WINDOW_STEPS", TML_ENV_INT, "10000", 2, 10000, A, "window-steps",
     "the most steps the diagnosis window holds"},
    {"TRACEML_MEMORY_MB", TML_ENV_INT, "160", 16, 1048576, A, NULL,
     "MiB of step records the aggregator keeps, all ranks together (past it, fewer steps each)"},
    {"TRACEML_THRESHOLDS", TML_ENV_STRING, NULL, 0, 0, A, "thresholds",
     "key=value,... overrides of the diagnosis thresholds (docs/diagnosis.md)"},
    {"TRACEML_HTML_REPORT", TML_ENV_BOOL, "0", 0, 0, A, "html-report",
     "on: final_summary.html too, for a run without the launcher"},
    {"TRACEML_DASHBOARD_PORT", TML_ENV_INT, "-1", -1, 65535, A, NULL,
     "a run without the launcher (python train.py, a notebook's --mode dashboard): the live "
     "dashboard on this port of 127.0.0.1 (0: any free one; taken: none); -1: none"},
    {"TRACEML_PROFILE", TML_ENV_STRING, NULL, 0, 0, E, NULL,
     "watch: system and process metrics only, no step tracing (traceml watch)"},
    {"TRACEML_SCRIPT", TML_ENV_PATH, NULL, 0, 0, E, NULL,
     "the script zero-edit tracing starts TraceML in (set by traceml run)"},
    {"TRACEML_TUNE_SETTINGS", TML_ENV_STRING, NULL, 0, 0, E, NULL,
     "key=value,... settings the zero-edit start-up applies (traceml tune, run --apply)"},
    {"TRACEML_TUNE_FETCH", TML_ENV_PATH, NULL, 0, 0, E, NULL,
     "where the DataLoader fetch's CPU and wall time go (PATH.<pid>; set by traceml tune)"},
    {"TRACEML_TUNE_TRIAL", TML_ENV_BOOL, "0", 0, 0, A, NULL,
     "on: the run is a trial of traceml tune (set by it): interrupted is tune's stop"},
    {"TRACEML_COMM", TML_ENV_BOOL, "1", 0, 0, E, NULL,
     "off: DDP buckets and torch.distributed collectives are not timed"},
    {"TRACEML_ON_MISSING_AGGREGATOR", TML_ENV_STRING, "warn", 0, 0, E, NULL,
     "warn or raise: what init() does when TraceML cannot start"},
    {"TRACEML_LIBCUDA", TML_ENV_PATH, "libcuda.so.1", 0, 0, E, NULL,
     "the CUDA driver library to open (the tests' fake)"},
    {"TRACEML_LIBNVML", TML_ENV_PATH, "libnvidia-ml.so.1", 0, 0, E, NULL,
     "the NVML library to open (the tests' fake)"},
    {"TRACEML_PYTHON", TML_ENV_PATH, NULL, 0, 0, L, "python",
     "the Python interpreter traceml run starts the script with"},
    {"TRACEML_ENV_PYTHON", TML_ENV_PATH, NULL, 0, 0, L, NULL,
     "the Python of the environment TraceML is installed in (set by the entry point)"},
    {"TRACEML_ENV_PYTHON_PROBE", TML_ENV_STRING, NULL, 0, 0, L, NULL,
     "what that Python can import (set by the entry point)"},
    {"TRACEML_SLURM", TML_ENV_BOOL, "1", 0, 0, L, NULL,
     "off: a traceml run under srun is not taken as one task of the run"},
};

const tml_env_var *tml__env_table(size_t *n)
{
    *n = sizeof(table) / sizeof(table[0]);
    return table;
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

static const tml_env_var *typed(const char *name, tml_env_type t)
{
    const tml_env_var *e = tml__env_find(name);
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

int tml__env_bool(const char *name)
{
    const tml_env_var *e = typed(name, TML_ENV_BOOL);
    const char *v = value(e);
    return e ? tml__env_yes(v ? v : e->def) : 0;
}

long tml__env_int(const char *name, char *bad, size_t cap)
{
    const tml_env_var *e = typed(name, TML_ENV_INT);
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

double tml__env_double(const char *name, char *bad, size_t cap)
{
    const tml_env_var *e = typed(name, TML_ENV_DOUBLE);
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

const char *tml__env_str(const char *name)
{
    const tml_env_var *e = tml__env_find(name);
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
