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
} tml_report_model;

void tml__report_box(const tml_report_model *m, tml_strbuf *out);
void tml__report_json(const tml_report_model *m, const char *text, tml_strbuf *out);

#endif
