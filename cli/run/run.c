/*
 * run.c - `traceml run`: launch a training under TraceML (the wing's map:
 * run.h).
 *
 * The launcher is three processes:
 *
 *     traceml run (cli/run/)   --fork/exec-->  traceml __aggregate (port, sqlite)
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
 * Signals: the launcher is the training's transparent parent (the essay
 * in signals.c): it passes on every signal the training could handle that
 * did not reach the training already (a terminal's Ctrl-C, a signal to
 * the whole process group), keeps the dispositions it inherited, never
 * kills the training on a clock of its own (--kill-after is the user's),
 * waits for it, prints the summary of what arrived (status interrupted
 * after SIGINT, SIGTERM, SIGHUP or SIGQUIT) and exits as it did: with its
 * exit code, or dying of its signal. The aggregator keeps those signals
 * blocked: the launcher decides when it ends. The drainer takes no part:
 * it is in a session of its own and ignores SIGINT, so it reads the
 * training's traceback to the end.
 */
#include "run.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/jsonw.h"
#include "model/progress.h"
#include "base/env.h"

/* The manifest's launch block, TraceML 0.5.0's names (docs/summary-json.md). */
static void launch_json(tml_run_ctx *c)
{
    const tml_run_opts *o = &c->o;
    const tml_dist *d = &o->dist;
    char cwd[4096];
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__sb_adds(&sb, "{\"script_path\": ");
    tml__json_add_str_or_null(&sb, o->dashdash ? NULL : o->cmd[0]);
    tml__sb_addf(&sb, ", \"profile\": \"%s\", \"ui_mode\": ", c->watch ? "watch" : "run");
    tml__json_add_str_or_null(&sb, o->mode);
    tml__sb_adds(&sb, ", \"logs_dir\": ");
    tml__json_add_str_or_null(&sb, o->logs_dir);
    tml__sb_addf(&sb, ", \"nnodes\": %ld, \"nproc_per_node\": %ld, \"node_rank\": %ld",
                 d->enabled ? d->nnodes : 1, d->enabled ? d->nproc : 1,
                 d->enabled ? d->node_rank : 0);
    tml__sb_adds(&sb, ", \"master_addr\": ");
    tml__json_add_str_or_null(&sb, d->enabled && !d->standalone ? d->master_addr : NULL);
    if (d->enabled && !d->standalone)
        tml__sb_addf(&sb, ", \"master_port\": %ld, \"aggregator_port\": %ld", d->master_port,
                     d->agg_port);
    else
        tml__sb_adds(&sb, ", \"master_port\": null, \"aggregator_port\": null");
    tml__sb_addf(&sb, ", \"finalize_timeout_sec\": %g, \"history_enabled\": true, "
                 "\"launch_cwd\": ", o->finalize_timeout_s);
    tml__json_add_str_or_null(&sb, getcwd(cwd, sizeof(cwd)) ? cwd : NULL);
    tml__sb_adds(&sb, "}");
    snprintf(c->launch_json, sizeof(c->launch_json), "%s",
             !sb.failed && sb.len < sizeof(c->launch_json) ? sb.buf : "");
    tml__sb_release(&sb);
}

void tml__launch_manifest_start(tml_run_ctx *c, const tml_cli_run *r, tml_manifest *m,
                             char **targv)
{
    const tml_dist *d = &c->o.dist;
    launch_json(c);
    memset(m, 0, sizeof(*m));
    m->launch = c->launch_json;
    m->run_name = r->name;
    m->run_id = r->id;
    m->status = "running";
    m->start_unix_ms = r->start_unix_ms;
    while (targv[m->argc])
        m->argc++;
    m->argv = targv;
    m->world_size = d->enabled ? (int)d->world_size : 1;
    m->nnodes = d->enabled ? (int)d->nnodes : 1;
    m->profile = c->watch ? "watch" : NULL;
    m->guard = c->project.guard[0] ? c->project.guard : NULL;
}

/* The aggregator, asked for the live views --mode wants; when it does not
 * start, the training runs untraced (ap->port 0) and the summary says why. */
static void start_aggregator(tml_run_ctx *c, tml_run_agg *ap, const tml_cli_run *r)
{
    const tml_run_opts *o = &c->o;
    if (strcmp(o->mode, "summary") != 0) {
        c->live_port_wanted = strcmp(o->mode, "dashboard") == 0 ? (int)o->dashboard_port : 0;
        c->live_interval_ms = (int)(o->interval * 1000.0);
    }
    if (c->live_port_wanted >= 0) {
        const char *where = tml__launch_from_file(c, o->live_bind, c->origin,
                                               sizeof(c->origin));
        char from[96];
        snprintf(from, sizeof(from), "%s%s", where ? "dashboard-bind in " : "--dashboard-bind",
                 where ? where : "");
        tml__cli_warn_exposed(o->live_bind, from);
    }
    if (tml__launch_agg_start(c, ap, r) < 0) {
        tml__cli_warn("the TraceML aggregator did not start (see %s/traceml.log); "
                      "running without telemetry", r->dir);
        tml__run_log(r->dir, "launcher", "aggregator did not start; training runs untraced");
        if (ap->pid > 0) {
            kill(ap->pid, SIGKILL);
            waitpid(ap->pid, NULL, 0);
        }
        ap->alive = 0;
        ap->port = 0;
        tml__launch_agg_lost(ap, "did not start");
    }
}

/* The traced run proper: the aggregator, the training, the live view,
 * the summary (from the aggregator, or rebuilt here) and the manifest's
 * end. Returns the training's exit code. */
static int run_traced(tml_run_ctx *c, const tml_cli_run *r, tml_manifest *m, char **targv)
{
    const tml_run_opts *o = &c->o;
    tml_run_end end = {0, 0};
    tml_run_agg ap;
    start_aggregator(c, &ap, r);
    tml__launch_build_env(c, r, ap.port, 0);
    c->live_view = tml__view_start(o->mode, c->live_port_wanted, c->live_port_got,
                                   o->live_bind, c->live_interval_ms, r);
    m->training_started_unix_ms = tml__unix_ms();
    m->telemetry_status = ap.port ? "running" : "unavailable";
    m->telemetry_reason = ap.port ? NULL : "aggregator_not_started";
    tml__manifest_write(r->dir, m);
    pid_t pid = tml__launch_start_training(c, targv);
    tml__view_started(c->live_view);
    if (pid < 0) {
        tml__view_free(c->live_view);
        c->live_view = NULL;
        tml__cli_warn("cannot fork: %s", strerror(errno));
        return 1;
    }
    int code = tml__launch_supervise(c, pid, &ap, r->dir, &end);
    int64_t ended_ns = tml__mono_ns();
    tml__view_free(c->live_view);   /* the terminal back as it was, before the summary */
    c->live_view = NULL;
    c->died_of = end.signal;
    const char *status = end.interrupted ? "interrupted" : code == 0 ? "completed" : "failed";
    int width = tml__cli_term_width();

    /* how the training ended, in the manifest before the summary reads it
     * (run_context); a guarded run's nodes' outcomes with it */
    m->status = status;
    m->exit_code = code;
    m->training_ended_unix_ms = tml__unix_ms();
    tml_strbuf guard = TML_STRBUF_INIT;
    tml__launch_guard_record(c, r, code);
    if (tml__launch_guard_collect(c, r, end.interrupted ? 1.0 : o->finalize_timeout_s,
                               &guard) == 0)
        m->guard_training = guard.buf;
    tml__manifest_write(r->dir, m);

    char *text = tml__launch_finalize_via_agg(c, &ap, r, status, code, width);
    int rebuilt = !text;
    if (!text)
        text = tml__launch_finalize_here(c, &ap, r, status, code, width, ended_ns);
    int summarized = text != NULL;
    if (text)
        tml__cli_print_summary(text);
    else
        tml__cli_warn("no summary could be written (see %s/traceml.log)", r->dir);
    free(text);

    m->end_unix_ms = tml__unix_ms();
    m->duration_s = tml__mono_s_since(r->start_mono_ns);
    /* the telemetry: complete when the aggregator wrote the summary */
    m->telemetry_status = NULL;
    if (!ap.port) {
        m->telemetry_status = "unavailable";
    } else if (rebuilt) {
        m->telemetry_status = summarized ? "degraded" : "unavailable";
        m->telemetry_reason = ap.hung ? "aggregator_timeout" : "aggregator_exited_early";
    }
    m->aggregator_exited = ap.exited;
    m->aggregator_exit_code = ap.exit_code;
    int mrc = tml__manifest_write(r->dir, m);
    tml__sb_release(&guard);
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

/* --disable-traceml: the same launch, untouched (TRACEML_DISABLED=1), no
 * run folder, no summary. */
static int run_untraced(tml_run_ctx *c, char **targv)
{
    tml_cli_run r;
    tml_run_end end = {0, 0};
    memset(&r, 0, sizeof(r));
    tml__launch_build_env(c, &r, 0, 1);
    pid_t pid = tml__launch_start_training(c, targv);
    if (pid < 0)
        tml__cli_die(1, "cannot fork: %s", strerror(errno));
    int code = tml__launch_supervise(c, pid, NULL, NULL, &end);
    c->died_of = end.signal;
    return code;
}

/* What every launch shares: the sampling interval reaches the processes
 * (every rank's sampler, the aggregator's) through the environment, and
 * how the training is run. The window goes to the aggregator on its
 * command line, with the other options (tml__launch_agg_options). */
static void prepare(tml_run_ctx *c)
{
    const tml_run_opts *o = &c->o;
    /* --interval reaches every traced process's sampler through the
     * environment; without the option a TRACEML_INTERVAL the user set wins */
    char ival[32];
    snprintf(ival, sizeof(ival), "%g", o->interval);
    setenv(tml__env_name(TML_ENV_INTERVAL), ival, o->interval != 1.0);
    /* --deep-dive / --no-deep-dive reach every rank the same way; without
     * either a TRACEML_DEEP_DIVE the user set wins */
    if (o->deep_dive && o->no_deep_dive)
        tml__cli_die(TML_EXIT_USAGE, "--deep-dive and --no-deep-dive say opposite things; "
                     "give one");
    if (o->deep_dive || o->no_deep_dive)
        setenv(tml__env_name(TML_ENV_DEEP_DIVE), o->deep_dive ? "on" : "off", 1);
    if (!o->dashdash && !o->no_auto_trace)
        c->zero_edit_script = o->cmd[0];
    c->launch_kind = o->dashdash        ? TML_LAUNCH_COMMAND
                     : o->no_auto_trace ? TML_LAUNCH_NO_AUTO_TRACE
                                        : TML_LAUNCH_ZERO_EDIT;
}

static int launch(tml_run_ctx *c, int targc, char **targv)
{
    const tml_run_opts *o = &c->o;
    const char *prog = c->prog;
    int rc;
    tml__launch_install_handlers();
    tml_cli_run r;
    memset(&r, 0, sizeof(r));
    prepare(c);
    char store[TML_DIST_STORE][32];
    char **dargv = NULL;   /* torch.distributed.run around the script */
    char logd[4300];       /* its --log_dir: per-rank stderr in the run folder */
    if (o->dist.enabled && !o->dist.slurm) {
        if (!o->disabled) {
            rc = tml__cli_run_create(&r, o->logs_dir, o->dist.host ? o->run_name : o->follower_dir,
                                     o->cmd[0]);
            if (rc)
                return rc;
            snprintf(logd, sizeof(logd), "%s/torchrun", r.abs_dir);
        }
        dargv = tml__dist_torchrun_argv(&o->dist, prog, o->py.torch_major == 1,
                                        o->disabled ? NULL : logd, targv + 1, targc - 1, store);
        if (!dargv)
            tml__cli_die(1, "out of memory");
        targv = dargv;
    }

    if (o->disabled) {
        rc = run_untraced(c, targv);
        free(dargv);
        return rc;
    }

    const char *stem = o->cmd[0];
    if (!r.dir[0]) {
        rc = tml__cli_run_create(&r, o->logs_dir, o->dist.host ? o->run_name : o->follower_dir,
                                 stem);
        if (rc)
            return rc;
    }
    int secret_file = 0;
    if (o->dist.followers) {
        rc = tml__launch_share_identity(o, &r, &secret_file);
        if (!o->dist.host) {
            rc = tml__launch_follow(c, &r, targv, rc == 0);
            free(dargv);
            return rc;
        }
    }
    tml_manifest m;
    tml__launch_manifest_start(c, &r, &m, targv);
    rc = tml__manifest_write(r.dir, &m);
    if (rc < 0)
        tml__cli_warn("could not write %s/manifest.json: %s", r.dir,
                      rc == TML_EIO ? strerror(errno) : tml_strerror(rc));
    tml__run_log(r.dir, "launcher", "run %s (id %s) started", r.name, r.id);

    int code = run_traced(c, &r, &m, targv);
    if (secret_file)
        tml__dist_remove_secret(r.dir);
    free(dargv);
    return code;
}

int tml__cmd_run(int argc, char **argv)
{
    return tml__cmd_run_profile(argc, argv, 0);
}

/* The training's argv: the command as given, or PYTHON SCRIPT args;
 * launched. */
static int run_command(tml_run_ctx *c)
{
    const tml_run_opts *o = &c->o;
    char **targv = calloc((size_t)o->ncmd + 2, sizeof(*targv));
    if (!targv)
        tml__cli_die(1, "out of memory");
    int targc = 0;
    if (!o->dashdash)
        targv[targc++] = c->prog;
    for (int i = 0; i < o->ncmd; i++)
        targv[targc++] = o->cmd[i];
    targv[targc] = NULL;
    int rc = launch(c, targc, targv);
    tml__launch_env_release(&c->env);
    free(targv);
    return rc;
}

int tml__cmd_run_profile(int argc, char **argv, int watch)
{
    tml_run_ctx ctx, *c = &ctx;
    memset(c, 0, sizeof(*c));
    c->watch = watch != 0;
    c->cmd_name = watch ? "watch" : "run";
    c->live_port_wanted = c->live_port_got = -1;
    c->live_interval_ms = 1000;
    tml__launch_parse(c, argc, argv);
    int rc = tml__launch_validate(c);
    if (rc == 0)
        rc = run_command(c);
    tml__launch_opts_release(&c->o, argc, argv);
    tml__launch_witness_end();
    return tml__launch_die_as(c->died_of, rc);
}
