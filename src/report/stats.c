/*
 * stats.c - Student's t from the regularized incomplete beta function
 * (see stats.h): P(|T| > t) = I_{df/(df+t^2)}(df/2, 1/2), and its
 * quantiles by bisection on that tail, which falls in t.
 */
#include "report/stats.h"

#include <math.h>

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
