/*
 * check.c - everything `traceml run` can check before it creates
 * anything: a wrong input is one error line, exit 2, and no run folder.
 * The interpreter is checked last: it starts Python once (python.c).
 */
#include "run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/env.h"
#include "base/json.h"
#include "judge/tune.h"

/* The distributed shape (dist.h): which launcher hosts the aggregator, and
 * the names every launcher of the run must agree on. */
static int validate_dist(tml_run_opts *o)
{
    tml_dist_args da = {o->nproc, o->nnodes, o->node_rank, o->master_addr, o->master_port,
                        o->agg_port, o->addr_given, o->port_given, o->dashdash};
    if (tml__dist_setup(&o->dist, &da))
        return TML_EXIT_USAGE;
    const tml_dist *d = &o->dist;
    if (!d->followers)
        return 0;
    if (!o->run_name) {
        const char *env = tml__env_str(TML_ENV_RUN_NAME);
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

/* --apply FILE: the settings a `traceml tune` recommended, applied by the
 * start-up code in the script's process (docs/tune.md). */
static int check_apply(tml_run_ctx *c)
{
    const tml_run_opts *o = &c->o;
    tml_json *doc = NULL;
    if (tml__cli_read_json(o->apply, "tune result", &doc, NULL, NULL))
        return TML_EXIT_USAGE;
    const tml_json *v = tml__json_get(doc, "apply");
    const char *s = tml__json_str(v);
    char why[256];
    int rc = 0;
    if (!v || !tml__json_get(doc, "trials"))
        rc = tml__cli_error("--apply %s: not a tune.json written by traceml tune", o->apply);
    else if (!s)
        rc = tml__cli_error("--apply %s: that tune recommended no setting (none was faster "
                            "over its whole interval)", o->apply);
    else if (tml__tune_settings_check(s, why, sizeof(why)) < 0)
        rc = tml__cli_error("--apply %s: %s", o->apply, why);
    else if (o->dashdash || o->no_auto_trace || o->disabled)
        rc = tml__cli_error("--apply needs TraceML's start-up code in the script's process: "
                            "not with %s", o->dashdash ? "-- COMMAND" : o->no_auto_trace
                            ? "--no-auto-trace" : "--disable-traceml");
    else
        snprintf(c->apply_settings, sizeof(c->apply_settings), "%s", s);
    tml__json_free(doc);
    return rc;
}

/* Everything that can be checked before creating anything; an error
 * about a value from the project's file names its line. */
static int check_all(tml_run_ctx *c)
{
    tml_run_opts *o = &c->o;
    tml__cli_origin(tml__launch_from_file(c, o->mode, c->origin, sizeof(c->origin)));
    if (strcmp(o->mode, "summary") != 0 && strcmp(o->mode, "cli") != 0 &&
        strcmp(o->mode, "dashboard") != 0)
        return tml__cli_error("--mode must be summary, cli or dashboard, got '%s'", o->mode);
    if (o->node_rank >= o->nnodes)
        return tml__cli_error("--node-rank %ld must be below --nnodes %ld", o->node_rank,
                              o->nnodes);
    tml__cli_origin(tml__launch_from_file(c, o->master_addr, c->origin,
                                       sizeof(c->origin)));
    if (!*o->master_addr)
        return tml__cli_error("--master-addr must not be empty");
    tml__cli_origin(NULL);
    if (validate_dist(o))
        return TML_EXIT_USAGE;
    if (o->ncmd == 0)
        return tml__cli_error(o->dashdash ? "missing COMMAND after --"
                                          : "missing SCRIPT (usage: traceml run [options] SCRIPT [args...])");
    if (o->dashdash) {
        if (tml__cli_which(o->cmd[0], c->prog, sizeof(c->prog)) < 0)
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
    if (o->apply && check_apply(c))
        return TML_EXIT_USAGE;
    tml__cli_origin(tml__launch_from_file(c, o->run_name, c->origin, sizeof(c->origin)));
    if (o->run_name && !tml__run_name_valid(o->run_name))
        return tml__cli_error("invalid run name '%s': use 1-100 of [A-Za-z0-9_.-]",
                              o->run_name);
    const char *where = tml__launch_from_file(c, o->logs_dir, c->origin, sizeof(c->origin));
    tml__cli_origin(where ? where
                          : tml__launch_from_file(c, o->run_name, c->origin, sizeof(c->origin)));
    if (!o->disabled &&
        tml__cli_run_check(o->logs_dir, o->dist.host ? o->run_name : o->follower_dir))
        return TML_EXIT_USAGE;
    /* last: it starts the interpreter once (python.c) */
    if (!o->dashdash) {
        char *from = c->python_from;   /* quoted by o->py for the run's life */
        snprintf(from, sizeof(c->python_from), "--python");
        if ((where = tml__launch_from_file(c, o->python, c->origin, sizeof(c->origin))))
            snprintf(from, sizeof(c->python_from), "'python' in %s", where);
        tml__cli_origin(NULL);
        if (tml__python_find(&o->py, o->python, from, 1))
            return TML_EXIT_USAGE;
        snprintf(c->prog, sizeof(c->prog), "%s", o->py.path);
    }
    return 0;
}

int tml__launch_validate(tml_run_ctx *c)
{
    int rc = check_all(c);
    tml__cli_origin(NULL);
    return rc;
}
