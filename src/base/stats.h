/*
 * stats.h - the statistics every part shares, in one home: the
 * diagnosis's medians and percentiles over a window's steps, `traceml
 * compare`'s Mann-Whitney test on block medians and Welch t-test on runs,
 * `traceml tune`'s intervals over trial processes. A new statistic comes
 * here, with its test in tests/unit/test_stats.c; what a figure means for
 * a verdict stays with the rule that reads it (src/diag/, src/judge/).
 *
 *     qsort(v, n, sizeof(*v), tml__cmp_double);
 *     double m = tml__median(v, n);            // reorders v; NANs left out
 *     double p = tml__t_p2(t, df);             // two-sided p of |t|
 *     double q = tml__t_quantile(0.975, df);   // 95% two-sided half-width's t
 *     double h = tml__welch_half_width(va, na, vb, nb, 0.975);   // 95%
 *
 * Degrees of freedom need not be whole (Welch's are not).
 */
#ifndef TML_STATS_H
#define TML_STATS_H

#include <stddef.h>

/* qsort's comparator of doubles, ascending. */
int tml__cmp_double(const void *a, const void *b);

/* The k-th smallest (0-based, k < n) of v, which is reordered (Hoare's
 * selection: linear on average). v holds no NAN. */
double tml__select_kth(double *v, size_t n, size_t k);
/* The median of v's values that are not NAN (v is reordered); NAN when
 * there are none. */
double tml__median(double *v, size_t n);
/* The nearest-rank p percentile (0 <= p <= 1) of v (no NAN; reordered);
 * NAN when n is 0. */
double tml__percentile(double *v, size_t n, double p);
/* The mean and the sample variance (n - 1) of x: NAN where n is too small. */
void tml__mean_var(const double *x, size_t n, double *mean, double *var);

/* Two-sided p-value of the Mann-Whitney U test (normal approximation with
 * tie and continuity corrections); 1 when every value is equal, NAN when
 * a side is empty. */
double tml__mann_whitney_p(const double *a, size_t n, const double *b, size_t m);

/* P(|T| >= |t|) for Student's t with df (> 0) degrees of freedom; NAN for
 * a NAN t or df <= 0. */
double tml__t_p2(double t, double df);

/* The q quantile (0 < q < 1) of Student's t with df (> 0) degrees of
 * freedom; NAN outside those ranges. */
double tml__t_quantile(double q, double df);
/* The multiple of its standard error a change must reach for a two-sided
 * t-test at alpha to see it with this power (0.8: 80%), at df degrees of
 * freedom: t(1 - alpha/2) + t(power), what the minimal detectable change
 * is made of. */
double tml__t_detectable(double alpha, double power, double df);

/* Welch's: two samples of sizes na, nb (>= 2 each; not whole numbers when
 * a caller asks "with k more") and sample variances va, vb. The
 * Welch-Satterthwaite degrees of freedom of the difference of their means
 * (NAN when both variances are 0), and the half-width of its interval at
 * the two-sided quantile q (0.975: 95%), Student's t at those degrees of
 * freedom (at least 1) times the standard error (0 when both variances
 * are 0: a point). */
double tml__welch_df(double va, double na, double vb, double nb);
double tml__welch_half_width(double va, double na, double vb, double nb, double q);

#endif
