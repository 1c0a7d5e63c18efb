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
 *     long n = tml__env_int(TML_ENV_WINDOW_STEPS, bad, sizeof(bad));
 *     if (bad[0])
 *         warn("%s", bad);      // "TRACEML_WINDOW_STEPS='x' is not an integer ...; using 10000"
 *
 * A variable is named by its id (TML_ENV_WINDOW_STEPS), never by its
 * text: a misspelt id does not compile, and the text, "TRACEML_" and the
 * id, cannot drift from it. A new variable is one row of TML_ENV_VARS.
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

/*
 * Every TRACEML_* variable, in the order docs/cli.md lists them:
 *
 *     X(ID, type, default, min, max, sides, option, doc)
 *
 * ID: the name without "TRACEML_" (the id is TML_ENV_<ID>); type: BOOL,
 * INT, DOUBLE, STRING or PATH (tml_env_type without its prefix);
 * default: the value as text, NULL for none (unset); min, max: the range
 * of an int or a double; sides: which read it, L (launcher), E (engine),
 * A (aggregator) or'ed; option: the `traceml run` option (and
 * traceml.yaml key) that sets it, NULL for none (an option of kind VAR,
 * cli/run/options.c, takes this row's type and range: their one home);
 * doc: one line.
 */
#define TML_ENV_VARS(X)                                                                   \
    X(ADDR, STRING, NULL, 0, 0, E, NULL,                                                  \
      "host:port of the aggregator to report to; unset: an aggregator in the process")    \
    X(RUN_ID, STRING, NULL, 0, 0, E, NULL,                                                \
      "the run's id, sent in each rank's hello (set by traceml run, printed by serve)")   \
    X(SECRET, STRING, NULL, 0, 0, L|E|A, NULL,                                            \
      "the run's secret: the key of the hello's HMAC; several nodes: the same on each")   \
    X(AGGREGATOR_HOST, STRING, NULL, 0, 0, E, NULL,                                       \
      "TraceML 0.5.0's direct launch: the host of `traceml serve` to report to "          \
      "[127.0.0.1]")                                                                      \
    X(AGGREGATOR_PORT, STRING, NULL, 0, 0, E, NULL,                                       \
      "TraceML 0.5.0's direct launch: its port [29765]")                                  \
    X(SECRET_WAIT_S, INT, "60", 0, 3600, L, NULL,                                         \
      "seconds a follower node waits for node 0's secret file")                           \
    X(RUN_NAME, STRING, NULL, 0, 0, L|E, "run-name",                                      \
      "the run's name (default: <script stem>_<time>)")                                   \
    X(SESSION_ID, STRING, NULL, 0, 0, E, NULL,                                            \
      "TraceML 0.5.0's name for the run's name (set by traceml run; read when "           \
      "TRACEML_RUN_NAME is not)")                                                         \
    X(LOGS_DIR, PATH, "logs", 0, 0, E, "logs-dir",                                        \
      "the folder run folders are made in")                                               \
    X(RUN_DIR, PATH, NULL, 0, 0, E, NULL,                                                 \
      "the run folder traceml run made (absolute)")                                       \
    X(NNODES, INT, "1", 0, 1 << 20, E, "nnodes",                                          \
      "the number of nodes of the run (else SLURM_NNODES)")                               \
    X(DISABLED, BOOL, "0", 0, 0, L|E, "disable-traceml",                                  \
      "on: TraceML does nothing, the script runs untouched")                              \
    X(INTERVAL, DOUBLE, "1", 0.01, 3600, E|A, "interval",                                 \
      "seconds between resource samples")                                                 \
    X(WINDOW_STEPS, INT, "10000", 2, 10000, A, "window-steps",                            \
      "the most steps the diagnosis window holds")                                        \
    X(MEMORY_MB, INT, "160", 16, 1048576, A, NULL,                                        \
      "MiB of step records the aggregator keeps, all ranks together (past it, fewer "     \
      "steps each)")                                                                      \
    X(THRESHOLDS, STRING, NULL, 0, 0, A, "thresholds",                                    \
      "key=value,... overrides of the diagnosis thresholds (docs/diagnosis.md)")          \
    X(HTML_REPORT, BOOL, "0", 0, 0, A, "html-report",                                     \
      "on: final_summary.html too, for a run without the launcher")                       \
    X(DASHBOARD_PORT, INT, "-1", -1, 65535, A, NULL,                                      \
      "a run without the launcher (python train.py, a notebook's --mode dashboard): the " \
      "live dashboard on this port of 127.0.0.1 (0: any free one; taken: none); -1: "     \
      "none")                                                                             \
    X(PROFILE, STRING, NULL, 0, 0, E, NULL,                                               \
      "watch: system and process metrics only, no step tracing (traceml watch)")          \
    X(DEEP_DIVE, STRING, "auto", 0, 0, E, NULL,                                           \
      "the deep dive (docs/deep-dive.md): on (traceml run --deep-dive), auto (when the "  \
      "verdict is COMPUTE_BOUND) or off (--no-deep-dive)")                                \
    X(DEEP_DIVE_START, INT, "20", 1, 1000000000, E, NULL,                                 \
      "the step the deep dive's window starts at")                                        \
    X(DEEP_DIVE_STEPS, INT, "3", 1, 100, E, NULL,                                         \
      "how many steps the deep dive's window profiles")                                   \
    X(SCRIPT, PATH, NULL, 0, 0, E, NULL,                                                  \
      "the script zero-edit tracing starts TraceML in (set by traceml run)")              \
    X(TUNE_SETTINGS, STRING, NULL, 0, 0, E, NULL,                                         \
      "key=value,... settings the zero-edit start-up applies (traceml tune, run "         \
      "--apply)")                                                                         \
    X(TUNE_FETCH, PATH, NULL, 0, 0, E, NULL,                                              \
      "where the DataLoader fetch's CPU and wall time go (PATH.<pid>; set by traceml "    \
      "tune)")                                                                            \
    X(TUNE_TRIAL, BOOL, "0", 0, 0, A, NULL,                                               \
      "on: the run is a trial of traceml tune (set by it): interrupted is tune's stop")   \
    X(COMM, BOOL, "1", 0, 0, E, NULL,                                                     \
      "off: DDP buckets and torch.distributed collectives are not timed")                 \
    X(FLOPS, BOOL, "1", 0, 0, E, NULL,                                                    \
      "off: no model's first forward is counted under FlopCounterMode (no FLOPs, no MFU)") \
    X(ON_MISSING_AGGREGATOR, STRING, "warn", 0, 0, E, NULL,                               \
      "warn or raise: what init() does when TraceML cannot start")                        \
    X(LIBCUDA, PATH, "libcuda.so.1", 0, 0, E, NULL,                                       \
      "the CUDA driver library to open (the tests' fake)")                                \
    X(LIBNVML, PATH, "libnvidia-ml.so.1", 0, 0, E, NULL,                                  \
      "the NVML library to open (the tests' fake)")                                       \
    X(PYTHON, PATH, NULL, 0, 0, L, "python",                                              \
      "the Python interpreter traceml run starts the script with")                        \
    X(ENV_PYTHON, PATH, NULL, 0, 0, L, NULL,                                              \
      "the Python of the environment TraceML is installed in (set by the entry point)")   \
    X(ENV_PYTHON_PROBE, STRING, NULL, 0, 0, L, NULL,                                      \
      "what that Python can import (set by the entry point)")                             \
    X(SLURM, BOOL, "1", 0, 0, L, NULL,                                                    \
      "off: a traceml run under srun is not taken as one task of the run")

/* The ids: TML_ENV_ADDR, ..., then TML_ENV_COUNT. */
typedef enum tml_env_id {
#define TML_ENV_ID_(id, ...) TML_ENV_##id,
    TML_ENV_VARS(TML_ENV_ID_)
#undef TML_ENV_ID_
    TML_ENV_COUNT
} tml_env_id;

typedef struct tml_env_var {
    const char *name;          /* "TRACEML_<ID>" */
    tml_env_type type;
    const char *def;           /* the default, as text; NULL: none (unset) */
    double min, max;           /* the range of an int or a double */
    unsigned sides;            /* TML_ENV_LAUNCHER | ... */
    const char *key;           /* the traceml run option / traceml.yaml key; NULL: none */
    const char *doc;           /* one line */
} tml_env_var;

/* The table, in TML_ENV_VARS's order (indexed by tml_env_id); *n entries. */
const tml_env_var *tml__env_table(size_t *n);
/* The entry of id. */
const tml_env_var *tml__env_var(tml_env_id id);
/* Its name, "TRACEML_<ID>". */
const char *tml__env_name(tml_env_id id);
/* The entry of a name given as text (tml_config's, the public look-up);
 * NULL for a name not in the table. */
const tml_env_var *tml__env_find(const char *name);
/* The type's name: "bool", "int", "double", "string", "path". */
const char *tml__env_type_name(tml_env_type t);

/* The yes/no words: v set, and not empty, "0", "false", "no" or "off". */
int tml__env_yes(const char *v);

/* Typed values of table variables (a variable of another type: the
 * type's zero and, for a string, NULL). bad, when not NULL, gets one line
 * for a value not taken ("" when taken). */
int tml__env_bool(tml_env_id id);
long tml__env_int(tml_env_id id, char *bad, size_t cap);
double tml__env_double(tml_env_id id, char *bad, size_t cap);
/* A string or path variable's value; NULL when unset or empty (and no
 * default). */
const char *tml__env_str(tml_env_id id);

/* A variable of another program (RANK, SLURM_NTASKS, MASTER_PORT,
 * COLUMNS): a non-negative decimal integer, else def. */
long tml__env_count(const char *name, long def);
/* Another program's variable as it is (NULL: unset). */
const char *tml__env_raw(const char *name);

#endif
