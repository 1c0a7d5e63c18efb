/*
 * cmd_aggregate.c - `traceml __aggregate`, the aggregator process that
 * `traceml run` starts (hidden: users run `traceml serve` instead).
 *
 * It is a separate process, not a thread of the launcher, so that it can
 * die (a crash, the OOM killer, a SIGKILL) without taking the launcher or
 * the training with it: the launcher then rebuilds the run from
 * telemetry.sqlite. It talks to the launcher over two pipes: it writes
 * "port <n>\n" on the status fd once it listens, reads
 * "finalize <status> <exit_code> <width>\n" from the control fd, writes
 * the summary files, says "done\n" and exits 0.
 *
 * SIGINT is blocked here, never handled: the launcher decides how the run
 * ends. Blocking (rather than ignoring) leaves a terminal's or a process
 * group's SIGINT pending, which the launcher reads in /proc to learn that
 * the training got the same signal and must not get a second one.
 */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/agg.h"
#include "agg/rundir.h"
#include "agg/server.h"
#include "live/feed.h"
#include "traceml/traceml.h"

static void say(int fd, const char *line)
{
    size_t n = strlen(line), off = 0;
    while (off < n) {
        ssize_t w = write(fd, line + off, n - off);
        if (w <= 0)
            return;
        off += (size_t)w;
    }
}

int tml__cmd_aggregate(int argc, char **argv)
{
    const char *run_dir = NULL, *run_name = NULL, *run_id = NULL, *bind = NULL, *v;
    int control_fd = -1, status_fd = -1, port = 0;
    /* live views (--mode cli / dashboard): the live server, off by default */
    const char *live_bind = NULL;
    int live_port = -1, live_interval_ms = 1000;
    long world = 0, nnodes = 0;
    int html_report = 0;
    for (int i = 1; i < argc; i++) {
        if (tml__cli_opt(argc, argv, &i, "--html-report", NULL)) {
            html_report = 1;
            continue;
        }
        if (tml__cli_opt(argc, argv, &i, "--run-dir", &run_dir) ||
            tml__cli_opt(argc, argv, &i, "--run-name", &run_name) ||
            tml__cli_opt(argc, argv, &i, "--run-id", &run_id) ||
            tml__cli_opt(argc, argv, &i, "--bind", &bind))
            continue;
        if (tml__cli_opt(argc, argv, &i, "--control-fd", &v))
            control_fd = (int)tml__cli_long("--control-fd", v, 0, 1 << 20);
        else if (tml__cli_opt(argc, argv, &i, "--status-fd", &v))
            status_fd = (int)tml__cli_long("--status-fd", v, 0, 1 << 20);
        else if (tml__cli_opt(argc, argv, &i, "--port", &v))
            port = (int)tml__cli_long("--port", v, 0, 65535);
        else if (tml__cli_opt(argc, argv, &i, "--live-port", &v))
            live_port = (int)tml__cli_long("--live-port", v, 0, 65535);
        else if (tml__cli_opt(argc, argv, &i, "--live-bind", &v))
            live_bind = v;
        else if (tml__cli_opt(argc, argv, &i, "--live-interval-ms", &v))
            live_interval_ms = (int)tml__cli_long("--live-interval-ms", v, 10, 3600000);
        else if (tml__cli_opt(argc, argv, &i, "--world-size", &v))
            world = tml__cli_long("--world-size", v, 0, 1 << 20);
        else if (tml__cli_opt(argc, argv, &i, "--nnodes", &v))
            nnodes = tml__cli_long("--nnodes", v, 0, 1 << 20);
        else
            return tml__cli_error("__aggregate: unknown option '%s'", argv[i]);
    }
    const char *env_secret = getenv("TRACEML_SECRET");
    if (!run_dir || !run_name || !run_id || !env_secret || control_fd < 0 || status_fd < 0)
        return tml__cli_error("__aggregate is internal to 'traceml run'");
    char secret[TML_WIRE_SECRET_MAX];
    snprintf(secret, sizeof(secret), "%s", env_secret);
    unsetenv("TRACEML_SECRET");

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    tml_agg *agg = NULL;
    tml_server *srv = NULL;
    tml_agg_opts ao = {run_name, run_id, run_dir, (int32_t)world, (int32_t)nnodes};
    int rc = tml__agg_new(&ao, &agg);
    tml__agg_set_html_report(agg, html_report);
    if (rc == 0) {
        tml_server_opts so;
        memset(&so, 0, sizeof(so));
        so.bind_addr = bind;
        so.port = port;
        so.run_id = run_id;
        so.secret = secret;
        so.run_dir = run_dir;
        so.control_fd = control_fd;
        rc = tml__server_new(&so, agg, &srv);
    }
    if (rc < 0) {
        tml__run_log(run_dir, "aggregator", "could not start: %s", tml_strerror(rc));
        say(status_fd, "error\n");
        tml__agg_free(agg);
        return 1;
    }
    /* The live server is optional: failing to bind it (a busy dashboard
     * port) costs the live views, never the run. */
    tml_live_server *live = NULL;
    int live_rc = 0;
    if (live_port >= 0) {
        tml_live_server_opts lo;
        memset(&lo, 0, sizeof(lo));
        lo.bind_addr = live_bind;
        lo.port = live_port;
        lo.run_dir = run_dir;
        live_rc = tml__live_server_new(&lo, &live);
        if (live_rc < 0)
            tml__run_log(run_dir, "aggregator", "live server: cannot listen on %s:%d: %s",
                         live_bind ? live_bind : "127.0.0.1", live_port, strerror(errno));
        else
            tml__run_log(run_dir, "aggregator", "live server on %s:%d",
                         live_bind ? live_bind : "127.0.0.1", tml__live_server_port(live));
    }
    char line[64];
    if (live_port >= 0)   /* "live -1": asked for, could not listen */
        snprintf(line, sizeof(line), "port %d live %d\n", tml__server_port(srv),
                 live ? tml__live_server_port(live) : -1);
    else
        snprintf(line, sizeof(line), "port %d\n", tml__server_port(srv));
    say(status_fd, line);
    tml__run_log(run_dir, "aggregator", "listening on %s:%d", bind ? bind : "127.0.0.1",
                 tml__server_port(srv));

    tml_server_cmd cmd;
    tml_live_feed feed;
    tml__live_feed_init(&feed, live, live_interval_ms, 0);
    if (live)
        rc = tml__live_feed_run(&feed, srv, agg, NULL, &cmd);
    else
        rc = tml__server_run(srv, &cmd);
    const char *status = "interrupted";
    int code = -1, width = 0;
    if (rc == 0 && cmd.event == TML_SERVER_FINALIZE) {
        status = cmd.status;
        code = cmd.exit_code;
        width = cmd.width;
    } else {
        tml__run_log(run_dir, "aggregator", "the launcher went away; finalizing");
    }
    /* Ranks get time to deliver their last records, less after Ctrl-C
     * (the summary must be out within 2 s). */
    int drain_ms = strcmp(status, "interrupted") == 0 ? 300 : 1500;
    size_t left = tml__server_drain(srv, drain_ms);
    if (left)
        tml__run_log(run_dir, "aggregator",
                     "%zu connection(s) still open after %d ms; finalizing without them",
                     left, drain_ms);
    tml__live_feed_tick(&feed, tml__agg_run(agg), 1, status);   /* the end state */
    char fs[128];
    tml__live_feed_stats(&feed, fs, sizeof(fs));
    if (fs[0])
        tml__run_log(run_dir, "aggregator", "%s", fs);
    rc = tml__agg_finalize(agg, status, code, width, NULL);
    tml__live_server_free(live);
    tml__server_free(srv);
    tml__agg_free(agg);
    say(status_fd, rc == 0 ? "done\n" : "failed\n");
    return rc == 0 ? 0 : 1;
}
