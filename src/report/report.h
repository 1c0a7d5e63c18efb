/*
 * report.h - the run summary: the boxed text of the brief and
 * final_summary.json (docs/summary-json.md), built from a tml_run.
 *
 *     tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
 *     tml_report_opts o = { .status = "completed", .json_path = path };
 *     if (tml__report_build(run, &o, &text, &json) == 0) ...
 *     tml__sb_release(&text); tml__sb_release(&json);
 *
 * Ownership: the caller owns both buffers; the function appends to them.
 * The run is only read.
 */
#ifndef TML_REPORT_H
#define TML_REPORT_H

#include <stddef.h>
#include "model/run.h"
#include "diag/diag.h"
#include "base/strbuf.h"

#define TML_REPORT_DEFAULT_WIDTH 156   /* the brief's box: 156 columns */
#define TML_REPORT_MIN_WIDTH 60
#define TML_REPORT_STACK_BELOW 110     /* narrower: panels stack */
#define TML_REPORT_LOG_WIDTH 120       /* no terminal: a pipe, a log (tee, Slurm, CI) */

/* The width of a box printed to fd: the terminal's, else columns (the
 * caller's $COLUMNS; 0: unset), else TML_REPORT_LOG_WIDTH. Whoever prints a box without a terminal width to
 * pass on (the aggregator left alone, a training started without `traceml
 * run` into a pipe) uses this, so the box has the same width everywhere. */
int tml__report_term_width(int fd, long columns);

typedef struct tml_report_opts {
    const char *status;       /* "completed", "failed", "interrupted"; NULL = "completed" */
    int exit_code;
    double duration_s;        /* run duration; negative or NAN = unknown */
    const char *json_path;    /* shown as "Full evidence: <path>"; NULL = no line */
    int width;                /* total box width in columns (borders included);
                               * 0 = 156 (the brief's); values below 60 are
                               * raised to 60; below 110 the panels stack */
    const tml_thresholds *th; /* NULL = defaults */
    size_t window_steps;      /* 0 = 10000 */
    const char *generated_at; /* ISO-8601 UTC, NULL = now */
    int series;               /* 1: embed the per-step series the HTML report
                               * draws ("series"); 0: "series" is null */
    const char *not_saved;    /* the artifacts that could not be written and
                               * why, shown as the box's NOT SAVED line;
                               * NULL or "" = no line */
    /* 1: past TML_REPORT_ALL_RANKS ranks, the JSON's per_rank lists keep
     * only the ranks the summary names (median, worst, straggler, the
     * resource sections' picks and issues), each followed by
     * per_rank_omitted: what traceml.summary() gets mid-run, which must
     * fit a frame at any rank count. final_summary.json keeps them all. */
    int compact_ranks;
    /* What ran, compact JSON for meta.workload (tml__manifest_workload);
     * NULL: null */
    const char *workload_json;
    /* TraceML 0.5.0's run_context, compact JSON (tml__manifest_run_context);
     * NULL: null */
    const char *run_context_json;
} tml_report_opts;

#define TML_REPORT_ALL_RANKS 64

/*
 * Builds the box text and the final_summary.json text (whose "text" field
 * holds the box). Pure except reading the clock for generated_at when
 * NULL. Returns 0, or TML_ENOMEM (buffers then hold partial output).
 */
int tml__report_build(const tml_run *run, const tml_report_opts *o,
                      tml_strbuf *text, tml_strbuf *json);

#endif
