/*
 * options.c - the options of `traceml run` (and `traceml watch`, and
 * `traceml tune`'s trials): one table, TML_RUN_OPTIONS below, for the
 * command line, the usage text, the project's file (./traceml.yaml or
 * the [tool.traceml] table of ./pyproject.toml, config_file.c), whose
 * values are taken as if typed first, TraceML 0.5.0's names, and what
 * crosses to the aggregator on its command line.
 *
 * Before the table, an option was a rung of a ladder of string compares,
 * a line of a usage text kept by hand, an alias in two other lists and,
 * for the aggregator, a slot of a fixed argv; --window-steps was checked
 * in three places and reached the aggregator through the environment.
 *
 * A value from the project's file still points into it (c->project) for
 * the run's life, so an error about it can name its line
 * (tml__launch_from_file).
 */
#include "run.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/env.h"

/*
 * The options of `traceml run`, one row each, in the order the usage
 * text lists them:
 *
 *     X(name, alias, kind, field, given, default, min, max, channel, usage)
 *
 * name: the option, which is also its traceml.yaml key (without the
 * dashes; config_file.c) and what abbrev.c expands a prefix to; alias:
 * TraceML 0.5.0's name for it, or NULL; kind: STR (the text), FLAG (no
 * value; 1), LONG or DOUBLE (a number in [min, max]), VAR (typed, ranged
 * and checked as the variable whose option it is, base/env.h's row with
 * this key: the one home of that range) or ARGS (--args, parsed on its
 * own: only its usage is here); field: the member of tml_run_opts it
 * sets; given: GIVEN(member), an int set to 1 once the option is, or 0;
 * default: as text, NULL for none (zero); channel: the option of
 * `traceml __aggregate` that carries a set value to the aggregator
 * (tml__launch_agg_options), NULL for none; usage: its lines of
 * tml__usage_run, which is made of them at compile time.
 *
 * A new option is a row here and the member it sets (run.h).
 */
#define TML_RUN_OPTIONS(X) \
    X("--mode", NULL, STR, mode, 0, "summary", 0, 0, NULL, \
      "  --mode summary|cli|dashboard  what to show [summary]: the summary at the end;\n" \
      "                          cli adds a live terminal view, dashboard a live\n" \
      "                          browser dashboard (docs/live.md); on several\n" \
      "                          nodes, node 0's shows every node's ranks\n") \
    X("--run-name", "--session-id", STR, run_name, 0, NULL, 0, 0, NULL, \
      "  --run-name NAME         name of the run folder, [A-Za-z0-9_.-]+ [generated]\n") \
    X("--logs-dir", NULL, STR, logs_dir, 0, "logs", 0, 0, NULL, \
      "  --logs-dir DIR          where run folders go [./logs]\n") \
    X("--nproc-per-node", NULL, LONG, nproc, 0, "1", 1, 4096, NULL, \
      "  --nproc-per-node N      ranks on this node, via torch.distributed.run [1]\n") \
    X("--nnodes", NULL, LONG, nnodes, 0, "1", 1, 4096, NULL, \
      "  --nnodes N              nodes; run `traceml run` on each, same --run-name [1]\n") \
    X("--node-rank", NULL, LONG, node_rank, 0, NULL, 0, 4095, NULL, \
      "  --node-rank K           this node's rank; node 0 prints the summary [0]\n") \
    X("--master-addr", NULL, STR, master_addr, GIVEN(addr_given), "127.0.0.1", 0, 0, NULL, \
      "  --master-addr A         rendezvous address [127.0.0.1]\n") \
    X("--master-port", NULL, LONG, master_port, GIVEN(port_given), "29500", 1, 65535, NULL, \
      "  --master-port P         rendezvous port [one node: a free one, picked by\n" \
      "                          torchrun --standalone; several nodes: 29500]\n") \
    X("--aggregator-port", NULL, LONG, agg_port, 0, NULL, 1, 65535, NULL, \
      "  --aggregator-port P     node 0's telemetry port, multi-node [master port + 1]\n") \
    X("--interval", NULL, VAR, interval, 0, "1", 0, 0, NULL, \
      "  --interval SEC          sampling interval [1.0]\n") \
    X("--html-report", NULL, FLAG, html, 0, NULL, 0, 0, "--html-report", \
      "  --html-report           also write final_summary.html (one self-contained page)\n") \
    X("--dashboard-port", NULL, LONG, dashboard_port, 0, "8765", 1, 65535, NULL, \
      "  --dashboard-port P      dashboard port [8765]\n") \
    X("--dashboard-bind", NULL, STR, live_bind, 0, NULL, 0, 0, NULL, \
      "  --dashboard-bind ADDR   dashboard address [127.0.0.1]; 0.0.0.0 exposes it\n") \
    X("--python", NULL, STR, python, 0, NULL, 0, 0, NULL, \
      "  --python PATH           interpreter [$TRACEML_PYTHON, else the Python of the\n" \
      "                          environment traceml is installed in, else python3]\n") \
    X("--no-auto-trace", NULL, FLAG, no_auto_trace, 0, NULL, 0, 0, NULL, \
      "  --no-auto-trace         leave a script without traceml_ai in it untraced\n" \
      "                          (by default TraceML starts in it and finds its\n" \
      "                          steps: docs/zero-edit.md)\n") \
    X("--disable-traceml", "--disable_traceml", FLAG, disabled, 0, NULL, 0, 0, NULL, \
      "  --disable-traceml       same launch without instrumentation (baseline);\n" \
      "                          TRACEML_DISABLED=1 does the same\n") \
    X("--deep-dive", NULL, FLAG, deep_dive, 0, NULL, 0, 0, NULL, \
      "  --deep-dive             profile a few steps after warm-up under torch.profiler\n" \
      "                          and name the modules the compute goes to (by default\n" \
      "                          only when COMPUTE-BOUND: docs/deep-dive.md)\n") \
    X("--no-deep-dive", NULL, FLAG, no_deep_dive, 0, NULL, 0, 0, NULL, \
      "  --no-deep-dive          no deep dive, whatever the verdict\n") \
    X("--window-steps", "--summary-window-rows", VAR, window_steps, 0, NULL, 0, 0, "--window-steps", \
      "  --window-steps N        diagnose the last N common steps, 2-10000 [10000]\n" \
      "                          (the original's --summary-window-rows)\n") \
    X("--finalize-timeout-sec", NULL, DOUBLE, finalize_timeout_s, 0, "20", 0.1, 86400, NULL, \
      "  --finalize-timeout-sec S  time the summary may take before the fallback [20]\n") \
    X("--kill-after", NULL, DOUBLE, kill_after_s, 0, NULL, 0.1, 86400, NULL, \
      "  --kill-after S          SIGKILL a training still running S seconds after a\n" \
      "                          SIGINT/SIGTERM/SIGHUP/SIGQUIT [never: it takes as\n" \
      "                          long as it needs, e.g. to save a checkpoint]\n") \
    X("--aggregator-bind-host", NULL, STR, agg_bind, 0, "0.0.0.0", 0, 0, NULL, \
      "  --aggregator-bind-host A  node 0's aggregator address, multi-host [0.0.0.0]\n") \
    X("--apply", NULL, STR, apply, 0, NULL, 0, 0, NULL, \
      "  --apply FILE            run with the settings a `traceml tune` recommended\n" \
      "                          (its tune.json), applied at start-up: the script\n" \
      "                          is not edited (docs/tune.md)\n") \
    X("--args", NULL, ARGS, cmd, 0, NULL, 0, 0, NULL, \
      "  --args \"...\"            more script arguments, split as a shell would\n")

#define USAGE(name, alias, kind, field, given, def, min, max, channel, usage) usage
const char tml__usage_run[] =
    "usage: traceml run [options] SCRIPT [script args...]\n"
    "       traceml run [options] -- COMMAND [args...]\n"
    "\n"
    "Runs a Python training script (or, after --, any command) under TraceML,\n"
    "prints the run summary, writes logs/<run>/ and exits with the training's\n"
    "exit code.\n"
    "\n"
    "Options:\n"
    TML_RUN_OPTIONS(USAGE)
    "\n"
    "TraceML's options may also follow SCRIPT (traceml run train.py --mode=cli);\n"
    "everything after -- goes to the script. Defaults: ./traceml.yaml or the\n"
    "[tool.traceml] table of ./pyproject.toml (docs/cli.md).\n";

#undef USAGE

typedef enum opt_kind { STR, FLAG, LONG, DOUBLE, VAR, ARGS } opt_kind;

typedef struct run_option {
    const char *name, *alias;
    opt_kind kind;
    size_t off;       /* the member of tml_run_opts it sets */
    size_t given;     /* the int set once it is, 0 none (offset 0 is mode: no int) */
    const char *def;
    double min, max;
    const char *channel;
} run_option;

#define GIVEN(member) offsetof(tml_run_opts, member)
#define ROW(name, alias, kind, field, given, def, min, max, channel, usage) \
    {name, alias, kind, offsetof(tml_run_opts, field), given, def, min, max, channel},
static const run_option options[] = {TML_RUN_OPTIONS(ROW)};
#undef ROW
#undef GIVEN
#define NOPTIONS (sizeof(options) / sizeof(options[0]))

/* Options of TraceML 0.5.0 that mean nothing here: a note line each. */
const tml_cli_legacy tml__launch_legacy[] = {
    {"--trace-max-steps", 1, "TraceML traces every step: its memory stays bounded and it "
     "costs ~1 us a step (docs/performance.md), so there is no step limit to set"},
    {"--aggregator-host", 1, "the ranks of other nodes reach node 0's aggregator at "
     "--master-addr, port --aggregator-port"},
    {"--history-retention", 1, "the summary covers the whole run in bounded memory; "
     "there is no history to prune"},
    {"--no-history", 0, "the run's records are kept in bounded memory and its SQLite file"},
    {"--on-missing-aggregator", 1, "the aggregator is this launcher's child; if it fails, "
     "the training runs on and the launcher says so"},
    {"--save-training-output", 0, "the training's output goes to this terminal as it "
     "comes, untouched (a file in between would change its buffering); redirect it to keep "
     "it (`| tee train.log`); --mode cli keeps it in the run folder's training_output.log"},
    {"--no-save-training-output", 0, "the training's output goes to this terminal as it "
     "comes; only --mode cli keeps a copy (training_output.log)"},
    {"--enable-logging", 0, "logging is always on: the run folder's traceml.log"},
    {"--no-dashboard-auto-open", 0, "nothing opens a browser by itself"},
};
const size_t tml__launch_nlegacy = sizeof(tml__launch_legacy) / sizeof(tml__launch_legacy[0]);

/* TraceML 0.5.0's traceml.yaml settings that are no option here: true is
 * what happens anyway; false means the option named (a note says why it
 * changes nothing). */
static const struct {
    const char *key, *when_false;
} file_bools[] = {
    {"--history-enabled", "--no-history"},
    {"--dashboard-auto-open", "--no-dashboard-auto-open"},
};

static void *member(tml_run_opts *o, size_t off)
{
    return (char *)o + off;
}

static const void *cmember(const tml_run_opts *o, size_t off)
{
    return (const char *)o + off;
}

/* A VAR option's variable: the row of base/env.h whose option it is. */
static const tml_env_var *var_of(const run_option *r)
{
    size_t n;
    const tml_env_var *t = tml__env_table(&n);
    for (size_t k = 0; r->kind == VAR && k < n; k++)
        if (t[k].key && strcmp(t[k].key, r->name + 2) == 0)
            return &t[k];
    return NULL;
}

/* r's member is a long: a LONG, or a VAR of an int variable (else a
 * number is a double). */
static int is_long(const run_option *r)
{
    const tml_env_var *e = var_of(r);
    return r->kind == LONG || (e && e->type == TML_ENV_INT);
}

/* Sets r's member from v (the option was written name): a number out of
 * its range dies naming it. */
static void set_option(tml_run_opts *o, const run_option *r, const char *name, const char *v)
{
    const tml_env_var *e = var_of(r);
    double min = e ? e->min : r->min, max = e ? e->max : r->max;
    if (r->kind == STR)
        *(const char **)member(o, r->off) = v;
    else if (r->kind == FLAG)
        *(int *)member(o, r->off) = 1;
    else if (is_long(r))
        *(long *)member(o, r->off) = tml__cli_long(name, v, (long)min, (long)max);
    else
        *(double *)member(o, r->off) = tml__cli_double(name, v, min, max);
    if (r->given)
        *(int *)member(o, r->given) = 1;
}

/* Consumes TraceML's option at argv[*i]: 1 taken, 0 not one of ours. */
static int take_option(int argc, char **argv, int *i, tml_run_opts *o)
{
    for (size_t k = 0; k < NOPTIONS; k++) {
        const run_option *r = &options[k];
        const char *names[] = {r->name, r->alias}, *v = NULL;
        for (int n = 0; n < 2 && names[n] && r->kind != ARGS; n++)
            if (tml__cli_opt(argc, argv, i, names[n], r->kind == FLAG ? NULL : &v)) {
                set_option(o, r, names[n], v);
                return 1;
            }
    }
    return tml__cli_legacy_opt(argc, argv, i, tml__launch_legacy, tml__launch_nlegacy);
}

/* Every option's default (the project's file and the command line come
 * after). */
static void set_defaults(tml_run_opts *o)
{
    for (size_t k = 0; k < NOPTIONS; k++) {
        const run_option *r = &options[k];
        if (!r->def)
            continue;
        if (r->kind == STR)
            *(const char **)member(o, r->off) = r->def;
        else if (is_long(r))
            *(long *)member(o, r->off) = strtol(r->def, NULL, 10);
        else
            *(double *)member(o, r->off) = strtod(r->def, NULL);
    }
}

/* An option without a value ("--html-report"), ours or 0.5.0's. */
int tml__launch_is_flag(const char *name)
{
    for (size_t k = 0; k < NOPTIONS; k++)
        if (options[k].kind == FLAG && (strcmp(name, options[k].name) == 0 ||
                                        (options[k].alias && strcmp(name, options[k].alias) == 0)))
            return 1;
    for (size_t k = 0; k < tml__launch_nlegacy; k++)
        if (!tml__launch_legacy[k].value && strcmp(name, tml__launch_legacy[k].name) == 0)
            return 1;
    return 0;
}

void tml__launch_agg_options(const tml_run_opts *o, tml_run_argv *a)
{
    for (size_t k = 0; k < NOPTIONS; k++) {
        const run_option *r = &options[k];
        if (!r->channel)
            continue;
        if (r->kind == FLAG && *(const int *)cmember(o, r->off)) {
            tml__launch_arg(a, r->channel);
        } else if (is_long(r) && *(const long *)cmember(o, r->off)) {
            tml__launch_arg(a, r->channel);
            tml__launch_arg_long(a, *(const long *)cmember(o, r->off));
        } else if (r->kind == STR && *(const char *const *)cmember(o, r->off)) {
            tml__launch_arg(a, r->channel);
            tml__launch_arg(a, *(const char *const *)cmember(o, r->off));
        }
    }
}

/* cli.h: for abbrev.c, which expands a prefix to one of these too. */
const char *tml__launch_alias(size_t k, int *value)
{
    for (size_t j = 0; j < NOPTIONS; j++)
        if (options[j].alias && k-- == 0) {
            *value = options[j].kind != FLAG;
            return options[j].alias;
        }
    return NULL;
}

const char *tml__launch_from_file(const tml_run_ctx *c, const char *value, char *buf,
                               size_t cap)
{
    for (int k = 0; value && k < c->project.n; k++) {
        const char *eq = strchr(c->project.argv[k], '=');
        if (eq && value == eq + 1) {
            snprintf(buf, cap, "%s:%d", c->project.path, c->project.line[k]);
            return buf;
        }
    }
    return NULL;
}

/* An option's name in the file's option k ("--mode=x": "--mode"), 0.5.0's
 * names as ours: the file that sets session-id and run-name sets one
 * thing twice. */
static void file_option_name(const tml_cli_config *project, int k, char *out, size_t cap,
                             int canonical)
{
    const char *opt = project->argv[k];
    snprintf(out, cap, "%.*s", (int)strcspn(opt, "="), opt);
    for (size_t a = 0; canonical && a < NOPTIONS; a++)
        if (options[a].alias && strcmp(out, options[a].alias) == 0)
            snprintf(out, cap, "%s", options[a].name);
}

/* The file's options, parsed as if typed first; any error names its line. */
static void take_file_options(tml_run_ctx *c)
{
    tml_cli_config *project = &c->project;
    if (tml__cli_config_load(project) < 0)
        tml__cli_die(TML_EXIT_USAGE, "%s", project->err);
    char where[64], name[80], same[80], other[80];
    tml__cli_origin(where);
    for (int k = 0; k < project->n; k++) {
        char *opt = project->argv[k], *val = strchr(opt, '=') + 1;
        int i = 0;
        snprintf(where, sizeof(where), "%s:%d", project->path, project->line[k]);
        file_option_name(project, k, name, sizeof(name), 0);
        file_option_name(project, k, same, sizeof(same), 1);
        for (int j = 0; j < k; j++) {   /* one name twice: the parser said so */
            file_option_name(project, j, other, sizeof(other), 1);
            if (strcmp(other, same) == 0) {
                file_option_name(project, j, other, sizeof(other), 0);
                tml__cli_die(TML_EXIT_USAGE, "'%s' sets what '%s' on %s:%d sets; say it once",
                             name + 2, other + 2, project->path, project->line[j]);
            }
        }
        size_t b = 0;
        while (b < sizeof(file_bools) / sizeof(file_bools[0]) && strcmp(name, file_bools[b].key))
            b++;
        if (b < sizeof(file_bools) / sizeof(file_bools[0])) {
            char *flag[] = {(char *)file_bools[b].when_false, NULL};
            if (strcmp(val, "true") != 0 && strcmp(val, "false") != 0)
                tml__cli_die(TML_EXIT_USAGE, "'%s' is true or false, got '%s'", name + 2, val);
            if (strcmp(val, "false") == 0)
                take_option(1, flag, &i, &c->o);
        } else if (tml__launch_is_flag(name)) {
            char *flag[] = {name, NULL};
            if (strcmp(val, "true") != 0 && strcmp(val, "false") != 0)
                tml__cli_die(TML_EXIT_USAGE, "'%s' is a flag: true or false, got '%s'",
                             name + 2, val);
            if (strcmp(val, "true") == 0)
                take_option(1, flag, &i, &c->o);
        } else if (!take_option(1, project->argv + k, &i, &c->o)) {
            tml__cli_die(TML_EXIT_USAGE, "unknown key '%s' (the keys are the options of "
                         "'traceml run', see 'traceml help run')", name + 2);
        }
    }
    tml__cli_origin(NULL);
}

/* Splits --args "..." as a shell would split words: blanks separate, '...'
 * and "..." quote, a backslash escapes the next character. Appends to
 * *out (a NULL-terminated array of n entries). */
static void split_args(const char *s, char ***out, size_t *n, size_t *cap)
{
    char *buf = malloc(strlen(s) + 1);
    if (!buf)
        tml__cli_die(1, "out of memory");
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n')
            s++;
        if (!*s)
            break;
        size_t k = 0;
        char q = 0;
        for (; *s && (q || (*s != ' ' && *s != '\t' && *s != '\n')); s++) {
            if (q ? *s == q : (*s == '\'' || *s == '"')) {
                q = q ? 0 : *s;
            } else if (*s == '\\' && s[1] && q != '\'') {
                buf[k++] = *++s;
            } else {
                buf[k++] = *s;
            }
        }
        if (q)
            tml__cli_die(TML_EXIT_USAGE, "--args: unmatched %c", q);
        buf[k] = '\0';
        char *w = strdup(buf);
        if (!w || TML_GROW(*out, *n + 2, *cap) < 0)
            tml__cli_die(1, "out of memory");
        (*out)[(*n)++] = w;
        (*out)[*n] = NULL;
    }
    free(buf);
}

void tml__launch_opts_release(tml_run_opts *o, int argc, char **argv)
{
    if (!o->cmd_owned)
        return;
    for (int i = 0; i < o->ncmd; i++) {
        int given = 0;
        for (int j = 0; j < argc && !given; j++)
            given = o->cmd[i] == argv[j];
        if (!given)
            free(o->cmd[i]);   /* a word of --args */
    }
    free(o->cmd);
    o->cmd = NULL;
    o->ncmd = 0;
}

/* A --mode after SCRIPT whose value is no TraceML mode ("--mode train"):
 * the script's. */
static int mode_for_script(int argc, char **argv, int i)
{
    const char *a = argv[i], *v;
    if (strncmp(a, "--mode=", 7) == 0)
        v = a + 7;
    else if (strcmp(a, "--mode") == 0 && i + 1 < argc)
        v = argv[i + 1];
    else
        return 0;
    return strcmp(v, "summary") != 0 && strcmp(v, "cli") != 0 && strcmp(v, "dashboard") != 0;
}

/* After SCRIPT: TraceML's own options are TraceML's (the product brief
 * writes `traceml run train.py --mode=cli`), --args "..." adds script
 * arguments, and everything after -- is the script's verbatim. Builds
 * o->cmd as SCRIPT and the script's arguments. */
static void parse_after_script(int argc, char **argv, int i, tml_run_opts *o,
                               const char *pre_args)
{
    char **cmd = NULL;
    size_t n = 0, cap = 0;
    char taken[256] = "";
    if (TML_GROW(cmd, 2, cap) < 0)
        tml__cli_die(1, "out of memory");
    cmd[n++] = argv[i++];
    cmd[n] = NULL;
    for (; i < argc; i++) {
        const char *v, *a = argv[i];
        int at = i;
        if (strcmp(a, "--") == 0) {
            for (i++; i < argc; i++) {
                if (TML_GROW(cmd, n + 2, cap) < 0)
                    tml__cli_die(1, "out of memory");
                cmd[n++] = argv[i];
                cmd[n] = NULL;
            }
            break;
        }
        if (tml__cli_opt(argc, argv, &i, "--args", &v)) {
            split_args(v, &cmd, &n, &cap);
            continue;
        }
        if (mode_for_script(argc, argv, i)) {
            fprintf(stderr, "traceml: note: '%s%s%s' goes to the script (not a TraceML "
                    "--mode: summary, cli or dashboard)\n", a, strchr(a, '=') ? "" : " ",
                    strchr(a, '=') ? "" : argv[i + 1]);
        } else if (a[0] == '-' && a[1] == '-' && take_option(argc, argv, &i, o)) {
            size_t len = strlen(taken);
            for (int k = at; k <= i && len < sizeof(taken) - 1; k++)
                len += (size_t)snprintf(taken + len, sizeof(taken) - len, "%s%s",
                                        len ? " " : "", argv[k]);
            continue;
        }
        if (TML_GROW(cmd, n + 2, cap) < 0)
            tml__cli_die(1, "out of memory");
        cmd[n++] = argv[i];
        cmd[n] = NULL;
    }
    if (pre_args)
        split_args(pre_args, &cmd, &n, &cap);
    if (taken[0])
        fprintf(stderr, "traceml: note: '%s' after the script is TraceML's (the script's own "
                "arguments of the same name go after --)\n", taken);
    o->cmd = cmd;
    o->ncmd = (int)n;
    o->cmd_owned = 1;
}

void tml__launch_parse(tml_run_ctx *c, int argc, char **argv)
{
    const char *pre_args = NULL;   /* --args before SCRIPT */
    tml_run_opts *o = &c->o;
    set_defaults(o);
    /* the project's defaults (traceml.yaml, pyproject.toml), then the command line */
    take_file_options(c);
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            o->dashdash = 1;
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(c->watch ? tml__usage_watch : tml__usage_run, stdout);
            exit(0);
        }
        if (tml__cli_opt(argc, argv, &i, "--args", &pre_args))
            continue;
        if (!take_option(argc, argv, &i, o)) {
            char hint[96];
            tml__cli_suggest_option(c->cmd_name, a, hint, sizeof(hint));
            tml__cli_die(TML_EXIT_USAGE, "unknown option '%s' for 'traceml %s'%s (see "
                         "'traceml help %s')", a, c->cmd_name, hint, c->cmd_name);
        }
    }
    o->cmd = argv + i;
    o->ncmd = argc - i;
    if (o->dashdash && pre_args)
        tml__cli_die(TML_EXIT_USAGE, "--args goes with a SCRIPT; after -- write the "
                     "command's arguments themselves");
    if (!o->dashdash && i < argc)
        parse_after_script(argc, argv, i, o, pre_args);
    /* TRACEML_DISABLED=1 traceml run ...: the script runs untouched */
    if (tml__env_bool(TML_ENV_DISABLED))   /* as the engine reads it */
        o->disabled = 1;
}
