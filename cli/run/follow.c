/*
 * follow.c - a run on several nodes (or Slurm tasks): every launcher
 * presents the same run id and secret; node 0's hosts the aggregator and
 * prints the summary, the followers' ranks report to it and a follower
 * only trains, supervises and completes its own manifest.
 */
#include "run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/env.h"
#include "model/progress.h"

/* With several launchers, every one must present the same run id and
 * secret: the id is derived from the run name; the secret comes from
 * $TRACEML_SECRET, else the host writes it to its run folder and followers
 * wait for it there (dist.h). -1 when a follower found no secret. */
int tml__launch_share_identity(const tml_run_opts *o, tml_cli_run *r, int *secret_file)
{
    const char *env = tml__env_str(TML_ENV_SECRET);
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
    long wait_s = tml__env_int(TML_ENV_SECRET_WAIT_S, NULL, 0);   /* 0-3600, else 60 */
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
static void live_elsewhere(const tml_run_opts *o, const tml_cli_run *r, const char *where)
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
int tml__launch_follow(tml_run_ctx *c, tml_cli_run *r, char **targv, int have_secret)
{
    const tml_run_opts *o = &c->o;
    const tml_dist *d = &o->dist;
    tml_run_end end = {0, 0};
    char where[320];
    snprintf(where, sizeof(where), "%s:%ld", d->multi_host ? d->master_addr : "127.0.0.1",
             d->agg_port);
    tml_manifest m;
    tml__launch_manifest_start(c, r, &m, targv);
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
    tml__launch_build_env(c, r, have_secret ? (int)d->agg_port : 0, 0);
    m.training_started_unix_ms = tml__unix_ms();
    pid_t pid = tml__launch_start_training(c, targv);
    if (pid < 0) {
        tml__cli_warn("cannot fork: %s", strerror(errno));
        return 1;
    }
    int code = tml__launch_supervise(c, pid, NULL, r->dir, &end);
    c->died_of = end.signal;
    m.status = end.interrupted ? "interrupted" : code == 0 ? "completed" : "failed";
    m.exit_code = code;
    m.end_unix_ms = m.training_ended_unix_ms = tml__unix_ms();
    /* the telemetry is node 0's: this node's manifest says where */
    m.telemetry_status = have_secret ? "complete" : "unavailable";
    m.telemetry_reason = have_secret ? "reported_to_node_0" : "no_run_secret";
    tml__launch_guard_record(c, r, code);
    m.duration_s = tml__mono_s_since(r->start_mono_ns);
    tml__manifest_write(r->dir, &m);
    tml__progress_remove(r->dir);
    tml__run_log(r->dir, "launcher", "ended: %s, exit code %d", m.status, code);
    if (!d->slurm)
        fprintf(stderr, "traceml: node %ld done (exit code %d); the run summary is printed "
                "on node 0 (%s/%s there)\n", d->node_rank, code, o->logs_dir, r->name);
    return code;
}
