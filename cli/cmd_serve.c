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

#include "host/host.h"
#include "model/progress.h"
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
    "  --interval SEC    live refresh interval [1.0]\n"
    "\n"
    "TraceML 0.5.0's names work too: --session-id (--run-name), --aggregator-port\n"
    "(--port), --aggregator-bind-host (--bind), --mode dashboard (--dashboard);\n"
    "its other options are a note line each (docs/compat.md).\n";

/* Options of TraceML 0.5.0's serve that mean nothing here: a note each. */
const tml_cli_legacy tml__serve_legacy[] = {
    {"--aggregator-host", 1, "the ranks are given the address in the export line"},
    {"--nnodes", 1, "the summary counts the ranks that reported; `traceml run` knows "
     "how many to expect"},
    {"--nproc-per-node", 1, "the summary counts the ranks that reported; `traceml run` "
     "knows how many to expect"},
    {"--history-retention", 1, "the summary covers the whole run in bounded memory"},
    {"--enable-logging", 0, "logging is always on: the run folder's traceml.log"},
};
const size_t tml__serve_nlegacy =
    sizeof(tml__serve_legacy) / sizeof(tml__serve_legacy[0]);

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
    (void)sig;
    stop = 1;
}

/* A wildcard bind is reached through this host's name. */
static void reach_as(const char *bind, char *host, size_t cap)
{
    if (strcmp(bind, "0.0.0.0") == 0) {
        if (gethostname(host, cap - 1) != 0)
            snprintf(host, cap, "127.0.0.1");
    } else {
        snprintf(host, cap, "%s", bind);
    }
}

/* What the training's shell needs to report to this run. */
static void print_environment(const tml_cli_run *r, const char *bind, int port)
{
    char host[256] = "127.0.0.1";
    reach_as(bind, host, sizeof(host));
    printf("traceml serve: run %s, listening on %s:%d. In the training's shell:\n"
           "export TRACEML_ADDR=%s:%d TRACEML_RUN_ID=%s TRACEML_SECRET=%s "
           "TRACEML_RUN_NAME=%s TRACEML_RUN_DIR=%s TRACEML_SESSION_ID=%s\n"
           "(on this machine, TRACEML_AGGREGATOR_PORT=%d alone is enough%s)\n"
           "Stop with Ctrl-C to print the summary.\n",
           r->name, host, port, host, port, r->id, r->secret, r->name, r->abs_dir, r->name,
           port, port == TML_SERVE_PORT_05 ? "; a script that calls traceml.init() needs "
           "nothing" : "");
    fflush(stdout);
}

/* TraceML 0.5.0's direct launch: this user's trainings on this machine
 * find the run by its port, without the export line (rundir.h). 1 when
 * advertised. */
static int advertise(const tml_cli_run *r, int port)
{
    tml_serve_advert adv = {.pid = (long)getpid()};
    snprintf(adv.run_id, sizeof(adv.run_id), "%s", r->id);
    snprintf(adv.secret, sizeof(adv.secret), "%s", r->secret);
    snprintf(adv.run_dir, sizeof(adv.run_dir), "%s", r->abs_dir);
    return tml__serve_advert(port, &adv) == 0;
}

static void print_dashboard(const char *dash_bind, int want, int got, const char *bind)
{
    char host[256] = "127.0.0.1";
    reach_as(bind, host, sizeof(host));
    if (got < 0)
        tml__cli_warn("the dashboard could not listen on %s:%d (see traceml.log); "
                      "serving without it", dash_bind, want);
    else
        printf("Live dashboard: http://%s:%d/  (also /metrics, /api/live, /api/summary)\n",
               strcmp(dash_bind, "0.0.0.0") == 0 ? host : dash_bind, got);
    fflush(stdout);
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
        if (tml__cli_help(a, tml__usage_serve))
            return 0;
        if (tml__cli_opt(argc, argv, &i, "--run-name", &run_name) ||
            tml__cli_opt(argc, argv, &i, "--session-id", &run_name) ||   /* 0.5.0's names */
            tml__cli_opt(argc, argv, &i, "--logs-dir", &logs_dir) ||
            tml__cli_opt(argc, argv, &i, "--bind", &bind) ||
            tml__cli_opt(argc, argv, &i, "--aggregator-bind-host", &bind) ||
            tml__cli_legacy_opt(argc, argv, &i, tml__serve_legacy,
                                tml__serve_nlegacy))
            continue;
        if (tml__cli_opt(argc, argv, &i, "--port", &v) ||
            tml__cli_opt(argc, argv, &i, "--aggregator-port", &v))
            port = (int)tml__cli_long(a, v, 0, 65535);
        else if (tml__cli_opt(argc, argv, &i, "--mode", &v)) {
            if (strcmp(v, "dashboard") == 0)
                dash = 1;
            else if (strcmp(v, "cli") == 0)
                fputs("traceml: note: --mode cli has no meaning for serve (no terminal view "
                      "here; `traceml run --mode cli` has one); ignored\n", stderr);
            else if (strcmp(v, "summary") != 0)
                return tml__cli_error("--mode: '%s' is not summary, cli or dashboard", v);
        }
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
            return tml__cli_unknown("serve", a);
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
    tml_manifest m = {.run_name = r.name, .run_id = r.id, .status = "running",
                      .start_unix_ms = r.start_unix_ms, .argc = 2, .argv = cmdv};
    tml_host *h = NULL;
    tml_host_opts ho = {.run_name = r.name, .run_id = r.id, .run_dir = r.dir,
                        .manifest = &m, .log_as = "serve", .serve = 1, .bind_addr = bind,
                        .port = port, .secret = r.secret, .control_fd = -1, .stop = &stop,
                        .live_port = dash ? dash_port : -1, .live_bind = dash_bind,
                        .live_interval_ms = (int)(interval * 1000.0)};
    tml__cli_agg_env(&ho.thresholds, &ho.window_steps, &ho.memory_mb);
    rc = tml__host_open(&ho, &h);
    if (rc < 0) {
        /* nothing ran: no run folder is left behind */
        tml__cli_error("cannot listen on %s:%d: %s", bind, port,
                       rc == TML_ECONN ? strerror(errno) : tml_strerror(rc));
        tml__cli_run_remove(&r);
        return 1;
    }
    int port_got = tml__host_port(h);
    int advertised = advertise(&r, port_got);
    print_environment(&r, bind, port_got);
    if (dash) {
        tml__cli_warn_exposed(dash_bind, "--dashboard-bind");
        print_dashboard(dash_bind, dash_port, tml__host_live_port(h), bind);
    }
    tml_server_cmd cmd;
    tml__host_run(h, &cmd);
    if (advertised)
        tml__serve_advert(port_got, NULL);
    tml__host_drain(h, 1500);
    char *text = NULL;
    rc = tml__host_finalize(h, "completed", 0, tml__cli_term_width(), &text);
    tml__host_free(h);
    tml__progress_remove(r.dir);   /* the ranks' progress files (model/progress.h) */
    if (text)
        tml__cli_print_summary(text);
    free(text);
    return rc == 0 ? 0 : 1;
}
