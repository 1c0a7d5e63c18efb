/*
 * contention.c - the machine's figures as the rules read them: other
 * processes' share of the cores, the training's wait for one, the host CPU against
 * HIGH CPU (docs/diagnosis.md, "A shared machine" and "Close calls").
 */
#include "diag/rules.h"

void tml__contention_init(tml_contention *c)
{
    c->cores = 0;
    c->node = -1;
    c->host_cpu_percent = c->training_cpu_percent = c->other_cpu_percent = NAN;
    c->runq_wait_percent = NAN;
    c->gpu_shared = -1;
}

void tml__contention_compute(tml_contention *c, int32_t node, int32_t cores, double host_pct,
                             double trees_pct, double runq_pct)
{
    tml__contention_init(c);
    c->node = node;
    c->cores = cores > 0 ? cores : 0;
    c->host_cpu_percent = isfinite(host_pct) ? (host_pct < 0 ? 0 : host_pct > 100 ? 100 : host_pct)
                                             : NAN;
    c->runq_wait_percent = isfinite(runq_pct) && runq_pct >= 0 ? runq_pct : NAN;
    if (cores > 0 && isfinite(trees_pct) && trees_pct >= 0) {
        double t = trees_pct / (double)cores;
        c->training_cpu_percent = t > 100 ? 100 : t;
    }
    if (!isnan(c->host_cpu_percent) && !isnan(c->training_cpu_percent)) {
        double o = c->host_cpu_percent - c->training_cpu_percent;
        c->other_cpu_percent = o > 0 ? o : 0;
    }
}

int tml__gpu_shared_of(const double *most, size_t n)
{
    int shared = -1;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(most[i]) || most[i] < 0)
            continue;
        if (most[i] >= 1)
            return 1;
        shared = 0;
    }
    return shared;
}

int tml__contended(const tml_contention *c)
{
    return ge(c->other_cpu_percent, TML_CONTENTION_OTHER) &&
           ge(c->runq_wait_percent, TML_CONTENTION_RUNQ);
}

/* Do other processes, not the training's own tree, take the cores? The
 * machine is contended (tml__contended) and the others take at least what
 * the training takes. Then more DataLoader workers do not so much compete
 * with the training as win it a larger share of the cores (issue 45:
 * beside two busy loops, one more worker was 25-70% faster in 7 of 8 A/B
 * pairs), and which count wins is for `traceml tune` to measure. */
int tml__others_take_cores(const tml_window *w)
{
    const tml_contention *c = &w->contention;
    return tml__contended(c) && !(c->training_cpu_percent > c->other_cpu_percent);
}

/* The host CPU as the rules read it: HIGH CPU's figure when it fired, else
 * the measured average (NAN unsampled). */
double tml__host_cpu(const tml_window *w)
{
    return w->host_cpu_busy > 0 ? w->host_cpu_busy : w->host_cpu_percent;
}

/* Is the host too busy for more workers (or ranks' collectives)? A HIGH
 * CPU below the band (a caller's own figure) stays a yes. */
tml_call tml__host_busy_call(const tml_window *w)
{
    double cpu = tml__host_cpu(w);
    if (ge(cpu, TML_HOST_CPU_HIGH + TML_HOST_CPU_CLOSE))
        return TML_CALL_YES;
    if (ge(cpu, TML_HOST_CPU_HIGH - TML_HOST_CPU_CLOSE))
        return TML_CALL_CLOSE;
    return w->host_cpu_busy > 0 ? TML_CALL_YES : TML_CALL_NO;
}

/* "host CPU averaged between 75% and 85%, near HIGH CPU's 80%": the band,
 * not the value, so that either side of the threshold reads the same. */
void tml__host_cpu_band(char *out, size_t cap)
{
    snprintf(out, cap, "host CPU averaged between %.0f%% and %.0f%%, near HIGH CPU's %.0f%%",
             TML_HOST_CPU_HIGH - TML_HOST_CPU_CLOSE, TML_HOST_CPU_HIGH + TML_HOST_CPU_CLOSE,
             TML_HOST_CPU_HIGH);
}
