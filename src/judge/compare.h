/*
 * compare.h - `traceml compare A B`'s decision: did run B get faster,
 * slower, or stay the same as run A, and what changed (SPEC 6,
 * docs/compare.md). The runs come from summaries (report/compare.h reads
 * them and prints the result); everything here works on the plain structs
 * below, so a table-driven test can feed numbers and read verdicts.
 *
 *     tml_cmp_run a, b;                    // tml__cmp_run_load (report/)
 *     tml_cmp_result r;
 *     tml__cmp_decide(&a, &b, NULL, &r);   // NULL: the SPEC's gates
 *     tml__cmp_text(&a, &b, &r, &box);     // report/compare.h prints it
 *
 * Missing is NAN (or "" for labels), never 0.
 *
 * Ownership: the structs hold copies (but tml_cmp_result's ra / rb, the
 * caller's arrays); nothing here allocates.
 */
#ifndef TML_JUDGE_COMPARE_H
#define TML_JUDGE_COMPARE_H

#include <stddef.h>

#define TML_CMP_LABEL 128

enum { TML_CMP_CPU = 0, TML_CMP_GPU = 1 };

/* Step-time figures of one run on one clock (the median rank's, as the
 * run summary prints them), milliseconds. */
#define TML_CMP_BLOCKS 32

typedef struct tml_cmp_clock {
    int valid;                     /* the run has figures on this clock */
    double step_ms, input_ms, h2d_ms, compute_ms, residual_ms;
    double noise_ms;               /* step-to-step noise (Step Time stddev) */
    /* Step Time medians of consecutive blocks of the window (what the
     * statistical test compares); nblocks 0 in summaries that predate them */
    double blocks_ms[TML_CMP_BLOCKS];
    size_t nblocks;
} tml_cmp_clock;

/* The machine a run shared (the summary's top-level "contention" object,
 * docs/summary-json.md): known 0 in summaries that predate it. Percentages
 * are of the host's capacity (all cores); gpu_shared -1 unknown. */
typedef struct tml_cmp_contention {
    int known;
    double cores, host_cpu, training_cpu, other_cpu, runq_wait;
    int gpu_shared;
} tml_cmp_contention;

/* What ran (meta.workload): "" / -1 unknown. guard is the traceml.yaml
 * `guard:` declaration as compact JSON ("" none declared). */
typedef struct tml_cmp_workload {
    char script[256];
    char args[256];
    long world_size;
    char guard[512];
    /* a guarded run whose launchers did not all report a completed
     * training (run_context.execution.launcher_completion, 0.5.0's) */
    int launch_incomplete;
} tml_cmp_workload;

enum { TML_CMP_SEC_STEP_TIME, TML_CMP_SEC_STEP_MEMORY, TML_CMP_SEC_PROCESS,
       TML_CMP_SEC_SYSTEM, TML_CMP_SEC_COUNT,
       /* shown, never diagnosed: what ran and the machine it shared */
       TML_CMP_SEC_WORKLOAD = TML_CMP_SEC_COUNT, TML_CMP_SEC_MACHINE, TML_CMP_SEC_ALL };

/* Below the phase (docs/deep-dive.md): a run's deep-dive window, its
 * heaviest modules and operators (the summary's top 8 each), per
 * profiled step so that windows of different lengths compare. */
#define TML_CMP_DD_ITEMS 8
#define TML_CMP_DD_NAME 96
typedef struct tml_cmp_dd_item {
    char name[TML_CMP_DD_NAME];
    double ms;                     /* self time per profiled step */
} tml_cmp_dd_item;

typedef struct tml_cmp_dd {
    int ran;                       /* the run has a deep-dive window */
    size_t nmod, nop;
    tml_cmp_dd_item mod[TML_CMP_DD_ITEMS], op[TML_CMP_DD_ITEMS];
} tml_cmp_dd;

/* One module's or operator's change, B - A (NAN: not among one run's top
 * 8 while that run's list was full, so unknown there). */
typedef struct tml_cmp_dd_change {
    char name[TML_CMP_DD_NAME];
    double a_ms, b_ms, delta_ms;
} tml_cmp_dd_change;

#define TML_CMP_DD_CHANGES 5
typedef struct tml_cmp_dd_diff {
    int compared;                  /* both runs have a window */
    size_t nmod, nop;              /* the changes, largest |delta| first */
    tml_cmp_dd_change mod[TML_CMP_DD_CHANGES], op[TML_CMP_DD_CHANGES];
} tml_cmp_dd_diff;

/* The modules and operators whose time per profiled step changed most
 * between a and b (pure; compare_dd.c). */
void tml__cmp_deep_dive(const tml_cmp_dd *a, const tml_cmp_dd *b, tml_cmp_dd_diff *out);

/* What compare reads from one final_summary.json. */
typedef struct tml_cmp_run {
    char label[TML_CMP_LABEL];     /* meta.run_name, else the file name */
    char path[TML_CMP_LABEL * 4];  /* where it was read from ("" unknown) */
    /* Another TraceML's summary (0.5.0): what it was and what it lacked,
     * shown under its name; "" for this TraceML's own. */
    char source[TML_CMP_LABEL * 2];
    char primary[64];              /* primary_diagnosis.label */
    char diag[TML_CMP_SEC_COUNT][64];   /* each section's diagnosis label */
    size_t window_steps;
    tml_cmp_clock clock[2];        /* TML_CMP_CPU, TML_CMP_GPU */
    double peak_reserved_bytes;    /* step_memory.average */
    double mem_skew_percent;       /* (worst - median) / median peak reserved */
    double proc_cpu_percent;       /* process CPU (cpu_percent, else capacity) */
    double proc_rss_bytes;
    double sys_cpu_percent, sys_ram_used_bytes, gpu_util_percent, gpu_mem_percent;
    /* throughput (all ranks) and MFU; NAN not counted. Shown, never decides:
     * the step time does, and the work per step may differ */
    double samples_per_s, tokens_per_s, flops_per_s, mfu_percent;
    tml_cmp_contention cont;
    tml_cmp_workload work;
    tml_cmp_dd dd;                 /* the deep dive, dd.ran 0: none */
} tml_cmp_run;

/* Runs a side: `traceml compare --baseline A1 A2 ... --candidate B1 ...`. */
#define TML_CMP_MAX_RUNS 32

/* SPEC 6 defaults: 3% step time, 10% peak reserved memory. */
typedef struct tml_cmp_gates {
    double step_time;              /* fraction */
    double memory;                 /* fraction */
} tml_cmp_gates;

typedef enum tml_cmp_verdict {
    TML_CMP_EQUIVALENT = 0,
    TML_CMP_IMPROVEMENT,
    TML_CMP_REGRESSION,
    TML_CMP_MIXED,
    TML_CMP_INCONCLUSIVE
} tml_cmp_verdict;

typedef struct tml_cmp_result {
    tml_cmp_verdict verdict;
    tml_cmp_gates gates;
    int clock;                     /* TML_CMP_CPU / _GPU; -1 when none is comparable */
    double time_a_ms, time_b_ms;   /* Step Time on that clock */
    double time_change;            /* (B - A) / A; NAN when not comparable */
    double noise_ms;               /* the larger of the two runs' noise; NAN unknown */
    int time_moved;                /* -1 faster, +1 slower, 0 within gate or noise */
    int within_noise;              /* past the gate but smaller than the noise */
    /* The statistical test, when both runs carry block medians (>= 5 each):
     * Mann-Whitney U on the block medians, two-sided; the effect is the
     * change of their medians. Step time moves only when the change is
     * significant (p < TML_CMP_ALPHA) and past the gate. */
    int tested;
    size_t blocks_a, blocks_b;
    double center_a_ms, center_b_ms;   /* medians of the block medians */
    double effect;                 /* (center B - center A) / center A */
    double p_value;
    int significant, past_gate;
    /* Several runs a side: the run is the unit. Each run's center (the
     * median of its block medians, else its Step Time) on the clock; a
     * Welch t-test on their logs, the effect the ratio of the geometric
     * means, and the minimal detectable change (alpha TML_CMP_ALPHA,
     * power 80%) for these runs' noise. */
    size_t runs_a, runs_b;
    double run_a_ms[TML_CMP_MAX_RUNS], run_b_ms[TML_CMP_MAX_RUNS];
    int run_tested;
    double run_noise_a, run_noise_b;   /* stddev of the log centers (~ fraction) */
    double t_df;
    double mdc;                    /* fraction; NAN unknown */
    /* Why a time change cannot be trusted, when it cannot ("" none):
     * the sides ran on differently loaded machines, one run a side on a
     * loaded machine, the declared workloads differ. */
    int load_differs, loaded_single, guard_differs, undecided;
    int launch_incomplete;     /* a guarded run's nodes did not all complete */
    char next[320];                /* how to get a decision ("" none) */
    /* the runs of each side (tml__cmp_decide_n's arrays, not copied) */
    const tml_cmp_run *ra, *rb;
    int mem_compared;              /* both runs have peak reserved memory */
    double mem_change;             /* (B - A) / A; NAN when not compared */
    int mem_moved;                 /* -1 less, +1 more, 0 within the gate */
    char why[1024];
    tml_cmp_dd_diff dd;            /* below the phase: the sides' first runs' windows */
} tml_cmp_result;

#define TML_CMP_ALPHA 0.01

/* Interleaved runs a side that would decide a change of target (a log
 * ratio) between runs whose log centers spread by s (compare.c); the
 * INCONCLUSIVE Next's "About N". */
int tml__cmp_runs_needed(double s, double target, size_t have);
#define TML_CMP_MIN_BLOCKS 5
/* Differently loaded sides (docs/compare.md): other processes' share of
 * the cores differing by >= 25 points, the training's run-queue wait by
 * >= 15 points, or the GPU shared on one side only -- unless the time
 * moved against the load (the more loaded side was the faster). One run a
 * side is "loaded" at other >= 25% or run-queue wait >= 15%. */
#define TML_CMP_LOAD_OTHER_PP 25.0
#define TML_CMP_LOAD_RUNQ_PP 15.0
/* ... nor when the more loaded, slower side would still be this many
 * times as slow with all its wait for a core taken out (its step time x
 * (1 - run-queue wait)). The wait is the main thread's: an op split over
 * intra-op threads stalls for the slowest of them, a DataLoader worker
 * waits unseen, so the margin is wide -- the quickstart beside two busy
 * loops was 2.24x as slow with a main-thread wait near a third. */
#define TML_CMP_BEYOND_WAIT 2.0
/* One run a side on a loaded machine still decides a change of at least
 * this factor (either way): the same script beside two busy loops has
 * been seen off by 1.25x, never by 1.5x (issue 45, bench/compare_stats.py). */
#define TML_CMP_LOADED_FACTOR 1.5
/* Several runs a side call a change that is not significant EQUIVALENT
 * only when the runs could have seen one of this many gates. */
#define TML_CMP_MDC_GATES 5.0

void tml__cmp_gates_default(tml_cmp_gates *g);
const char *tml__cmp_verdict_name(tml_cmp_verdict v);   /* "IMPROVEMENT", ... */
const char *tml__cmp_clock_name(int clock);             /* "GPU", else "CPU" */
/* The run's label, else which ("A", "B"). */
const char *tml__cmp_run_name(const tml_cmp_run *r, const char *which);

/* An empty run: every number NAN, every label "". */
void tml__cmp_run_init(tml_cmp_run *r);
/* The verdict of SPEC 6 (docs/compare.md). gates NULL = defaults. Pure. */
void tml__cmp_decide(const tml_cmp_run *a, const tml_cmp_run *b, const tml_cmp_gates *gates,
                     tml_cmp_result *out);
/* The same with na and nb runs a side (1..TML_CMP_MAX_RUNS). */
void tml__cmp_decide_n(const tml_cmp_run *a, size_t na, const tml_cmp_run *b, size_t nb,
                       const tml_cmp_gates *gates, tml_cmp_result *out);
/* One run standing for a side in the box and the JSON: each figure the
 * median over the runs, the label naming them, the contention the median
 * of the known ones, the workload the first run's. */
void tml__cmp_side(const tml_cmp_run *runs, size_t n, tml_cmp_run *out);

#endif
