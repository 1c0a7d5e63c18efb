/*
 * agg.h - the aggregator: receives every rank's hello, step records and
 * counters, keeps the run in memory (tml_run), stores every record in
 * telemetry.sqlite, and at the end diagnoses the run and writes
 * final_summary.json / final_summary.txt into the run folder.
 *
 * The same object serves three callers: the socket server of `traceml run`
 * and `traceml serve` (server.c feeds it frames), a process traced without
 * a launcher (the engine feeds it directly, in-process), and the launcher's
 * fallback after the aggregator process died (tml__agg_open_existing loads
 * telemetry.sqlite back and finalizes from it).
 *
 * Ownership: tml__agg_new copies every string in opts. text_out from
 * finalize is malloc'd and owned by the caller.
 */
#ifndef TML_AGG_H
#define TML_AGG_H

#include <stddef.h>
#include <stdint.h>
#include "model/run.h"
#include "model/record.h"
#include "base/strbuf.h"

typedef struct tml_agg tml_agg;

typedef struct tml_agg_opts {
    const char *run_name;
    const char *run_id;
    const char *run_dir;       /* existing folder; telemetry.sqlite goes here */
    int32_t world_size;        /* expected ranks, 0 = whoever reports */
    int32_t nnodes;            /* expected nodes, 0 = whoever reports */
    /* The aggregator is a process of its own (traceml run's, serve): the
     * summary counts its CPU time in TraceML's background cost. */
    int own_process;
    /* When the run started on this host's monotonic clock (tml__mono_ns);
     * 0: now. The run's duration is measured from it. */
    int64_t start_mono_ns;
    /* From the environment, as the edge read it (base/env.h): the
     * TRACEML_THRESHOLDS overrides (NULL: the defaults; malformed: the
     * defaults and a line in traceml.log at finalize) and the window's
     * cap, TRACEML_WINDOW_STEPS (0: 10,000). The aggregator copies them. */
    const char *thresholds;
    int window_steps;
    /* TRACEML_MEMORY_MB: what the ranks' step records may take in all
     * (model/run.h), MiB; 0: the default. */
    int memory_mb;
} tml_agg_opts;

int tml__agg_new(const tml_agg_opts *opts, tml_agg **out);
/* Reopens a run folder whose aggregator died: loads telemetry.sqlite. */
int tml__agg_open_existing(const tml_agg_opts *opts, tml_agg **out);
/* Seconds since the run started, on the monotonic clock (opts.start_mono_ns). */
double tml__agg_elapsed_s(const tml_agg *a);
void tml__agg_free(tml_agg *a);

/* A rank says who it is. A process claiming a rank another live or past
 * process of the run holds (another pid or host) is not merged into it: it
 * gets the next free rank number, *reported_as (NULL: not wanted), and the
 * conflict is kept for the summary and logged. The same pid and host with
 * another process image (info->instance): with live_twin (the caller knows
 * a connection of the other image is still open) a conflict as above;
 * without, the rank's process restarted: a new incarnation of the same
 * rank (tml__run_restart), noted as a conflict too. The same process image
 * again (a reconnection, an IDENTITY update) keeps the rank it has. */
int tml__agg_hello(tml_agg *a, const tml_rank_info *info, int live_twin,
                   int32_t *reported_as);
int tml__agg_steps(tml_agg *a, int32_t rank, const tml_step_record *recs, size_t n);
/* Resource samples (SAMPLES frames, or the in-process sampler): kept in
 * memory for the rules and queued for telemetry.sqlite. */
struct tml_sample;
int tml__agg_samples(tml_agg *a, const struct tml_sample *v, size_t n);
/* bye: the rank said goodbye (its last counters). */
int tml__agg_stats(tml_agg *a, int32_t rank, const tml_rank_stats *s, int bye);
/* A rank's deep-dive window (copied): 0, TML_ESTATE (no such rank), TML_ENOMEM. */
int tml__agg_deep_dive(tml_agg *a, int32_t rank, const tml_dd_window *d);
/* The rank's connection ended without a goodbye (it died or was cut off);
 * the summary names it. Unknown ranks are ignored. */
void tml__agg_lost(tml_agg *a, int32_t rank);
/* Number of ranks that said hello and not yet goodbye. */
size_t tml__agg_open_ranks(const tml_agg *a);
/* Writes the store's batch when it is due (about every 200 ms); callers
 * with an event loop call it on every turn. */
int tml__agg_tick(tml_agg *a);
/* The run as received so far (valid until the next call on a). */
const tml_run *tml__agg_run(const tml_agg *a);

/*
 * Flushes the store, diagnoses, writes final_summary.json and
 * final_summary.txt. status is "completed", "failed" or "interrupted";
 * width is the box width (the launcher's terminal; 0 = default).
 * *text_out (may be NULL) receives the box.
 *
 * The summary is built in memory before any file is written, so a file
 * that cannot be written (a full disk) costs the file, not the summary:
 * finalize then returns TML_EIO, and *text_out still holds the whole box,
 * with a NOT SAVED line naming the files and the system's reason
 * (tml__agg_not_saved). Files are replaced by rename, so a failed write
 * leaves what was there. Other errors (TML_ENOMEM) leave *text_out NULL.
 */
int tml__agg_finalize(tml_agg *a, const char *status, int exit_code, int width,
                      char **text_out);
/* The last finalize's NOT SAVED line ("final_summary.json: No space left on
 * device (logs/run/)"), "" when every file was written. */
const char *tml__agg_not_saved(const tml_agg *a);

/*
 * The summary of the run so far (status "running", no per-step series),
 * appended to json: what `traceml.summary()` returns mid-run. Writes no
 * file and changes nothing, so the final artifacts stay the end's.
 */
int tml__agg_summary_json(tml_agg *a, tml_strbuf *json);
/* on != 0: finalize also writes final_summary.html (--html-report). */
void tml__agg_set_html_report(tml_agg *a, int on);
/* Marks the run's data incomplete, and why (shown in the summary as
 * PARTIAL and in meta.partial); also logged to traceml.log. */
void tml__agg_set_partial(tml_agg *a, const char *why);
/* The run is a trial of `traceml tune` (TRACEML_TUNE_TRIAL): ended
 * "interrupted", it is tune's stop once the trial ran its steps, and the
 * summary says so (meta.stopped_by "tune"). */
void tml__agg_set_tune_trial(tml_agg *a, int on);

/* How the launcher ran the training (TML_LAUNCH_*): a summary without any
 * rank says why by it. */
void tml__agg_set_launch(tml_agg *a, tml_launch how);
/* The settings `traceml run --apply` applied (tune.json's "apply"), so the
 * Next lines do not advise against them; NULL or "" none. */
void tml__agg_set_applied(tml_agg *a, const char *settings);
/* on != 0: a `traceml watch` run: step records are dropped as they come
 * (system and process metrics only), the summary is the watch box, and
 * telemetry.sqlite's meta says profile=watch. */
void tml__agg_set_watch(tml_agg *a, int on);
/* The highest step id any rank sent + 1 (0 without steps). */
uint64_t tml__agg_steps_seen(const tml_agg *a);

#endif
