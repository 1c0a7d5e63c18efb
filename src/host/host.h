/*
 * host.h - hosting an aggregator: the one routine behind `traceml run`'s
 * aggregator process, `traceml serve` and a process traced without a
 * launcher.
 *
 *     tml_host *h;
 *     tml_host_opts o = {.run_name = .., .run_id = .., .run_dir = ..,
 *                        .serve = 1, .secret = .., .control_fd = -1,
 *                        .live_port = -1, .manifest = &m};
 *     tml__host_open(&o, &h);           // aggregator, socket server, live server
 *     tml_server_cmd cmd;
 *     tml__host_run(h, &cmd);           // the server loop; live snapshots are its timer
 *     tml__host_drain(h, 1500);
 *     tml__host_finalize(h, "completed", 0, width, &text);   // summary files, manifest
 *     tml__host_free(h);
 *
 * Without .serve there is no socket: the caller feeds tml__host_agg(h)
 * directly (the in-process mode). Without a live port there are no live
 * views. The manifest, when given, is written as running at open and with
 * the final status and exit code at finalize.
 *
 * Ownership: the host copies what it keeps of opts except the manifest,
 * which must outlive it.
 */
#ifndef TML_HOST_H
#define TML_HOST_H

#include <signal.h>
#include <stdint.h>

#include "agg/agg.h"
#include "agg/rundir.h"
#include "agg/server.h"

typedef struct tml_host tml_host;

typedef struct tml_host_opts {
    const char *run_name, *run_id, *run_dir;
    int32_t world_size, nnodes;       /* expected; 0 = whoever reports */
    int html_report;                  /* also final_summary.html */
    tml_manifest *manifest;           /* NULL: none */
    const char *log_as;               /* who writes traceml.log lines ("aggregator") */
    /* the socket server */
    int serve;
    const char *bind_addr;            /* NULL: 127.0.0.1 */
    int port;                         /* 0: ephemeral */
    const char *secret;
    int control_fd;                   /* -1: none */
    volatile sig_atomic_t *stop;      /* may be NULL */
    /* the live views */
    int live_port;                    /* -1: none */
    const char *live_bind;            /* NULL: 127.0.0.1 */
    int live_interval_ms;             /* 0: 1000 */
    /* sample this host's CPU and RAM too, for a run whose ranks never do
     * (a script TraceML was not started in): used at finalize only then */
    int sample_host;
    double sample_interval_s;         /* 0: 1.0 ($TRACEML_INTERVAL, read by the edge) */
    /* the aggregator's, from the environment (tml_agg_opts) */
    const char *thresholds;
    int window_steps;
    int memory_mb;
} tml_host_opts;

/* 0 (the live server may still be missing: a busy port costs the live
 * views only, see tml__host_live_port), or the aggregator's or the socket
 * server's error. */
int tml__host_open(const tml_host_opts *o, tml_host **out);
void tml__host_free(tml_host *h);

tml_agg *tml__host_agg(tml_host *h);
int tml__host_port(const tml_host *h);        /* the socket server's, -1 none */
int tml__host_live_port(const tml_host *h);   /* the live server's, -1 none */
/* A host without a server thread (the in-process one): its live views'
 * snapshot, when one is due (once per interval). */
void tml__host_tick(tml_host *h);

/* The server loop (with the live snapshot as its timer) until a finalize
 * line, the control pipe's end or *stop. */
int tml__host_run(tml_host *h, tml_server_cmd *cmd);
/* Lets the ranks deliver their last records (server_drain). */
size_t tml__host_drain(tml_host *h, int timeout_ms);
/* The last live snapshot, the summary files (final_summary.{json,txt},
 * .html when asked), the manifest. text_out (may be NULL) receives the box
 * (caller frees). 0 or the aggregator's error; TML_EIO when a summary file
 * could not be written, *text_out then still the whole box, with its NOT
 * SAVED line (tml__agg_finalize). */
int tml__host_finalize(tml_host *h, const char *status, int exit_code, int width,
                       char **text_out);

#endif
