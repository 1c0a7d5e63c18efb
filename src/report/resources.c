/*
 * resources.c - the report model's resource half: from the run's samples
 * (per-place aggregates, sample/series.h) and per-step memory to the rows
 * of the SYSTEM METRICS and PROCESS METRICS panels, the STEP MEMORY series,
 * and the three sections' diagnoses (diag/resources.c).
 *
 * Places and scopes. Host figures belong to a node (sampled once per node,
 * by local rank 0); GPU figures to a node's GPU (each rank samples the GPU
 * it uses, so a GPU shared by two ranks is one place); process figures to
 * a rank. A node's GPU row is the mean over its GPUs ("per device"); the
 * rules look at the worst GPU (peaks and power ratios). Whatever was not
 * sampled stays NAN and prints as n/a.
 *
 * Per-step memory is taken over the analysed window's step ids of each
 * rank: the CUDA reserved per-step peak when any rank reported one, else
 * the per-step RSS (SPEC 4.2: on CPU-only runs the creep analysis runs on
 * RSS).
 */
#include "report/model.h"
#include "base/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/series.h"

static const tml_series *find(const tml_series_set *s, int32_t node, int32_t rank, int32_t gpu,
                              uint32_t metric)
{
    return tml__series_find(s, node, rank, gpu, metric);
}

static double mean_or_nan(const tml_series *x)
{
    return tml__series_mean(x);
}

static double max_or_nan(const tml_series *x)
{
    return x && x->n ? x->max : NAN;
}

/* The node's GPU indices seen in gpu.* series. */
static size_t node_gpus(const tml_series_set *s, int32_t node, int32_t *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        const tml_series *x = &s->v[i];
        if (x->node != node || x->gpu < 0)
            continue;
        int seen = 0;
        for (size_t k = 0; k < n; k++)
            seen |= out[k] == x->gpu;
        if (!seen && n < cap)
            out[n++] = x->gpu;
    }
    return n;
}

static void fill_node(const tml_series_set *s, tml_sys_node *nd)
{
    int32_t node = nd->node, g[64];
    const tml_series *cpu = find(s, node, -1, -1, TML_S_HOST_CPU_PERCENT);
    const tml_series *used = find(s, node, -1, -1, TML_S_HOST_RAM_USED_BYTES);
    const tml_series *total = find(s, node, -1, -1, TML_S_HOST_RAM_TOTAL_BYTES);

    nd->samples = (cpu ? cpu->n : 0) + (used ? used->n : 0);
    nd->cpu_percent = mean_or_nan(cpu);
    nd->ram_used_bytes = mean_or_nan(used);
    nd->ram_used_peak_bytes = max_or_nan(used);
    nd->ram_total_bytes = max_or_nan(total);
    nd->gpu_util_percent = nd->gpu_mem_used_bytes = nd->gpu_mem_total_bytes = NAN;
    nd->gpu_temp_c = nd->gpu_power_w = nd->gpu_power_limit_w = NAN;
    nd->gpu_mem_peak_percent = nd->gpu_temp_peak_c = nd->gpu_power_percent = NAN;
    nd->worst_gpu = -1;

    size_t ng = node_gpus(s, node, g, 64);
    double sum[6] = {0};
    size_t cnt[6] = {0};
    for (size_t k = 0; k < ng; k++) {
        const tml_series *u = find(s, node, -1, g[k], TML_S_GPU_UTIL_PERCENT);
        const tml_series *mu = find(s, node, -1, g[k], TML_S_GPU_MEM_USED_BYTES);
        const tml_series *mt = find(s, node, -1, g[k], TML_S_GPU_MEM_TOTAL_BYTES);
        const tml_series *t = find(s, node, -1, g[k], TML_S_GPU_TEMP_C);
        const tml_series *p = find(s, node, -1, g[k], TML_S_GPU_POWER_W);
        const tml_series *pl = find(s, node, -1, g[k], TML_S_GPU_POWER_LIMIT_W);
        const tml_series *all[6] = { u, mu, mt, t, p, pl };
        double v[6] = { mean_or_nan(u), mean_or_nan(mu), max_or_nan(mt), mean_or_nan(t),
                        mean_or_nan(p), max_or_nan(pl) };
        for (int j = 0; j < 6; j++) {
            if (all[j] && all[j]->n)
                nd->samples += all[j]->n;
            if (!isnan(v[j])) {
                sum[j] += v[j];
                cnt[j]++;
            }
        }
        double mp = mt && mu && mt->max > 0 ? 100.0 * mu->max / mt->max : NAN;
        if (!isnan(mp) && (isnan(nd->gpu_mem_peak_percent) || mp > nd->gpu_mem_peak_percent)) {
            nd->gpu_mem_peak_percent = mp;
            nd->worst_gpu = g[k];
        }
        double tp = max_or_nan(t);
        if (!isnan(tp) && (isnan(nd->gpu_temp_peak_c) || tp > nd->gpu_temp_peak_c))
            nd->gpu_temp_peak_c = tp;
        double pp = !isnan(v[4]) && v[5] > 0 ? 100.0 * v[4] / v[5] : NAN;
        if (!isnan(pp) && (isnan(nd->gpu_power_percent) || pp > nd->gpu_power_percent))
            nd->gpu_power_percent = pp;
    }
    nd->gpus = (int32_t)ng;
    double *dst[6] = { &nd->gpu_util_percent, &nd->gpu_mem_used_bytes, &nd->gpu_mem_total_bytes,
                       &nd->gpu_temp_c, &nd->gpu_power_w, &nd->gpu_power_limit_w };
    for (int j = 0; j < 6; j++)
        *dst[j] = cnt[j] ? sum[j] / (double)cnt[j] : NAN;
}

/* The per-step memory figure the series uses. */
static int64_t step_mem(const tml_step_record *s, int gpu)
{
    return gpu ? s->cuda_reserved_peak_bytes : s->rss_bytes;
}

static int in_window(const tml_window *w, const tml_step_record *s)
{
    return w->window_steps && s->step >= w->first_step && s->step <= w->last_step &&
           !(s->flags & TML_STEP_ABORTED);
}

/* Where r's window records are: [*lo, *hi) of its records (a thousand
 * ranks' records outside the window are not read). */
static void window_span(const tml_window *w, const tml_rank *r, size_t *lo, size_t *hi)
{
    *lo = *hi = 0;
    if (w->window_steps)
        tml__rank_span(r, w->first_step, w->last_step, lo, hi);
}

static int build_memory(tml_report_model *m)
{
    const tml_run *run = m->run;
    const tml_window *w = &m->win;
    size_t total = 0;

    m->mem_gpu = 0;
    for (size_t i = 0; i < run->nranks; i++) {
        size_t lo, hi;
        window_span(w, &run->ranks[i], &lo, &hi);
        for (size_t j = lo; j < hi; j++) {
            const tml_step_record *s = &run->ranks[i].steps[j];
            if (!in_window(w, s))
                continue;
            total++;
            if (s->cuda_reserved_peak_bytes >= 0)
                m->mem_gpu = 1;
        }
    }
    m->mem_nranks = run->nranks;
    m->mem_ranks = calloc(run->nranks ? run->nranks : 1, sizeof(*m->mem_ranks));
    m->mem_values = malloc((total ? total : 1) * sizeof(*m->mem_values));
    m->mem_step_ids = malloc((total ? total : 1) * sizeof(*m->mem_step_ids));
    if (!m->mem_ranks || !m->mem_values || !m->mem_step_ids)
        return TML_ENOMEM;
    size_t at = 0;
    for (size_t i = 0; i < run->nranks; i++) {
        const tml_rank *r = &run->ranks[i];
        tml_mem_rank *mr = &m->mem_ranks[i];
        mr->rank = r->info.rank;
        mr->node = r->info.node_rank;
        mr->series = m->mem_values + at;
        mr->steps = m->mem_step_ids + at;
        /* steps arrive in order per rank; a resent id keeps its first copy */
        uint64_t last = 0;
        int have = 0;
        size_t lo, hi;
        window_span(w, r, &lo, &hi);
        for (size_t j = lo; j < hi; j++) {
            const tml_step_record *s = &r->steps[j];
            int64_t v = step_mem(s, m->mem_gpu);
            if (!in_window(w, s) || v < 0 || (have && s->step <= last))
                continue;
            m->mem_values[at] = (double)v;
            m->mem_step_ids[at] = s->step;
            at++;
            mr->n++;
            last = s->step;
            have = 1;
        }
        const tml_series_set *ss = &run->samples;
        if (m->mem_gpu) {
            double cap = max_or_nan(find(ss, mr->node, mr->rank, -1, TML_S_PROC_CUDA_DEVICE_TOTAL));
            int32_t g = tml__series_rank_gpu(ss, mr->rank);
            if (isnan(cap) && g >= 0)
                cap = max_or_nan(find(ss, mr->node, -1, g, TML_S_GPU_MEM_TOTAL_BYTES));
            mr->capacity_bytes = cap;
        } else {
            mr->capacity_bytes = max_or_nan(find(ss, mr->node, -1, -1, TML_S_HOST_RAM_TOTAL_BYTES));
        }
    }
    return 0;
}

/* The machine's contention (tml_contention): per node, the host's CPU
 * against the sum of its ranks' process trees (each rank with its
 * DataLoader workers); the node whose other processes used the most. The
 * run-queue wait is the median over the ranks that sampled it. */
static void contention(tml_report_model *m)
{
    const tml_run *run = m->run;
    const tml_series_set *ss = &run->samples;
    tml_contention *best = &m->win.contention;
    double *rq = malloc((m->nprocs ? m->nprocs : 1) * sizeof(*rq));
    size_t nrq = 0;
    double runq = NAN;

    for (size_t i = 0; rq && i < m->nprocs; i++)
        if (!isnan(m->procs[i].runq_wait_percent))
            rq[nrq++] = m->procs[i].runq_wait_percent;
    if (nrq)
        runq = tml__median(rq, nrq);
    free(rq);
    tml__contention_init(best);
    for (size_t k = 0; k < m->nnodes; k++) {
        int32_t node = m->nodes[k].node, cores = 0;
        double trees = 0;
        int ranks = 0, unknown = 0;
        for (size_t i = 0; i < run->nranks; i++) {
            const tml_rank *r = &run->ranks[i];
            if (r->info.node_rank != node)
                continue;
            ranks++;
            if (r->info.cpu_count > cores)
                cores = r->info.cpu_count;
            double t = mean_or_nan(find(ss, node, r->info.rank, -1, TML_S_PROC_TREE_CPU_PERCENT));
            if (isnan(t))
                unknown = 1;
            else
                trees += t;
        }
        tml_contention c;
        tml__contention_compute(&c, node, cores, m->nodes[k].cpu_percent,
                                ranks && !unknown ? trees : NAN, runq);
        if (best->node < 0 || (!isnan(c.other_cpu_percent) &&
                               !(c.other_cpu_percent <= best->other_cpu_percent)))
            *best = c;
    }
    if (best->node < 0)
        tml__contention_compute(best, -1, 0, NAN, NAN, runq);
    /* the GPU: shared when any rank's GPU had another process, on any node */
    size_t ng = 0;
    for (size_t i = 0; i < ss->n; i++)
        ng += ss->v[i].metric == TML_S_GPU_OTHER_PROCS;
    double *most = ng ? malloc(ng * sizeof(*most)) : NULL;
    size_t k = 0;
    for (size_t i = 0; most && i < ss->n; i++)
        if (ss->v[i].metric == TML_S_GPU_OTHER_PROCS)
            most[k++] = max_or_nan(&ss->v[i]);
    best->gpu_shared = tml__gpu_shared_of(most, k);
    free(most);
}

int tml__report_resources(tml_report_model *m, const int32_t *nodes, size_t nnodes)
{
    const tml_run *run = m->run;
    const tml_series_set *ss = &run->samples;

    m->nnodes = nnodes;
    m->nodes = calloc(nnodes ? nnodes : 1, sizeof(*m->nodes));
    m->nprocs = run->nranks;
    m->procs = calloc(run->nranks ? run->nranks : 1, sizeof(*m->procs));
    if (!m->nodes || !m->procs)
        return TML_ENOMEM;
    int32_t gpus = 0;
    for (size_t i = 0; i < nnodes; i++) {
        m->nodes[i].node = nodes[i];
        fill_node(ss, &m->nodes[i]);
        gpus += m->nodes[i].gpus;
    }
    if (gpus > m->gpus_observed)
        m->gpus_observed = gpus;

    for (size_t i = 0; i < run->nranks; i++) {
        tml_proc_rank *p = &m->procs[i];
        const tml_rank_window *rw = &m->win.ranks[i];
        int32_t rank = run->ranks[i].info.rank, node = run->ranks[i].info.node_rank;
        const tml_series *cap = find(ss, node, rank, -1, TML_S_PROC_CPU_CAPACITY);
        const tml_series *cpu = find(ss, node, rank, -1, TML_S_PROC_CPU_PERCENT);
        const tml_series *rss = find(ss, node, rank, -1, TML_S_PROC_RSS_BYTES);
        const tml_series *ca = find(ss, node, rank, -1, TML_S_PROC_CUDA_ALLOCATED);
        const tml_series *cr = find(ss, node, rank, -1, TML_S_PROC_CUDA_RESERVED);
        const tml_series *dt = find(ss, node, rank, -1, TML_S_PROC_CUDA_DEVICE_TOTAL);
        p->rank = rank;
        p->node = node;
        p->samples = (cap ? cap->n : 0) + (rss ? rss->n : 0);
        p->cpu_capacity_percent = mean_or_nan(cap);
        p->cpu_percent = mean_or_nan(cpu);
        p->runq_wait_percent = mean_or_nan(find(ss, node, rank, -1, TML_S_PROC_RUNQ_WAIT_PERCENT));
        p->rss_bytes = rss ? mean_or_nan(rss) : rw->rss_bytes;
        p->rss_peak_bytes = rss ? max_or_nan(rss) : NAN;
        p->host_ram_total_bytes = max_or_nan(find(ss, node, -1, -1, TML_S_HOST_RAM_TOTAL_BYTES));
        /* per-step peaks first (they are what the step did), samples else */
        p->cuda_allocated_bytes = !isnan(rw->cuda_allocated_bytes) ? rw->cuda_allocated_bytes
                                                                    : mean_or_nan(ca);
        p->cuda_reserved_bytes = !isnan(rw->cuda_reserved_bytes) ? rw->cuda_reserved_bytes
                                                                  : mean_or_nan(cr);
        p->gpu = tml__series_rank_gpu(ss, rank);
        p->device_total_bytes = max_or_nan(dt);
        if (isnan(p->device_total_bytes) && p->gpu >= 0)
            p->device_total_bytes = max_or_nan(find(ss, node, -1, p->gpu, TML_S_GPU_MEM_TOTAL_BYTES));
        p->cuda_reserved_peak_bytes = max_or_nan(cr);
        size_t lo, hi;
        window_span(&m->win, &run->ranks[i], &lo, &hi);
        for (size_t j = lo; j < hi; j++) {
            const tml_step_record *s = &run->ranks[i].steps[j];
            if (in_window(&m->win, s) && s->cuda_reserved_peak_bytes >= 0 &&
                (isnan(p->cuda_reserved_peak_bytes) ||
                 (double)s->cuda_reserved_peak_bytes > p->cuda_reserved_peak_bytes))
                p->cuda_reserved_peak_bytes = (double)s->cuda_reserved_peak_bytes;
            if (!rss && in_window(&m->win, s) && s->rss_bytes >= 0 &&
                (isnan(p->rss_peak_bytes) || (double)s->rss_bytes > p->rss_peak_bytes))
                p->rss_peak_bytes = (double)s->rss_bytes;
        }
    }

    contention(m);
    if (build_memory(m) < 0)
        return TML_ENOMEM;
    tml_mem_input in = { m->mem_gpu, m->mem_ranks, m->mem_nranks };
    tml__diag_memory(&in, &m->th, &m->mem_s);
    tml__diag_system_rules(m->nodes, m->nnodes, &m->th, &m->sys_s, &m->gpu_util_percent);
    tml__diag_process_rules(m->procs, m->nprocs, &m->th, &m->proc_s);
    m->mem = m->mem_s.primary;
    m->sys = m->sys_s.primary;
    m->proc = m->proc_s.primary;
    return 0;
}

void tml__report_resources_release(tml_report_model *m)
{
    free(m->mem_ranks);
    free(m->mem_values);
    free(m->mem_step_ids);
    m->mem_ranks = NULL;
    m->mem_values = NULL;
    m->mem_step_ids = NULL;
}
