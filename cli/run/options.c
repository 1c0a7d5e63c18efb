/*
 * options.c - the options of `traceml run` (and `traceml watch`): one
 * table for the command line and the project's file (./traceml.yaml or
 * the [tool.traceml] table of ./pyproject.toml, config_file.c), whose
 * values are taken as if typed first, and TraceML 0.5.0's names.
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

const char tml__usage_run[] =
    "usage: traceml run [options] SCRIPT [script args...]\n"
    "       traceml run [options] -- COMMAND [args...]\n"
    "\n"
    "Runs a Python training script (or, after --, any command) under TraceML,\n"
    "prints the run summary, writes logs/<run>/ and exits with the training's\n"
    "exit code.\n"
    "\n"
    "Options:\n"
    "  --mode summary|cli|dashboard  what to show [summary]: the summary at the end;\n"
    "                          cli adds a live terminal view, dashboard a live\n"
    "                          browser dashboard (docs/live.md); on several\n"
    "                          nodes, node 0's shows every node's ranks\n"
    "  --run-name NAME         name of the run folder, [A-Za-z0-9_.-]+ [generated]\n"
    "  --logs-dir DIR          where run folders go [./logs]\n"
    "  --nproc-per-node N      ranks on this node, via torch.distributed.run [1]\n"
    "  --nnodes N              nodes; run `traceml run` on each, same --run-name [1]\n"
    "  --node-rank K           this node's rank; node 0 prints the summary [0]\n"
    "  --master-addr A         rendezvous address [127.0.0.1]\n"
    "  --master-port P         rendezvous port [one node: a free one, picked by\n"
    "                          torchrun --standalone; several nodes: 29500]\n"
    "  --aggregator-port P     node 0's telemetry port, multi-node [master port + 1]\n"
    "  --interval SEC          sampling interval [1.0]\n"
    "  --html-report           also write final_summary.html (one self-contained page)\n"
    "  --dashboard-port P      dashboard port [8765]\n"
    "  --dashboard-bind ADDR   dashboard address [127.0.0.1]; 0.0.0.0 exposes it\n"
    "  --python PATH           interpreter [$TRACEML_PYTHON, else the Python of the\n"
    "                          environment traceml is installed in, else python3]\n"
    "  --no-auto-trace         leave a script without traceml_ai in it untraced\n"
    "                          (by default TraceML starts in it and finds its\n"
    "                          steps: docs/zero-edit.md)\n"
    "  --disable-traceml       same launch without instrumentation (baseline);\n"
    "                          TRACEML_DISABLED=1 does the same\n"
    "  --window-steps N        diagnose the last N common steps, 2-10000 [10000]\n"
    "                          (the original's --summary-window-rows)\n"
    "  --finalize-timeout-sec S  time the summary may take before the fallback [20]\n"
    "  --kill-after S          SIGKILL a training still running S seconds after a\n"
    "                          SIGINT/SIGTERM/SIGHUP/SIGQUIT [never: it takes as\n"
    "                          long as it needs, e.g. to save a checkpoint]\n"
    "  --aggregator-bind-host A  node 0's aggregator address, multi-host [0.0.0.0]\n"
    "  --apply FILE            run with the settings a `traceml tune` recommended\n"
    "                          (its tune.json), applied at start-up: the script\n"
    "                          is not edited (docs/tune.md)\n"
    "  --args \"...\"            more script arguments, split as a shell would\n"
    "\n"
    "TraceML's options may also follow SCRIPT (traceml run train.py --mode=cli);\n"
    "everything after -- goes to the script. Defaults: ./traceml.yaml or the\n"
    "[tool.traceml] table of ./pyproject.toml (docs/cli.md).\n";

static const char default_master_addr[] = "127.0.0.1";

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

/* The options without a value; a project file sets them true or false. */
static const struct {
    const char *name;
    size_t off;   /* the int in tml_run_opts it sets */
} run_flags[] = {
    {"--html-report", offsetof(tml_run_opts, html)},
    {"--disable-traceml", offsetof(tml_run_opts, disabled)},
    {"--disable_traceml", offsetof(tml_run_opts, disabled)},   /* 0.5.0's alias */
    {"--no-auto-trace", offsetof(tml_run_opts, no_auto_trace)},
};

/* Consumes TraceML's option at argv[*i]: 1 taken, 0 not one of ours. */
static int take_option(int argc, char **argv, int *i, tml_run_opts *o)
{
    const char *v, *a = argv[*i];
    if (tml__cli_opt(argc, argv, i, "--mode", &o->mode) ||
        tml__cli_opt(argc, argv, i, "--run-name", &o->run_name) ||
        tml__cli_opt(argc, argv, i, "--session-id", &o->run_name) ||   /* 0.5.0's name */
        tml__cli_opt(argc, argv, i, "--logs-dir", &o->logs_dir) ||
        tml__cli_opt(argc, argv, i, "--master-addr", &o->master_addr) ||
        tml__cli_opt(argc, argv, i, "--python", &o->python) ||
        tml__cli_opt(argc, argv, i, "--dashboard-bind", &o->live_bind) ||
        tml__cli_opt(argc, argv, i, "--aggregator-bind-host", &o->agg_bind) ||
        tml__cli_opt(argc, argv, i, "--apply", &o->apply))
        return 1;
    if (tml__cli_opt(argc, argv, i, "--nproc-per-node", &v))
        o->nproc = tml__cli_long("--nproc-per-node", v, 1, 4096);
    else if (tml__cli_opt(argc, argv, i, "--nnodes", &v))
        o->nnodes = tml__cli_long("--nnodes", v, 1, 4096);
    else if (tml__cli_opt(argc, argv, i, "--node-rank", &v))
        o->node_rank = tml__cli_long("--node-rank", v, 0, 4095);
    else if (tml__cli_opt(argc, argv, i, "--master-port", &v)) {
        o->master_port = tml__cli_long("--master-port", v, 1, 65535);
        o->port_given = 1;
    } else if (tml__cli_opt(argc, argv, i, "--aggregator-port", &v))
        o->agg_port = tml__cli_long("--aggregator-port", v, 1, 65535);
    else if (tml__cli_opt(argc, argv, i, "--dashboard-port", &v))
        o->dashboard_port = tml__cli_long("--dashboard-port", v, 1, 65535);
    else if (tml__cli_opt(argc, argv, i, "--interval", &v))
        o->interval = tml__cli_double("--interval", v, 0.01, 3600.0);
    else if (tml__cli_opt(argc, argv, i, "--window-steps", &v) ||
             tml__cli_opt(argc, argv, i, "--summary-window-rows", &v))
        o->window_steps = tml__cli_long(strncmp(a, "--window-steps", 14) == 0
                                            ? "--window-steps" : "--summary-window-rows",
                                        v, 2, 10000);
    else if (tml__cli_opt(argc, argv, i, "--finalize-timeout-sec", &v))
        o->finalize_timeout_s = tml__cli_double("--finalize-timeout-sec", v, 0.1, 86400);
    else if (tml__cli_opt(argc, argv, i, "--kill-after", &v))
        o->kill_after_s = tml__cli_double("--kill-after", v, 0.1, 86400);
    else {
        for (size_t k = 0; k < sizeof(run_flags) / sizeof(run_flags[0]); k++)
            if (tml__cli_opt(argc, argv, i, run_flags[k].name, NULL)) {
                *(int *)(void *)((char *)o + run_flags[k].off) = 1;
                return 1;
            }
        return tml__cli_legacy_opt(argc, argv, i, tml__launch_legacy,
                                   tml__launch_nlegacy);
    }
    return 1;
}

/* An option without a value ("--html-report"), ours or 0.5.0's. */
int tml__launch_is_flag(const char *name)
{
    for (size_t k = 0; k < sizeof(run_flags) / sizeof(run_flags[0]); k++)
        if (strcmp(name, run_flags[k].name) == 0)
            return 1;
    for (size_t k = 0; k < tml__launch_nlegacy; k++)
        if (!tml__launch_legacy[k].value && strcmp(name, tml__launch_legacy[k].name) == 0)
            return 1;
    return 0;
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
    static const char *const aliases[][2] = {{"--session-id", "--run-name"},
                                             {"--summary-window-rows", "--window-steps"}};
    const char *opt = project->argv[k];
    snprintf(out, cap, "%.*s", (int)strcspn(opt, "="), opt);
    for (size_t a = 0; canonical && a < sizeof(aliases) / sizeof(aliases[0]); a++)
        if (strcmp(out, aliases[a][0]) == 0)
            snprintf(out, cap, "%s", aliases[a][1]);
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
    o->mode = "summary";
    o->logs_dir = "logs";
    o->master_addr = default_master_addr;
    o->nproc = o->nnodes = 1;
    o->master_port = 29500;
    o->dashboard_port = 8765;
    o->interval = 1.0;
    o->agg_bind = "0.0.0.0";
    o->finalize_timeout_s = 20;
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
    o->addr_given = o->master_addr != default_master_addr;
    /* TRACEML_DISABLED=1 traceml run ...: the script runs untouched */
    if (tml__env_bool(TML_ENV_DISABLED))   /* as the engine reads it */
        o->disabled = 1;
}
