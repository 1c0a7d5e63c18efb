/*
 * reload.h - a stored final_summary.json back into the report model, so
 * that the box can be printed again from its data: `traceml view
 * --re-render` (this TraceML's summaries, schema 1), `traceml view` and
 * `traceml compare` of a summary TraceML 0.5.0 wrote (its schema 1.x, a
 * different shape: reload_v05.c maps it), `traceml inspect`.
 *
 *     tml_report_loaded *l;
 *     char why[256];
 *     if (tml__report_load(doc, "logs/a/final_summary.json", 120, &l, why,
 *                          sizeof(why)) < 0) ...error: why
 *     tml__report_box(&l->m, &box);          // today's layout
 *     tml__report_json(&l->m, box.buf, &js); // this TraceML's schema
 *     tml__report_loaded_free(l);
 *
 * Nothing is recomputed that the file states: the verdicts, their Why and
 * Next, every figure are the file's. What a file does not hold stays
 * missing (NAN, "n/a"), never zero, and for a 0.5.0 file the box says
 * which fields it lacked (the model's `source` line). Every number is
 * checked against its range before it is used; one out of range (a
 * hand-edited file) is missing.
 *
 * Ownership: tml__report_load allocates *out and everything the model
 * points at; tml__report_loaded_free releases it. The JSON tree is not
 * kept: it may be freed right after the call.
 */
#ifndef TML_RELOAD_H
#define TML_RELOAD_H

#include <stddef.h>

#include "base/json.h"
#include "report/model.h"

typedef enum tml_summary_kind {
    TML_SUMMARY_OURS = 1,     /* this TraceML's final_summary.json, schema 1 */
    TML_SUMMARY_V05 = 2       /* TraceML 0.5.0's (schema 1.x: analysis_window, groups) */
} tml_summary_kind;

#define TML_RELOAD_POOL 16384

typedef struct tml_report_loaded {
    tml_report_model m;       /* what the printers read */
    tml_run run;              /* the run's name, id, PARTIAL, conflicts, lost ranks */
    tml_summary_kind kind;
    char schema[24];          /* schema_version as written: "1", "1.9" */
    char status[16];
    char generated_at[40];
    char json_path[1024];
    char source[768];         /* m.source, when set */
    char *workload;           /* m.workload_json (meta.workload), malloc'd; NULL */
    char *run_context;        /* m.run_context_json, the same */
    char pool[TML_RELOAD_POOL];   /* kind, label, section and metric strings */
    size_t pool_used;
} tml_report_loaded;

/* 1 when doc has TraceML 0.5.0's shape (its sections hold global/groups,
 * not per_rank), else 0. */
int tml__summary_is_v05(const tml_json *doc);

/*
 * Reads a parsed summary (either kind) into a model. path is shown as the
 * box's "Full evidence" (NULL: no line); width as in tml_report_opts.
 * Returns 0, TML_EPROTO with a reason in why ("not a TraceML summary (no
 * schema_version)", "unsupported schema_version 2 ..."), or TML_ENOMEM.
 */
int tml__report_load(const tml_json *doc, const char *path, int width,
                     tml_report_loaded **out, char *why, size_t cap);
void tml__report_loaded_free(tml_report_loaded *l);

/* ---- shared by reload.c and reload_v05.c ---- */

/* The number at path (dotted, may be NULL for v itself) when it lies in
 * [lo, hi], else NAN. */
double tml__rl_num(const tml_json *v, const char *path, double lo, double hi);
/* A copy of s in the pool (dflt when s is NULL or the pool is full). */
const char *tml__rl_keep(tml_report_loaded *l, const char *s, const char *dflt);
/* Allocates n ranks (every figure missing) into m.win and their memory
 * rows; n nodes / procs likewise. 0 or TML_ENOMEM. */
int tml__rl_ranks(tml_report_loaded *l, size_t n);
int tml__rl_nodes(tml_report_loaded *l, size_t n);
int tml__rl_procs(tml_report_loaded *l, size_t n);
/* The window index of rank number `rank`, -1 when absent. */
int tml__rl_rank_index(const tml_window *w, double rank);
/* After the ranks are known: memory rows, active ranks, missing ranks. */
int tml__rl_finish(tml_report_loaded *l);
/* reload_deepdive.c: a summary's "deep_dive" object (NULL: none) into dd. */
void tml__rl_deep_dive(tml_report_dd *dd, const tml_json *o);
/* TraceML 0.5.0's summary into l (reload_v05.c). */
int tml__report_load_v05(const tml_json *doc, tml_report_loaded *l, char *why, size_t cap);

#define TML_RL_MAX_MS 1e9           /* a step of 11 days */
#define TML_RL_MAX_BYTES 1e18
#define TML_RL_MAX_PERCENT 1e7      /* process CPU: 100 per core */
#define TML_RL_MAX_COUNT 1e12       /* steps, samples */
#define TML_RL_MAX_FLOPS 1e21       /* FLOP/s of 10,000 ranks at 1e17 */

#endif
