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
 * the summary files, sends the box itself ("summary <bytes>\n" and the
 * bytes), says "done\n" and exits 0.
 *
 * The box travels on the pipe rather than through final_summary.txt so
 * that a run folder that cannot be written (a full disk) costs the files,
 * never the summary: the box then carries a NOT SAVED line, and exit 0
 * still means "the summary is whole". Exit 1 (no summary at all) is what
 * sends the launcher to its rebuild from telemetry.sqlite.
 *
 * SIGINT is blocked here, never handled (and the launcher starts it with
 * every signal it passes on blocked: cli/run/signals.c): the launcher
 * decides how the run ends, whatever reaches the process group.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/agg.h"
#include "base/env.h"
#include "agg/rundir.h"
#include "host/host.h"
#include "traceml/traceml.h"

/* Writes all of buf, unless the launcher stops reading for 10 s (it reads
 * while it waits for us) or is gone (EPIPE: SIGPIPE is ignored). */
static void say_bytes(int fd, const char *buf, size_t n)
{
    size_t off = 0;
    int64_t deadline = tml__mono_ms() + 10000;
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    while (off < n) {
        ssize_t w = write(fd, buf + off, n - off);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        int64_t left = deadline - tml__mono_ms();
        if (w == 0 || (errno != EAGAIN && errno != EINTR) || left <= 0)
            return;
        struct pollfd pf = {fd, POLLOUT, 0};
        poll(&pf, 1, (int)left);
    }
}

static void say(int fd, const char *line)
{
    say_bytes(fd, line, strlen(line));
}

/* The box for the launcher to print: "summary <bytes>\n" and the bytes. */
static void send_summary(int fd, const char *text)
{
    char head[48];
    size_t n = strlen(text);
    snprintf(head, sizeof(head), "summary %zu\n", n);
    say(fd, head);
    say_bytes(fd, text, n);
}

/* The run until the launcher says finalize (or goes away), then the
 * summary: written, and sent to the launcher. Frees h. */
static int serve_and_finish(tml_host *h, const char *run_dir, int status_fd)
{
    tml_server_cmd cmd;
    memset(&cmd, 0, sizeof(cmd));
    int rc = tml__host_run(h, &cmd);
    const char *status = "interrupted";
    int code = -1, width = 0;
    if (rc == 0 && cmd.event == TML_SERVER_FINALIZE) {
        status = cmd.status;
        code = cmd.exit_code;
        width = cmd.width;
    } else {
        width = tml__cli_term_width();   /* no terminal here: a log's width, as the launcher's */
        tml__run_log(run_dir, "aggregator", "the launcher went away; finalizing");
        tml__agg_set_partial(tml__host_agg(h), "the launcher went away (killed?) before the "
                                               "training ended: this covers what had arrived");
    }
    tml__agg_set_tune_trial(tml__host_agg(h), tml__env_bool(TML_ENV_TUNE_TRIAL));
    /* Ranks get time to deliver their last records, less after Ctrl-C
     * (the summary must be out within 2 s). */
    int drain_ms = strcmp(status, "interrupted") == 0 ? 300 : 1500;
    size_t left = tml__host_drain(h, drain_ms);
    if (left)
        tml__run_log(run_dir, "aggregator",
                     "%zu connection(s) still open after %d ms; finalizing without them",
                     left, drain_ms);
    char *text = NULL;
    /* TML_EIO with a box: files not written, the summary whole (NOT SAVED) */
    tml__host_finalize(h, status, code, width, &text);
    double duration_s = tml__agg_elapsed_s(tml__host_agg(h));
    tml__host_free(h);
    /* the launcher completes the manifest; without it, so do we */
    rc = cmd.event != TML_SERVER_FINALIZE
         ? tml__manifest_finish(run_dir, status, -1, duration_s) : 0;
    if (rc < 0)
        tml__run_log(run_dir, "aggregator", "could not complete manifest.json: %s",
                     rc == TML_EIO ? strerror(errno) : tml_strerror(rc));
    int whole = text != NULL;
    if (whole)
        send_summary(status_fd, text);
    say(status_fd, whole ? "done\n" : "failed\n");
    free(text);
    return whole ? 0 : 1;
}

int tml__cmd_aggregate(int argc, char **argv)
{
    const char *run_dir = NULL, *run_name = NULL, *run_id = NULL, *bind = NULL, *v;
    int control_fd = -1, status_fd = -1, port = 0;
    /* live views (--mode cli / dashboard): the live server, off by default */
    const char *live_bind = NULL;
    int live_port = -1, live_interval_ms = 1000;
    long world = 0, nnodes = 0;
    int html_report = 0, watch = 0, window_steps = 0;
    const tml_env_var *ws = tml__env_var(TML_ENV_WINDOW_STEPS);   /* its range */
    tml_launch launch = TML_LAUNCH_UNKNOWN;
    const char *applied = NULL;
    for (int i = 1; i < argc; i++) {
        if (tml__cli_opt(argc, argv, &i, "--html-report", NULL)) {
            html_report = 1;
            continue;
        }
        if (tml__cli_opt(argc, argv, &i, "--watch", NULL)) {   /* traceml watch */
            watch = 1;
            continue;
        }
        if (tml__cli_opt(argc, argv, &i, "--run-dir", &run_dir) ||
            tml__cli_opt(argc, argv, &i, "--run-name", &run_name) ||
            tml__cli_opt(argc, argv, &i, "--run-id", &run_id) ||
            tml__cli_opt(argc, argv, &i, "--bind", &bind) ||
            tml__cli_opt(argc, argv, &i, "--applied", &applied))
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
        else if (tml__cli_opt(argc, argv, &i, "--window-steps", &v))
            window_steps = (int)tml__cli_long("--window-steps", v, (long)ws->min, (long)ws->max);
        else if (tml__cli_opt(argc, argv, &i, "--nnodes", &v))
            nnodes = tml__cli_long("--nnodes", v, 0, 1 << 20);
        else if (tml__cli_opt(argc, argv, &i, "--launch", &v))
            launch = tml__launch_kind(v);
        else
            return tml__cli_error("__aggregate: unknown option '%s'", argv[i]);
    }
    const char *env_secret = tml__env_str(TML_ENV_SECRET);
    if (!run_dir || !run_name || !run_id || !env_secret || control_fd < 0 || status_fd < 0)
        return tml__cli_error("__aggregate is internal to 'traceml run'");
    char secret[TML_WIRE_SECRET_MAX];
    snprintf(secret, sizeof(secret), "%s", env_secret);
    unsetenv(tml__env_name(TML_ENV_SECRET));

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    tml_host *h = NULL;
    tml_host_opts ho = {.run_name = run_name, .run_id = run_id, .run_dir = run_dir,
                        .world_size = (int32_t)world, .nnodes = (int32_t)nnodes,
                        .html_report = html_report, .serve = 1, .bind_addr = bind,
                        .port = port, .secret = secret, .control_fd = control_fd,
                        .live_port = live_port, .live_bind = live_bind,
                        .live_interval_ms = live_interval_ms, .sample_host = 1,
                        .window_steps = window_steps,
                        .sample_interval_s = tml__env_double(TML_ENV_INTERVAL, NULL, 0)};
    tml__cli_agg_env(&ho.thresholds, &ho.window_steps, &ho.memory_mb);
    if (tml__host_open(&ho, &h) < 0) {
        say(status_fd, "error\n");
        return 1;
    }
    tml__agg_set_launch(tml__host_agg(h), launch);
    tml__agg_set_applied(tml__host_agg(h), applied);
    tml__agg_set_watch(tml__host_agg(h), watch);
    char line[64];
    if (live_port >= 0)   /* "live -1": asked for, could not listen */
        snprintf(line, sizeof(line), "port %d live %d\n", tml__host_port(h),
                 tml__host_live_port(h));
    else
        snprintf(line, sizeof(line), "port %d\n", tml__host_port(h));
    say(status_fd, line);

    return serve_and_finish(h, run_dir, status_fd);
}
