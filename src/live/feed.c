/*
 * feed.c - the aggregator side of the live views: once per interval, build
 * a snapshot of the run and publish its renderings to the live server.
 *
 * This runs on the aggregator's own thread, between two turns of its poll
 * loop, because that thread owns the tml_run: no lock is ever taken on the
 * run, and the ranks' sockets are served again as soon as the snapshot is
 * built (its cost is bounded: live/snapshot.c looks at a fixed tail). The
 * host (host/host.c) makes the tick a timer of the server's loop.
 */
#include "live/feed.h"
#include "base/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void tml__live_feed_init(tml_live_feed *f, tml_live_server *srv, int interval_ms,
                         int64_t start_mono_ns)
{
    memset(f, 0, sizeof(*f));
    f->srv = srv;
    f->interval_ms = interval_ms > 0 ? interval_ms : 1000;
    f->start_mono_ns = start_mono_ns;
}

int tml__live_feed_tick(tml_live_feed *f, const tml_run *run, int force, const char *status)
{
    if (!f->srv)
        return 0;
    int64_t now = tml__mono_ns() / 1000;
    if (!force && f->next_ms && now / 1000 < f->next_ms)
        return 0;
    f->next_ms = now / 1000 + f->interval_ms;
    tml_live_snap snap;
    tml_live_build_opts o;
    tml_strbuf summary = TML_STRBUF_INIT, live = TML_STRBUF_INIT, prom = TML_STRBUF_INIT;
    memset(&o, 0, sizeof(o));
    o.seq = ++f->seq;
    o.status = status;
    o.start_mono_ns = f->start_mono_ns;
    int rc = tml__live_snap_build(run, &o, &snap, &summary);
    if (rc == 0) {
        tml__live_json(&snap, &live);
        tml__live_prometheus(&snap, &prom);
        if (!live.failed && !prom.failed && !summary.failed)
            tml__live_server_publish(f->srv, live.buf, summary.buf, prom.buf);
        else
            rc = TML_ENOMEM;
        tml__live_snap_release(&snap);
    }
    tml__sb_release(&summary);
    tml__sb_release(&live);
    tml__sb_release(&prom);
    f->build_us = tml__mono_ns() / 1000 - now;
    f->recent_us[f->nbuilt % 64] = f->build_us;
    f->nbuilt++;
    if (f->build_us > f->max_us)
        f->max_us = f->build_us;
    return rc;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void tml__live_feed_stats(const tml_live_feed *f, char *out, size_t cap)
{
    if (!cap)
        return;
    out[0] = '\0';
    if (!f->nbuilt)
        return;
    int64_t v[64];
    size_t n = f->nbuilt < 64 ? (size_t)f->nbuilt : 64;
    memcpy(v, f->recent_us, n * sizeof(*v));
    qsort(v, n, sizeof(*v), cmp_i64);
    snprintf(out, cap, "live: %llu snapshots, median %.2f ms, max %.2f ms",
             (unsigned long long)f->nbuilt, (double)v[n / 2] / 1000.0,
             (double)f->max_us / 1000.0);
}
