/*
 * env.h - TraceML's environment variables: one table (every TRACEML_*
 * variable, its type, default, range, one line of doc and which side
 * reads it) and the typed look-ups that read them, the one way TraceML
 * does.
 *
 * Only the edges read the environment: the CLI (cli/, the launcher and
 * the aggregator it starts) and the engine's entry, tml_init
 * (src/host/local.c, which also hosts the in-process aggregator), and the
 * Python package through the extension (traceml_ai._traceml.config). They
 * pass the values down in the option structs (tml_agg_opts, the
 * sampler's, the engine's tml_engine_env); nothing below reads getenv.
 *
 *     char bad[160];
 *     long n = tml__env_int("TRACEML_WINDOW_STEPS", bad, sizeof(bad));
 *     if (bad[0])
 *         warn("%s", bad);      // "TRACEML_WINDOW_STEPS='x' is not an integer ...; using 10000"
 *
 * A boolean is on when set to anything but empty, "0", "false", "no" or
 * "off" (any case); unset or empty, its default. Every other type: unset
 * or empty is the default; a value that does not parse or is out of range
 * is the default too, with one line saying so.
 *
 * Ownership: the table and the strings returned are static (a string
 * returned by tml__env_str lives in the environment: until the variable
 * is set again).
 */
#ifndef TML_ENV_H
#define TML_ENV_H

#include <stddef.h>

typedef enum tml_env_type {
    TML_ENV_BOOL,
    TML_ENV_INT,
    TML_ENV_DOUBLE,
    TML_ENV_STRING,
    TML_ENV_PATH,
} tml_env_type;

/* Which side reads a variable (a mask). */
enum {
    TML_ENV_LAUNCHER = 1,      /* traceml run / watch / serve, the pip entry point */
    TML_ENV_ENGINE = 2,        /* the training process: tml_init, the Python package */
    TML_ENV_AGGREGATOR = 4,    /* the aggregator: traceml run's, serve's, in-process */
};

typedef struct tml_env_var {
    const char *name;
    tml_env_type type;
    const char *def;           /* the default, as text; NULL: none (unset) */
    double min, max;           /* the range of an int or a double */
    unsigned sides;            /* TML_ENV_LAUNCHER | ... */
    const char *key;           /* the traceml run option / traceml.yaml key; NULL: none */
    const char *doc;           /* one line */
} tml_env_var;

/* The table, in the order docs/cli.md lists it; *n entries. */
const tml_env_var *tml__env_table(size_t *n);
/* The entry of name; NULL for a name not in the table. */
const tml_env_var *tml__env_find(const char *name);
/* The type's name: "bool", "int", "double", "string", "path". */
const char *tml__env_type_name(tml_env_type t);

/* The yes/no words: v set, and not empty, "0", "false", "no" or "off". */
int tml__env_yes(const char *v);

/* Typed values of table variables (a name not in the table, or of
 * another type: the type's zero and, for a string, NULL). bad, when not
 * NULL, gets one line for a value not taken ("" when taken). */
int tml__env_bool(const char *name);
long tml__env_int(const char *name, char *bad, size_t cap);
double tml__env_double(const char *name, char *bad, size_t cap);
/* A string or path variable's value; NULL when unset or empty. */
const char *tml__env_str(const char *name);

/* A variable of another program (RANK, SLURM_NTASKS, MASTER_PORT,
 * COLUMNS): a non-negative decimal integer, else def. */
long tml__env_count(const char *name, long def);
/* Another program's variable as it is (NULL: unset). */
const char *tml__env_raw(const char *name);

#endif
