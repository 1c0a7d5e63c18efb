/*
 * resources.c - the step memory, system and process sections' rules
 * (SPEC 4.2, 4.3).
 *
 * Only step time can be the run's root cause (SPEC 4.4); these sections
 * report resource findings beside it, each with its own verdict, every
 * finding as an issue, and structured evidence (tml_res_evidence) that
 * names the value, the threshold and where it was seen. Like diag.c, every
 * rule is a pure function of plain structs, tested on both sides of its
 * thresholds (tests/unit/test_resources.c), and never reasons from a
 * missing value: NAN compares false, so what was not sampled can neither
 * fire a finding nor hide one.
 *
 * Memory trends. A per-step peak series (CUDA reserved on GPU runs, RSS on
 * CPU-only runs) is cut in three bands (early, middle, recent); it is
 * RISING when each band's mean is above the previous one and the recent
 * band is materially above the early one (2% and 32 MiB: allocator and
 * page-cache noise is smaller than that). It CREEPs when it is rising and
 * the fitted growth over the window (least-squares slope x steps) reaches
 * the creep amount (1 GiB by default). The slope is the growth per step;
 * the projected full step is where the fitted line meets the capacity.
 *
 * Thresholds not in tml_thresholds are SPEC 4.3's, fixed here.
 */
#include "diag/diag.h"
#include "base/fmt.h"
#include "base/stats.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EPS 1e-9
#define MIB (1024.0 * 1024.0)
#define GB 1e9

/* SPEC 4.3 */
#define SYS_GPU_MEM_VERY_HIGH 90.0
#define SYS_GPU_MEM_HIGH 80.0
#define SYS_GPU_TEMP_HIGH 85.0
#define SYS_GPU_POWER_HIGH 80.0
#define SYS_RAM_HIGH 80.0
#define SYS_CPU_HIGH TML_HOST_CPU_HIGH   /* diag.h: the step-time rules use it too */
#define SYS_GPU_UTIL_LOW 30.0
#define SYS_GPU_UTIL_MODERATE 70.0
#define PROC_GPU_MEM_VERY_HIGH 90.0
#define PROC_GPU_MEM_HIGH 80.0
#define PROC_RESERVED_RATIO 2.0
#define PROC_RESERVED_RATIO_MIN_PRESSURE 30.0
#define PROC_RSS_HIGH 80.0
#define PROC_CPU_HIGH 80.0
/* SPEC 4.2 IMBALANCE; reused for RANK GPU MEMORY IMBALANCE */
#define IMB_WARN_SKEW 0.20
#define IMB_WARN_PRESSURE 0.30
#define IMB_CRIT_SKEW 0.30
#define IMB_CRIT_PRESSURE 0.50
/* MEMORY RISING: the recent band above the early one by both */
#define RISE_MIN_FRACTION 0.02
#define RISE_MIN_BYTES (32.0 * MIB)

static int ge(double v, double th)
{
    return !isnan(v) && !isnan(th) && v >= th - EPS;
}


static void add_issue(tml_section_diag *out, const tml_diagnosis *d)
{
    if (out->nissues < TML_DIAG_MAX_ISSUES)
        out->issues[out->nissues++] = *d;
}

/* The primary finding: the most severe, the first among equals. */
static void pick_primary(tml_section_diag *out)
{
    size_t best = 0;
    for (size_t i = 1; i < out->nissues; i++)
        if (out->issues[i].severity > out->issues[best].severity)
            best = i;
    out->primary = out->issues[best];
}

static void res_init(tml_diagnosis *d, const char *kind, const char *label,
                     const char *section, tml_severity sev, const char *metric,
                     double value, double threshold)
{
    tml__diag_init(d, kind, label, section, sev);
    d->res.valid = 1;
    d->res.metric = metric;
    d->res.value = value;
    d->res.threshold = threshold;
}

/* ---- step memory ------------------------------------------------------ */

double tml__slope(const double *v, size_t n)
{
    if (n < 2)
        return NAN;
    double mx = (double)(n - 1) / 2.0, my = 0, sxy = 0, sxx = 0;
    for (size_t i = 0; i < n; i++)
        my += v[i];
    my /= (double)n;
    for (size_t i = 0; i < n; i++) {
        double dx = (double)i - mx;
        sxy += dx * (v[i] - my);
        sxx += dx * dx;
    }
    return sxx > 0 ? sxy / sxx : NAN;
}

static double mean_of(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return n ? s / (double)n : NAN;
}

static double max_of(const double *v, size_t n)
{
    double m = NAN;
    for (size_t i = 0; i < n; i++)
        if (isnan(m) || v[i] > m)
            m = v[i];
    return m;
}

typedef struct trend {
    int rising;
    double slope, growth, last;
} trend;

static trend trend_of(const tml_mem_rank *r)
{
    trend t = { 0, NAN, NAN, NAN };
    size_t n = r->n, b = n / 3;
    if (n < 3 || b == 0)
        return t;
    double e = mean_of(r->series, b);
    double m = mean_of(r->series + b, n - 2 * b);
    double rc = mean_of(r->series + (n - b), b);
    double rise_min = e * RISE_MIN_FRACTION > RISE_MIN_BYTES ? e * RISE_MIN_FRACTION : RISE_MIN_BYTES;
    t.rising = m > e && rc > m && rc - e >= rise_min;
    t.slope = tml__slope(r->series, n);
    t.growth = t.slope * (double)(n - 1);
    t.last = r->series[n - 1];
    return t;
}

/* NO GPU or BALANCED as the primary when no rank has enough steps to
 * analyse; returns 1 when it set one. */
static int memory_too_short(const tml_mem_input *in, const tml_thresholds *th,
                            tml_section_diag *out)
{
    size_t analysed = 0, longest = 0;

    for (size_t i = 0; i < in->nranks; i++) {
        if (in->ranks[i].n > longest)
            longest = in->ranks[i].n;
        if (in->ranks[i].n >= th->mem_min_steps)
            analysed++;
    }
    if (!in->gpu && analysed == 0) {
        tml__diag_init(&out->primary, "NO_GPU", "NO GPU", "step_memory", TML_SEV_INFO);
        snprintf(out->primary.why, sizeof(out->primary.why), "%s",
                 longest ? "No CUDA memory figures were recorded (CPU-only run); too few steps to analyse RSS."
                         : "No CUDA memory figures were recorded (CPU-only run).");
        return 1;
    }
    if (analysed == 0) {
        tml__diag_init(&out->primary, "BALANCED", "BALANCED", "step_memory", TML_SEV_INFO);
        snprintf(out->primary.why, sizeof(out->primary.why),
                 "Only %zu steps with memory figures; the memory rules need %zu.", longest,
                 th->mem_min_steps);
        return 1;
    }
    return 0;
}

/* What the per-rank pass finds: the worst peak, every analysed rank's
 * peak, each rank's trend and the ranks with the largest growth. */
typedef struct mem_scan {
    int worst, creep, rising;     /* rank indices, -1 none */
    double worst_peak;
    double *peaks;                /* npeaks entries */
    size_t npeaks;
    trend *tr;                    /* per rank */
} mem_scan;

/* Per rank with enough steps: its peak and trend; the worst peak and the
 * ranks that grew the most. */
static void scan_ranks(const tml_mem_input *in, const tml_thresholds *th, mem_scan *sc)
{
    for (size_t i = 0; i < in->nranks; i++) {
        const tml_mem_rank *r = &in->ranks[i];
        if (r->n < th->mem_min_steps)
            continue;
        double pk = max_of(r->series, r->n);
        sc->peaks[sc->npeaks++] = pk;
        if (sc->worst < 0 || pk > sc->worst_peak) {
            sc->worst = (int)i;
            sc->worst_peak = pk;
        }
        sc->tr[i] = trend_of(r);
        double gmin = (double)th->creep_mb * MIB;
        if (sc->tr[i].rising && ge(sc->tr[i].growth, gmin) &&
            (sc->creep < 0 || sc->tr[i].growth > sc->tr[sc->creep].growth))
            sc->creep = (int)i;
        if (sc->tr[i].rising && (sc->rising < 0 || sc->tr[i].growth > sc->tr[sc->rising].growth))
            sc->rising = (int)i;
    }
}

/* HIGH PRESSURE (GPU): the worst rank's peak near the device's capacity. */
static void high_pressure_rule(const tml_mem_input *in, const tml_thresholds *th,
                               const mem_scan *sc, double pressure, tml_section_diag *out)
{
    const tml_mem_rank *wr = &in->ranks[sc->worst];
    tml_diagnosis d;
    char a[32], b[32];

    if (!in->gpu || !ge(pressure, th->mem_pressure_warn))
        return;
    tml_severity sev = ge(pressure, th->mem_pressure_crit) ? TML_SEV_CRITICAL : TML_SEV_WARNING;
    res_init(&d, "HIGH_PRESSURE", "HIGH PRESSURE", "step_memory", sev, "peak_reserved_percent",
             100.0 * pressure,
             100.0 * (sev == TML_SEV_CRITICAL ? th->mem_pressure_crit : th->mem_pressure_warn));
    d.res.rank = wr->rank;
    d.res.node = wr->node;
    d.res.capacity_bytes = wr->capacity_bytes;
    tml__fmt_bytes(sc->worst_peak, a, sizeof(a));
    tml__fmt_bytes(wr->capacity_bytes, b, sizeof(b));
    snprintf(d.why, sizeof(d.why), "Peak reserved reached %s of %s (%.0f%% of device memory) on R%d/N%d.",
             a, b, 100.0 * pressure, (int)wr->rank, (int)wr->node);
    snprintf(d.next, sizeof(d.next),
             "Close to out-of-memory: reduce batch size or activation memory (mixed precision, activation checkpointing), or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation.");
    add_issue(out, &d);
}

/* The median of the other ranks, of n >= 2 values sorted ascending whose
 * largest is the rank compared: compared with a median that counts it, the
 * largest of two ranks would be compared with itself. The upper median of
 * the n - 1 others (with two ranks, the other one). */
static double others_median(const double *sorted, size_t n)
{
    return sorted[(n - 1) / 2];
}

/* How a rank's figure is compared: "the other rank's", "the other
 * ranks' median". */
static const char *others_name(size_t n)
{
    return n == 2 ? "the other rank's" : "the other ranks' median";
}

/* IMBALANCE (GPU, several ranks): the worst peak far above the other
 * ranks' while under pressure. Sorts sc->peaks. */
static void imbalance_rule(const tml_mem_input *in, mem_scan *sc, double pressure,
                           tml_section_diag *out)
{
    const tml_mem_rank *wr = &in->ranks[sc->worst];
    tml_diagnosis d;
    char a[32], b[32];

    if (!in->gpu || sc->npeaks < 2)
        return;
    qsort(sc->peaks, sc->npeaks, sizeof(double), tml__cmp_double);
    double med = others_median(sc->peaks, sc->npeaks);
    double skew = med > 0 ? (sc->worst_peak - med) / med : NAN;
    tml_severity sev;
    if (ge(skew, IMB_CRIT_SKEW) && ge(pressure, IMB_CRIT_PRESSURE))
        sev = TML_SEV_CRITICAL;
    else if (ge(skew, IMB_WARN_SKEW) && ge(pressure, IMB_WARN_PRESSURE))
        sev = TML_SEV_WARNING;
    else
        return;
    res_init(&d, "IMBALANCE", "IMBALANCE", "step_memory", sev, "rank_skew_percent",
             100.0 * skew, 100.0 * (sev == TML_SEV_CRITICAL ? IMB_CRIT_SKEW : IMB_WARN_SKEW));
    d.res.rank = wr->rank;
    d.res.node = wr->node;
    d.res.capacity_bytes = wr->capacity_bytes;
    tml__fmt_bytes(sc->worst_peak, a, sizeof(a));
    tml__fmt_bytes(med, b, sizeof(b));
    snprintf(d.why, sizeof(d.why),
             "R%d/N%d peaks at %s reserved, %.0f%% above %s %s (%.0f%% of device memory).",
             (int)wr->rank, (int)wr->node, a, 100.0 * skew, others_name(sc->npeaks), b,
             100.0 * pressure);
    snprintf(d.next, sizeof(d.next),
             "Look for uneven work across ranks: unequal batch or sequence lengths, rank-0-only evaluation or logging state, unsharded parameters.");
    add_issue(out, &d);
}

/* MEMORY CREEP, else MEMORY RISING, on the rank that grew the most, with
 * the step where the fitted line meets the capacity. */
static void trend_rule(const tml_mem_input *in, const tml_thresholds *th, const mem_scan *sc,
                       tml_section_diag *out)
{
    tml_diagnosis d;
    char a[32], b[32], c[64];
    int t = sc->creep >= 0 ? sc->creep : sc->rising;

    if (t < 0)
        return;
    const tml_mem_rank *r = &in->ranks[t];
    const trend *x = &sc->tr[t];
    int is_creep = sc->creep >= 0;
    res_init(&d, is_creep ? "MEMORY_CREEP" : "MEMORY_RISING",
             is_creep ? "MEMORY CREEP" : "MEMORY RISING", "step_memory",
             is_creep ? TML_SEV_WARNING : TML_SEV_INFO, "growth_bytes", x->growth,
             is_creep ? (double)th->creep_mb * MIB : NAN);
    d.res.rank = r->rank;
    d.res.node = r->node;
    d.res.growth_bytes_per_step = x->slope;
    d.res.growth_bytes = x->growth;
    d.res.capacity_bytes = r->capacity_bytes;
    uint64_t last_step = r->steps ? r->steps[r->n - 1] : (uint64_t)(r->n - 1);
    if (r->capacity_bytes > 0 && x->slope > 0) {
        double left = r->capacity_bytes - x->last;
        d.res.projected_full_step = (double)last_step + (left > 0 ? ceil(left / x->slope) : 0);
    }
    tml__fmt_bytes(x->growth, a, sizeof(a));
    tml__fmt_bytes(x->slope, b, sizeof(b));
    c[0] = '\0';
    if (!isnan(d.res.projected_full_step))
        snprintf(c, sizeof(c), "; %s would be full at step %.0f",
                 in->gpu ? "the device" : "host RAM", d.res.projected_full_step);
    snprintf(d.why, sizeof(d.why), "%s of R%d/N%d grew by %s over %zu steps (%s/step)%s.",
             in->gpu ? "Per-step peak reserved" : "Per-step RSS", (int)r->rank, (int)r->node,
             a, r->n, b, c);
    snprintf(d.next, sizeof(d.next), "%s",
             is_creep ? "Look for tensors kept across steps: losses or outputs appended to lists without .item()/.detach(), growing caches, logging references."
                      : "Watch the trend: if it keeps growing, look for tensors kept across steps.");
    add_issue(out, &d);
}

/* BALANCED: no memory rule fired; the Why line quotes the worst peak. */
static void memory_balanced(const tml_mem_input *in, double worst_peak, double pressure,
                            tml_section_diag *out)
{
    char a[32], b[32];

    tml__diag_init(&out->primary, "BALANCED", "BALANCED", "step_memory", TML_SEV_INFO);
    tml__fmt_bytes(worst_peak, a, sizeof(a));
    if (in->gpu)
        snprintf(out->primary.why, sizeof(out->primary.why),
                 "No memory rule fired: peak reserved %s (%s of device memory), no upward trend.", a,
                 isnan(pressure) ? "n/a" : (snprintf(b, sizeof(b), "%.0f%%", 100.0 * pressure), b));
    else
        snprintf(out->primary.why, sizeof(out->primary.why),
                 "No memory rule fired: per-step RSS (CPU-only run) peaks at %s with no upward trend.", a);
}

void tml__diag_memory(const tml_mem_input *in, const tml_thresholds *th_in,
                      tml_section_diag *out)
{
    tml_thresholds defaults;
    const tml_thresholds *th = th_in;

    if (!th) {
        tml__thresholds_default(&defaults);
        th = &defaults;
    }
    memset(out, 0, sizeof(*out));
    if (memory_too_short(in, th, out))
        return;

    mem_scan sc = { -1, -1, -1, NAN, NULL, 0, NULL };
    sc.peaks = calloc(in->nranks, sizeof(double));
    sc.tr = calloc(in->nranks, sizeof(trend));
    if (!sc.peaks || !sc.tr) {
        free(sc.peaks);
        free(sc.tr);
        tml__diag_init(&out->primary, "BALANCED", "BALANCED", "step_memory", TML_SEV_INFO);
        snprintf(out->primary.why, sizeof(out->primary.why), "Out of memory while analysing.");
        return;
    }
    scan_ranks(in, th, &sc);

    const tml_mem_rank *wr = &in->ranks[sc.worst];
    double pressure = wr->capacity_bytes > 0 ? sc.worst_peak / wr->capacity_bytes : NAN;
    high_pressure_rule(in, th, &sc, pressure, out);
    imbalance_rule(in, &sc, pressure, out);
    trend_rule(in, th, &sc, out);
    free(sc.peaks);
    free(sc.tr);

    if (out->nissues) {
        pick_primary(out);
        return;
    }
    memory_balanced(in, sc.worst_peak, pressure, out);
}

/* ---- system ----------------------------------------------------------- */

/* Index of the node with the largest value of field off, -1 none. */
static int worst_node(const tml_sys_node *nodes, size_t n, size_t off)
{
    return tml__rows_argmax(nodes, n, sizeof(*nodes), off, TML_ROWS_PLAIN, NULL);
}

static void sys_finding(tml_section_diag *out, const tml_sys_node *nd, const char *kind,
                        const char *label, tml_severity sev, const char *metric, double value,
                        double threshold, const char *next, const char *fmt, ...)
    __attribute__((format(printf, 10, 11)));

static void sys_finding(tml_section_diag *out, const tml_sys_node *nd, const char *kind,
                        const char *label, tml_severity sev, const char *metric, double value,
                        double threshold, const char *next, const char *fmt, ...)
{
    tml_diagnosis d;
    va_list ap;
    res_init(&d, kind, label, "system", sev, metric, value, threshold);
    if (nd) {
        d.res.node = nd->node;
        d.res.gpu = nd->worst_gpu;
    }
    va_start(ap, fmt);
    vsnprintf(d.why, sizeof(d.why), fmt, ap);
    va_end(ap);
    snprintf(d.next, sizeof(d.next), "%s", next);
    add_issue(out, &d);
}

/* Mean GPU utilization over the nodes that report it (NAN none); counts
 * the samples taken on every node. */
static double mean_gpu_util(const tml_sys_node *nodes, size_t n, size_t *samples)
{
    size_t ngpu = 0;
    double util = 0;

    *samples = 0;
    for (size_t i = 0; i < n; i++) {
        *samples += nodes[i].samples;
        if (!isnan(nodes[i].gpu_util_percent)) {
            util += nodes[i].gpu_util_percent;
            ngpu++;
        }
    }
    return ngpu ? util / (double)ngpu : NAN;
}

/* The node with the largest peak share of host RAM, -1 none. */
static int worst_ram_node(const tml_sys_node *nodes, size_t n, double *percent)
{
    int r = tml__rows_argmax(nodes, n, sizeof(*nodes), offsetof(tml_sys_node, ram_used_peak_bytes),
                             offsetof(tml_sys_node, ram_total_bytes), NULL);
    *percent = r >= 0 ? 100.0 * nodes[r].ram_used_peak_bytes / nodes[r].ram_total_bytes : NAN;
    return r;
}

/* LOW GPU UTIL, else MODERATE GPU UTIL, over the run. */
static void gpu_util_rule(tml_section_diag *out, double util)
{
    if (!isnan(util) && util < SYS_GPU_UTIL_LOW)
        sys_finding(out, NULL, "LOW_GPU_UTIL", "LOW GPU UTIL", TML_SEV_INFO, "gpu_util_percent", util,
                    SYS_GPU_UTIL_LOW,
                    "The GPU is idle most of the time: see the step-time verdict for where the time goes.",
                    "GPU utilization averaged %.0f%%.", util);
    else if (!isnan(util) && util < SYS_GPU_UTIL_MODERATE)
        sys_finding(out, NULL, "MODERATE_GPU_UTIL", "MODERATE GPU UTIL", TML_SEV_INFO,
                    "gpu_util_percent", util, SYS_GPU_UTIL_MODERATE,
                    "The GPU is busy part of the time: larger batches or fewer host-side stalls may help.",
                    "GPU utilization averaged %.0f%%.", util);
}

void tml__diag_system_rules(const tml_sys_node *nodes, size_t n, const tml_thresholds *th,
                            tml_section_diag *out, double *gpu_util_out)
{
    size_t samples;
    char a[32], b[32];
    int multi = n > 1;
    char where[32];

    (void)th;
    memset(out, 0, sizeof(*out));
    double util = mean_gpu_util(nodes, n, &samples);
    if (gpu_util_out)
        *gpu_util_out = util;
    if (samples == 0) {
        tml__diag_init(&out->primary, "NORMAL", "NORMAL", "system", TML_SEV_INFO);
        snprintf(out->primary.why, sizeof(out->primary.why), "No system metrics were sampled in this run.");
        return;
    }
#define WHERE(nd) (multi ? (snprintf(where, sizeof(where), " on N%d", (int)(nd)->node), where) : "")
    int k = worst_node(nodes, n, offsetof(tml_sys_node, gpu_mem_peak_percent));
    if (k >= 0 && ge(nodes[k].gpu_mem_peak_percent, SYS_GPU_MEM_VERY_HIGH))
        sys_finding(out, &nodes[k], "VERY_HIGH_GPU_MEM", "VERY HIGH GPU MEM", TML_SEV_CRITICAL,
                    "gpu_memory_peak_percent", nodes[k].gpu_mem_peak_percent, SYS_GPU_MEM_VERY_HIGH,
                    "GPU memory is nearly full: reduce batch size or activation memory, or check for other processes on the GPU.",
                    "GPU memory peaked at %.0f%% of the device%s.", nodes[k].gpu_mem_peak_percent, WHERE(&nodes[k]));
    int t = worst_node(nodes, n, offsetof(tml_sys_node, gpu_temp_peak_c));
    if (t >= 0 && ge(nodes[t].gpu_temp_peak_c, SYS_GPU_TEMP_HIGH))
        sys_finding(out, &nodes[t], "HIGH_GPU_TEMP", "HIGH GPU TEMP", TML_SEV_CRITICAL,
                    "gpu_temperature_peak_c", nodes[t].gpu_temp_peak_c, SYS_GPU_TEMP_HIGH,
                    "The GPU may throttle its clocks: check cooling, airflow and fan speed (nvidia-smi -q -d PERFORMANCE shows throttle reasons).",
                    "GPU temperature reached %.0fC%s.", nodes[t].gpu_temp_peak_c, WHERE(&nodes[t]));
    if (k >= 0 && !ge(nodes[k].gpu_mem_peak_percent, SYS_GPU_MEM_VERY_HIGH) &&
        ge(nodes[k].gpu_mem_peak_percent, SYS_GPU_MEM_HIGH))
        sys_finding(out, &nodes[k], "HIGH_GPU_MEM", "HIGH GPU MEM", TML_SEV_WARNING,
                    "gpu_memory_peak_percent", nodes[k].gpu_mem_peak_percent, SYS_GPU_MEM_HIGH,
                    "Little GPU memory headroom: a longer sequence or larger batch may run out of memory.",
                    "GPU memory peaked at %.0f%% of the device%s.", nodes[k].gpu_mem_peak_percent, WHERE(&nodes[k]));
    int p = worst_node(nodes, n, offsetof(tml_sys_node, gpu_power_percent));
    if (p >= 0 && ge(nodes[p].gpu_power_percent, SYS_GPU_POWER_HIGH))
        sys_finding(out, &nodes[p], "HIGH_GPU_PWR", "HIGH GPU PWR", TML_SEV_WARNING,
                    "gpu_power_percent", nodes[p].gpu_power_percent, SYS_GPU_POWER_HIGH,
                    "The GPU runs near its power limit and may be power-capped: check the limit (nvidia-smi -q -d POWER).",
                    "GPU power averaged %.0f%% of its limit%s.", nodes[p].gpu_power_percent, WHERE(&nodes[p]));
    double rv;
    int r = worst_ram_node(nodes, n, &rv);
    if (r >= 0 && ge(rv, SYS_RAM_HIGH)) {
        tml__fmt_bytes(nodes[r].ram_used_peak_bytes, a, sizeof(a));
        tml__fmt_bytes(nodes[r].ram_total_bytes, b, sizeof(b));
        sys_finding(out, &nodes[r], "HIGH_RAM", "HIGH RAM", TML_SEV_WARNING, "ram_peak_percent", rv,
                    SYS_RAM_HIGH,
                    "Host memory is tight: fewer DataLoader workers or prefetch, smaller in-memory datasets; swapping slows everything.",
                    "Host RAM peaked at %s of %s (%.0f%%)%s.", a, b, rv, WHERE(&nodes[r]));
    }
    int cpu = worst_node(nodes, n, offsetof(tml_sys_node, cpu_percent));
    if (cpu >= 0 && ge(nodes[cpu].cpu_percent, SYS_CPU_HIGH))
        sys_finding(out, &nodes[cpu], "HIGH_CPU", "HIGH CPU", TML_SEV_WARNING, "cpu_percent",
                    nodes[cpu].cpu_percent, SYS_CPU_HIGH,
                    "The host CPU is busy: data loading and the training loop compete for cores (check num_workers and thread counts).",
                    "Host CPU averaged %.0f%%%s.", nodes[cpu].cpu_percent, WHERE(&nodes[cpu]));
#undef WHERE
    gpu_util_rule(out, util);
    if (out->nissues) {
        out->primary = out->issues[0];   /* listed in priority order */
        return;
    }
    tml__diag_init(&out->primary, "NORMAL", "NORMAL", "system", TML_SEV_INFO);
    if (!isnan(util))
        snprintf(out->primary.why, sizeof(out->primary.why),
                 "No system rule fired: GPU utilization averaged %.0f%%.", util);
    else
        snprintf(out->primary.why, sizeof(out->primary.why), "No system rule fired.");
}

/* ---- process ---------------------------------------------------------- */

static void proc_finding(tml_section_diag *out, const tml_proc_rank *p, const char *kind,
                         const char *label, tml_severity sev, const char *metric, double value,
                         double threshold, const char *why, const char *next)
{
    tml_diagnosis d;
    res_init(&d, kind, label, "process", sev, metric, value, threshold);
    if (p) {
        d.res.rank = p->rank;
        d.res.node = p->node;
        d.res.gpu = p->gpu;
    }
    snprintf(d.why, sizeof(d.why), "%s", why);
    snprintf(d.next, sizeof(d.next), "%s", next);
    add_issue(out, &d);
}

/* The rank with the largest ratio num/den (fields; den 0: num alone), -1
 * none. */
static int worst_ratio(const tml_proc_rank *v, size_t n, size_t num, size_t den, double *out)
{
    return tml__rows_argmax(v, n, sizeof(*v), num, den ? den : TML_ROWS_PLAIN, out);
}

/* (VERY) HIGH PROCESS GPU MEMORY: the rank reserving the largest share of
 * its GPU. */
static void proc_gpu_memory_rule(const tml_proc_rank *v, size_t n, tml_section_diag *out)
{
    char why[TML_DIAG_TEXT], a[32];
    double x;
    int k = worst_ratio(v, n, offsetof(tml_proc_rank, cuda_reserved_peak_bytes),
                        offsetof(tml_proc_rank, device_total_bytes), &x);

    if (k < 0 || !ge(100.0 * x, PROC_GPU_MEM_HIGH))
        return;
    int very = ge(100.0 * x, PROC_GPU_MEM_VERY_HIGH);
    tml__fmt_bytes(v[k].cuda_reserved_peak_bytes, a, sizeof(a));
    snprintf(why, sizeof(why), "R%d/N%d reserved up to %s, %.0f%% of its GPU's memory.",
             (int)v[k].rank, (int)v[k].node, a, 100.0 * x);
    proc_finding(out, &v[k], very ? "VERY_HIGH_PROCESS_GPU_MEMORY" : "HIGH_PROCESS_GPU_MEMORY",
                 very ? "VERY HIGH PROCESS GPU MEMORY" : "HIGH PROCESS GPU MEMORY",
                 very ? TML_SEV_CRITICAL : TML_SEV_WARNING, "cuda_reserved_peak_percent",
                 100.0 * x, very ? PROC_GPU_MEM_VERY_HIGH : PROC_GPU_MEM_HIGH, why,
                 "The process holds most of the GPU: reduce batch size or activation memory; torch.cuda.memory_summary() shows where it goes.");
}

/* HIGH CUDA RESERVED/ALLOCATED RATIO, with reserved a real share of the
 * device. */
static void proc_reserved_ratio_rule(const tml_proc_rank *v, size_t n, tml_section_diag *out)
{
    char why[TML_DIAG_TEXT], a[32], b[32];
    int r = -1;
    double rv = NAN;

    for (size_t i = 0; i < n; i++) {
        const tml_proc_rank *p = &v[i];
        double ratio = p->cuda_allocated_bytes > 0 ? p->cuda_reserved_bytes / p->cuda_allocated_bytes : NAN;
        double pr = p->device_total_bytes > 0 ? 100.0 * p->cuda_reserved_bytes / p->device_total_bytes : NAN;
        if (ge(ratio, PROC_RESERVED_RATIO) && ge(pr, PROC_RESERVED_RATIO_MIN_PRESSURE) &&
            (r < 0 || ratio > rv)) {
            r = (int)i;
            rv = ratio;
        }
    }
    if (r < 0)
        return;
    tml__fmt_bytes(v[r].cuda_reserved_bytes, a, sizeof(a));
    tml__fmt_bytes(v[r].cuda_allocated_bytes, b, sizeof(b));
    snprintf(why, sizeof(why), "R%d/N%d reserves %s for %s allocated (%.1fx).", (int)v[r].rank,
             (int)v[r].node, a, b, rv);
    proc_finding(out, &v[r], "HIGH_CUDA_RESERVED_ALLOCATED_RATIO",
                 "HIGH CUDA RESERVED/ALLOCATED RATIO", TML_SEV_WARNING, "reserved_allocated_ratio",
                 rv, PROC_RESERVED_RATIO, why,
                 "The caching allocator holds much more than tensors use (fragmentation or varying shapes): try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.");
}

/* RANK GPU MEMORY IMBALANCE: the largest reserved far above the median
 * rank's (the first 256 ranks reporting it). */
static void proc_imbalance_rule(const tml_proc_rank *v, size_t n, tml_section_diag *out)
{
    char why[TML_DIAG_TEXT], a[32], b[32];
    double vals[256];
    size_t m = 0;
    int w = -1;

    for (size_t i = 0; i < n && m < 256; i++)
        if (!isnan(v[i].cuda_reserved_bytes)) {
            vals[m++] = v[i].cuda_reserved_bytes;
            if (w < 0 || v[i].cuda_reserved_bytes > v[w].cuda_reserved_bytes)
                w = (int)i;
        }
    if (m < 2)
        return;
    qsort(vals, m, sizeof(double), tml__cmp_double);
    double med = others_median(vals, m);
    double skew = med > 0 ? (v[w].cuda_reserved_bytes - med) / med : NAN;
    double pr = v[w].device_total_bytes > 0 ? v[w].cuda_reserved_bytes / v[w].device_total_bytes : NAN;
    if (!ge(skew, IMB_WARN_SKEW) || !ge(pr, IMB_WARN_PRESSURE))
        return;
    int crit = ge(skew, IMB_CRIT_SKEW) && ge(pr, IMB_CRIT_PRESSURE);
    tml__fmt_bytes(v[w].cuda_reserved_bytes, a, sizeof(a));
    tml__fmt_bytes(med, b, sizeof(b));
    snprintf(why, sizeof(why), "R%d/N%d reserves %s, %.0f%% above %s %s.",
             (int)v[w].rank, (int)v[w].node, a, 100.0 * skew, others_name(m), b);
    proc_finding(out, &v[w], "RANK_GPU_MEMORY_IMBALANCE", "RANK GPU MEMORY IMBALANCE",
                 crit ? TML_SEV_CRITICAL : TML_SEV_WARNING, "rank_skew_percent", 100.0 * skew,
                 100.0 * (crit ? IMB_CRIT_SKEW : IMB_WARN_SKEW), why,
                 "Look for uneven work or state across ranks (rank 0 doing extra evaluation, logging or checkpointing).");
}

/* HIGH PROCESS RSS and HIGH PROCESS CPU: the rank using the largest share
 * of its host's RAM, and of its host's CPU capacity. */
static void proc_host_rules(const tml_proc_rank *v, size_t n, tml_section_diag *out)
{
    char why[TML_DIAG_TEXT], a[32];
    double x;
    int k = worst_ratio(v, n, offsetof(tml_proc_rank, rss_peak_bytes),
                        offsetof(tml_proc_rank, host_ram_total_bytes), &x);

    if (k >= 0 && ge(100.0 * x, PROC_RSS_HIGH)) {
        tml__fmt_bytes(v[k].rss_peak_bytes, a, sizeof(a));
        snprintf(why, sizeof(why), "R%d/N%d's RSS reached %s, %.0f%% of host RAM.", (int)v[k].rank,
                 (int)v[k].node, a, 100.0 * x);
        proc_finding(out, &v[k], "HIGH_PROCESS_RSS", "HIGH PROCESS RSS", TML_SEV_WARNING,
                     "rss_peak_percent", 100.0 * x, PROC_RSS_HIGH, why,
                     "The process is close to exhausting host memory: datasets held in memory, pinned-memory buffers, or host tensors kept across steps.");
    }
    k = worst_ratio(v, n, offsetof(tml_proc_rank, cpu_capacity_percent), 0, &x);
    if (k >= 0 && ge(x, PROC_CPU_HIGH)) {
        snprintf(why, sizeof(why), "R%d/N%d used %.0f%% of the host's CPU capacity on average.",
                 (int)v[k].rank, (int)v[k].node, x);
        proc_finding(out, &v[k], "HIGH_PROCESS_CPU", "HIGH PROCESS CPU", TML_SEV_WARNING,
                     "cpu_capacity_percent", x, PROC_CPU_HIGH, why,
                     "The training process saturates the host's cores: check intra-op threads (torch.set_num_threads) and CPU-side preprocessing.");
    }
}

void tml__diag_process_rules(const tml_proc_rank *v, size_t n, const tml_thresholds *th,
                             tml_section_diag *out)
{
    size_t samples = 0;

    (void)th;
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < n; i++)
        samples += v[i].samples;
    int any_cuda = 0;
    for (size_t i = 0; i < n; i++)
        any_cuda |= !isnan(v[i].cuda_reserved_bytes);
    if (samples == 0 && !any_cuda) {
        tml__diag_init(&out->primary, "NORMAL", "NORMAL", "process", TML_SEV_INFO);
        snprintf(out->primary.why, sizeof(out->primary.why), "No process metrics were sampled in this run.");
        return;
    }

    proc_gpu_memory_rule(v, n, out);
    proc_reserved_ratio_rule(v, n, out);
    proc_imbalance_rule(v, n, out);
    proc_host_rules(v, n, out);
    if (out->nissues) {
        pick_primary(out);
        return;
    }
    tml__diag_init(&out->primary, "NORMAL", "NORMAL", "process", TML_SEV_INFO);
    snprintf(out->primary.why, sizeof(out->primary.why), "No process rule fired.");
}

/* ---- the earlier, window-only entry points ---------------------------- */

void tml__diag_step_memory(const tml_window *w, const tml_thresholds *th,
                           tml_diagnosis *out)
{
    int gpu = 0;

    (void)th;
    for (size_t i = 0; i < w->nranks; i++)
        if (!isnan(w->ranks[i].cuda_reserved_bytes) || !isnan(w->ranks[i].cuda_allocated_bytes))
            gpu = 1;
    if (!gpu) {
        tml__diag_init(out, "NO_GPU", "NO GPU", "step_memory", TML_SEV_INFO);
        snprintf(out->why, sizeof(out->why), "No CUDA memory figures were recorded (CPU-only run).");
        return;
    }
    tml__diag_init(out, "BALANCED", "BALANCED", "step_memory", TML_SEV_INFO);
    snprintf(out->why, sizeof(out->why), "No memory rule fired.");
}

void tml__diag_system(const tml_sys_node *nodes, size_t n,
                      const tml_thresholds *th, tml_diagnosis *out)
{
    tml_section_diag s;
    tml__diag_system_rules(nodes, n, th, &s, NULL);
    *out = s.primary;
}

void tml__diag_process(const tml_proc_rank *ranks, size_t n,
                       const tml_thresholds *th, tml_diagnosis *out)
{
    tml_section_diag s;
    tml__diag_process_rules(ranks, n, th, &s);
    *out = s.primary;
}

/* ---- across sections ------------------------------------------------ */

static int heading_for_oom(const tml_diagnosis *d)
{
    return (strcmp(d->kind, "MEMORY_CREEP") == 0 || strcmp(d->kind, "MEMORY_RISING") == 0) &&
           d->res.valid && !isnan(d->res.projected_full_step);
}

/* a before b under tml__diag_also's ranking */
static int also_before(const tml_diagnosis *a, const tml_diagnosis *b)
{
    if (a->severity != b->severity)
        return a->severity > b->severity;
    int oa = heading_for_oom(a), ob = heading_for_oom(b);
    if (oa && ob)
        return a->res.projected_full_step < b->res.projected_full_step;
    return oa > ob;
}

size_t tml__diag_also(const tml_diagnosis *verdict, const tml_section_diag *const *sections,
                      size_t nsections, const tml_diagnosis **out, size_t max)
{
    size_t n = 0;
    for (size_t s = 0; s < nsections; s++) {
        for (size_t i = 0; sections[s] && i < sections[s]->nissues; i++) {
            const tml_diagnosis *d = &sections[s]->issues[i];
            if (!d->kind || (d->severity < TML_SEV_WARNING && !heading_for_oom(d)) ||
                (verdict && verdict->kind && strcmp(d->kind, verdict->kind) == 0))
                continue;
            /* insertion into the ranked list, the last dropped when full */
            size_t at = n;
            while (at > 0 && also_before(d, out[at - 1]))
                at--;
            if (at >= max)
                continue;
            if (n < max)
                n++;
            memmove(&out[at + 1], &out[at], (n - 1 - at) * sizeof(*out));
            out[at] = d;
        }
    }
    return n;
}
