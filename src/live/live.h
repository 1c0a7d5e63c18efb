/*
 * live.h - the live views' model: a snapshot of a running run, built by the
 * aggregator once per interval, and its three renderings (the live JSON of
 * /api/live and the SSE stream, the Prometheus text of /metrics), plus the
 * live HTTP server that serves them (httpd.c).
 *
 *     aggregator thread (owns the tml_run)          live server thread
 *     ------------------------------------          ------------------
 *     every interval:                                poll(2) over clients
 *       tml__live_snap_build(run, &o, &snap, &sum)     GET /            page
 *       tml__live_json(&snap, &json)                   GET /api/live    json
 *       tml__live_prometheus(&snap, &prom)             GET /api/summary sum
 *       tml__live_server_publish(srv, json, sum, prom) GET /metrics     prom
 *          (copied under a mutex) ---------------->    GET /events      SSE
 *
 * The aggregator never waits for a client: publishing is a copy under a
 * mutex the server thread only holds to copy the strings out, and every
 * client has a bounded output buffer (a client that does not read loses
 * updates, then its connection; never the aggregator's time).
 *
 * The verdict is the run's verdict (SPEC 4.4) over the last 100 common
 * steps (TML_LIVE_WINDOW): the snapshot reads the report model
 * (report/model.h) computed over that live window, the one the final
 * summary prints, and /api/summary is that model printed as
 * final_summary.json. The gauges of /metrics are the rows of the model's
 * resource sections, named by the report's field tables (the JSON keys).
 *
 * Ownership: a tml_live_snap owns its arrays (tml__live_snap_release).
 * The server copies what is published.
 */
#ifndef TML_LIVE_H
#define TML_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "model/run.h"
#include "diag/diag.h"
#include "report/model.h"
#include "base/strbuf.h"

#define TML_LIVE_WINDOW 100          /* common steps diagnosed live */
#define TML_LIVE_TAIL 1000           /* latest records per rank looked at */
#define TML_LIVE_HISTORY 200         /* steps in the per-step series */
#define TML_LIVE_SERIES_RANKS 16     /* ranks with a step-time series */
#define TML_LIVE_MAX_GAUGES 512

/* The per-step series' metrics (a subset of tml_metric). */
enum {
    TML_LS_STEP = 0, TML_LS_INPUT, TML_LS_H2D, TML_LS_FORWARD, TML_LS_BACKWARD,
    TML_LS_OPTIMIZER, TML_LS_RESIDUAL, TML_LS_COMM, TML_LS_COUNT
};

typedef struct tml_live_point {
    uint64_t step;
    double ms[TML_LS_COUNT];         /* NAN = phase not measured in this step */
    double rss_bytes, cuda_allocated_bytes, cuda_reserved_bytes;   /* NAN = none */
} tml_live_point;

typedef struct tml_live_rank {
    int32_t rank, node, local_rank;
    char host[64];
    uint64_t steps_received;
    int64_t last_step;               /* -1 before the first record */
    int ended;                       /* said goodbye */
    size_t window_steps;
    double avg_ms[TML_M_COUNT];      /* live-window averages, NAN = missing */
    double step_p50_ms, step_p90_ms;
    double rss_bytes, cuda_allocated_bytes, cuda_reserved_bytes;
    double overhead_us;              /* NAN unknown */
    uint64_t records_dropped, events_dropped;
    /* last steps' Step Time (ms), oldest first; only the first
     * TML_LIVE_SERIES_RANKS ranks have one */
    double *step_ms;
    uint64_t *step_ids;
    size_t nstep_ms;
} tml_live_rank;

/* A number from the memory/system/process sections of the live summary:
 * `name` is the Prometheus metric name, `who` "rank" / "node" / "" and
 * `id` its value. */
typedef struct tml_live_gauge {
    char name[80];
    char who[8];
    int32_t id;
    double value;
} tml_live_gauge;

typedef struct tml_live_section {
    char label[64];                  /* the section's diagnosis, "" unknown */
    char severity[12];
    char why[256];
} tml_live_section;

typedef struct tml_live_snap {
    uint64_t seq;                    /* 1, 2, ... per publication */
    char run_name[128];
    char run_id[40];
    char status[16];                 /* "running", then "completed" ... */
    int64_t unix_ms;
    double elapsed_s;                /* since the run started, NAN unknown */
    /* window */
    const char *clock;               /* "cpu" / "gpu" */
    size_t common_steps, window_steps, warmup_steps;
    int64_t first_step, last_step;   /* -1 without window steps */
    /* verdict (run verdict over the live window) */
    tml_diagnosis verdict;
    tml_diagnosis also[TML_ALSO_MAX];   /* named under it (tml__diag_also) */
    size_t nalso;
    double share[TML_M_COUNT];       /* fractions, NAN = unknown */
    double skew;
    int32_t median_rank, worst_rank; /* rank numbers, -1 none */
    int32_t straggler_rank;          /* the straggler of a straggler verdict, -1 none */
    tml_live_section mem, sys, proc;
    double gpu_util_percent;         /* window average, NAN unsampled */
    /* throughput over the live window, all ranks (NAN not counted) */
    double samples_per_s, tokens_per_s, flops_per_s, mfu;
    /* ranks */
    tml_live_rank *ranks;
    size_t nranks;
    int32_t world_size;              /* expected ranks, at least nranks */
    uint64_t steps_received;         /* the most steps a rank sent */
    uint64_t records_dropped, events_dropped;
    /* per-step series of one rank (the lowest with steps) */
    int32_t series_rank;
    tml_live_point *points;
    size_t npoints;
    /* memory / system / process numbers from the live summary */
    tml_live_gauge *gauges;
    size_t ngauges;
    /* the latest deep-dive window of the run (docs/deep-dive.md), whatever
     * the live window holds: the report model's, dd.present 0 none */
    tml_report_dd dd;
} tml_live_snap;

typedef struct tml_live_build_opts {
    uint64_t seq;
    const char *status;              /* NULL: "running" */
    int64_t now_unix_ms;             /* the time shown; 0: read the clock */
    /* elapsed_s, on this host's monotonic clock (tml__mono_ns): from
     * start (0: the run's start_mono_ns) to now (0: read the clock) */
    int64_t start_mono_ns, now_mono_ns;
    const tml_thresholds *th;        /* NULL: defaults */
} tml_live_build_opts;

/*
 * Builds the snapshot of `run` (only read) and, when summary is not NULL,
 * appends the final_summary.json-shaped JSON over the live window to it.
 * Looks at most at the last TML_LIVE_TAIL records of each rank, so the
 * cost does not grow with the run. 0 or TML_ENOMEM.
 */
int tml__live_snap_build(const tml_run *run, const tml_live_build_opts *o,
                         tml_live_snap *snap, tml_strbuf *summary);
void tml__live_snap_release(tml_live_snap *snap);

/* The live JSON (one line, no newline inside): docs/live.md. */
void tml__live_json(const tml_live_snap *snap, tml_strbuf *out);
/* The Prometheus text exposition (version 0.0.4): docs/live.md. */
void tml__live_prometheus(const tml_live_snap *snap, tml_strbuf *out);
/* The # HELP text of a section gauge's metric name
 * ("traceml_system_cpu_percent"), NULL for a name it does not know. */
const char *tml__live_gauge_help(const char *name);
/* One plain text line for terminals that cannot draw the full view. */
void tml__live_text_line(const tml_live_snap *snap, tml_strbuf *out);

/* ---- the live HTTP server (httpd.c) ---- */

typedef struct tml_live_server tml_live_server;

typedef struct tml_live_server_opts {
    const char *bind_addr;           /* NULL: "127.0.0.1" */
    int port;                        /* 0: ephemeral */
    const char *run_dir;             /* refusals are logged to traceml.log; may be NULL */
    int max_clients;                 /* 0: 64 */
    int request_timeout_ms;          /* head must arrive within; 0: 10000 */
    int stall_timeout_ms;            /* a client not reading for this long is closed; 0: 15000 */
    size_t max_pending_bytes;        /* per client unsent bytes before updates are dropped; 0: 1 MiB */
} tml_live_server_opts;

typedef struct tml_live_server_stats {
    uint64_t requests, refused, sse_clients, events_sent, events_dropped, timeouts;
} tml_live_server_stats;

/* Binds and starts the server thread. 0, TML_EINVAL (bad address),
 * TML_ECONN (cannot bind; errno kept), TML_ENOMEM. */
int tml__live_server_new(const tml_live_server_opts *o, tml_live_server **out);
int tml__live_server_port(const tml_live_server *s);
/* Replaces what the endpoints serve (copies) and pushes one SSE event
 * ("live", then "summary") to every stream client. Any argument may be
 * NULL (kept as it was). */
void tml__live_server_publish(tml_live_server *s, const char *live_json,
                              const char *summary_json, const char *metrics);
void tml__live_server_stats(tml_live_server *s, tml_live_server_stats *out);
/* Stops the thread, closes every connection. NULL is fine. */
void tml__live_server_free(tml_live_server *s);

/* The dashboard's files (live/assets.c, generated from web/dashboard/). */
typedef struct tml_live_asset {
    const char *path;                /* "/", "/dashboard.js", ... */
    const char *ctype;
    const unsigned char *data;
    size_t len;
} tml_live_asset;
const tml_live_asset *tml__live_asset(const char *path);

#endif
