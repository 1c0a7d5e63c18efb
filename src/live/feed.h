/*
 * feed.h - publishing live snapshots from the aggregator's loop.
 *
 *     tml_live_feed feed;
 *     tml__live_feed_init(&feed, live_srv, interval_ms, start_mono_ns);
 *     ... every interval, on the aggregator's loop (a timer of the server):
 *     tml__live_feed_tick(&feed, tml__agg_run(agg), 0, "running");
 *     ... at the end:
 *     tml__live_feed_tick(&feed, tml__agg_run(agg), 1, "completed");
 *
 * Ownership: the feed borrows the live server; it allocates nothing that
 * outlives a call.
 */
#ifndef TML_LIVE_FEED_H
#define TML_LIVE_FEED_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "agg/agg.h"
#include "live/live.h"

typedef struct tml_live_feed {
    tml_live_server *srv;      /* NULL: every call does nothing */
    int interval_ms;
    int64_t start_mono_ns;       /* 0: the run's */
    int64_t next_ms;
    uint64_t seq;
    int64_t build_us;          /* how long the last snapshot took */
    /* snapshot times so far, for the run's log (tml__live_feed_stats) */
    uint64_t nbuilt;
    int64_t max_us;
    int64_t recent_us[64];     /* the last 64, for a median */
} tml_live_feed;

void tml__live_feed_init(tml_live_feed *f, tml_live_server *srv, int interval_ms,
                         int64_t start_mono_ns);
/* Builds and publishes a snapshot when the interval has passed (or force).
 * status NULL: "running". 0 or TML_ENOMEM. */
int tml__live_feed_tick(tml_live_feed *f, const tml_run *run, int force, const char *status);
/* "live: N snapshots, median X ms, max Y ms" (the median of the last 64;
 * empty when none). */
void tml__live_feed_stats(const tml_live_feed *f, char *out, size_t cap);

#endif
