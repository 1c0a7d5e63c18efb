/*
 * host.c - hosting an aggregator (host.h).
 *
 * What `traceml run`'s aggregator process, `traceml serve` and the
 * in-process mode have in common is written once here: the aggregator
 * object and its run folder (SQLite, manifest), the socket server that
 * ranks report to, the live server and its snapshots, and the end of the
 * run (the last snapshot, the summary files, the manifest's final status).
 * The snapshots are a timer of the server's one event loop: the thread
 * that owns the run builds them between two turns, so no lock is taken.
 */
#include "host/host.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/net.h"
#include "live/feed.h"
#include "live/live.h"
#include "model/series.h"
#include "sample/sampler.h"
#include "traceml/traceml.h"

#define HOST_SAMPLES_MAX 200000   /* ~18 h of host CPU/RAM at 1 s */

struct tml_host {
    tml_agg *agg;
    tml_server *srv;
    tml_live_server *live;
    tml_live_feed feed;
    tml_manifest *manifest;
    char run_dir[4096];
    char who[32];
    /* The host's own readings (opts.sample_host), held until finalize. */
    tml_sampler *sampler;
    tml_sample *held;
    size_t nheld, cap;
};

/* Keeps the sampler's host CPU/RAM readings (not its own process's). */
static void take_host_samples(tml_host *h)
{
    tml_sample buf[256];
    size_t n;
    while (h->sampler && (n = tml__sampler_take(h->sampler, buf, 256)) > 0) {
        for (size_t i = 0; i < n; i++) {
            uint32_t m = buf[i].metric;
            if ((m != TML_S_HOST_CPU_PERCENT && m != TML_S_HOST_RAM_USED_BYTES &&
                 m != TML_S_HOST_RAM_TOTAL_BYTES) || h->nheld == HOST_SAMPLES_MAX)
                continue;
            if (TML_GROW(h->held, h->nheld + 1, h->cap) < 0)
                return;
            h->held[h->nheld++] = buf[i];
        }
    }
}

/* manifest.json is replaced by rename: a write that fails (a full disk)
 * leaves the one before, and says why in traceml.log. */
static void write_manifest(tml_host *h)
{
    int rc = tml__manifest_write(h->run_dir, h->manifest);
    if (rc < 0)
        tml__run_log(h->run_dir, h->who, "could not write manifest.json: %s",
                     rc == TML_EIO ? strerror(errno) : tml_strerror(rc));
}

void tml__host_tick(tml_host *h)
{
    if (h->live)
        tml__live_feed_tick(&h->feed, tml__agg_run(h->agg), 0, "running");
}

static void on_timer(void *ctx)
{
    tml_host *h = ctx;
    tml__host_tick(h);
    take_host_samples(h);
}

/* At finalize: when no rank sampled this host, its own readings stand in,
 * so a run without ranks still has system metrics. */
static void host_samples_if_none(tml_host *h)
{
    if (!h->sampler)
        return;
    tml__sampler_halt(h->sampler);
    take_host_samples(h);
    const tml_run *run = tml__agg_run(h->agg);
    if (h->nheld && !tml__series_find(&run->samples, 0, -1, -1, TML_S_HOST_CPU_PERCENT)) {
        tml__agg_samples(h->agg, h->held, h->nheld);
        tml__run_log(h->run_dir, h->who, "no rank sampled the host: the aggregator's own "
                     "%zu readings of its CPU and RAM are used", h->nheld);
    }
}

static int open_live(tml_host *h, const tml_host_opts *o)
{
    tml_live_server_opts lo;
    memset(&lo, 0, sizeof(lo));
    lo.bind_addr = o->live_bind;
    lo.port = o->live_port;
    lo.run_dir = o->run_dir;
    const char *bind = o->live_bind ? o->live_bind : "127.0.0.1";
    if (tml__live_server_new(&lo, &h->live) < 0) {
        tml__run_log(h->run_dir, h->who, "live server: cannot listen on %s:%d: %s", bind,
                     o->live_port, strerror(errno));
        h->live = NULL;
        return -1;
    }
    tml__run_log(h->run_dir, h->who, "live server on %s:%d", bind,
                 tml__live_server_port(h->live));
    return 0;
}

int tml__host_open(const tml_host_opts *o, tml_host **out)
{
    *out = NULL;
    tml_host *h = calloc(1, sizeof(*h));
    if (!h)
        return TML_ENOMEM;
    snprintf(h->run_dir, sizeof(h->run_dir), "%s", o->run_dir);
    snprintf(h->who, sizeof(h->who), "%s", o->log_as ? o->log_as : "aggregator");
    h->manifest = o->manifest;
    if (h->manifest)
        write_manifest(h);
    /* a host with a socket server is its own process: its CPU is TraceML's */
    tml_agg_opts ao = {.run_name = o->run_name, .run_id = o->run_id, .run_dir = o->run_dir,
                       .world_size = o->world_size, .nnodes = o->nnodes,
                       .own_process = o->serve, .thresholds = o->thresholds,
                       .window_steps = o->window_steps, .memory_mb = o->memory_mb};
    int rc = tml__agg_new(&ao, &h->agg);
    if (rc < 0)
        goto fail;
    tml__agg_set_html_report(h->agg, o->html_report);
    if (o->live_port >= 0)
        open_live(h, o);
    tml__live_feed_init(&h->feed, h->live, o->live_interval_ms, 0);
    if (o->serve) {
        tml_server_opts so;
        memset(&so, 0, sizeof(so));
        so.bind_addr = o->bind_addr;
        so.port = o->port;
        so.run_id = o->run_id;
        so.secret = o->secret;
        so.run_dir = o->run_dir;
        so.control_fd = o->control_fd;
        so.stop = o->stop;
        if (o->sample_host) {
            tml_sampler_opts sp = {.interval_s = o->sample_interval_s, .rank = -1, .node = 0,
                                   .local_rank = -1, .host = 1};
            if (tml__sampler_start(&sp, &h->sampler) < 0)
                h->sampler = NULL;
        }
        if (h->live || h->sampler) {
            so.timer = on_timer;
            so.timer_ctx = h;
            so.timer_ms = h->live ? h->feed.interval_ms : 1000;
        }
        /* serving is always a process of TraceML's own (serve, aggregate) */
        long fd_before, fd_now = tml__net_raise_fd_limit(&fd_before);
        rc = tml__server_new(&so, h->agg, &h->srv);
        if (rc < 0)
            goto fail;
        tml__run_log(h->run_dir, h->who,
                     "open files: limit %ld (was %ld), up to %zu rank connections", fd_now,
                     fd_before, tml__server_max_connections(h->srv));
        tml__run_log(h->run_dir, h->who, "listening on %s:%d",
                     o->bind_addr ? o->bind_addr : "127.0.0.1", tml__server_port(h->srv));
    }
    *out = h;
    return 0;
fail: {
        int saved = errno;   /* TML_ECONN: why the port could not be bound */
        tml__run_log(h->run_dir, h->who, "could not start: %s",
                     rc == TML_ECONN || rc == TML_EIO ? strerror(saved) : tml_strerror(rc));
        tml__host_free(h);
        errno = saved;
    }
    return rc;
}

void tml__host_free(tml_host *h)
{
    if (!h)
        return;
    tml__live_server_free(h->live);
    tml__server_free(h->srv);
    tml__agg_free(h->agg);
    tml__sampler_stop(h->sampler);
    free(h->held);
    free(h);
}

tml_agg *tml__host_agg(tml_host *h)
{
    return h->agg;
}

int tml__host_port(const tml_host *h)
{
    return h->srv ? tml__server_port(h->srv) : -1;
}

int tml__host_live_port(const tml_host *h)
{
    return h->live ? tml__live_server_port(h->live) : -1;
}

int tml__host_run(tml_host *h, tml_server_cmd *cmd)
{
    if (!h->srv) {
        memset(cmd, 0, sizeof(*cmd));
        return TML_ESTATE;
    }
    return tml__server_run(h->srv, cmd);
}

size_t tml__host_drain(tml_host *h, int timeout_ms)
{
    return h->srv ? tml__server_drain(h->srv, timeout_ms) : 0;
}

int tml__host_finalize(tml_host *h, const char *status, int exit_code, int width,
                       char **text_out)
{
    if (h->live) {
        tml__live_feed_tick(&h->feed, tml__agg_run(h->agg), 1, status);   /* the end state */
        char fs[128];
        tml__live_feed_stats(&h->feed, fs, sizeof(fs));
        if (fs[0])
            tml__run_log(h->run_dir, h->who, "%s", fs);
    }
    host_samples_if_none(h);
    int rc = tml__agg_finalize(h->agg, status, exit_code, width, text_out);
    if (h->manifest) {
        h->manifest->status = status;
        h->manifest->exit_code = exit_code;
        h->manifest->end_unix_ms = tml__unix_ms();
        h->manifest->duration_s = tml__agg_elapsed_s(h->agg);
        write_manifest(h);
    }
    return rc;
}
