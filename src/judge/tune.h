/*
 * tune.h - `traceml tune`'s reckoning: which settings to try for a
 * baseline's diagnosis, whether a setting's trials beat the baseline's
 * (a confidence interval over processes), which setting to recommend.
 * The trials themselves are run by cli/cmd_tune.c and the result printed
 * by report/tune.h (terminal table, tune.json, tune.html); nothing here
 * starts a process or prints a report, so a table-driven test can feed
 * numbers.
 *
 *     tml_tune_dir dirs[TML_TUNE_DIRS];
 *     size_t n = tml__tune_plan(&base, dirs, TML_TUNE_DIRS);
 *     ... trials ...
 *     tml__tune_compare(base_ms, nb, cand_ms, nc, &arm->cmp);
 *     result.pick = tml__tune_pick(&result);
 *     tml__tune_text(&result, &sb);            // report/tune.h
 *
 * A setting string is what the injected start-up code applies
 * (TRACEML_TUNE_SETTINGS, docs/tune.md): "num_workers=2,prefetch_factor=4".
 */
#ifndef TML_JUDGE_TUNE_H
#define TML_JUDGE_TUNE_H

#include <stddef.h>

#include "base/strbuf.h"

/* A setting string's room, NUL included: the nine settings at their
 * longest integer values fit (160 bytes); a longer string is refused
 * (tml__tune_settings_check), never cut. */
#define TML_TUNE_SETTING 256
#define TML_TUNE_RUNS 64       /* processes an arm keeps */
#define TML_TUNE_MORE_MAX 99   /* rounds more estimated at most */
#define TML_TUNE_ARMS 32       /* the baseline and the settings tried */
#define TML_TUNE_DIRS 6
#define TML_TUNE_STEPS 8       /* settings a direction tries at most */

/* What the baseline's trials said (final_summary.json, telemetry.sqlite). */
typedef struct tml_tune_base {
    char verdict[40];          /* primary_diagnosis.kind: INPUT_BOUND, ... */
    char label[64];            /* as printed: INPUT-BOUND (CRITICAL) */
    int host_cpu_high;         /* the system section said HIGH_CPU */
    int cores;                 /* the host's logical CPUs (0 unknown) */
    int ranks_here;            /* training processes on this host */
    int workers;               /* the script's DataLoader num_workers; -1: no DataLoader seen */
    int pin_memory;
    int gpu;                   /* step times on the GPU clock */
    int ddp;                   /* several ranks that communicate */
    double comm_bytes_per_step;   /* the median rank's; NAN without communication */
    double comm_share;            /* exposed communication / Step Time, 0-1; NAN */
    /* The fetch's CPU share: the fetching thread's CPU time over the
     * fetches' wall time (in the training process: workers 0); NAN
     * unknown. Far below 1: the fetch waits (storage, network, decoding
     * that releases the GIL), and more workers than cores pay. */
    double fetch_cpu_share;
} tml_tune_base;

/* The worker counts a waiting fetch may use: ceil(1 / share) of them,
 * bounded by TML_TUNE_WAIT_WORKERS_PER_CORE a core and TML_TUNE_WAIT_WORKERS. */
#define TML_TUNE_WAIT_WORKERS_PER_CORE 8
#define TML_TUNE_WAIT_WORKERS 32
/* A fetch whose CPU share is below this waits. */
#define TML_TUNE_WAIT_SHARE 0.5
/* The most workers worth trying for this baseline (a rank's cores, half
 * on a busy host; more for a waiting fetch). */
int tml__tune_max_workers(const tml_tune_base *b);

/* One direction: settings tried in order, each on top of `on`. A ladder
 * stops at the first step that does not beat the one before it (more
 * workers after two did not pay); a list tries every step. */
typedef struct tml_tune_dir {
    char name[40];
    int ladder;
    int min_steps;             /* a ladder tries at least these before it may stop */
    int on_best_of;            /* index of the direction whose best is under each step; -1 */
    char steps[TML_TUNE_STEPS][TML_TUNE_SETTING];
    size_t n;
} tml_tune_dir;

/* The directions worth trying for this baseline, most promising first. */
size_t tml__tune_plan(const tml_tune_base *b, tml_tune_dir *out, size_t cap);

enum { TML_TUNE_UNSURE = 0, TML_TUNE_GAIN, TML_TUNE_LOSS };

/* A setting against the baseline: means over processes (each process's
 * mean step time over its steady steps) and the 95% interval of the
 * relative change, computed on the log of the step time (the ratio of
 * geometric means: Welch's t over processes, so process-to-process noise
 * is in it, with Student's t at the Welch-Satterthwaite degrees of
 * freedom; exp of its bounds, so never below -100%). GAIN only when the
 * whole interval is below zero (faster), LOSS when it is above.
 * change/lo/hi NAN when either side has fewer than two processes. more:
 * for an UNSURE one, the rounds more (one baseline and one setting
 * process each) that would decide it at the spread seen (a change of 0
 * never: -1; TML_TUNE_MORE_MAX + 1: more than that); -1 otherwise. */
typedef struct tml_tune_cmp {
    double base_ms, ms;        /* means */
    double change, lo, hi;     /* geometric-mean ratio - 1 and its interval */
    int verdict;
    int more;
} tml_tune_cmp;

void tml__tune_compare(const double *base, size_t nb, const double *cand, size_t nc,
                       tml_tune_cmp *out);

/* One arm: the baseline (settings "") or a setting, its processes. */
typedef struct tml_tune_arm {
    char settings[TML_TUNE_SETTING];
    char direction[40];
    double step_ms[TML_TUNE_RUNS];
    size_t n;
    int failures;              /* trial processes that gave no steady steps */
    char why[200];             /* the last failure, or why it was not tried */
    int skipped;               /* not tried (the budget) */
    tml_tune_cmp cmp;
    /* A setting on top of another's best (the loader's settings on the
     * best worker count): that arm, and the change against it, which must
     * be a gain too for this one to be recommended. -1: on the baseline. */
    int over;
    tml_tune_cmp vs_over;
} tml_tune_arm;

typedef struct tml_tune_result {
    const char *command;       /* the script and its arguments, as one line */
    const char *dir;           /* the tune folder */
    tml_tune_base base;
    tml_tune_arm arms[TML_TUNE_ARMS];   /* arms[0]: the baseline */
    size_t narms;
    int combo;                 /* the arm re-measuring the best settings together; -1 */
    int pick;                  /* the arm recommended; -1: none */
    int trials, repeats, warmup, steps;
    int warmup_asked, steps_asked;   /* before trials were shrunk to fit the budget */
    int rounds_added;          /* rounds added to undecided settings */
    double trial_s;            /* a trial's time here (start-up and steps); 0 unknown */
    double elapsed_s, budget_s;
} tml_tune_result;

/* Picks the recommendation: the combination if it gained, else the single
 * setting that gained most; -1 when none gained over its whole interval. */
int tml__tune_pick(const tml_tune_result *r);

/* Checks a setting string: known keys, values in range. 0, or
 * TML_EINVAL with the reason in why. */
int tml__tune_settings_check(const char *s, char *why, size_t cap);
/* a's settings with b's on top (b's value wins for a key in both), in the
 * order of the settings' table (num_workers first), so that the same
 * settings are always the same string. */
void tml__tune_merge(const char *a, const char *b, char *out, size_t cap);
/* The lines to put in the script for these settings, one per setting. */
void tml__tune_code(const char *settings, tml_strbuf *out);

#endif
