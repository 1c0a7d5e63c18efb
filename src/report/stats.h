/*
 * stats.h - Student's t, for the two places that hold one set of
 * measurements against another: `traceml compare` with several runs a
 * side (a Welch t-test on the runs' log step times, its minimal detectable
 * change) and `traceml tune`'s intervals over trial processes.
 *
 *     double p = tml__t_p2(t, df);            two-sided p of |t|
 *     double q = tml__t_quantile(0.975, df);  95% two-sided half-width's t
 *
 * Degrees of freedom need not be whole (Welch's are not).
 */
#ifndef TML_STATS_H
#define TML_STATS_H

/* P(|T| >= |t|) for Student's t with df (> 0) degrees of freedom; NAN for
 * a NAN t or df <= 0. */
double tml__t_p2(double t, double df);

/* The q quantile (0 < q < 1) of Student's t with df (> 0) degrees of
 * freedom; NAN outside those ranges. */
double tml__t_quantile(double q, double df);

#endif
