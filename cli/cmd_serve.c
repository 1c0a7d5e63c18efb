/*
 * cmd_serve.c - `traceml serve`: the aggregator alone, in the foreground,
 * for trainings started some other way (a cluster scheduler, a notebook,
 * an IDE). It creates the run folder like `traceml run`, prints the
 * environment the training needs, receives telemetry until SIGINT or
 * SIGTERM, then finalizes (status completed) and prints the summary.
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

const char tml__usage_serve[] =
    "usage: traceml serve [--run-name NAME] [--logs-dir DIR] [--port P] [--bind ADDR]\n"
    "                     [--dashboard] [--dashboard-port P] [--dashboard-bind ADDR]\n"
    "\n"
    "Runs the TraceML aggregator alone. It prints the environment variables a\n"
    "training needs (export TRACEML_ADDR=... TRACEML_RUN_ID=... TRACEML_SECRET=...),\n"
    "receives telemetry until Ctrl-C, then prints the run summary and writes\n"
    "logs/<run>/.\n"
    "\n"
    "  --run-name NAME   run folder name, [A-Za-z0-9_.-]+ [generated]\n"
    "  --logs-dir DIR    where run folders go [./logs]\n"
    "  --port P          port to listen on [0: any free port]\n"
    "  --bind ADDR       address to listen on [127.0.0.1]\n"
    "  --dashboard       serve the live dashboard, /metrics and /api/* (docs/live.md)\n"
    "  --dashboard-port P  its port [8765] (implies --dashboard)\n"
    "  --dashboard-bind ADDR  its address [127.0.0.1] (implies --dashboard)\n"
    "  --interval SEC    live refresh interval [1.0]\n";

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
    (void)sig;
    stop = 1;
}

int tml__cmd_serve(int argc, char **argv)
{
    const char *run_name = NULL, *logs_dir = "logs", *bind = "127.0.0.1", *v;
    int port = 0;
    int dash = 0, dash_port = 8765;   /* live views: docs/live.md */
    const char *dash_bind = "127.0.0.1";
    double interval = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(tml__usage_serve, stdout);
            return 0;
        }
        if (tml__cli_opt(argc, argv, &i, "--run-name", &run_name) ||
            tml__cli_opt(argc, argv, &i, "--logs-dir", &logs_dir) ||
            tml__cli_opt(argc, argv, &i, "--bind", &bind))
            continue;
        if (tml__cli_opt(argc, argv, &i, "--port", &v))
            port = (int)tml__cli_long("--port", v, 0, 65535);
        else if (tml__cli_opt(argc, argv, &i, "--dashboard", NULL))
            dash = 1;
        else if (tml__cli_opt(argc, argv, &i, "--dashboard-port", &v)) {
            dash_port = (int)tml__cli_long("--dashboard-port", v, 1, 65535);
            dash = 1;
        } else if (tml__cli_opt(argc, argv, &i, "--dashboard-bind", &dash_bind))
            dash = 1;
        else if (tml__cli_opt(argc, argv, &i, "--interval", &v))
            interval = tml__cli_double("--interval", v, 0.01, 3600.0);
        else
            return tml__cli_error("unknown option '%s' for 'traceml serve' "
                                  "(see 'traceml help serve')", a);
    }
    if (!*bind)
        return tml__cli_error("--bind must not be empty");
    int rc = tml__cli_run_check(logs_dir, run_name);
    if (rc)
        return rc;
    tml_cli_run r;
    rc = tml__cli_run_create(&r, logs_dir, run_name, "serve");
    if (rc)
        return rc;

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    char *cmdv[] = {"traceml", "serve"};
    tml_manifest m;
    memset(&m, 0, sizeof(m));
    m.run_name = r.name;
    m.run_id = r.id;
    m.status = "running";
    m.start_unix_ms = r.start_unix_ms;
    m.argc = 2;
    m.argv = cmdv;
    tml__manifest_write(r.dir, &m);

    tml_agg *agg = NULL;
    tml_server *srv = NULL;
    tml_agg_opts ao = {r.name, r.id, r.dir, 0, 0};
    rc = tml__agg_new(&ao, &agg);
    if (rc == 0) {
        tml_server_opts so;
        memset(&so, 0, sizeof(so));
        so.bind_addr = bind;
        so.port = port;
        so.run_id = r.id;
        so.secret = r.secret;
        so.run_dir = r.dir;
        so.control_fd = -1;
        so.stop = &stop;
        rc = tml__server_new(&so, agg, &srv);
    }
    if (rc < 0) {
        tml__agg_free(agg);
        tml__cli_error("cannot listen on %s:%d: %s", bind, port, tml_strerror(rc));
        m.status = "failed";
        m.exit_code = 1;
        m.end_unix_ms = tml__unix_ms();
        tml__manifest_write(r.dir, &m);
        return 1;
    }
    /* a wildcard bind is reached through this host's name */
    char host[256] = "127.0.0.1";
    if (strcmp(bind, "0.0.0.0") == 0) {
        if (gethostname(host, sizeof(host) - 1) != 0)
            snprintf(host, sizeof(host), "127.0.0.1");
    } else {
        snprintf(host, sizeof(host), "%s", bind);
    }
    printf("traceml serve: run %s, listening on %s:%d. In the training's shell:\n"
           "export TRACEML_ADDR=%s:%d TRACEML_RUN_ID=%s TRACEML_SECRET=%s "
           "TRACEML_RUN_NAME=%s TRACEML_RUN_DIR=%s\n"
           "Stop with Ctrl-C to print the summary.\n",
           r.name, host, tml__server_port(srv), host, tml__server_port(srv), r.id, r.secret,
           r.name, r.abs_dir);
    fflush(stdout);
    tml__run_log(r.dir, "serve", "listening on %s:%d", bind, tml__server_port(srv));

    tml_live_server *live = NULL;
    if (dash) {
        tml_live_server_opts lo;
        memset(&lo, 0, sizeof(lo));
        lo.bind_addr = dash_bind;
        lo.port = dash_port;
        lo.run_dir = r.dir;
        if (tml__live_server_new(&lo, &live) < 0)
            tml__cli_warn("the dashboard could not listen on %s:%d: %s; serving without it",
                          dash_bind, dash_port, strerror(errno));
        else
            printf("Live dashboard: http://%s:%d/  (also /metrics, /api/live, /api/summary)\n",
                   strcmp(dash_bind, "0.0.0.0") == 0 ? host : dash_bind,
                   tml__live_server_port(live));
        fflush(stdout);
    }
    tml_server_cmd cmd;
    tml_live_feed feed;
    tml__live_feed_init(&feed, live, (int)(interval * 1000.0), 0);
    if (live)
        tml__live_feed_run(&feed, srv, agg, &stop, &cmd);
    else
        tml__server_run(srv, &cmd);
    tml__server_drain(srv, 1500);
    char *text = NULL;
    tml__live_feed_tick(&feed, tml__agg_run(agg), 1, "completed");
    rc = tml__agg_finalize(agg, "completed", 0, tml__cli_term_width(), &text);
    tml__live_server_free(live);
    tml__server_free(srv);
    tml__agg_free(agg);
    if (text)
        tml__cli_print_summary(text);
    free(text);
    m.status = "completed";
    m.exit_code = 0;
    m.end_unix_ms = tml__unix_ms();
    tml__manifest_write(r.dir, &m);
    return rc == 0 ? 0 : 1;
}
