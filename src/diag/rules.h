/*
 * rules.h - the step-time rules' table, and what the rules share
 * (private to src/diag/).
 *
 * One rule is one file, src/diag/rule_<name>.c: a function that reads
 * the window (and what the rules before it found) and fills one
 * diagnosis when it fires, with the kinds it can produce. TML_RULES below
 * lists them in SPEC 4.1's priority: their row order is the order of the
 * issues, and one comparator (ahead(), diag.c) lets a rule whose
 * place is not fixed go ahead of the rows it outranks. A new rule is its
 * file, its row here, its golden test and its section of
 * docs/diagnosis.md.
 *
 * Before the table: NO DATA and WARMUP (rule_data.c) stop the evaluation;
 * after it, INCOMPLETE DATA (rule_data.c) is the verdict's caveat and an
 * issue of its own, BALANCED is the verdict when nothing fired, and
 * UNTRACED-HEAVY (rule_untraced.c) is the run's verdict over the step's.
 */
#ifndef TML_DIAG_RULES_H
#define TML_DIAG_RULES_H

#include <math.h>
#include <stdio.h>

#include "diag/diag.h"

/* Comparisons allow this much slack: a share of exactly 0.10 computed in
 * floating point meets a 0.10 threshold. */
#define TML_DIAG_EPS 1e-9

/* v meets threshold th (never when either is NAN). */
static inline int ge(double v, double th)
{
    return !isnan(v) && !isnan(th) && v >= th - TML_DIAG_EPS;
}

static inline double ms(double ns)
{
    return ns / 1e6;
}

static inline int pct(double share)
{
    return (int)lround(share * 100.0);
}

/* "R1/N0" */
static inline void fmt_rank(const tml_rank_window *r, char *out, size_t cap)
{
    snprintf(out, cap, "R%d/N%d", (int)r->rank, (int)r->node);
}

/* A step-time diagnosis (section "step_time"). */
static inline void diag_init(tml_diagnosis *d, const char *kind, const char *label,
                             tml_severity sev)
{
    tml__diag_init(d, kind, label, "step_time", sev);
}

/* ---- what a rule reads ---------------------------------------------- */

typedef struct tml_rule_ctx {
    const tml_window *w;
    const tml_thresholds *th;
    const tml_step_diag *st;     /* shares, untraced_wall, the straggler analysis */
    const char *multi;           /* " (median over N ranks)", or "" */
    unsigned fired;              /* bit TML_RULE_<ID>: the rows before this one that fired */
} tml_rule_ctx;

/* 1 with *d filled when the rule fires, else 0. */
typedef int (*tml_rule_fn)(const tml_rule_ctx *c, tml_diagnosis *d);

/*
 * The rules, in priority order: X(ID, name, floats_from, of_run).
 *
 * floats_from: -1, the row's place is fixed; else the row (TML_RULE_<ID>)
 * from which this rule goes ahead of every issue it outranks (more severe,
 * or as severe and at least as large a part of the time: diag.c's
 * comparator). of_run: its share is of the whole run, not of a steady
 * step (the comparator weighs the others' by the part of the run the
 * steady steps took). Each row has tml__rule_<name>() and
 * tml__rule_<name>_kinds (the kinds it can produce, NULL-terminated) in
 * its rule_*.c.
 */
#define TML_RULES(X)                                                   \
    X(STRAGGLER, straggler, -1, 0)                /* rule_straggler.c */ \
    X(INPUT, input, -1, 0)                        /* rule_input.c */     \
    X(COMM, comm, TML_RULE_INPUT, 0)              /* rule_comm.c */      \
    X(H2D, h2d, -1, 0)                            /* rule_h2d.c */       \
    X(RESIDUAL, residual, -1, 0)                  /* rule_residual.c */  \
    X(STRAGGLER_IN_COMM, straggler_in_comm, -1, 0) /* rule_straggler.c */ \
    X(COMPUTE, compute, -1, 0)                    /* rule_compute.c */   \
    X(EPOCH_START, epoch_start, TML_RULE_STRAGGLER, 1) /* rule_epoch.c */

typedef enum tml_rule_id {
#define TML_RULE_ENUM(ID, name, floats_from, of_run) TML_RULE_##ID,
    TML_RULES(TML_RULE_ENUM)
#undef TML_RULE_ENUM
    TML_RULE_COUNT
} tml_rule_id;

#define TML_RULE_DECL(ID, name, floats_from, of_run)                   \
    int tml__rule_##name(const tml_rule_ctx *c, tml_diagnosis *d);     \
    extern const char *const tml__rule_##name##_kinds[];
TML_RULES(TML_RULE_DECL)
#undef TML_RULE_DECL

/* ---- before and after the table (rule_data.c, rule_untraced.c) ------- */

/* NO DATA or WARMUP as out->primary when the window cannot be diagnosed;
 * 1 when it set one. */
int tml__rule_no_data(const tml_window *w, const tml_thresholds *th, size_t nactive,
                      tml_step_diag *out);
/* INCOMPLETE DATA: a required phase never observed that can matter. */
int tml__rule_incomplete(const tml_window *w, const tml_thresholds *th, tml_diagnosis *d);
/* The caveat INCOMPLETE DATA adds to the verdict v. */
void tml__rule_caveat(tml_diagnosis *v, const tml_diagnosis *inc);
/* out->untraced_wall and between_epochs_wall. */
void tml__untraced_wall(const tml_window *w, tml_step_diag *out);
/* UNTRACED-HEAVY over the step's verdict; 1 when it fired. */
int tml__rule_untraced_heavy(const tml_step_diag *st, const tml_thresholds *th,
                             tml_diagnosis *out);

/* ---- shares (diag.c) ------------------------------------------------- */

/* A rank's share of its Step Time outside every phase it measured. */
double tml__outside_share(const tml_rank_window *r, tml_metric unused, int unused2);
/* The median over the ranks with steps of f(rank, m, arg); NAN when none. */
double tml__median_of(const tml_window *w,
                      double (*f)(const tml_rank_window *, tml_metric, int), tml_metric m,
                      int arg);
/* Median over ranks of m / Step Time, or (of_wall) m / (Step Time + m). */
double tml__median_share(const tml_window *w, tml_metric m, int of_wall);
/* A share rule: kind at warn (WARNING) and crit (CRITICAL), Why "X took
 * N% of Step Time", Next `next`. */
int tml__share_issue(double share, double warn, double crit, const char *kind,
                     const char *label, tml_metric cause, const char *next,
                     const char *multi, tml_diagnosis *d);

/* ---- the machine (contention.c) -------------------------------------- */

/*
 * Close calls. Some Next lines choose between two pieces of advice by a
 * measured value against a threshold (a batch's fetch against what a
 * worker costs, the host CPU against HIGH CPU). A value near the
 * threshold falls on either side in identical runs, and the advice would
 * flip with it; so around each threshold a band gives one text that says
 * the call is close, names both ways and how to settle it (`traceml
 * tune`), the same whichever side the value fell on: it names the band,
 * not the value. Outside the band the advice is as before. The verdicts
 * and severities are not banded: only the Next text.
 *
 * A call: whether a reason against the advice holds clearly not, is too
 * close to call, or holds clearly.
 */
typedef enum tml_call { TML_CALL_NO, TML_CALL_CLOSE, TML_CALL_YES } tml_call;

/* The host CPU as the rules read it: HIGH CPU's figure when it fired, else
 * the measured average (NAN unsampled). */
double tml__host_cpu(const tml_window *w);
/* Is the host too busy for more workers (or ranks' collectives)? */
tml_call tml__host_busy_call(const tml_window *w);
/* "host CPU averaged between 75% and 85%, near HIGH CPU's 80%". */
void tml__host_cpu_band(char *out, size_t cap);
/* Do other processes, not the training's own tree, take the cores? */
int tml__others_take_cores(const tml_window *w);

/* ---- the straggler (rule_straggler.c) -------------------------------- */

/* Below straggler_warn, does the straggler explain a part of its peers'
 * exposed communication worth naming? */
int tml__straggler_in_comm(const tml_window *w, const tml_straggler *s);

#endif
