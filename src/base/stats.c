/*
 * stats.c - the shared statistics (stats.h). Student's t comes from the
 * regularized incomplete beta function: P(|T| > t) =
 * I_{df/(df+t^2)}(df/2, 1/2), and its quantiles by bisection on that
 * tail, which falls in t.
 */
#include "base/stats.h"

#include <math.h>
#include <stdlib.h>

int tml__cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Every element before k ends up no larger than v[k] and every one after
 * k no smaller (a summary of 8 ranks x 10,000 steps once spent most of
 * its time sorting). */
double tml__select_kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];
        double pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        size_t i = lo, j = hi;
        for (;;) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i >= j)
                break;
            double t = v[i];
            v[i++] = v[j];
            v[j--] = t;
        }
        /* v[lo..j] <= pivot <= v[j+1..hi] */
        if (k <= j)
            hi = j;
        else
            lo = j + 1;
    }
    return v[k];
}

double tml__median(double *v, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i]))
            v[k++] = v[i];
    if (k == 0)
        return NAN;
    double hi = tml__select_kth(v, k, k / 2);
    if (k % 2)
        return hi;
    double lo = v[0];          /* the largest of the lower half */
    for (size_t i = 1; i < k / 2; i++)
        if (v[i] > lo)
            lo = v[i];
    return (lo + hi) / 2.0;
}

double tml__percentile(double *v, size_t n, double p)
{
    if (n == 0)
        return NAN;
    double r = ceil(p * (double)n);
    size_t k = r < 1.0 ? 0 : (size_t)r - 1;
    return tml__select_kth(v, n, k < n ? k : n - 1);
}

void tml__mean_var(const double *x, size_t n, double *mean, double *var)
{
    double s = 0, ss = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    *mean = n ? s / (double)n : NAN;
    for (size_t i = 0; i < n; i++)
        ss += (x[i] - *mean) * (x[i] - *mean);
    *var = n > 1 ? ss / (double)(n - 1) : NAN;
}

/* The continued fraction of the regularized incomplete beta function
 * (Lentz's method), and I_x(a, b) itself. */
static double beta_cf(double a, double b, double x)
{
    const double tiny = 1e-300;
    double c = 1, d = 1 - (a + b) * x / (a + 1);
    d = fabs(d) < tiny ? tiny : d;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 300; m++) {
        double m2 = 2.0 * m, aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
        d = 1 + aa * d;
        d = fabs(d) < tiny ? tiny : d;
        c = 1 + aa / c;
        c = fabs(c) < tiny ? tiny : c;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
        d = 1 + aa * d;
        d = fabs(d) < tiny ? tiny : d;
        c = 1 + aa / c;
        c = fabs(c) < tiny ? tiny : c;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-14)
            break;
    }
    return h;
}

static double ibeta(double a, double b, double x)
{
    if (x <= 0)
        return 0;
    if (x >= 1)
        return 1;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log(1 - x);
    if (x < (a + 1) / (a + b + 2))
        return exp(lbt) * beta_cf(a, b, x) / a;
    return 1 - exp(lbt) * beta_cf(b, a, 1 - x) / b;
}

double tml__t_p2(double t, double df)
{
    if (isnan(t) || !(df > 0))
        return NAN;
    if (isinf(t))
        return 0;
    return ibeta(df / 2, 0.5, df / (df + t * t));
}

double tml__t_quantile(double q, double df)
{
    if (!(q > 0 && q < 1) || !(df > 0))
        return NAN;
    if (q == 0.5)
        return 0;
    double want = 2 * (q > 0.5 ? 1 - q : q), lo = 0, hi = 1;
    while (tml__t_p2(hi, df) > want && hi < 1e12)
        hi *= 2;
    for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
        double mid = (lo + hi) / 2;
        if (tml__t_p2(mid, df) > want)
            lo = mid;
        else
            hi = mid;
    }
    double t = (lo + hi) / 2;
    return q > 0.5 ? t : -t;
}

double tml__t_detectable(double alpha, double power, double df)
{
    return tml__t_quantile(1 - alpha / 2, df) + tml__t_quantile(power, df);
}

double tml__welch_df(double va, double na, double vb, double nb)
{
    double qa = va / na, qb = vb / nb;
    return (qa + qb) * (qa + qb) / (qa * qa / (na - 1) + qb * qb / (nb - 1));
}

double tml__welch_half_width(double va, double na, double vb, double nb, double q)
{
    double se = sqrt(va / na + vb / nb);
    if (!(se > 0))
        return 0;
    double df = tml__welch_df(va, na, vb, nb);
    return tml__t_quantile(q, df < 1 ? 1 : df) * se;
}

double tml__mann_whitney_p(const double *a, size_t n, const double *b, size_t m)
{
    typedef struct { double v; int from_a; } obs;
    size_t total = n + m;
    if (n == 0 || m == 0)
        return NAN;
    obs *x = malloc(total * sizeof(*x));
    if (!x)
        return NAN;
    for (size_t i = 0; i < total; i++) {
        x[i].v = i < n ? a[i] : b[i - n];
        x[i].from_a = i < n;
    }
    qsort(x, total, sizeof(*x), tml__cmp_double);   /* the value comes first */
    double rank_a = 0, ties = 0;
    for (size_t i = 0; i < total;) {
        size_t j = i;
        while (j < total && x[j].v == x[i].v)
            j++;
        double rank = (double)(i + 1 + j) / 2.0, t = (double)(j - i);
        for (size_t k = i; k < j; k++)
            rank_a += x[k].from_a ? rank : 0;
        ties += t * t * t - t;
        i = j;
    }
    free(x);
    double nn = (double)n, mm = (double)m, tt = (double)total;
    double u = rank_a - nn * (nn + 1) / 2, mu = nn * mm / 2;
    double var = nn * mm / 12.0 * ((tt + 1) - ties / (tt * (tt - 1)));
    if (!(var > 0))
        return 1.0;
    double z = (fabs(u - mu) - 0.5) / sqrt(var);
    return erfc((z > 0 ? z : 0) / sqrt(2.0));
}
