/*
 * run.h - a run as the aggregator holds it in memory: every rank that said
 * hello, and the step records it sent, in arrival order (which is step
 * order per rank). The store (SQLite) holds the same records on disk and can
 * load them back into a tml_run, so the summary is built from one shape
 * whether it comes from a live aggregator or from telemetry.sqlite.
 *
 * Memory does not grow with the run, nor past a budget with the ranks. A
 * rank keeps its first records (the warm-up rule reads a run's start) and
 * its last (the window is the last 10,000 steps; the rest is room for
 * ranks a few thousand steps apart mid-run). Records in between are
 * dropped from memory as the run goes, after being counted and folded into
 * the rank's step history (the charts). At most TML_RUN_HEAD_STEPS +
 * TML_RUN_KEEP_STEPS kept and TML_RUN_CAP_STEPS in all (~3 MB) plus the
 * history (TML_HISTORY_BUCKETS, ~270 KB) per rank, whatever the run length.
 *
 * The run's memory budget (mem_budget, TRACEML_MEMORY_MB) bounds the sum
 * over ranks: past budget / (TML_RUN_CAP_STEPS records + a full history)
 * ranks, each rank's share shrinks — fewer records kept (the window is the
 * last steps every rank still holds; the summary says so), fewer history
 * buckets (coarser charts) — never below TML_RUN_MIN_STEPS records. The
 * share is set by the ranks expected (world_size) or seen, whichever is
 * more, and shrinks the ranks already there when it changes. A reader that
 * wants every record (the trace export) sets keep_all, and no budget.
 */
#ifndef TML_RUN_H
#define TML_RUN_H

#include <stddef.h>
#include <stdint.h>
#include "model/deepdive.h"
#include "model/history.h"
#include "model/record.h"
#include "model/series.h"

#define TML_RUN_HEAD_STEPS 64
#define TML_RUN_KEEP_STEPS 12288
#define TML_RUN_CAP_STEPS 16384     /* head + kept tail + room to append */
#define TML_RUN_MIN_STEPS 64        /* a rank's records however many ranks */
#define TML_RUN_BUDGET_MB 160       /* mem_budget's default, MiB */

/* What a rank may hold (the run's budget shared out). */
typedef struct tml_rank_limits {
    size_t head, keep, cap;  /* records: first kept, last kept, in all */
    size_t buckets;          /* step history buckets */
} tml_rank_limits;

typedef struct tml_rank {
    tml_rank_info info;
    tml_rank_stats stats;
    tml_step_record *steps;  /* the first and the last records (above) */
    size_t nsteps, cap;
    /* The records dropped from memory (older than the kept tail): how
     * many, how many aborted, whether any had GPU figures, and their
     * step history. */
    uint64_t past_steps, past_aborted;
    int past_gpu;
    tml_step_history past;
    int ended;               /* sent its goodbye */
    /* Its connection closed (or was still open at the end) without a
     * goodbye: the rank died or was cut off. Set by the socket server. */
    int lost;
    /* The fatal signal it died of after its goodbye (at exit: its progress
     * page, model/progress.h), 0 none. */
    int exit_signal;
    int keep_all;            /* the run's keep_all when the rank was added */
    tml_rank_limits lim;     /* the run's, when the rank was added or they changed */
    uint64_t detected_steps; /* found by automatic step detection (TML_STEP_DETECTED) */
    /* Incarnations: a rank whose process restarted (a re-exec under the
     * same pid restarts its step ids) keeps every incarnation's steps, the
     * later ones numbered on after the earlier (tml__run_restart). */
    uint32_t incarnation;    /* 0 for the first process */
    uint64_t step_base;      /* added to the current incarnation's step ids */
    uint64_t next_step;      /* the highest step id kept + 1 (0 without steps) */
    int unordered;           /* a record arrived with an id not above the last's */
    /* Its latest deep-dive window (model/deepdive.h; owned), NULL none. */
    tml_dd_window *deep_dive;
} tml_rank;

/* What a conflict is. */
typedef enum tml_conflict_kind {
    /* Two processes (another pid or host) claimed the same rank: never
     * merged, the later one is reported under a rank number of its own. */
    TML_CONFLICT_CLAIMED = 0,
    /* A second live connection of the same rank, pid and host from another
     * process image: not merged either, reported under a number of its own. */
    TML_CONFLICT_SECOND_CONNECTION,
    /* The rank's process restarted (a new process image under the same pid
     * and host, its step ids started again): a new incarnation of the same
     * rank, both incarnations' steps kept. */
    TML_CONFLICT_RESTARTED,
} tml_conflict_kind;

typedef struct tml_rank_conflict {
    int kind;                 /* tml_conflict_kind */
    int32_t claimed;          /* the rank both claimed */
    int32_t reported_as;      /* the later process's own number (RESTARTED: claimed) */
    int32_t pid, first_pid;   /* the later and the first claimant */
    char host[64], first_host[64];
    uint32_t incarnation;     /* RESTARTED: the incarnation that began (1, 2, ...) */
    uint64_t first_step;      /* RESTARTED: the step id its first step is shown as */
} tml_rank_conflict;

#define TML_MAX_CONFLICTS 64

/* How `traceml run` started the training: what a summary in which no rank
 * reported tells the user to do depends on it. */
typedef enum tml_launch {
    TML_LAUNCH_UNKNOWN = 0,     /* traceml serve, in-process, a rebuilt run */
    TML_LAUNCH_ZERO_EDIT,       /* traceml run SCRIPT: zero-edit tracing on */
    TML_LAUNCH_NO_AUTO_TRACE,   /* traceml run --no-auto-trace SCRIPT */
    TML_LAUNCH_COMMAND,         /* traceml run -- COMMAND: run as given */
    TML_LAUNCH_FORKED           /* in-process: the training's processes were forked from
                                 * this one (tml_set_launcher_forked) */
} tml_launch;

typedef struct tml_run {
    char name[128];
    char id[40];
    int32_t world_size;      /* expected ranks; 0 = as many as reported */
    int32_t nnodes;          /* expected nodes; 0 = as many as reported */
    int64_t start_unix_ms;   /* wall clock, for the manifest and report */
    int64_t end_unix_ms;
    /* tml__mono_ns() of this process's host at the start, 0 unknown: the
     * run's duration (a wall-clock jump must not stretch it) */
    int64_t start_mono_ns;
    tml_rank *ranks;         /* sorted by info.rank */
    size_t nranks, cap;
    int keep_all;            /* keep every step record in memory (export) */
    /* Bytes the ranks' records and histories may take in all (0: the
     * default, TML_RUN_BUDGET_MB), and each rank's share of it now. */
    size_t mem_budget;
    tml_rank_limits lim;
    /* Why the run's data is incomplete (the aggregator died and the run
     * was rebuilt from telemetry.sqlite, ...); "" when it is whole. */
    char partial[256];
    /* Who stopped an interrupted run on purpose: "tune" (a trial of
     * `traceml tune`, stopped once it ran its steps), "" nobody known. */
    char stopped_by[16];
    tml_launch launch;
    /* The settings `traceml run --apply` applied from a tune.json
     * ("num_workers=1"), "" none; TML_TUNE_SETTING (judge/tune.h) bytes. */
    char applied[256];
    /* `traceml watch`: a run of system and process metrics only; step
     * records are not kept (the aggregator drops them). */
    int watch;
    tml_rank_conflict conflicts[TML_MAX_CONFLICTS];
    size_t nconflicts;        /* may exceed TML_MAX_CONFLICTS (then only counted) */
    /* CPU time of an aggregator that is a process of its own, 0 unknown
     * (in-process, its work is in the shipper thread's time). */
    int64_t aggregator_cpu_ns;
    /* Steps this host's training processes ended, from their progress
     * files (model/progress.h): some may never have reached the
     * aggregator. 0 none or unknown. */
    uint64_t steps_traced_here;
    /* Resource samples (host, GPU, process), aggregated per place. */
    tml_series_set samples;
    /* Host/GPU metrics over time, bounded (model/timeline.h); NULL until the
     * first sample. */
    struct tml_timeline *timeline;
} tml_run;

void tml__run_init(tml_run *run, const char *name, const char *id);
/* Sets the memory budget (bytes, 0: the default) and shares it out again. */
int tml__run_set_budget(tml_run *run, size_t bytes);
/* Shares the budget out for the ranks expected (world_size) or seen, and
 * shrinks ranks past their new share. tml__run_rank calls it. 0 or
 * TML_ENOMEM (a history could not fold; the records stay). */
int tml__run_share_budget(tml_run *run);
void tml__run_release(tml_run *run);
/* Returns the rank's slot, adding it (sorted) on first sight; NULL on OOM.
 * A second hello for the same rank updates its info and keeps its steps. */
tml_rank *tml__run_rank(tml_run *run, const tml_rank_info *info);
tml_rank *tml__run_find(tml_run *run, int32_t rank);
/* Appends a rank's records (dropping the oldest past the kept tail unless
 * the run keeps all), their step ids moved on by the rank's step_base. 0
 * or TML_ENOMEM. */
int tml__run_add_steps(tml_rank *rank, const tml_step_record *recs, size_t n);
/* A record's step id in the run: its process's own id moved on by the
 * rank's base (step_base), *next_step (next_step) kept past it. What
 * tml__run_add_steps does to every record, for a reader that keeps none. */
uint64_t tml__run_step_id(uint64_t step, uint64_t base, uint64_t *next_step);
/* The rank's process restarted: a new incarnation begins, its steps are
 * numbered on after those kept so far, and the run notes a RESTARTED
 * conflict (pid and host: the rank's). The aggregator and the store's
 * loader both call it, so a rebuilt run numbers steps the same way. */
void tml__run_restart(tml_run *run, tml_rank *rank);
/* Notes a conflict (counted past TML_MAX_CONFLICTS, not kept); returns
 * the kept slot or NULL. */
tml_rank_conflict *tml__run_add_conflict(tml_run *run, int kind);
/* How the run's steps were found: "automatic" when any rank's were
 * detected (zero-edit tracing), "marked" when steps came only from
 * trace_step / the C API, NULL without steps. */
const char *tml__run_step_detection(const tml_run *run);
/* How far a rank had got and at what pace, from its records in memory:
 * what a summary rebuilt after the aggregator died estimates the rest of
 * the run from. */
typedef struct tml_run_pace {
    int32_t rank;            /* -1: no rank (on that host) with a step */
    uint64_t last_step;      /* its last step */
    int64_t last_start_ns;   /* when that step began, on its host's monotonic clock */
    double steps_per_s;      /* over its last steps (never its first: start-up
                              * is not the pace); NAN under two steps */
} tml_run_pace;

/* The pace of the rank that got furthest, among those on `host` (the
 * hello's host name; NULL: any): its timestamps compare with this host's
 * tml__mono_ns() only when it ran here. */
void tml__run_pace(const tml_run *run, const char *host, tml_run_pace *out);
/* The records of r with step ids first..last: [*lo, *hi). Ids ascend in
 * a rank's records unless it resent some (r->unordered): then all of them. */
void tml__rank_span(const tml_rank *r, uint64_t first, uint64_t last, size_t *lo, size_t *hi);
/* Records the rank sent, kept or not. */
static inline uint64_t tml__rank_received(const tml_rank *r)
{
    return r->past_steps + r->nsteps;
}

/* 1 when name matches [A-Za-z0-9_.-]+, is at most 100 bytes and not "." or "..". */
int tml__run_name_valid(const char *name);
/* A fresh name: "<stem>_<YYYYmmdd_HHMMSS>" (stem sanitized, e.g. the script's
 * base name without .py; "run" when NULL). */
void tml__run_name_generate(const char *stem, char *out, size_t cap);

#endif
