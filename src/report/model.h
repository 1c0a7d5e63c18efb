/*
 * model.h - what a report shows, computed once into one struct: the box
 * (box.c) and final_summary.json (json.c) print it, and the live views
 * (live/snapshot.c) read it over their window. Most of what the printers
 * show is computed here; box.c and json.c still derive a few figures as
 * they print (shares of the step, a row's median and worst place), which
 * belong here too.
 *
 *     tml_report_model m;
 *     if (tml__report_model_init(&m, run, &opts) == 0)
 *         tml__report_print(&m, &text, &json);
 *     tml__report_model_release(&m);
 */
#ifndef TML_REPORT_MODEL_H
#define TML_REPORT_MODEL_H

#include <string.h>

#include "report/report.h"

/* One row of step_memory.per_rank[] (the step-memory peaks the window
 * saw and what the memory rules analysed). */
typedef struct tml_mem_row {
    int32_t rank, node;
    double peak_allocated_bytes, peak_reserved_bytes, rss_bytes;
    double steps_analysed, series_peak_bytes, capacity_bytes;   /* NAN unknown */
} tml_mem_row;

/* A number of a per-rank or per-node row: its key in final_summary.json
 * (and in /metrics, traceml_<section>_<key>), where the double sits in the
 * row struct, and its decimals in the JSON. */
typedef struct tml_report_field {
    const char *key;
    size_t off;
    int decimals;
} tml_report_field;

/* A median and a worst row of a section: indexes into its rows, -1 none. */
typedef struct tml_report_pick {
    int median, worst;
} tml_report_pick;

enum { TML_REPORT_ROWS = 3, TML_REPORT_MAX_FIELDS = 16 };

/* A resource section's rows: step_memory.per_rank[] (tml_mem_row),
 * system.per_node[] (tml_sys_node), process.per_rank[] (tml_proc_rank).
 * The figures under "derived" are the model's (derive.c), in m->rows only. */
typedef struct tml_report_rows {
    const char *section;          /* "step_memory", "system", "process" */
    const char *who;              /* "rank" or "node" */
    const tml_report_field *fields;
    size_t nfields;
    const void *rows;
    size_t nrows, row_size;
    size_t id_off;                /* the int32_t rank or node in a row */
    /* derived */
    const void *average;          /* a row: each field's mean over the rows
                                   * (NAN ones skipped); NULL: a system
                                   * section without samples */
    tml_report_pick pick;         /* the section's median and worst row (the
                                   * summary's "median" and "worst") */
    /* Per field, the box's columns: step memory, the median rank of the
     * window and the largest row (the first of equals); system and process,
     * the upper median and the largest (the last of equals) of the rows
     * that have the field, in row order among equals. */
    tml_report_pick field[TML_REPORT_MAX_FIELDS];
    size_t samples;               /* samples over the rows (system, process) */
} tml_report_rows;

#define TML_REPORT_NAMED_RANKS 16

/* The deep dive in the report (deepdive.c; docs/deep-dive.md): one
 * rank's window ranked into its heaviest modules and operators, and,
 * across ranks, the module whose time differs most. */
#define TML_DD_TOP 8
typedef struct tml_dd_item {
    char name[TML_DD_NAME];       /* the module ("" outside any) or the operator */
    char op[TML_DD_NAME];         /* a module's heaviest operator; "" for an operator */
    double ns;                    /* self time over the window */
    double pct;                   /* of the window's profiled time, 0-100 */
    int64_t calls;
} tml_dd_item;

typedef struct tml_report_dd {
    int present;                  /* a rank reported a deep dive (ran or skipped) */
    int ran;                      /* with rows: the figures below are valid */
    int32_t rank;                 /* whose window the figures are */
    size_t nranks;                /* ranks whose window ran */
    char skipped[TML_DD_REASON];  /* why none ran (when !ran) */
    uint64_t first_step, last_step;
    size_t steps_left_out;        /* the window's steps left out of the step figures */
    double wall_ns, total_ns;     /* the window's wall time, its profiled self time */
    int cuda;
    int depth;                    /* the module level shown: 1, the model's children */
    size_t nmodules, nops;
    tml_dd_item modules[TML_DD_TOP], ops[TML_DD_TOP];
    /* Several ranks: the module whose time differs most between the
     * slowest and the fastest rank in it (name "" when none differs). */
    tml_dd_item spread;
    int32_t spread_slow_rank, spread_fast_rank;
    double spread_slow_ns, spread_fast_ns;
} tml_report_dd;

typedef struct tml_report_model {
    const tml_run *run;
    /* opts.compact_ranks past TML_REPORT_ALL_RANKS ranks: the ranks the
     * per_rank lists keep (derive.c), else compact is 0 and they keep all. */
    int compact;
    int32_t named[TML_REPORT_NAMED_RANKS];
    size_t nnamed;
    int32_t named_nodes[TML_REPORT_NAMED_RANKS];   /* the system section's issues' */
    size_t nnamed_nodes;
    const char *status;
    int exit_code;
    double duration_s;            /* NAN unknown */
    const char *json_path;
    const char *not_saved;        /* NULL: every artifact was written */
    int width;
    char generated_at[40];
    tml_thresholds th;
    tml_window win;
    tml_step_diag st;
    tml_diagnosis verdict;        /* the run's verdict (SPEC 4.4) */
    /* What is named under it ("Also: ..."): pointers into mem_s, sys_s,
     * proc_s (tml__diag_also), and st's straggler under a communication
     * verdict (tml__report_also). */
    const tml_diagnosis *also[TML_ALSO_MAX];
    size_t nalso;
    int32_t world_size;           /* expected ranks */
    int32_t ranks_reported;
    int32_t nodes_expected, nodes_reported;
    int32_t gpus_observed;
    size_t active_ranks;          /* ranks that sent steps */
    int32_t *missing_ranks;       /* expected ranks that never said hello */
    size_t nmissing;
    double overhead_us;           /* mean over ranks that measured it; NAN none */
    double background_cpu_percent;   /* TraceML's threads and aggregator, % of a core; NAN */
    double overhead_total_us;     /* overhead_us + the background's CPU per step; NAN */
    uint64_t records_dropped, events_dropped;
    tml_diagnosis mem, sys, proc;
    tml_sys_node *nodes;          /* one per reported node */
    size_t nnodes;
    tml_proc_rank *procs;         /* one per reported rank */
    size_t nprocs;
    double gpu_util_percent;      /* run average, NAN unsampled */
    /* The window again on the CPU clock when `win` is on the GPU clock
     * (step_time.by_clock; compare needs a clock both runs have). */
    tml_window cpu_win;
    int has_cpu_win;
    int series;                   /* embed the per-step series (opts.series) */
    /* Resource sections in full (resources.c): m->mem/sys/proc are their
     * primaries. The memory series live as long as the model. */
    tml_section_diag mem_s, sys_s, proc_s;
    int mem_gpu;                  /* the memory series are CUDA reserved */
    tml_mem_rank *mem_ranks;
    double *mem_values;
    uint64_t *mem_step_ids;
    size_t mem_nranks;
    tml_mem_row *mem_rows;        /* one per window rank (win.nranks) */
    /* Derived from all of the above (derive.c), for every printer: the
     * three sections' rows with their average, median and worst rows, the
     * rows' averages, the window's mean per metric over the ranks that
     * sent steps, and the memory series' steps analysed. */
    tml_report_rows rows[TML_REPORT_ROWS];
    tml_mem_row mem_avg;
    tml_sys_node sys_avg;
    tml_proc_rank proc_avg;
    double step_mean_ns[TML_M_COUNT];
    size_t mem_analysed;
    /* The machine around the training when it matters (tml__contended:
     * docs/diagnosis.md, "A shared machine"): "other processes used 83%
     * of the 2 cores; the training waited for a core 50% of its time.";
     * "" otherwise. The box's Machine row, contention.machine. */
    char machine[160];
    /* How the steps were found ("automatic", "marked", NULL without
     * steps: tml__run_step_detection). */
    const char *step_detection;
    /* Models whose forward was timed though the step did not name them
     * (tml_set_auto_models, over every rank): class names joined by ", ";
     * "" none. The box says "also timed: ..."; meta.also_timed_models. */
    char also_timed[256];
    /* `traceml watch`: system and process metrics only, no step tracing;
     * the box shows those panels and says so instead of a verdict. */
    int watch;
    /* meta.workload as compact JSON (script, args, world_size, guard);
     * NULL unknown: tml_report_opts.workload_json, or a reloaded summary's */
    const char *workload_json;
    const char *run_context_json;   /* the same for run_context */
    /* A summary read back from a file another TraceML wrote (reload.h):
     * what it was and which fields it lacked, the box's Source line;
     * NULL otherwise. */
    const char *source;
    int warmup_unknown;           /* such a summary never excluded warm-up: n/a */
    tml_report_dd dd;             /* the deep dive (deepdive.c), dd.present 0: none */
} tml_report_model;

/* Computes the model of `run` (only read) under `o` (NULL: defaults).
 * 0 or TML_ENOMEM; release it either way. */
int tml__report_model_init(tml_report_model *m, const tml_run *run, const tml_report_opts *o);
void tml__report_model_release(tml_report_model *m);
/* Sets also/nalso from the verdict and the resource sections (none in a
 * watch run): what the views name under the verdict. */
void tml__report_also(tml_report_model *m);
/* Adds each name of `list` (comma-separated) that `dst` (cap bytes, names
 * joined by ", ") lacks; what does not fit is left out. */
void tml__report_add_models(char *dst, size_t cap, const char *list);
/* The box width for a requested one (tml_report_opts.width's rules). */
int tml__report_width(int width);
/* Appends the box to `text` and final_summary.json (the box as its
 * "text") to `json`; either may be NULL. 0 or TML_ENOMEM. */
int tml__report_print(const tml_report_model *m, tml_strbuf *text, tml_strbuf *json);
/* The three resource sections' rows, in final_summary.json order: their
 * field tables and rows, nothing derived (m->rows has that). */
void tml__report_rows(const tml_report_model *m, tml_report_rows out[TML_REPORT_ROWS]);
/* deepdive.c: m->dd from the run's ranks' deep dives and the window. */
void tml__report_deep_dive(tml_report_model *m);
/* derive.c: fills what model.h calls derived, from the rows, the window
 * and the resource findings (tml__report_model_init and a summary read
 * back both end with it). 0 or TML_ENOMEM. */
int tml__report_derive(tml_report_model *m);
/* The double at field f of a row. */
static inline double tml__report_field(const void *row, const tml_report_field *f)
{
    double v;
    memcpy(&v, (const char *)row + f->off, sizeof(v));
    return v;
}

/* 1 when a per_rank list keeps rank (every rank unless m->compact). */
static inline int tml__report_named(const tml_report_model *m, int32_t rank)
{
    if (!m->compact)
        return 1;
    for (size_t i = 0; i < m->nnamed; i++)
        if (m->named[i] == rank)
            return 1;
    return 0;
}

/* 1 when the system section's issues name node (m->compact only). */
static inline int tml__report_named_node(const tml_report_model *m, int32_t node)
{
    for (size_t i = 0; i < m->nnamed_nodes; i++)
        if (m->named_nodes[i] == node)
            return 1;
    return 0;
}

/* The window index of the straggler the verdict names (a straggler kind
 * with valid evidence), -1 otherwise: every view marks that rank, not the
 * one with the largest Step Time (in lock-step training the others wait
 * for it, so its own Step Time is no larger). */
static inline int tml__report_straggler(const tml_report_model *m)
{
    const tml_straggler *s = &m->verdict.straggler;
    return tml__diag_is_cause(&m->verdict) && strstr(m->verdict.kind, "STRAGGLER") &&
           s->valid ? s->culprit : -1;
}

/* resources.c: fills nodes, procs, the memory series, the three resource
 * sections and gpu_util_percent from the run's samples and steps (the
 * window must be computed). 0 or TML_ENOMEM. */
int tml__report_resources(tml_report_model *m, const int32_t *nodes, size_t nnodes);
void tml__report_resources_release(tml_report_model *m);

void tml__report_box(const tml_report_model *m, tml_strbuf *out);
void tml__report_json(const tml_report_model *m, const char *text, tml_strbuf *out);
/* series.c: the "series" value (an object, or null), compact JSON. */
void tml__report_series(const tml_report_model *m, tml_strbuf *out);

#endif
