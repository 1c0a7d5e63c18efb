/*
 * model.h - what a report shows, computed once and printed twice (box.c
 * and json.c). Internal to src/report/.
 */
#ifndef TML_REPORT_MODEL_H
#define TML_REPORT_MODEL_H

#include "report/report.h"

typedef struct tml_report_model {
    const tml_run *run;
    const char *status;
    int exit_code;
    double duration_s;            /* NAN unknown */
    const char *json_path;
    int width;
    char generated_at[40];
    tml_thresholds th;
    tml_window win;
    tml_step_diag st;
    tml_diagnosis verdict;        /* the run's verdict (SPEC 4.4) */
    int32_t world_size;           /* expected ranks */
    int32_t ranks_reported;
    int32_t nodes_expected, nodes_reported;
    int32_t gpus_observed;
    size_t active_ranks;          /* ranks that sent steps */
    int32_t *missing_ranks;       /* expected ranks that never said hello */
    size_t nmissing;
    double overhead_us;           /* mean over ranks that measured it; NAN none */
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
} tml_report_model;

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
