/*
 * test_stats.c - the shared statistics (src/base/stats.c): selection,
 * medians and percentiles against sorting, Mann-Whitney against its
 * normal approximation by hand, Student's t against the tables, and
 * Welch's degrees of freedom and interval against the formula.
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "base/stats.h"

/* The median and percentiles of a shuffled series are those of its sorted
 * copy: the median of an even count the mean of the middle two, NANs left
 * out of the median; the nearest-rank percentile. */
static void test_median_percentile(void)
{
    double v[9] = {7, 1, 9, 3, 5, 2, 8, 6, 4};
    CHECK_NEAR(tml__median(v, 9), 5, 0);
    double e[6] = {4, 1, 3, 2, 6, 5};
    CHECK_NEAR(tml__median(e, 6), 3.5, 0);
    double n[5] = {NAN, 2, NAN, 10, 4};
    CHECK_NEAR(tml__median(n, 5), 4, 0);
    double none[2] = {NAN, NAN};
    CHECK(isnan(tml__median(none, 2)));
    CHECK(isnan(tml__median(none, 0)));
    double p[10] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
    CHECK_NEAR(tml__percentile(p, 10, 0.90), 9, 0);
    CHECK_NEAR(tml__percentile(p, 10, 0.50), 5, 0);
    CHECK_NEAR(tml__percentile(p, 10, 0), 1, 0);
    CHECK_NEAR(tml__percentile(p, 10, 1), 10, 0);
    CHECK(isnan(tml__percentile(p, 0, 0.5)));
    /* every k of a series with ties, against qsort */
    double s[31], sorted[31];
    for (int i = 0; i < 31; i++)
        s[i] = sorted[i] = (double)((i * 17) % 11);
    qsort(sorted, 31, sizeof(double), tml__cmp_double);
    for (size_t k = 0; k < 31; k++) {
        double w[31];
        for (int i = 0; i < 31; i++)
            w[i] = s[i];
        CHECK_NEAR(tml__select_kth(w, 31, k), sorted[k], 0);
    }
    double x[4] = {1, 2, 3, 4}, mean, var;
    tml__mean_var(x, 4, &mean, &var);
    CHECK_NEAR(mean, 2.5, 1e-15);
    CHECK_NEAR(var, 5.0 / 3.0, 1e-15);
    tml__mean_var(x, 1, &mean, &var);
    CHECK(isnan(var));
}

static void test_mann_whitney(void)
{
    double a[5] = {1, 2, 3, 4, 5}, b[5] = {6, 7, 8, 9, 10}, c[5] = {3, 3, 3, 3, 3};
    CHECK_NEAR(tml__mann_whitney_p(a, 5, b, 5), 0.0122, 0.0005);   /* U = 0, normal approx */
    CHECK_NEAR(tml__mann_whitney_p(b, 5, a, 5), 0.0122, 0.0005);   /* two-sided */
    CHECK_NEAR(tml__mann_whitney_p(a, 5, a, 5), 1.0, 0.05);
    CHECK_NEAR(tml__mann_whitney_p(c, 5, c, 5), 1.0, 1e-12);       /* all tied */
    double x[20], y[20];
    for (int i = 0; i < 20; i++) {
        x[i] = 100 + i * 0.1;
        y[i] = 110 + i * 0.1;
    }
    CHECK(tml__mann_whitney_p(x, 20, y, 20) < 1e-6);
}

/* Student's t against the tables' values (4 decimals), whole and
 * fractional degrees of freedom (Welch's are fractional); 31-119 degrees
 * of freedom too, where tune's old table's 2.000 was narrower. */
static void test_student_t(void)
{
    static const struct { double df, t; } t975[] = {
        {1, 12.7062}, {2, 4.3027}, {3, 3.1824}, {5, 2.5706}, {10, 2.2281}, {30, 2.0423},
        {40, 2.0211}, {60, 2.0003}, {100, 1.9840}, {120, 1.9799}, {1e6, 1.9600}};
    for (size_t i = 0; i < sizeof(t975) / sizeof(t975[0]); i++)
        CHECK_NEAR(tml__t_quantile(0.975, t975[i].df), t975[i].t, 6e-5);
    CHECK_NEAR(tml__t_quantile(0.95, 10), 1.8125, 6e-5);
    CHECK_NEAR(tml__t_quantile(0.995, 4), 4.6041, 6e-5);
    /* between 2 (4.303) and 3 (3.182) degrees of freedom, not either */
    double t = tml__t_quantile(0.975, 2.5);
    CHECK(t < 4.3027 && t > 3.1824);
    CHECK(isnan(tml__t_quantile(0.975, 0)));
    CHECK(isnan(tml__t_quantile(1.2, 5)));
    CHECK_NEAR(tml__t_quantile(0.975, 1), 12.706, 0.001);
    CHECK_NEAR(tml__t_quantile(0.975, 4), 2.776, 0.001);
    CHECK_NEAR(tml__t_quantile(0.995, 10), 3.169, 0.001);
    CHECK_NEAR(tml__t_quantile(0.8, 4), 0.941, 0.001);
    CHECK_NEAR(tml__t_quantile(0.025, 30), -2.042, 0.001);
    CHECK_NEAR(tml__t_p2(2.776, 4), 0.05, 0.0005);
    CHECK_NEAR(tml__t_p2(0, 7), 1.0, 1e-12);
    CHECK_NEAR(tml__t_p2(1.96, 1e6), 0.05, 0.0005);
}

/* Welch: equal variances and sizes give 2n - 2 degrees of freedom;
 * unequal ones the Welch-Satterthwaite value by hand; the half-width is
 * t at those degrees of freedom times the standard error, a point when
 * both samples are constant. The detectable change's factor is the sum
 * of the two quantiles. */
static void test_welch(void)
{
    CHECK_NEAR(tml__welch_df(1, 3, 1, 3), 4, 1e-12);
    double qa = 4.0 / 5, qb = 1.0 / 10;
    CHECK_NEAR(tml__welch_df(4, 5, 1, 10), (qa + qb) * (qa + qb) / (qa * qa / 4 + qb * qb / 9),
               1e-12);
    CHECK_NEAR(tml__welch_df(4, 5, 1, 10), 5.0276, 1e-4);
    CHECK(isnan(tml__welch_df(0, 3, 0, 3)));
    CHECK_NEAR(tml__welch_half_width(1, 3, 1, 3, 0.975), 2.7764451 * sqrt(2.0 / 3), 1e-6);
    CHECK_NEAR(tml__welch_half_width(0, 3, 0, 4, 0.975), 0, 0);
    /* fewer than one degree of freedom counts as one */
    CHECK_NEAR(tml__welch_half_width(100, 2, 1e-9, 50, 0.975), 12.7062 * sqrt(50), 1e-3);
    CHECK_NEAR(tml__t_detectable(0.01, 0.8, 10), 3.1693 + 0.8791, 2e-4);
}

#define TESTS X(test_median_percentile) X(test_mann_whitney) X(test_student_t) X(test_welch)
#include "harness.h"
