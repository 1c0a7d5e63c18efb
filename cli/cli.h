/*
 * cli.h - the `traceml` command: a table of subcommands (main.c), one file
 * per subcommand, and the helpers they share (util.c).
 *
 * Only the CLI may print to the terminal or exit the process: library
 * code returns error codes, the CLI turns them into one line on stderr
 * ("traceml: error: ...") and an exit status (2 for bad usage or input).
 */
#ifndef TML_CLI_H
#define TML_CLI_H

#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/clock.h"
#include "base/fs.h"
#include "model/run.h"
#include "wire/wire.h"

#define TML_EXIT_USAGE 2

typedef struct tml_cli_cmd {
    const char *name;
    int (*fn)(int argc, char **argv);   /* argv[0] is the subcommand's name */
    const char *summary;                /* one line for `traceml help`; NULL: hidden */
    const char *usage;                  /* `traceml help NAME` */
} tml_cli_cmd;

/* main.c: the table, ended by a zeroed entry. */
extern const tml_cli_cmd tml__cli_cmds[];
const tml_cli_cmd *tml__cli_find(const char *name);

int tml__cmd_run(int argc, char **argv);
/* `traceml run` (watch 0) or `traceml watch` (1): the same launch; a
 * watch run traces no step (system and process metrics only). */
int tml__cmd_run_profile(int argc, char **argv, int watch);
int tml__cmd_watch(int argc, char **argv);
int tml__cmd_inspect(int argc, char **argv);
extern const char tml__usage_watch[], tml__usage_inspect[];
int tml__cmd_view(int argc, char **argv);
int tml__cmd_serve(int argc, char **argv);
int tml__cmd_help(int argc, char **argv);
/* The command list (`traceml help`) to out. */
void tml__cli_print_help(FILE *out);
int tml__cmd_aggregate(int argc, char **argv);   /* hidden: `traceml run`'s child */
int tml__cmd_compare(int argc, char **argv);
int tml__cmd_export(int argc, char **argv);
int tml__cmd_config(int argc, char **argv);
int tml__cmd_tune(int argc, char **argv);
extern const char tml__usage_tune[];
extern const char tml__usage_compare[], tml__usage_export[], tml__usage_config[];

extern const char tml__usage_run[], tml__usage_view[], tml__usage_serve[],
    tml__usage_help[];

/* ---- util.c ---- */

/* "traceml: error: <message>" on stderr. Returns TML_EXIT_USAGE. */
int tml__cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, then exit(code). */
_Noreturn void tml__cli_die(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void tml__cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* One warning when the dashboard's address bind is not loopback (0.0.0.0:
 * every interface), naming where the setting came from ("--dashboard-bind",
 * "dashboard-bind in traceml.yaml:3"). */
void tml__cli_warn_exposed(const char *bind, const char *from);
/* While where is set ("traceml.yaml:3": the value being checked came from
 * there), every error line names it first: "traceml: error: WHERE: ...".
 * NULL clears it. The string must outlive the setting. */
void tml__cli_origin(const char *where);

/* Matches argv[*i] against option `name` ("--run-name"). Flags (value
 * NULL) match "--name" only. Valued options match "--name V" (advancing
 * *i) and "--name=V"; a missing value dies with exit 2. 1 on match. */
int tml__cli_opt(int argc, char **argv, int *i, const char *name, const char **value);
/* 1 when a asks for help (-h, --help): the usage printed on stdout. */
int tml__cli_help(const char *a, const char *usage);
/* An option of `traceml cmd` that nothing matched: "unknown option 'A' for
 * 'traceml CMD' (see 'traceml help CMD')". Returns TML_EXIT_USAGE. */
int tml__cli_unknown(const char *cmd, const char *a);
/* a, a word of `traceml cmd` that no option matched, as its one operand
 * (what: "RUN", "FILE") into *slot: an option is unknown, a second
 * operand one too many. 0, or TML_EXIT_USAGE after the error line. */
int tml__cli_operand(const char *cmd, const char *what, const char *a, const char **slot);
/* An option of TraceML 0.5.0 with no meaning here (docs/compat.md):
 * name, whether it takes a value, and why it means nothing. */
typedef struct tml_cli_legacy {
    const char *name;
    int value;
    const char *why;
} tml_cli_legacy;
/* Matches argv[*i] against the n options of `table` as tml__cli_opt()
 * does; a match is accepted with one line "traceml: note: --X has no
 * meaning here (why); ignored" on stderr. 1 on match. */
int tml__cli_legacy_opt(int argc, char **argv, int *i, const tml_cli_legacy *table, size_t n);
/* The 0.5.0 options `run`/`watch` and `serve` accept with a note. */
extern const tml_cli_legacy tml__launch_legacy[], tml__serve_legacy[];
extern const size_t tml__launch_nlegacy, tml__serve_nlegacy;
/* The k-th TraceML 0.5.0 alias of an option of `traceml run` (cli/run/
 * options.c's table: "--session-id"), *value whether it takes one; NULL
 * past the last. */
const char *tml__launch_alias(size_t k, int *value);

/* abbrev.c: argparse's habits. Rewrites a unique prefix of one of c's long
 * options in argv to that option (before SCRIPT for run, watch, tune); an
 * ambiguous one is an error naming the candidates (exit 2). */
void tml__cli_abbrev(const tml_cli_cmd *c, int argc, char **argv);
/* "; did you mean '--x'?" for an unknown option of cmd, or "". */
void tml__cli_suggest_option(const char *cmd, const char *arg, char *out, size_t cap);
/* "; did you mean 'run'?" for an unknown command, or "". */
void tml__cli_suggest_command(const char *word, char *out, size_t cap);
/* Strict numbers: the whole string, within [min, max]; else dies naming opt. */
long tml__cli_long(const char *opt, const char *s, long min, long max);
double tml__cli_double(const char *opt, const char *s, double min, double max);

/* config_file.c: the defaults of ./traceml.yaml (else ./traceml.yml, else
 * the [tool.traceml] table of ./pyproject.toml), as "--key=value" options
 * (the key normalized: "logs_dir" is "--logs-dir"; flags as "=true" or
 * "=false") with the line of each. Owned by the struct: release it. */
#define TML_CLI_CONFIG_MAX (1u << 20)   /* a bigger file is no options file */
struct tml_cli_config_key;
typedef struct tml_cli_config {
    char path[32];            /* the file read; "" when there is none */
    char **argv;              /* n options, NULL-terminated */
    int *line;                /* line[k]: the file's line of argv[k], from 1 */
    int n;
    char thresholds[1024];    /* the thresholds map, "key=value,..."; "" */
    int thresholds_line;      /* the map's first entry */
    /* traceml.yaml's `guard:` declaration (TraceML 0.5.0's declared
     * workload) as compact JSON, recorded in the summary's meta.workload
     * and held by `traceml compare`; "" none */
    char guard[2048];
    int guard_depth, guard_indent[8], guard_count[8];   /* private: the block being read */
    char err[512];            /* on failure: "FILE:LINE: why", one line */
    struct tml_cli_config_key *keys;   /* private: every key, for duplicates */
    size_t nkeys, kcap, cap, lcap;
} tml_cli_config;
/* Parses a file's text (len bytes; path decides the syntax: *.toml is a
 * pyproject.toml, anything else YAML): pure, prints nothing. 0, or -1
 * with c->err. Release c either way. */
int tml__cli_config_parse(tml_cli_config *c, const char *path, const char *text, size_t len);
/* Finds, reads and parses the file of the current folder; sets
 * TRACEML_THRESHOLDS from its thresholds unless set. 0 (c->path "" when
 * there is none), or -1 with c->err: a candidate that exists but is not
 * a readable regular file of at most TML_CLI_CONFIG_MAX bytes is an
 * error, never skipped for the next. */
int tml__cli_config_load(tml_cli_config *c);
void tml__cli_config_release(tml_cli_config *c);

/* `__aggregate --launch WORD`: how `traceml run` ran the training
 * ("zero-edit", "no-auto-trace", "command"; anything else: unknown). */
const char *tml__launch_word(tml_launch how);
tml_launch tml__launch_kind(const char *word);

/* Full path of an executable: PATH lookup when name has no '/'. 0 or -1. */
int tml__cli_which(const char *name, char *out, size_t cap);
/* Folder of the running binary (/proc/self/exe). 0 or -1. */
int tml__cli_exe_dir(char *out, size_t cap);
/* Terminal width of stdout, else $COLUMNS, else TML_REPORT_LOG_WIDTH (the
 * summary printed into a pipe: tee, Slurm and CI logs). */
int tml__cli_term_width(void);
/* Closes every descriptor above 2 but keep[] (n small; sorted here). */
void tml__cli_close_all_but(int *keep, int n);
/* The aggregator's variables (base/env.h: TRACEML_THRESHOLDS,
 * TRACEML_WINDOW_STEPS, TRACEML_MEMORY_MB) for its options (tml_agg_opts,
 * tml_host_opts); a value not taken is a warning line and the default. A
 * *window_steps already set (--window-steps) is kept: the option wins. */
void tml__cli_agg_env(const char **thresholds, int *window_steps, int *memory_mb);

/* A run folder being set up by `run` or `serve`. */
typedef struct tml_cli_run {
    char name[128];
    char dir[4096];          /* logs_dir/name as the user wrote it */
    char abs_dir[4096];      /* absolute, for child environments */
    char logs_dir[4096];
    char id[TML_WIRE_RUNID_MAX];
    char secret[TML_WIRE_SECRET_MAX];
    int64_t start_unix_ms;   /* for people (the manifest) */
    int64_t start_mono_ns;   /* for durations (tml__mono_ns) */
} tml_cli_run;

/* Checks (nothing created) that logs_dir can hold a new run folder and
 * that name (if given) is valid and free. Prints the error; returns 0 or
 * TML_EXIT_USAGE. */
int tml__cli_run_check(const char *logs_dir, const char *name);
/* Creates the folder (name NULL: generated from stem, made unique), the
 * run id and the secret. Prints the error; returns 0 or TML_EXIT_USAGE. */
int tml__cli_run_create(tml_cli_run *r, const char *logs_dir, const char *name,
                        const char *stem);
/* Removes a run folder that tml__cli_run_create made and only TraceML
 * wrote into (a run that could not start). */
void tml__cli_run_remove(const tml_cli_run *r);
/* Reads and parses a JSON file (at most TML_CLI_JSON_MAX bytes) that
 * should be a TraceML `what` ("summary", "manifest"). On failure prints
 * one error line (unreadable, empty, truncated, invalid JSON at byte N)
 * and returns TML_EXIT_USAGE; else 0, *doc to free with tml__json_free and,
 * when buf is not NULL, the bytes read (*buf to free). */
#define TML_CLI_JSON_MAX (256u << 20)
struct tml_json;
int tml__cli_read_json(const char *path, const char *what, struct tml_json **doc,
                       char **buf, size_t *len);
/* A run folder stands for its final_summary.json (view, compare, as
 * inspect and export take a run folder): "ARG/final_summary.json" in buf
 * when arg is a folder, else arg. */
const char *tml__cli_summary_path(const char *arg, char *buf, size_t cap);
/* Prints the text to stdout with a final newline, flushed; control
 * characters (a hand-edited summary) are shown as '?'. */
void tml__cli_print_summary(const char *text);

#endif
