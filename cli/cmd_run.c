/*
 * cmd_run.c - `traceml run`: launch a training under TraceML.
 *
 * The launcher is three processes:
 *
 *     traceml run (this file)  --fork/exec-->  traceml __aggregate (port, sqlite)
 *                              --fork/exec-->  $PYTHON SCRIPT args  (the training)
 *
 * and a fourth under --mode cli's full screen: the drainer (drain.c), forked
 * before the training, which reads the training's pseudo-terminal into
 * training_output.log so that the training never waits for the launcher.
 *
 * and the order of work is: validate everything (nothing is created when
 * any input is wrong), create the run folder and manifest, start the
 * aggregator and learn its port, start the training with TRACEML_ADDR and
 * the run's secret in its environment, wait for it, tell the aggregator to
 * finalize, print the summary it sends back (final_summary.txt, also when
 * the disk could not take the file), complete the manifest, and exit with
 * the training's own exit code.
 *
 * Fail-open is the rule: the aggregator is a separate process so that its
 * death never touches the training. When it dies (or does not answer in
 * time) the launcher rebuilds the run from telemetry.sqlite itself and
 * still prints a summary.
 *
 * Ctrl-C: the training shares our process group, so a terminal's Ctrl-C
 * reaches it directly and must not be forwarded a second time. A SIGINT
 * sent to the launcher alone (kill PID) must be forwarded. The two are told
 * apart by the kernel's si_code (SI_KERNEL for a terminal) and, for a
 * SIGINT sent by a program to the whole group, by the aggregator: it keeps
 * SIGINT blocked, so a group-wide SIGINT shows as pending in its
 * /proc/PID/status. Then the training gets at most ~1 s to exit before
 * SIGKILL, and the summary of what arrived is printed, status interrupted,
 * exit 130. The drainer takes no part: it is in a session of its own and
 * ignores SIGINT, so it reads the training's traceback to the end.
 */
#include "cli.h"
#include "dist.h"
#include "live_view.h"
#include "python.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agg/agg.h"
#include "base/env.h"
#include "base/fs.h"
#include "base/array.h"
#include "agg/rundir.h"
#include "model/progress.h"
#include "traceml/traceml.h"

extern char **environ;

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
    "  --aggregator-bind-host A  node 0's aggregator address, multi-host [0.0.0.0]\n"
    "  --args \"...\"            more script arguments, split as a shell would\n"
    "\n"
    "TraceML's options may also follow SCRIPT (traceml run train.py --mode=cli);\n"
    "everything after -- goes to the script. Defaults: ./traceml.yaml or the\n"
    "[tool.traceml] table of ./pyproject.toml (docs/cli.md).\n";

typedef struct run_opts {
    const char *mode, *run_name, *logs_dir, *master_addr, *python;
    long nproc, nnodes, node_rank, master_port, dashboard_port;
    double interval;
    long window_steps;     /* --window-steps, 0 = the default (10,000) */
    int html, disabled, dashdash;
    int no_auto_trace;     /* --no-auto-trace: no zero-edit tracing */
    char **cmd;            /* SCRIPT args... or COMMAND args... */
    int ncmd;
    long agg_port;         /* --aggregator-port, 0 = master port + 1 */
    int addr_given, port_given;
    tml_dist dist;         /* the distributed shape (dist.h) */
    tml_python py;         /* the interpreter of SCRIPT (python.h) */
    char follower_dir[160];   /* a follower's own folder name */
    char slurm_name[128];     /* a Slurm run's name when none was given */
} run_opts;

static volatile sig_atomic_t got_int, int_code, got_term;

/* Live views (--mode cli / dashboard, live_view.h): what the aggregator is
 * asked to serve, and the terminal view that supervise() keeps drawing. */
static int live_port_wanted = -1, live_port_got = -1, live_interval_ms = 1000;
/* how the training is run, for a summary in which no rank reported */
static tml_launch launch_kind;
/* `traceml watch`: the same launch, system and process metrics only */
static int watch_profile;
static const char *cmd_name = "run";
/* --html-report: the aggregator (or the fallback finalize) writes the page */
static int html_report_wanted;
static const char *live_bind;
static tml_live_view *live_view;

static void on_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    if (sig == SIGINT) {
        if (!got_int)
            int_code = info ? info->si_code : 0;
        got_int++;
    } else {
        got_term = sig;
    }
}

static const char default_master_addr[] = "127.0.0.1";
/* --finalize-timeout-sec: how long the aggregator may take to finalize */
static double finalize_timeout_s = 20;   /* seconds, fractions too (0.5.0's float) */
/* --aggregator-bind-host: what node 0's aggregator listens on, multi-host */
static const char *agg_bind = "0.0.0.0";

/* Options of TraceML 0.5.0 that mean nothing here: a note line each. */
static const tml_cli_legacy legacy_opts[] = {
    {"--trace-max-steps", 1, "TraceML traces every step: its memory stays bounded and it "
     "costs ~1 us a step (docs/performance.md), so there is no step limit to set"},
    {"--aggregator-host", 1, "the ranks of other nodes reach node 0's aggregator at "
     "--master-addr, port --aggregator-port"},
    {"--history-retention", 1, "the summary covers the whole run in bounded memory; "
     "there is no history to prune"},
    {"--no-history", 0, "the run's records are kept in bounded memory and its SQLite file"},
    {"--on-missing-aggregator", 1, "the aggregator is this launcher's child; if it fails, "
     "the training runs on and the launcher says so"},
    {"--save-training-output", 0, "the training's output is always shown as it comes and "
     "kept in the run folder's training_output.log"},
    {"--no-save-training-output", 0, "the training's output is always shown as it comes "
     "and kept in the run folder's training_output.log"},
    {"--enable-logging", 0, "logging is always on: the run folder's traceml.log"},
    {"--no-dashboard-auto-open", 0, "nothing opens a browser by itself"},
};

/* The options without a value; a project file sets them true or false. */
static const struct {
    const char *name;
    size_t off;   /* the int in run_opts it sets */
} run_flags[] = {
    {"--html-report", offsetof(run_opts, html)},
    {"--disable-traceml", offsetof(run_opts, disabled)},
    {"--disable_traceml", offsetof(run_opts, disabled)},   /* 0.5.0's alias */
    {"--no-auto-trace", offsetof(run_opts, no_auto_trace)},
};

/* Consumes TraceML's option at argv[*i]: 1 taken, 0 not one of ours. */
static int take_option(int argc, char **argv, int *i, run_opts *o)
{
    const char *v, *a = argv[*i];
    if (tml__cli_opt(argc, argv, i, "--mode", &o->mode) ||
        tml__cli_opt(argc, argv, i, "--run-name", &o->run_name) ||
        tml__cli_opt(argc, argv, i, "--session-id", &o->run_name) ||   /* 0.5.0's name */
        tml__cli_opt(argc, argv, i, "--logs-dir", &o->logs_dir) ||
        tml__cli_opt(argc, argv, i, "--master-addr", &o->master_addr) ||
        tml__cli_opt(argc, argv, i, "--python", &o->python) ||
        tml__cli_opt(argc, argv, i, "--dashboard-bind", &live_bind) ||
        tml__cli_opt(argc, argv, i, "--aggregator-bind-host", &agg_bind))
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
        finalize_timeout_s = tml__cli_double("--finalize-timeout-sec", v, 0.1, 86400);
    else {
        for (size_t k = 0; k < sizeof(run_flags) / sizeof(run_flags[0]); k++)
            if (tml__cli_opt(argc, argv, i, run_flags[k].name, NULL)) {
                *(int *)(void *)((char *)o + run_flags[k].off) = 1;
                return 1;
            }
        return tml__cli_legacy_opt(argc, argv, i, legacy_opts,
                                   sizeof(legacy_opts) / sizeof(legacy_opts[0]));
    }
    return 1;
}

/* An option without a value ("--html-report"), ours or 0.5.0's. */
static int is_flag(const char *name)
{
    for (size_t k = 0; k < sizeof(run_flags) / sizeof(run_flags[0]); k++)
        if (strcmp(name, run_flags[k].name) == 0)
            return 1;
    for (size_t k = 0; k < sizeof(legacy_opts) / sizeof(legacy_opts[0]); k++)
        if (!legacy_opts[k].value && strcmp(name, legacy_opts[k].name) == 0)
            return 1;
    return 0;
}

/* The project's file (config_file.c): its options, kept for the run's
 * life, so that a value still pointing into them came from it. */
static tml_cli_config project;

/* "traceml.yaml:3" when value is the one that line gave, else NULL. */
static const char *from_file(const char *value)
{
    static char where[64];
    for (int k = 0; value && k < project.n; k++) {
        const char *eq = strchr(project.argv[k], '=');
        if (eq && value == eq + 1) {
            snprintf(where, sizeof(where), "%s:%d", project.path, project.line[k]);
            return where;
        }
    }
    return NULL;
}

/* An option's name in the file's option k ("--mode=x": "--mode"), 0.5.0's
 * names as ours: the file that sets session-id and run-name sets one
 * thing twice. */
static void file_option_name(int k, char *out, size_t cap, int canonical)
{
    static const char *const aliases[][2] = {{"--session-id", "--run-name"},
                                             {"--summary-window-rows", "--window-steps"}};
    const char *opt = project.argv[k];
    snprintf(out, cap, "%.*s", (int)strcspn(opt, "="), opt);
    for (size_t a = 0; canonical && a < sizeof(aliases) / sizeof(aliases[0]); a++)
        if (strcmp(out, aliases[a][0]) == 0)
            snprintf(out, cap, "%s", aliases[a][1]);
}

/* The file's options, parsed as if typed first; any error names its line. */
static void take_file_options(run_opts *o)
{
    if (tml__cli_config_load(&project) < 0)
        tml__cli_die(TML_EXIT_USAGE, "%s", project.err);
    char where[64], name[80], same[80], other[80];
    tml__cli_origin(where);
    for (int k = 0; k < project.n; k++) {
        char *opt = project.argv[k], *val = strchr(opt, '=') + 1;
        int i = 0;
        snprintf(where, sizeof(where), "%s:%d", project.path, project.line[k]);
        file_option_name(k, name, sizeof(name), 0);
        file_option_name(k, same, sizeof(same), 1);
        for (int j = 0; j < k; j++) {   /* one name twice: the parser said so */
            file_option_name(j, other, sizeof(other), 1);
            if (strcmp(other, same) == 0) {
                file_option_name(j, other, sizeof(other), 0);
                tml__cli_die(TML_EXIT_USAGE, "'%s' sets what '%s' on %s:%d sets; say it once",
                             name + 2, other + 2, project.path, project.line[j]);
            }
        }
        if (is_flag(name)) {
            char *flag[] = {name, NULL};
            if (strcmp(val, "true") != 0 && strcmp(val, "false") != 0)
                tml__cli_die(TML_EXIT_USAGE, "'%s' is a flag: true or false, got '%s'",
                             name + 2, val);
            if (strcmp(val, "true") == 0)
                take_option(1, flag, &i, o);
        } else if (!take_option(1, project.argv + k, &i, o)) {
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
static void parse_after_script(int argc, char **argv, int i, run_opts *o,
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
}

static void parse(int argc, char **argv, run_opts *o)
{
    const char *pre_args = NULL;   /* --args before SCRIPT */
    memset(o, 0, sizeof(*o));
    o->mode = "summary";
    o->logs_dir = "logs";
    o->master_addr = default_master_addr;
    o->nproc = o->nnodes = 1;
    o->master_port = 29500;
    o->dashboard_port = 8765;
    o->interval = 1.0;
    /* the project's defaults (traceml.yaml, pyproject.toml), then the command line */
    take_file_options(o);
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
            fputs(watch_profile ? tml__usage_watch : tml__usage_run, stdout);
            exit(0);
        }
        if (tml__cli_opt(argc, argv, &i, "--args", &pre_args))
            continue;
        if (!take_option(argc, argv, &i, o))
            tml__cli_die(TML_EXIT_USAGE, "unknown option '%s' for 'traceml %s' (see 'traceml "
                         "help %s')", a, cmd_name, cmd_name);
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
    if (tml__env_bool("TRACEML_DISABLED"))   /* as the engine reads it */
        o->disabled = 1;
}

/* The distributed shape (dist.h): which launcher hosts the aggregator, and
 * the names every launcher of the run must agree on. */
static int validate_dist(run_opts *o)
{
    tml_dist_args da = {o->nproc, o->nnodes, o->node_rank, o->master_addr, o->master_port,
                        o->agg_port, o->addr_given, o->port_given, o->dashdash};
    if (tml__dist_setup(&o->dist, &da))
        return TML_EXIT_USAGE;
    const tml_dist *d = &o->dist;
    if (!d->followers)
        return 0;
    if (!o->run_name) {
        const char *env = tml__env_str("TRACEML_RUN_NAME");
        const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
        if (env && *env) {
            o->run_name = env;
        } else if (d->slurm && job && *job) {
            const char *stem = strrchr(o->cmd && o->ncmd ? o->cmd[0] : "run", '/');
            stem = stem ? stem + 1 : (o->ncmd ? o->cmd[0] : "run");
            char base[64];
            snprintf(base, sizeof(base), "%.60s", stem);
            char *dot = strrchr(base, '.');
            if (dot && strcmp(dot, ".py") == 0)
                *dot = '\0';
            snprintf(o->slurm_name, sizeof(o->slurm_name), "%s-slurm%.20s.%.10s", base,
                     job, step ? step : "0");
            for (char *c = o->slurm_name; *c; c++)
                if (!(*c == '-' || *c == '_' || *c == '.' || (*c >= '0' && *c <= '9') ||
                      (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
                    *c = '_';
            o->run_name = o->slurm_name;
        } else {
            return tml__cli_error("a run launched on several nodes needs --run-name NAME "
                                  "(the same on every node)");
        }
    }
    snprintf(o->follower_dir, sizeof(o->follower_dir), "%.120s.%s%ld", o->run_name,
             d->slurm ? "task" : "node", d->slurm ? d->task : d->node_rank);
    return 0;
}

/* Everything that can be checked before creating anything; an error
 * about a value from the project's file names its line. */
static int check_all(run_opts *o, char *prog, size_t cap)
{
    tml__cli_origin(from_file(o->mode));
    if (strcmp(o->mode, "summary") != 0 && strcmp(o->mode, "cli") != 0 &&
        strcmp(o->mode, "dashboard") != 0)
        return tml__cli_error("--mode must be summary, cli or dashboard, got '%s'", o->mode);
    html_report_wanted = o->html;
    if (o->node_rank >= o->nnodes)
        return tml__cli_error("--node-rank %ld must be below --nnodes %ld", o->node_rank,
                              o->nnodes);
    tml__cli_origin(from_file(o->master_addr));
    if (!*o->master_addr)
        return tml__cli_error("--master-addr must not be empty");
    tml__cli_origin(NULL);
    if (validate_dist(o))
        return TML_EXIT_USAGE;
    if (o->ncmd == 0)
        return tml__cli_error(o->dashdash ? "missing COMMAND after --"
                                          : "missing SCRIPT (usage: traceml run [options] SCRIPT [args...])");
    if (o->dashdash) {
        if (tml__cli_which(o->cmd[0], prog, cap) < 0)
            return tml__cli_error("command '%s' not found or not executable", o->cmd[0]);
    } else {
        struct stat st;
        const char *script = o->cmd[0];
        if (stat(script, &st) < 0)
            return tml__cli_error("script '%s' not found: %s", script, strerror(errno));
        if (!S_ISREG(st.st_mode))
            return tml__cli_error("script '%s' is not a regular file", script);
        if (access(script, R_OK) < 0)
            return tml__cli_error("script '%s' is not readable", script);
    }
    tml__cli_origin(from_file(o->run_name));
    if (o->run_name && !tml__run_name_valid(o->run_name))
        return tml__cli_error("invalid run name '%s': use 1-100 of [A-Za-z0-9_.-]",
                              o->run_name);
    const char *where = from_file(o->logs_dir);
    tml__cli_origin(where ? where : from_file(o->run_name));
    if (!o->disabled &&
        tml__cli_run_check(o->logs_dir, o->dist.host ? o->run_name : o->follower_dir))
        return TML_EXIT_USAGE;
    /* last: it starts the interpreter once (python.c) */
    if (!o->dashdash) {
        static char from[80];   /* quoted by o->py for the run's life */
        snprintf(from, sizeof(from), "--python");
        if ((where = from_file(o->python)))
            snprintf(from, sizeof(from), "'python' in %s", where);
        tml__cli_origin(NULL);
        if (tml__python_find(&o->py, o->python, from, 1))
            return TML_EXIT_USAGE;
        snprintf(prog, cap, "%s", o->py.path);
    }
    return 0;
}

static int validate(run_opts *o, char *prog, size_t cap)
{
    int rc = check_all(o, prog, cap);
    tml__cli_origin(NULL);
    return rc;
}

/* ---- environment of the training ---- */

typedef struct envb {
    char **v;
    size_t n, cap;
    size_t owned_from;   /* v[owned_from..n) were malloc'd here */
} envb;

static void env_release(envb *e)
{
    for (size_t i = e->owned_from; i < e->n; i++)
        free(e->v[i]);
    free(e->v);
    memset(e, 0, sizeof(*e));
}

static void env_push(envb *e, char *s)
{
    if (TML_GROW(e->v, e->n + 2, e->cap) < 0)
        tml__cli_die(1, "out of memory");
    e->v[e->n++] = s;
    e->v[e->n] = NULL;
}

static void env_set(envb *e, const char *key, const char *val)
{
    size_t n = strlen(key) + strlen(val) + 2;
    char *s = malloc(n);
    if (!s)
        tml__cli_die(1, "out of memory");
    snprintf(s, n, "%s=%s", key, val);
    env_push(e, s);
}

static const char *const owned_vars[] = {
    "TRACEML_ADDR", "TRACEML_RUN_ID", "TRACEML_SECRET", "TRACEML_RUN_NAME",
    "TRACEML_LOGS_DIR", "TRACEML_RUN_DIR", "TRACEML_DISABLED", "TRACEML_NNODES",
    "TRACEML_ENV_PYTHON", "TRACEML_ENV_PYTHON_PROBE", "TRACEML_SCRIPT", "TRACEML_PROFILE",
    NULL,
};

/*
 * Zero-edit tracing (docs/zero-edit.md): a sitecustomize, first on the
 * training's PYTHONPATH, that starts TraceML in the script's own process
 * (its argv[0] is SCRIPT: not torchrun, not a worker) unless the script
 * starts it itself, then hands over to any sitecustomize it hides.
 */
static const char *zero_edit_script;   /* SCRIPT when on */

static const char zero_edit_site[] =
    "# Written by `traceml run` (zero-edit tracing, docs/zero-edit.md): starts\n"
    "# TraceML in the training script's process when the script does not.\n"
    "def _traceml_zero_edit():\n"
    "    import os, sys\n"
    "    me = sys.modules.get('sitecustomize')\n"
    "    here = os.path.dirname(os.path.abspath(__file__))\n"
    "    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]\n"
    "    sys.modules.pop('sitecustomize', None)\n"
    "    try:  # the one this file hides, if any, reported as Python's site.py does\n"
    "        try:\n"
    "            import sitecustomize\n"
    "        except ImportError as e:\n"
    "            if e.name != 'sitecustomize':\n"
    "                raise\n"
    "    except Exception as e:\n"
    "        if sys.flags.verbose:\n"
    "            sys.excepthook(*sys.exc_info())\n"
    "        else:\n"
    "            sys.stderr.write('Error in sitecustomize; set PYTHONVERBOSE for traceback:\\n'\n"
    "                             '%s: %s\\n' % (e.__class__.__name__, e))\n"
    "    finally:\n"
    "        sys.modules.setdefault('sitecustomize', me)\n"
    "    script = os.environ.get('TRACEML_SCRIPT')\n"
    "    argv = getattr(sys, 'argv', None) or ['']\n"
    "    spawned = '--multiprocessing-fork' in argv[1:]   # a multiprocessing spawn child\n"
    "    if not script or not (spawned or (argv[0] and\n"
    "            os.path.realpath(argv[0]) == os.path.realpath(script))):\n"
    "        return\n"
    "    try:\n"
    "        from traceml_ai import _zero_edit\n"
    "        _zero_edit.start(script, spawned)\n"
    "    except Exception as e:\n"
    "        sys.stderr.write('traceml: warning: zero-edit tracing could not start (%s)\\n' % (e,))\n"
    "\n"
    "\n"
    "_traceml_zero_edit()\n"
    "del _traceml_zero_edit\n";

/* Writes <run>/zero-edit/sitecustomize.py; its folder, or NULL. */
static const char *zero_edit_dir(const tml_cli_run *r)
{
    static char dir[4200];
    char path[4300];
    snprintf(dir, sizeof(dir), "%s/zero-edit", r->abs_dir);
    snprintf(path, sizeof(path), "%s/sitecustomize.py", dir);
    if ((mkdir(dir, 0700) < 0 && errno != EEXIST) ||
        tml__write_file(path, zero_edit_site, sizeof(zero_edit_site) - 1, 0644) < 0) {
        tml__cli_warn("could not write %s: the script runs without zero-edit tracing", path);
        return NULL;
    }
    return dir;
}

static void build_env(envb *e, const tml_cli_run *r, int port, int disabled,
                      const tml_dist *d)
{
    const char *site = zero_edit_script && !disabled && port > 0 ? zero_edit_dir(r) : NULL;
    const char *pypath = NULL;
    for (char **p = environ; *p; p++) {
        int skip = 0;
        if (site && strncmp(*p, "PYTHONPATH=", 11) == 0) {
            pypath = *p + 11;
            continue;
        }
        for (const char *const *k = owned_vars; *k && !skip; k++) {
            size_t n = strlen(*k);
            skip = strncmp(*p, *k, n) == 0 && (*p)[n] == '=';
        }
        if (!skip)
            env_push(e, *p);
    }
    e->owned_from = e->n;
    if (disabled) {
        env_set(e, "TRACEML_DISABLED", "1");
        return;
    }
    char addr[320];
    /* a follower's ranks reach the host's aggregator; everyone else's are
     * on the aggregator's own host */
    int remote = d && d->enabled && !d->host && d->multi_host;
    snprintf(addr, sizeof(addr), "%s:%d", remote ? d->master_addr : "127.0.0.1", port);
    if (port > 0) {
        env_set(e, "TRACEML_ADDR", addr);
        env_set(e, "TRACEML_SECRET", r->secret);
    } else {
        env_set(e, "TRACEML_DISABLED", "1");   /* no aggregator: run untraced */
    }
    env_set(e, "TRACEML_RUN_ID", r->id);
    env_set(e, "TRACEML_RUN_NAME", r->name);
    env_set(e, "TRACEML_LOGS_DIR", r->logs_dir);
    env_set(e, "TRACEML_RUN_DIR", r->abs_dir);
    if (watch_profile)   /* TraceML 0.5.0's variable: the ranks trace no step */
        env_set(e, "TRACEML_PROFILE", "watch");
    if (site) {
        size_t n = strlen(site) + (pypath ? strlen(pypath) : 0) + 2;
        char *v = malloc(n);
        if (!v)
            tml__cli_die(1, "out of memory");
        snprintf(v, n, "%s%s%s", site, pypath && *pypath ? ":" : "", pypath ? pypath : "");
        env_set(e, "PYTHONPATH", v);
        free(v);
        env_set(e, "TRACEML_SCRIPT", zero_edit_script);
    }
    if (d && d->enabled) {
        char nn[32];
        snprintf(nn, sizeof(nn), "%ld", d->nnodes);
        env_set(e, "TRACEML_NNODES", nn);
    }
}

static void child_signals_default(void)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
}

static pid_t start_training(const char *prog, char **argv, char **envp)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    child_signals_default();
    if (tml__view_child_fd(live_view) >= 0) {   /* the terminal view's output panel */
        dup2(tml__view_child_fd(live_view), 1);
        dup2(tml__view_child_fd(live_view), 2);
    }
    execve(prog, argv, envp);
    fprintf(stderr, "traceml: error: cannot run '%s': %s\n", prog, strerror(errno));
    _exit(127);
}

/* ---- the aggregator child ---- */

typedef struct aggproc {
    pid_t pid;
    int ctl, st;     /* our ends: write control, read status */
    int port;
    int alive;
    char lost[96];   /* what happened to it ("was killed by signal 9"), "" */
    int64_t lost_ns;  /* when (tml__mono_ns), 0 not lost */
    int hung;         /* alive but did not answer: lost_ns is when we gave up */
} aggproc;

__attribute__((format(printf, 2, 3)))
static void aggregator_lost(aggproc *ap, const char *fmt, ...)
{
    va_list va;
    va_start(va, fmt);
    vsnprintf(ap->lost, sizeof(ap->lost), fmt, va);
    va_end(va);
    ap->lost_ns = tml__mono_ns();
}

/* In the forked child: the aggregator process, `traceml __aggregate`, with
 * SIGINT blocked (see the essay above), its output into traceml.log and
 * the control and status pipes kept open. Never returns. */
__attribute__((noreturn))
static void exec_aggregator(const tml_cli_run *r, const tml_dist *d, int ctl, int st)
{
    char logp[4200], cfd[16], sfd[16];
    snprintf(logp, sizeof(logp), "%s/traceml.log", r->dir);
    snprintf(cfd, sizeof(cfd), "%d", ctl);
    snprintf(sfd, sizeof(sfd), "%d", st);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_SETMASK, &set, NULL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    fcntl(ctl, F_SETFD, 0);
    fcntl(st, F_SETFD, 0);
    int nul = open("/dev/null", O_RDONLY);
    int log = open(logp, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (nul >= 0)
        dup2(nul, 0);
    if (log >= 0) {   /* never the user's terminal */
        dup2(log, 1);
        dup2(log, 2);
    }
    setenv("TRACEML_SECRET", r->secret, 1);
    char *args[32] = {"traceml", "__aggregate", "--run-dir", (char *)r->dir,
                      "--run-name", (char *)r->name, "--run-id", (char *)r->id,
                      "--control-fd", cfd, "--status-fd", sfd,
                      "--launch", (char *)tml__launch_word(launch_kind), NULL};
    char ws[32], nn[32], port[32];
    int k = 14;
    if (d && d->enabled) {
        /* expected ranks and nodes: the summary names those missing */
        snprintf(ws, sizeof(ws), "%ld", d->world_size);
        snprintf(nn, sizeof(nn), "%ld", d->nnodes);
        args[k++] = "--world-size";
        args[k++] = ws;
        args[k++] = "--nnodes";
        args[k++] = nn;
    }
    if (d && d->followers) {
        /* other launchers find it at a known port; other hosts need
         * more than loopback */
        snprintf(port, sizeof(port), "%ld", d->agg_port);
        args[k++] = "--port";
        args[k++] = port;
        if (d->multi_host) {
            args[k++] = "--bind";
            args[k++] = (char *)agg_bind;
        }
    }
    char lport[16], lint[16];
    if (live_port_wanted >= 0) {
        snprintf(lport, sizeof(lport), "%d", live_port_wanted);
        snprintf(lint, sizeof(lint), "%d", live_interval_ms);
        args[k++] = "--live-port";
        args[k++] = lport;
        args[k++] = "--live-interval-ms";
        args[k++] = lint;
        if (live_bind) {
            args[k++] = "--live-bind";
            args[k++] = (char *)live_bind;
        }
    }
    if (html_report_wanted)
        args[k++] = "--html-report";
    if (watch_profile)
        args[k++] = "--watch";
    args[k] = NULL;
    execv("/proc/self/exe", args);
    _exit(127);
}

/* The aggregator's first status line, "port N [live M]", within 5 s. */
static int read_ports(aggproc *ap)
{
    char line[64];
    size_t n = 0;
    int64_t deadline = tml__mono_ms() + 5000;
    while (n < sizeof(line) - 1) {
        int64_t left = deadline - tml__mono_ms();
        if (left <= 0)
            break;
        struct pollfd pf = {ap->st, POLLIN, 0};
        int pr = poll(&pf, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            break;
        ssize_t rd = read(ap->st, line + n, 1);
        if (rd <= 0)
            break;
        if (line[n] == '\n')
            break;
        n++;
    }
    line[n] = '\0';
    int port = 0;
    if (sscanf(line, "port %d", &port) != 1 || port <= 0)
        return -1;
    ap->port = port;
    if (sscanf(line, "port %*d live %d", &live_port_got) != 1)
        live_port_got = -1;
    return 0;
}

static int start_aggregator(aggproc *ap, const tml_cli_run *r, const tml_dist *d)
{
    int ctl[2], st[2];
    memset(ap, 0, sizeof(*ap));
    ap->ctl = ap->st = -1;
    if (pipe2(ctl, O_CLOEXEC) < 0)
        return -1;
    if (pipe2(st, O_CLOEXEC) < 0) {
        close(ctl[0]);
        close(ctl[1]);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0)
        exec_aggregator(r, d, ctl[0], st[1]);
    close(ctl[0]);
    close(st[1]);
    if (pid < 0) {
        close(ctl[1]);
        close(st[0]);
        return -1;
    }
    ap->pid = pid;
    ap->alive = 1;
    ap->ctl = ctl[1];
    ap->st = st[0];
    return read_ports(ap);
}

static void reap_aggregator(aggproc *ap, const char *run_dir, int status)
{
    ap->alive = 0;
    if (WIFSIGNALED(status))
        aggregator_lost(ap, "was killed by signal %d", WTERMSIG(status));
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        aggregator_lost(ap, "exited with status %d", WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        tml__run_log(run_dir, "launcher",
                     "the aggregator (pid %d) was killed by signal %d; training continues, "
                     "the summary will be built from telemetry.sqlite",
                     (int)ap->pid, WTERMSIG(status));
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        tml__run_log(run_dir, "launcher", "the aggregator (pid %d) exited with status %d",
                     (int)ap->pid, WEXITSTATUS(status));
}

/* 1 when a pending SIGINT shows in pid's /proc status (it blocks SIGINT). */
static int sigint_pending_in(pid_t pid)
{
    char path[64], *buf = NULL;
    size_t len;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if (tml__read_file(path, 1 << 16, &buf, &len) < 0)
        return 0;
    int found = 0;
    const char *keys[] = {"\nSigPnd:", "\nShdPnd:"};
    for (int k = 0; k < 2; k++) {
        const char *p = strstr(buf, keys[k]);
        if (p) {
            unsigned long long mask = strtoull(p + strlen(keys[k]), NULL, 16);
            if (mask & (1ull << (SIGINT - 1)))
                found = 1;
        }
    }
    free(buf);
    return found;
}

/* Waits for the training; handles Ctrl-C and the aggregator's death. */
static int supervise(pid_t train, aggproc *ap, const char *run_dir, int *interrupted)
{
    int status = 0, forwarded_int = 0, killed = 0, forwarded_term = 0;
    int64_t int_at = 0, kill_at = 0;
    for (;;) {
        int st;
        /* ours only: the terminal view's drainer is the view's to reap */
        if (waitpid(train, &st, WNOHANG) == train) {
            status = st;
            break;
        }
        if (ap && ap->alive && waitpid(ap->pid, &st, WNOHANG) == ap->pid)
            reap_aggregator(ap, run_dir, st);
        int64_t now = tml__mono_ms();
        if (got_int && !int_at) {
            int_at = now;
            *interrupted = 1;
        }
        /* decide after 20 ms, once a group-wide signal has reached everyone */
        if (int_at && !forwarded_int && now - int_at >= 20) {
            forwarded_int = 1;
            int group = int_code == SI_KERNEL ||
                        (ap && ap->alive && sigint_pending_in(ap->pid));
            if (!group)
                kill(train, SIGINT);
            kill_at = now + 1000;
        }
        if (got_term && !forwarded_term) {
            forwarded_term = 1;
            *interrupted = 1;
            kill(train, got_term);
            kill_at = now + 1000;
        }
        if (!killed && ((kill_at && now >= kill_at) || got_int > 1)) {
            killed = 1;
            kill(train, SIGKILL);
        }
        if (live_view)
            tml__view_poll(live_view, 5);   /* draws, reads the training's output */
        else
            tml__sleep_ms(5);
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    /* a KeyboardInterrupt raised in the script ends Python by SIGINT, as
     * Ctrl-C does: interrupted either way */
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGINT)
        *interrupted = 1;
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

/* What the aggregator says on its status pipe after "port": the box
 * ("summary <bytes>\n" and the bytes) and "done" (cmd_aggregate.c). */
typedef struct agg_reply {
    tml_strbuf sb;
    int eof;
} agg_reply;

/* Reads what the pipe holds, waiting up to wait_ms for it; 1 when some
 * came. Read while waiting, so a box larger than the pipe never blocks
 * the aggregator. */
static int read_reply(const aggproc *ap, agg_reply *r, int wait_ms)
{
    struct pollfd pf = {r->eof ? -1 : ap->st, POLLIN, 0};   /* -1: just waits */
    char buf[16384];
    if (poll(&pf, 1, wait_ms) <= 0)
        return 0;
    if (!(pf.revents & (POLLIN | POLLHUP))) {
        r->eof = 1;   /* POLLERR, POLLNVAL: nothing more will come */
        return 0;
    }
    ssize_t n = read(ap->st, buf, sizeof(buf));
    if (n > 0 && r->sb.len < (64u << 20)) {
        tml__sb_add(&r->sb, buf, (size_t)n);
        return 1;
    }
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
        r->eof = 1;
    return 0;
}

/* The box the aggregator sent, NULL when none came whole. */
static char *reply_summary(const agg_reply *r)
{
    static const char key[] = "summary ";
    const char *p = r->sb.buf;
    char *end;
    if (r->sb.failed || !p || r->sb.len < sizeof(key) || memcmp(p, key, sizeof(key) - 1) != 0)
        return NULL;
    unsigned long long n = strtoull(p + sizeof(key) - 1, &end, 10);
    size_t head = (size_t)(end - p) + 1;
    if (*end != '\n' || n > r->sb.len || head > r->sb.len - n)
        return NULL;
    return strndup(p + head, (size_t)n);
}

/* Asks the aggregator to finalize; NULL when it did not (then: fallback).
 * An aggregator that exits 0 sent its whole box, even when the run folder
 * could not take the files (its NOT SAVED line says so). */
static char *finalize_via_aggregator(aggproc *ap, const tml_cli_run *r, const char *status,
                                     int code, int width)
{
    if (!ap->alive)
        return NULL;
    char line[96];
    snprintf(line, sizeof(line), "finalize %s %d %d\n", status, code, width);
    ssize_t w = write(ap->ctl, line, strlen(line));
    int interrupted = strcmp(status, "interrupted") == 0;
    int64_t deadline = tml__mono_ms() + (interrupted ? 1300 : (int64_t)(finalize_timeout_s * 1000));
    int st = 0, done = 0;
    agg_reply reply = {TML_STRBUF_INIT, 0};
    while (w > 0) {
        pid_t p = waitpid(ap->pid, &st, WNOHANG);
        if (p == ap->pid) {
            done = 1;
            break;
        }
        if (tml__mono_ms() >= deadline)
            break;
        read_reply(ap, &reply, 5);
    }
    while (done && read_reply(ap, &reply, 0))
        ;
    char *text = reply_summary(&reply);
    tml__sb_release(&reply.sb);
    if (!done) {
        tml__run_log(r->dir, "launcher", "the aggregator did not finish in time; "
                     "building the summary from telemetry.sqlite");
        aggregator_lost(ap, "did not finish the summary within %g s",
                        interrupted ? 1.0 : finalize_timeout_s);
        ap->hung = 1;
        kill(ap->pid, SIGKILL);
        waitpid(ap->pid, &st, 0);
        ap->alive = 0;
        free(text);
        return NULL;
    }
    ap->alive = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        reap_aggregator(ap, r->dir, st);
        free(text);
        return NULL;
    }
    char path[4200];
    size_t len;
    snprintf(path, sizeof(path), "%s/final_summary.txt", r->dir);
    if (!text && tml__read_file(path, 64u << 20, &text, &len) < 0)
        return NULL;
    return text;
}

/* How much of the run telemetry.sqlite covers, after "the aggregator
 * ...": of the steps this node's processes traced (their progress files:
 * a count, not an estimate), else of an estimate at the pace of the last
 * steps, from the moment the last stored one began on a rank of this
 * host (here: the same monotonic clock), else from the loss. */
static void coverage(const tml_cli_run *r, tml_agg *agg, const tml_run_pace *pace, int here,
                     int64_t lost, int64_t ended_ns, char *out, size_t cap)
{
    uint64_t seen = tml__agg_steps_seen(agg);
    tml_progress_sum ps;
    tml__progress_read(r->dir, &ps);
    int counted = ps.steps > seen && ps.last_end_ns >= r->start_mono_ns &&
                  ps.last_end_ns <= ended_ns;
    double est = NAN;
    if (!isnan(pace->steps_per_s) && here)
        est = (double)pace->last_step + 1 +
              pace->steps_per_s * (double)(ended_ns - pace->last_start_ns) / 1e9;
    else if (!isnan(pace->steps_per_s) && ended_ns > lost)
        est = (double)seen + pace->steps_per_s * (double)(ended_ns - lost) / 1e9;
    if (seen == 0 && counted)
        snprintf(out, cap, "; telemetry.sqlite holds none of the %llu steps traced on this node",
                 (unsigned long long)ps.steps);
    else if (seen == 0)
        snprintf(out, cap, "; telemetry.sqlite holds no step");
    else if (counted)
        snprintf(out, cap, "; telemetry covers steps 0-%llu, of %llu traced on this node",
                 (unsigned long long)(seen - 1), (unsigned long long)ps.steps);
    else if (est >= (double)seen + 1)
        snprintf(out, cap, "; telemetry covers steps 0-%llu, of ~%.0f at the pace of its last "
                 "steps", (unsigned long long)(seen - 1), est);
    else
        snprintf(out, cap, "; telemetry covers steps 0-%llu", (unsigned long long)(seen - 1));
}

/* Why a summary rebuilt from telemetry.sqlite is partial: what happened
 * to the aggregator, when, and how much of the run the telemetry covers.
 * A hung aggregator is dated by the last step it stored (on a rank of
 * this host), not by our giving up on it. ended_ns: when the training
 * ended (tml__mono_ns). */
static void partial_reason(const aggproc *ap, const tml_cli_run *r, tml_agg *agg,
                           int64_t ended_ns, char *out, size_t cap)
{
    char host[64] = "";
    tml_run_pace pace;
    gethostname(host, sizeof(host) - 1);
    tml__run_pace(tml__agg_run(agg), host, &pace);
    int here = pace.rank >= 0 && pace.last_start_ns >= r->start_mono_ns &&
               pace.last_start_ns <= ended_ns;
    if (!here)   /* only its pace then: its clock is another host's */
        tml__run_pace(tml__agg_run(agg), NULL, &pace);
    int64_t lost = ap->lost_ns ? ap->lost_ns : ended_ns;
    if (ap->hung && here)
        lost = pace.last_start_ns;
    double into = (double)(lost - r->start_mono_ns) / 1e9;
    int n = ap->hung && here
            ? snprintf(out, cap, "the aggregator stopped answering %.1f s into the run (its "
                       "last step reached it then; it %s)", into > 0 ? into : 0.0, ap->lost)
            : snprintf(out, cap, "the aggregator %s %.1f s into the run",
                       ap->lost[0] ? ap->lost : "was lost", into > 0 ? into : 0.0);
    if (n > 0 && (size_t)n < cap)
        coverage(r, agg, &pace, here, lost, ended_ns, out + n, cap - (size_t)n);
}

static char *finalize_here(const aggproc *ap, const tml_cli_run *r, const char *status, int code,
                           int width, const tml_dist *d, int64_t ended_ns)
{
    tml_agg *agg = NULL;
    char *text = NULL;
    tml_agg_opts ao = {r->name, r->id, r->dir, d->enabled ? (int32_t)d->world_size : 0,
                       d->enabled ? (int32_t)d->nnodes : 0, 0, r->start_mono_ns, NULL, 0};
    tml__cli_agg_env(&ao.thresholds, &ao.window_steps);
    tml__run_log(r->dir, "launcher", "finalizing from telemetry.sqlite");
    if (tml__agg_open_existing(&ao, &agg) == 0) {
        char why[256];
        partial_reason(ap, r, agg, ended_ns, why, sizeof(why));
        tml__agg_set_partial(agg, why);
        tml__agg_set_launch(agg, launch_kind);
        tml__agg_set_watch(agg, watch_profile);
        tml__agg_set_html_report(agg, html_report_wanted);
        tml__agg_finalize(agg, status, code, width, &text);
        tml__agg_free(agg);
    }
    return text;
}

static void install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;   /* no SA_RESTART: waits wake up */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static int launch(const run_opts *o, const char *prog, int targc, char **targv, envb *env);

int tml__cmd_run(int argc, char **argv)
{
    return tml__cmd_run_profile(argc, argv, 0);
}

int tml__cmd_run_profile(int argc, char **argv, int watch)
{
    run_opts o;
    watch_profile = watch != 0;
    cmd_name = watch ? "watch" : "run";
    char prog[4096];
    parse(argc, argv, &o);
    int rc = validate(&o, prog, sizeof(prog));
    if (rc)
        return rc;

    /* argv of the training: the command as given, or PYTHON SCRIPT args */
    char **targv = calloc((size_t)o.ncmd + 2, sizeof(*targv));
    if (!targv)
        tml__cli_die(1, "out of memory");
    int targc = 0;
    if (!o.dashdash)
        targv[targc++] = prog;
    for (int i = 0; i < o.ncmd; i++)
        targv[targc++] = o.cmd[i];
    targv[targc] = NULL;
    envb env;
    memset(&env, 0, sizeof(env));
    rc = launch(&o, prog, targc, targv, &env);
    env_release(&env);
    free(targv);
    return rc;
}

/* With several launchers, every one must present the same run id and
 * secret: the id is derived from the run name; the secret comes from
 * $TRACEML_SECRET, else the host writes it to its run folder and followers
 * wait for it there (dist.h). -1 when a follower found no secret. */
static int share_identity(const run_opts *o, tml_cli_run *r, int *secret_file)
{
    const char *env = tml__env_str("TRACEML_SECRET");
    snprintf(r->name, sizeof(r->name), "%s", o->run_name);
    tml__dist_run_id(r->name, r->id);
    if (env && *env) {
        snprintf(r->secret, sizeof(r->secret), "%s", env);
        return 0;
    }
    if (o->dist.host) {
        if (tml__dist_write_secret(r->dir, r->secret) == 0)
            *secret_file = 1;
        else
            tml__cli_warn("could not write %s/secret; other nodes need TRACEML_SECRET", r->dir);
        return 0;
    }
    long wait_s = tml__env_int("TRACEML_SECRET_WAIT_S", NULL, 0);   /* 0-3600, else 60 */
    if (tml__dist_read_secret(o->logs_dir, o->run_name, (int)wait_s * 1000, r->secret,
                              sizeof(r->secret)) == 0)
        return 0;
    r->secret[0] = '\0';
    return -1;
}

/* A follower given --mode cli / dashboard: the live views are the
 * aggregator's, on node 0, and show every node's ranks there; this node
 * only trains. One line on stderr (Slurm tasks: in traceml.log only, as
 * every task of the step would print it). */
static void live_elsewhere(const run_opts *o, const tml_cli_run *r, const char *where)
{
    if (strcmp(o->mode, "summary") == 0)
        return;
    const tml_dist *d = &o->dist;
    tml__run_log(r->dir, "launcher", "--mode %s: the live view is on %s 0", o->mode,
                 d->slurm ? "task" : "node");
    if (!d->slurm)
        fprintf(stderr, "traceml: node %ld: no live view here; --mode %s on node 0 shows "
                "every node's ranks (this node trains and reports to %s)\n", d->node_rank,
                o->mode, where);
}

/* A follower (node > 0, Slurm task > 0): its ranks report to the host's
 * aggregator; it prints no summary and exits with the training's code. */
static int follow(const run_opts *o, tml_cli_run *r, const char *prog, char **targv,
                  int have_secret, envb *env)
{
    const tml_dist *d = &o->dist;
    int interrupted = 0;
    char where[320];
    snprintf(where, sizeof(where), "%s:%ld", d->multi_host ? d->master_addr : "127.0.0.1",
             d->agg_port);
    tml_manifest m;
    memset(&m, 0, sizeof(m));
    m.run_name = r->name;
    m.run_id = r->id;
    m.status = "running";
    m.start_unix_ms = r->start_unix_ms;
    m.world_size = (int)d->world_size;
    m.nnodes = (int)d->nnodes;
    m.profile = watch_profile ? "watch" : NULL;
    int argc = 0;
    while (targv[argc])
        argc++;
    m.argc = argc;
    m.argv = targv;
    tml__manifest_write(r->dir, &m);
    if (!have_secret) {
        tml__cli_warn("no run secret (set TRACEML_SECRET on every node, or share --logs-dir "
                      "with node 0); this %s trains untraced", d->slurm ? "task" : "node");
        tml__run_log(r->dir, "launcher", "no secret found in %s/%s/secret; untraced",
                     o->logs_dir, o->run_name);
    }
    tml__run_log(r->dir, "launcher", "%s %ld of run %s: telemetry to %s",
                 d->slurm ? "task" : "node", d->slurm ? d->task : d->node_rank, r->name, where);
    if (have_secret)
        live_elsewhere(o, r, where);
    build_env(env, r, have_secret ? (int)d->agg_port : 0, 0, d);
    pid_t pid = start_training(prog, targv, env->v);
    if (pid < 0) {
        tml__cli_warn("cannot fork: %s", strerror(errno));
        return 1;
    }
    int code = supervise(pid, NULL, r->dir, &interrupted);
    if (interrupted && got_int)
        code = 130;
    m.status = interrupted ? "interrupted" : code == 0 ? "completed" : "failed";
    m.exit_code = code;
    m.end_unix_ms = tml__unix_ms();
    m.duration_s = tml__mono_s_since(r->start_mono_ns);
    tml__manifest_write(r->dir, &m);
    tml__progress_remove(r->dir);
    tml__run_log(r->dir, "launcher", "ended: %s, exit code %d", m.status, code);
    if (!d->slurm)
        fprintf(stderr, "traceml: node %ld done (exit code %d); the run summary is printed "
                "on node 0 (%s/%s there)\n", d->node_rank, code, o->logs_dir, r->name);
    return code;
}

/* The traced run proper: the aggregator, the training, the live view,
 * the summary (from the aggregator, or rebuilt here) and the manifest's
 * end. Returns the training's exit code. */
static int run_traced(const run_opts *o, const tml_cli_run *r, tml_manifest *m,
                      const char *prog, char **targv, envb *envp)
{
    int interrupted = 0;
    aggproc ap;
    if (strcmp(o->mode, "summary") != 0) {
        live_port_wanted = strcmp(o->mode, "dashboard") == 0 ? (int)o->dashboard_port : 0;
        live_interval_ms = (int)(o->interval * 1000.0);
    }
    if (live_port_wanted >= 0) {
        const char *where = from_file(live_bind);
        char from[96];
        snprintf(from, sizeof(from), "%s%s", where ? "dashboard-bind in " : "--dashboard-bind",
                 where ? where : "");
        tml__cli_warn_exposed(live_bind, from);
    }
    if (start_aggregator(&ap, r, &o->dist) < 0) {
        tml__cli_warn("the TraceML aggregator did not start (see %s/traceml.log); "
                      "running without telemetry", r->dir);
        tml__run_log(r->dir, "launcher", "aggregator did not start; training runs untraced");
        if (ap.pid > 0) {
            kill(ap.pid, SIGKILL);
            waitpid(ap.pid, NULL, 0);
        }
        ap.alive = 0;
        ap.port = 0;
        aggregator_lost(&ap, "did not start");
    }
    build_env(envp, r, ap.port, 0, &o->dist);
    live_view = tml__view_start(o->mode, live_port_wanted, live_port_got, live_bind,
                                live_interval_ms, r);
    pid_t pid = start_training(prog, targv, envp->v);
    tml__view_started(live_view);
    if (pid < 0) {
        tml__view_free(live_view);
        live_view = NULL;
        tml__cli_warn("cannot fork: %s", strerror(errno));
        return 1;
    }
    int code = supervise(pid, &ap, r->dir, &interrupted);
    int64_t ended_ns = tml__mono_ns();
    tml__view_free(live_view);   /* the terminal back as it was, before the summary */
    live_view = NULL;
    const char *status = interrupted ? "interrupted" : code == 0 ? "completed" : "failed";
    if (interrupted && got_int)
        code = 130;
    int width = tml__cli_term_width();

    char *text = finalize_via_aggregator(&ap, r, status, code, width);
    if (!text)
        text = finalize_here(&ap, r, status, code, width, &o->dist, ended_ns);
    if (text)
        tml__cli_print_summary(text);
    else
        tml__cli_warn("no summary could be written (see %s/traceml.log)", r->dir);
    free(text);

    m->status = status;
    m->exit_code = code;
    m->end_unix_ms = tml__unix_ms();
    m->duration_s = tml__mono_s_since(r->start_mono_ns);
    int mrc = tml__manifest_write(r->dir, m);
    tml__progress_remove(r->dir);   /* read by the summary; its job is done */
    if (mrc < 0)   /* a failed write leaves the manifest as it was (running) */
        tml__cli_warn("could not update %s/manifest.json: %s", r->dir,
                      mrc == TML_EIO ? strerror(errno) : tml_strerror(mrc));
    tml__run_log(r->dir, "launcher", "run ended: %s, exit code %d", status, code);
    if (ap.ctl >= 0)
        close(ap.ctl);
    if (ap.st >= 0)
        close(ap.st);
    return code;
}

static int launch(const run_opts *opts, const char *prog, int targc, char **targv, envb *envp)
{
    const run_opts o = *opts;
    envb env = {NULL, 0, 0, 0};
    int rc;
    install_handlers();
    tml_cli_run r;
    memset(&r, 0, sizeof(r));
    int interrupted = 0;

    /* --interval reaches every traced process's sampler through the
     * environment; without the option a TRACEML_INTERVAL the user set wins */
    char ival[32];
    snprintf(ival, sizeof(ival), "%g", o.interval);
    setenv("TRACEML_INTERVAL", ival, o.interval != 1.0);
    if (o.window_steps) {   /* the aggregator's (and a fallback finalize's) window */
        snprintf(ival, sizeof(ival), "%ld", o.window_steps);
        setenv("TRACEML_WINDOW_STEPS", ival, 1);
    }

    if (!o.dashdash && !o.no_auto_trace)
        zero_edit_script = o.cmd[0];
    launch_kind = o.dashdash ? TML_LAUNCH_COMMAND : o.no_auto_trace ? TML_LAUNCH_NO_AUTO_TRACE
                                                                    : TML_LAUNCH_ZERO_EDIT;
    char store[TML_DIST_STORE][32];
    char **dargv = NULL;   /* torch.distributed.run around the script */
    char logd[4300];       /* its --log_dir: per-rank stderr in the run folder */
    if (o.dist.enabled && !o.dist.slurm) {
        if (!o.disabled) {
            rc = tml__cli_run_create(&r, o.logs_dir, o.dist.host ? o.run_name : o.follower_dir,
                                     o.cmd[0]);
            if (rc)
                return rc;
            snprintf(logd, sizeof(logd), "%s/torchrun", r.abs_dir);
        }
        dargv = tml__dist_torchrun_argv(&o.dist, prog, o.py.torch_major == 1,
                                        o.disabled ? NULL : logd, targv + 1, targc - 1, store);
        if (!dargv)
            tml__cli_die(1, "out of memory");
        targv = dargv;
        for (targc = 0; targv[targc]; targc++)
            ;
    }

    if (o.disabled) {
        build_env(&env, &r, 0, 1, &o.dist);
        *envp = env;
        pid_t pid = start_training(prog, targv, env.v);
        if (pid < 0)
            tml__cli_die(1, "cannot fork: %s", strerror(errno));
        int code = supervise(pid, NULL, NULL, &interrupted);
        return interrupted && got_int ? 130 : code;
    }

    const char *stem = o.cmd[0];
    if (!r.dir[0]) {
        rc = tml__cli_run_create(&r, o.logs_dir, o.dist.host ? o.run_name : o.follower_dir,
                                 stem);
        if (rc)
            return rc;
    }
    int secret_file = 0;
    if (o.dist.followers) {
        rc = share_identity(&o, &r, &secret_file);
        if (!o.dist.host) {
            rc = follow(&o, &r, prog, targv, rc == 0, &env);
            *envp = env;
            free(dargv);
            return rc;
        }
    }
    tml_manifest m;
    memset(&m, 0, sizeof(m));
    m.run_name = r.name;
    m.run_id = r.id;
    m.status = "running";
    m.start_unix_ms = r.start_unix_ms;
    m.argc = targc;
    m.argv = targv;
    m.world_size = o.dist.enabled ? (int)o.dist.world_size : 1;
    m.nnodes = o.dist.enabled ? (int)o.dist.nnodes : 1;
    m.profile = watch_profile ? "watch" : NULL;
    rc = tml__manifest_write(r.dir, &m);
    if (rc < 0)
        tml__cli_warn("could not write %s/manifest.json: %s", r.dir,
                      rc == TML_EIO ? strerror(errno) : tml_strerror(rc));
    tml__run_log(r.dir, "launcher", "run %s (id %s) started", r.name, r.id);

    int code = run_traced(&o, &r, &m, prog, targv, envp);
    if (secret_file)
        tml__dist_remove_secret(r.dir);
    free(dargv);
    return code;
}
