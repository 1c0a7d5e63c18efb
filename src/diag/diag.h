/*
 * diag.h - the analysed window and the diagnosis rules.
 *
 * Data flows: tml_run (model/run.h) -> tml__window_compute() (diag/window.h)
 * -> tml_window (below, plain numbers) -> tml__diag_step_time() ->
 * tml_step_diag -> tml__diag_run_verdict() -> the run's verdict. The
 * reports (report/report.h) print all of it.
 *
 * The rules are pure functions of the plain structs declared here: no I/O,
 * no globals. What they allocate is scratch for one call (a value per
 * rank, to sort or scan), freed before they return; without memory they
 * find nothing (a figure is NAN, a rule stays silent). A test can fill a
 * tml_window by hand and read the verdict back. docs/diagnosis.md states every rule and threshold.
 *
 * Missing is never zero: a metric that was not measured is NAN (test with
 * isnan()); a measured zero is 0.0. Durations are nanoseconds as doubles.
 *
 * Ownership: a tml_window owns its `ranks` array when it was filled by
 * tml__window_compute() (freed by tml__window_release()); a hand-built
 * window is the builder's. Diagnoses hold copies of their strings (kind,
 * label and section point at string literals), so they may outlive the
 * window.
 */
#ifndef TML_DIAG_H
#define TML_DIAG_H

#include <stddef.h>
#include <stdint.h>
#include "model/breakdown.h"
#include "traceml/traceml.h"

/* ---- thresholds ---------------------------------------------------- */

typedef struct tml_thresholds {
    double input_warn, input_crit;          /* Input Wait share (0.10 / 0.20) */
    double h2d_warn, h2d_crit;              /* H2D share, GPU clock only (0.10 / 0.20) */
    double residual_warn, residual_crit;    /* Residual share (0.10 / 0.20) */
    /* Exposed communication's share on the rank that waited least (0.10 /
     * 0.20): what every rank pays, so a straggler's peers waiting for it
     * do not count */
    double comm_warn, comm_crit;
    double compute_min;                     /* Compute share for COMPUTE-BOUND (0.90) */
    double compute_other_max;               /* ...and every other share below (0.10) */
    double straggler_warn, straggler_crit;  /* straggler score (0.10 / 0.20) */
    double straggler_coverage;              /* one component explains (0.80) */
    size_t straggler_crit_min_steps;        /* CRITICAL needs this many steps (20) */
    size_t min_steps;                       /* fewer window steps: WARMUP (2) */
    /* Step memory (SPEC 4.2) */
    double mem_pressure_warn, mem_pressure_crit;   /* peak reserved / device (0.92 / 0.97) */
    size_t mem_min_steps;                   /* memory rules need this many steps (50) */
    size_t creep_mb;                        /* MEMORY CREEP growth, MiB (1024) */
    /* Untraced time's share of wall-clock (Untraced / (Step Time +
     * Untraced)) for UNTRACED-HEAVY (0.25 / 0.50) */
    double untraced_warn, untraced_crit;
} tml_thresholds;

/*
 * Every threshold, in one place: X(key, field, integer, default). The key
 * is TRACEML_THRESHOLDS's and final_summary.json's (meta.thresholds, with
 * docs/summary.schema.json); integer 0 is a fraction in [0, 1], 1 a count
 * >= 1; the default is SPEC 4.1's. The parser (thresholds.c), the
 * summary's writer (report/json.c) and its reader (report/reload.c) all
 * walk this list, and a test checks the schema against it: a new
 * threshold is its field above and its line here.
 */
#define TML_THRESHOLDS(X)                                             \
    X(input_warn, input_warn, 0, 0.10)                                \
    X(input_crit, input_crit, 0, 0.20)                                \
    X(h2d_warn, h2d_warn, 0, 0.10)                                    \
    X(h2d_crit, h2d_crit, 0, 0.20)                                    \
    X(residual_warn, residual_warn, 0, 0.10)                          \
    X(residual_crit, residual_crit, 0, 0.20)                          \
    X(comm_warn, comm_warn, 0, 0.10)                                  \
    X(comm_crit, comm_crit, 0, 0.20)                                  \
    X(compute, compute_min, 0, 0.90)                                  \
    X(compute_other, compute_other_max, 0, 0.10)                      \
    X(straggler_warn, straggler_warn, 0, 0.10)                        \
    X(straggler_crit, straggler_crit, 0, 0.20)                        \
    X(straggler_coverage, straggler_coverage, 0, 0.80)                \
    X(straggler_min_steps, straggler_crit_min_steps, 1, 20)           \
    X(min_steps, min_steps, 1, 2)                                     \
    X(mem_pressure_warn, mem_pressure_warn, 0, 0.92)                  \
    X(mem_pressure_crit, mem_pressure_crit, 0, 0.97)                  \
    X(mem_min_steps, mem_min_steps, 1, 50)                            \
    X(creep_mb, creep_mb, 1, 1024)                                    \
    X(untraced_warn, untraced_warn, 0, 0.25)                          \
    X(untraced_crit, untraced_crit, 0, 0.50)

/* One threshold of the list: where it lives in tml_thresholds. */
typedef struct tml_threshold_key {
    const char *key;
    size_t off;
    int integer;               /* a size_t count, else a double fraction */
} tml_threshold_key;

/* The list, in its order. */
const tml_threshold_key *tml__thresholds_keys(size_t *n);
/* A threshold's value as a double (a count converted). */
double tml__threshold_get(const tml_thresholds *t, const tml_threshold_key *k);
/* Sets it (v in range: a fraction in [0, 1], a count >= 1). */
void tml__threshold_put(tml_thresholds *t, const tml_threshold_key *k, double v);

/* The SPEC 4.1 defaults. */
void tml__thresholds_default(tml_thresholds *t);
/*
 * Applies overrides "key=value,key=value" (the TRACEML_THRESHOLDS syntax)
 * on top of *t. Keys: TML_THRESHOLDS's (fractions in [0, 1], counts
 * >= 1). Spaces around items are allowed; an empty spec changes
 * nothing. Each warn must stay <= its crit. Returns 0, or TML_EINVAL with
 * *t unchanged on any error (unknown key, bad number, out of range).
 */
int tml__thresholds_parse(tml_thresholds *t, const char *spec);
/* One item "key=value" (n bytes) of that syntax, without the warn <= crit
 * check (a file sets a pair on two lines): 0, or TML_EINVAL (unknown key,
 * bad number, out of range) with *t unchanged. */
int tml__thresholds_set(tml_thresholds *t, const char *item, size_t n);

/* ---- the window ---------------------------------------------------- */

#define TML_STEP_BLOCKS 20
#define TML_STEP_BLOCK_MIN 5        /* steps per block at least */

typedef struct tml_rank_window {
    int32_t rank, node, local_rank;
    size_t nsteps;                 /* window steps of this rank */
    double avg_ns[TML_M_COUNT];    /* window averages; NAN = missing */
    double step_median_ns;         /* Step Time median / p90; NAN without steps */
    double step_p90_ns;
    /* Step-to-step noise of Step Time over the window: standard deviation
     * and median absolute deviation from the median; NAN without steps. */
    double step_stddev_ns, step_mad_ns;
    /* Step Time medians of nblocks consecutive blocks of the window (at
     * most TML_STEP_BLOCKS, each of at least 5 steps, in window order):
     * what `traceml compare` tests two runs on. Consecutive steps are not
     * independent (epoch starts, drifting load); block medians nearly are,
     * and one slow step cannot move them. */
    double block_ns[TML_STEP_BLOCKS];
    size_t nblocks;
    uint32_t missing;              /* TML_PHASE_BIT of the phases missing here */
    /* How many window steps had this rank as the straggler culprit (the
     * smallest collective-bound phase of the step), 0 for one rank. */
    size_t culprit_steps;
    /* Per-step memory, window averages of the per-step peaks; NAN = never
     * sampled. */
    double rss_bytes, cuda_allocated_bytes, cuda_reserved_bytes;
    /* Communication: bytes sent per step (window average) and the
     * bandwidth they imply (bytes over the time some collective was in
     * flight); NAN without communication. */
    double comm_bytes_per_step, comm_bytes_per_s, comm_collectives_per_step;
    /* Throughput over the window's steps that counted them (samples,
     * tokens, FLOPs): per step, and per second of those steps' wall time
     * (Step Time plus the Untraced time before each); NAN none counted.
     * flops_how and peak_flops: the TML_FLOPS_* and the device's peak
     * FLOP/s (NAN unknown) of the last step with FLOPs. */
    double samples_per_step, samples_per_s, tokens_per_step, tokens_per_s;
    double flops_per_step, flops_per_s, peak_flops;
    uint32_t flops_how;
    int has_gpu;                   /* any GPU figure seen from this rank */
    /* The process's CPU use over the run (100 = one core), from its
     * samples; NAN unknown. Set by the report (the process section), for
     * the straggler rule on a saturated host. */
    double cpu_percent;
    /* Of its wall time, how long its main thread waited for a core (run
     * queue), from the same samples; NAN unknown (an older TraceML, a
     * kernel without schedstat). */
    double runq_wait_percent;
    int64_t overhead_ns_per_step;  /* from the rank's counters, -1 unknown */
    /* The rank's input pipeline as configured (see tml_rank_info). */
    int loader_known;
    int32_t loader_workers, loader_pin_memory, cpu_count;
    uint64_t records_dropped, events_dropped;
} tml_rank_window;

/* The machine's contention over the run (report/resources.c): how much
 * of the host's cores the training's process trees (ranks and their
 * DataLoader workers) used, how much other processes used, and how long
 * the training waited for a core. On several nodes, the node whose other
 * processes used the most. Percents are of all the node's cores, except
 * runq_wait_percent, of the training's wall time (the median rank); NAN
 * unknown. */
typedef struct tml_contention {
    int32_t cores;                 /* the node's logical cores, 0 unknown */
    int32_t node;                  /* -1 none */
    double host_cpu_percent, training_cpu_percent, other_cpu_percent;
    double runq_wait_percent;
    int gpu_shared;                /* -1 unknown, 0 no, 1 yes */
} tml_contention;

/* Other processes' share of all cores at which the machine is called
 * contended: the box names the share, and the rules stop blaming the
 * training for the time the machine took (docs/diagnosis.md, "A shared
 * machine"); with the training's wait for a core at least
 * TML_CONTENTION_RUNQ percent of its wall time. */
#define TML_CONTENTION_OTHER 25.0
#define TML_CONTENTION_RUNQ 10.0

/* 1 when other processes used at least TML_CONTENTION_OTHER% of the cores
 * and the training waited for a core at least TML_CONTENTION_RUNQ% of its
 * time (a rank that never waits is not slowed by its neighbours). */
int tml__contended(const tml_contention *c);

/* gpu_shared from the GPUs' gpu.other_processes samples: `most` holds,
 * per GPU series, the most other processes any sample saw (NAN for a
 * series without a sample). 1 when one is >= 1, 0 when some are known
 * and all 0, -1 (unknown) when none is known. */
int tml__gpu_shared_of(const double *most, size_t n);
/* Everything unknown. */
void tml__contention_init(tml_contention *c);
/*
 * The contention of one node from its figures: host CPU % (of all its
 * cores), the sum over its ranks of their process trees' CPU (100 = one
 * core), its cores, and the ranks' median run-queue wait. training =
 * trees / cores (at most 100), other = host - training (at least 0); NAN
 * where an input is. Pure: unit-tested (tests/unit/test_diag.c).
 */
void tml__contention_compute(tml_contention *c, int32_t node, int32_t cores, double host_pct,
                             double trees_pct, double runq_pct);

typedef struct tml_window {
    tml_clock clock;
    size_t common_steps;      /* step ids every rank reported, aborted ones excluded */
    size_t aborted_steps;     /* common ids left out because a rank aborted them */
    size_t warmup_steps;      /* leading common steps left out as warm-up */
    /* Epoch starts after warm-up (TML_STEP_EPOCH_START on any rank): left
     * out of the window like warm-up, and their wait — their Input Wait
     * from the loader's start (the iterator starting its workers; where
     * that start was not timed, the whole untraced time before the step
     * too), the largest over ranks — averaged here (NAN: none). The
     * script's own time before each loader's start (validation, a
     * checkpoint: between epochs), the largest over ranks, averaged into
     * between_epochs_ns (NAN: no epoch start; 0: none timed). */
    size_t epoch_start_steps;
    /* Steps the deep dive profiled (TML_STEP_DEEP_DIVE on any rank): left
     * out before warm-up is found, their first and last ids (valid when
     * deep_dive_steps > 0). */
    size_t deep_dive_steps;
    uint64_t deep_dive_first, deep_dive_last;
    double epoch_start_wait_ns;
    double between_epochs_ns;
    size_t window_steps;      /* steps analysed (the last N after warm-up) */
    uint64_t first_step, last_step;   /* step ids bounding the window (valid if window_steps) */
    size_t max_steps;         /* N: the window's cap */
    /* Why the window holds fewer steps than asked (NULL: it does not, or
     * the run had fewer): "ranks", so many ranks that the cap (max_steps)
     * came down to TML_WINDOW_CELLS / ranks (100 at least); "memory", the
     * ranks keep fewer of their last records (model/run.h's budget). */
    const char *limited_by;
    size_t nranks;
    tml_rank_window *ranks;   /* sorted by rank */
    int launch;               /* the run's tml_launch */
    uint32_t missing;         /* union over ranks of missing phases */
    /* Across ranks (indices into ranks, -1 without ranks/steps). */
    int median_rank;          /* the real rank nearest the median Step Time */
    int worst_rank;           /* the largest Step Time */
    /* The host CPU average (percent) when the system section found it
     * saturated (HIGH CPU; set by the report), else 0: INPUT-BOUND then
     * does not advise more DataLoader workers. */
    double host_cpu_busy;
    /* The host CPU average (percent) of the node HIGH CPU looks at (the
     * busiest), whether or not it fired; NAN unsampled. Near the HIGH CPU
     * threshold the Next lines call the choice close (TML_HOST_CPU_CLOSE). */
    double host_cpu_percent;
    double skew;              /* (worst - median) / median; NAN when unknown */
    /* Throughput of the run: the sum over ranks that counted (each rank
     * trains on its own batches); NAN where none did. peak_flops: the sum
     * of the peaks of the ranks whose device has one, and mfu what those
     * ranks achieved over it (a fraction); NAN none. Per step: the
     * median rank's, and how its FLOPs were counted. */
    double samples_per_s, tokens_per_s, flops_per_s, peak_flops, mfu;
    double samples_per_step, tokens_per_step, flops_per_step;
    uint32_t flops_how;
    tml_contention contention;   /* set by the report; zeroed: unknown */
    /* When applied: the DataLoader num_workers that `traceml run --apply`
     * set from a tune's measured winner (a Next line never advises
     * against what tune measured); zeroed: none. */
    int applied;
    int32_t applied_workers;
} tml_window;

/* ---- diagnoses ----------------------------------------------------- */

typedef enum tml_severity {
    TML_SEV_INFO = 0,
    TML_SEV_WARNING = 1,
    TML_SEV_CRITICAL = 2
} tml_severity;

const char *tml__severity_name(tml_severity s);   /* "INFO", ... */

#define TML_DIAG_TEXT 512

/* HIGH CPU (SPEC 4.3): the host CPU average, in percent, at which the
 * system section calls the host saturated, and the step-time rules stop
 * advising more DataLoader workers. Within TML_HOST_CPU_CLOSE points of it
 * (75% to 85%) their Next lines call the choice close and give one text
 * whichever side the average fell on: a run's average of samples a
 * second apart moves by a few points between identical runs (start-up,
 * other processes, where the samples fall; docs/diagnosis.md, "Close
 * calls"). */
#define TML_HOST_CPU_HIGH 80.0
#define TML_HOST_CPU_CLOSE 5.0

/* Evidence of a resource finding (step memory, system, process). */
typedef struct tml_res_evidence {
    int valid;
    const char *metric;        /* what `value` is: "peak_reserved_percent", ... */
    double value, threshold;   /* NAN none */
    int32_t rank, node, gpu;   /* where; -1 not applicable */
    double growth_bytes_per_step;   /* MEMORY RISING / CREEP; NAN otherwise */
    double growth_bytes;            /* over the window */
    double projected_full_step;     /* the step at which capacity would be reached */
    double capacity_bytes;          /* device memory (GPU) or host RAM (CPU-only) */
} tml_res_evidence;

/* Straggler evidence (SPEC 4.1). */
typedef struct tml_straggler {
    int valid;                 /* the score could be computed */
    int culprit, victim;       /* indices into the window's ranks */
    double cost_ns;            /* victim - culprit collective-bound phase */
    double score;              /* cost / victim Step Time */
    double coverage[4];        /* input, h2d, compute, outside-the-step excess / cost; NAN unknown */
    double forward_coverage;   /* compute's parts: Forward excess / cost, NAN unknown */
    double optimizer_coverage; /* Optimizer excess / cost */
    double residual_coverage;  /* Residual (in the step, outside every phase) excess / cost */
    int component;             /* 0 input, 1 h2d, 2 compute, 3 outside the step, -1 none */
    /* A CPU training on a saturated host (HIGH CPU) whose culprit used no
     * more CPU than the victim: it waited for a core, it did not compute
     * more (component -1 then). Its run queue tells it, or, for an excess
     * spread over its phases, the machine's contention (diag.c). */
    int cpu_contention;
    size_t culprit_steps;      /* window steps whose culprit was the same rank */
} tml_straggler;

typedef struct tml_diagnosis {
    const char *kind;          /* "INPUT_BOUND", "BALANCED", ... */
    const char *label;         /* "INPUT-BOUND", "BALANCED", ... */
    const char *section;       /* "step_time", "step_memory", "system", "process" */
    tml_severity severity;
    char why[TML_DIAG_TEXT];
    char next[TML_DIAG_TEXT];
    /* evidence */
    int cause;                 /* tml_metric the ◀ cause points at, -1 none */
    double share;              /* the share that fired, NAN none */
    double threshold;          /* the threshold it crossed, NAN none */
    uint32_t missing;          /* INCOMPLETE DATA: TML_PHASE_BIT mask */
    tml_straggler straggler;   /* straggler kinds; valid=0 otherwise */
    tml_res_evidence res;      /* resource kinds; valid=0 otherwise */
} tml_diagnosis;

#define TML_DIAG_MAX_ISSUES 8
/* The shortest epoch-start wait (EPOCH START), and script time before an
 * epoch (validation, checkpoints), worth naming. */
#define TML_EPOCH_MIN_WAIT_MS 50.0

typedef struct tml_step_diag {
    tml_diagnosis primary;                   /* the step-time verdict */
    tml_diagnosis issues[TML_DIAG_MAX_ISSUES];   /* all that fired, by priority */
    size_t nissues;
    double share[TML_M_COUNT];               /* median over ranks of metric / Step Time */
    /* Median over ranks of Untraced / (Step Time + Untraced): the share of
     * wall-clock spent between steps; NAN unknown. With epoch starts whose
     * loader start was timed, it also counts the script's own time before
     * them (validation, checkpoints: tml_window.between_epochs_ns), of
     * which between_epochs_wall is the part (0 none, NAN unknown). */
    double untraced_wall;
    double between_epochs_wall;
    tml_straggler straggler;                 /* computed whenever >= 2 ranks */
} tml_step_diag;

/* Median over ranks of avg[m] / avg[STEP]; ranks where either is missing
 * or Step Time is not positive are skipped; NAN when none is left. */
double tml__diag_share(const tml_window *w, tml_metric m);
/* The collective-bound phase of a rank's averages (or a step's
 * breakdown): Backward plus the exposed communication (the all-reduce it
 * waits in), NAN without Backward. */
double tml__diag_collective_ns(const double v[TML_M_COUNT]);
/* The smallest share of exposed communication over the ranks (the rank
 * that waited least: its communication is transfer, not waiting for a
 * peer) and that rank's index; NAN / -1 without communication. */
double tml__diag_comm_share(const tml_window *w, int *rank_out);
/* The straggler score of SPEC 4.1 (collective-bound phase: Backward and
 * exposed communication).
 * out->valid = 0 with fewer than 2 ranks or a missing Backward. */
void tml__diag_straggler(const tml_window *w, const tml_thresholds *th,
                         tml_straggler *out);
/* The step-time rules of SPEC 4.1. th NULL = defaults. */
void tml__diag_step_time(const tml_window *w, const tml_thresholds *th,
                         tml_step_diag *out);
/*
 * The run's verdict (SPEC 4.4) from the step-time verdict. gpu_util_percent
 * is the run's average GPU utilisation, NAN when no GPU was sampled (then
 * LOW GPU UTILIZATION cannot fire). UNTRACED-HEAVY comes first when the
 * time between steps takes th->untraced_warn of wall-clock or more. th NULL
 * = defaults.
 */
void tml__diag_run_verdict(const tml_step_diag *st, double gpu_util_percent,
                           const tml_thresholds *th, tml_diagnosis *out);
/* `traceml watch` (no step traced by design): the step-time diagnosis
 * NO DATA and the run's verdict INSUFFICIENT STEP-TIME DATA, saying it is
 * a watch run and how to get step timing, never blaming the script. */
void tml__diag_watch(tml_diagnosis *step, tml_diagnosis *verdict);
/* An empty diagnosis (cause -1, share/threshold NAN, empty why/next). */
void tml__diag_init(tml_diagnosis *d, const char *kind, const char *label,
                    const char *section, tml_severity sev);

/* ---- resources (step memory, system, process) ----------------------- *
 * The inputs of the resource sections: averages and peaks over the run's
 * samples (report/resources.c builds them), NAN where nothing was sampled.
 * The rules are in diag/resources.c. */

typedef struct tml_sys_node {
    int32_t node;
    size_t samples;
    double cpu_percent;
    double ram_used_bytes, ram_total_bytes;
    double gpu_util_percent;
    double gpu_mem_used_bytes, gpu_mem_total_bytes;
    double gpu_temp_c;
    double gpu_power_w, gpu_power_limit_w;
    /* peaks and ratios the rules use (NAN unsampled) */
    double ram_used_peak_bytes;
    double gpu_mem_peak_percent;    /* max over the node's GPUs of peak used / total */
    double gpu_temp_peak_c;
    double gpu_power_percent;       /* max over GPUs of avg power / limit, in % */
    int32_t gpus;                   /* GPUs sampled on the node */
    int32_t worst_gpu;              /* the GPU of gpu_mem_peak_percent, -1 none */
} tml_sys_node;

typedef struct tml_proc_rank {
    int32_t rank, node;
    size_t samples;
    double cpu_capacity_percent;    /* CPU % / logical cores */
    double rss_bytes, host_ram_total_bytes;
    double cuda_allocated_bytes, cuda_reserved_bytes, device_total_bytes;
    double cpu_percent;             /* 100 = one core */
    double runq_wait_percent;       /* of wall time, waiting for a core; NAN unknown */
    double rss_peak_bytes;
    double cuda_reserved_peak_bytes;   /* the largest per-step peak */
    int32_t gpu;                    /* the GPU it samples, -1 unknown */
} tml_proc_rank;

/* A section's verdict and every finding behind it. */
typedef struct tml_section_diag {
    tml_diagnosis primary;
    tml_diagnosis issues[TML_DIAG_MAX_ISSUES];
    size_t nissues;
} tml_section_diag;

/* Step memory input: per rank, the per-step peak series over the window:
 * CUDA reserved bytes on GPU runs, process RSS on CPU-only runs. */
typedef struct tml_mem_rank {
    int32_t rank, node;
    const double *series;      /* window order; n entries (none NAN) */
    const uint64_t *steps;     /* their step ids */
    size_t n;
    double capacity_bytes;     /* device total (GPU) / host RAM (CPU); NAN unknown */
} tml_mem_rank;

typedef struct tml_mem_input {
    int gpu;                   /* 1: CUDA reserved series; 0: RSS (CPU-only run) */
    const tml_mem_rank *ranks;
    size_t nranks;
} tml_mem_input;

/* SPEC 4.2 on the series (HIGH PRESSURE, IMBALANCE, MEMORY CREEP, MEMORY
 * RISING, BALANCED, NO GPU). th NULL = defaults. */
void tml__diag_memory(const tml_mem_input *in, const tml_thresholds *th,
                      tml_section_diag *out);
/* SPEC 4.3. gpu_util_out (may be NULL) receives the run's average GPU
 * utilisation, NAN when no GPU was sampled. */
void tml__diag_system_rules(const tml_sys_node *nodes, size_t n, const tml_thresholds *th,
                            tml_section_diag *out, double *gpu_util_out);
void tml__diag_process_rules(const tml_proc_rank *ranks, size_t n, const tml_thresholds *th,
                             tml_section_diag *out);
/* SPEC 4.4: the findings named under the run's verdict ("Also: ..."),
 * whatever section they are in: each WARNING or CRITICAL finding, and a
 * memory trend that projects the device or host RAM full (a run heading
 * for an out-of-memory crash, whatever its severity). Ranked by severity,
 * then the sooner projected full step, then the order of `sections`;
 * never the verdict itself. Up to `max` pointers into the sections;
 * returns how many. */
#define TML_ALSO_MAX 3
size_t tml__diag_also(const tml_diagnosis *verdict, const tml_section_diag *const *sections,
                      size_t nsections, const tml_diagnosis **out, size_t max);
/* The largest of a double over rows: n rows of `stride` bytes from `rows`,
 * the double at byte `off` of each, divided by the double at `per` unless
 * per is TML_ROWS_PLAIN (a row whose divisor is not above 0 has no value).
 * Returns the index of the largest, the first of equals, NANs skipped; -1
 * when no row has a value. *max (may be NULL) gets the largest, NAN none.
 * The one argmax of the rules (resources.c) and the report model alike. */
#define TML_ROWS_PLAIN ((size_t)-1)
int tml__rows_argmax(const void *rows, size_t n, size_t stride, size_t off, size_t per,
                     double *max);
/* Least-squares slope of v (per index step); NAN with fewer than 2. */
double tml__slope(const double *v, size_t n);

/* Step memory (SPEC 4.2): NO GPU without CUDA figures, else BALANCED. */
void tml__diag_step_memory(const tml_window *w, const tml_thresholds *th,
                           tml_diagnosis *out);
/* System / process (SPEC 4.3): NORMAL (the rules come with the samplers). */
void tml__diag_system(const tml_sys_node *nodes, size_t n,
                      const tml_thresholds *th, tml_diagnosis *out);
void tml__diag_process(const tml_proc_rank *ranks, size_t n,
                       const tml_thresholds *th, tml_diagnosis *out);

/* 1 for the bound and straggler kinds (a root cause), else 0. */
int tml__diag_is_cause(const tml_diagnosis *d);
/* "Input Wait", "Forward and Backward", "Input Wait, Forward and Optimizer". */
void tml__phase_list(uint32_t mask, char *out, size_t cap);

#endif
