/*
 * derive.c - the resource sections' rows (their field tables: keys in
 * final_summary.json and /metrics, decimals) and the figures of the report
 * model that no single row holds (model.h, "derived"): each section's
 * average row, its median and worst row, the box's median and worst per
 * field, the window's mean per metric.
 *
 * They were the printers' once (json.c averaged, box.c sorted, both picked
 * a worst), so the box, final_summary.json and the live views could drift
 * apart; here they are computed once, for a run (report.c) and for a
 * summary read back (reload.c) alike, and every printer only reads them.
 * Equal values keep row order (a sort on value then index), so the pick
 * does not depend on the C library's qsort.
 */
#include "report/model.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the resource sections' rows and their fields ----------------- */

#define F(type, key, field, dec) { key, offsetof(type, field), dec }
static const tml_report_field mem_fields[] = {
    F(tml_mem_row, "peak_allocated_bytes", peak_allocated_bytes, 0),
    F(tml_mem_row, "peak_reserved_bytes", peak_reserved_bytes, 0),
    F(tml_mem_row, "rss_bytes", rss_bytes, 0),
    F(tml_mem_row, "steps_analysed", steps_analysed, 0),
    F(tml_mem_row, "series_peak_bytes", series_peak_bytes, 0),
    F(tml_mem_row, "capacity_bytes", capacity_bytes, 0),
};
static const tml_report_field sys_fields[] = {
    F(tml_sys_node, "cpu_percent", cpu_percent, 2),
    F(tml_sys_node, "ram_used_bytes", ram_used_bytes, 0),
    F(tml_sys_node, "ram_total_bytes", ram_total_bytes, 0),
    F(tml_sys_node, "gpu_util_percent", gpu_util_percent, 2),
    F(tml_sys_node, "gpu_memory_used_bytes", gpu_mem_used_bytes, 0),
    F(tml_sys_node, "gpu_memory_total_bytes", gpu_mem_total_bytes, 0),
    F(tml_sys_node, "gpu_temperature_c", gpu_temp_c, 1),
    F(tml_sys_node, "gpu_power_w", gpu_power_w, 1),
    F(tml_sys_node, "gpu_power_limit_w", gpu_power_limit_w, 1),
    F(tml_sys_node, "ram_used_peak_bytes", ram_used_peak_bytes, 0),
    F(tml_sys_node, "gpu_memory_peak_percent", gpu_mem_peak_percent, 2),
    F(tml_sys_node, "gpu_temperature_peak_c", gpu_temp_peak_c, 1),
    F(tml_sys_node, "gpu_power_percent", gpu_power_percent, 2),
};
static const tml_report_field proc_fields[] = {
    F(tml_proc_rank, "cpu_capacity_percent", cpu_capacity_percent, 2),
    F(tml_proc_rank, "rss_bytes", rss_bytes, 0),
    F(tml_proc_rank, "cuda_allocated_bytes", cuda_allocated_bytes, 0),
    F(tml_proc_rank, "cuda_reserved_bytes", cuda_reserved_bytes, 0),
    F(tml_proc_rank, "cpu_percent", cpu_percent, 2),
    F(tml_proc_rank, "runqueue_wait_percent", runq_wait_percent, 2),
    F(tml_proc_rank, "rss_peak_bytes", rss_peak_bytes, 0),
    F(tml_proc_rank, "cuda_reserved_peak_bytes", cuda_reserved_peak_bytes, 0),
    F(tml_proc_rank, "device_total_bytes", device_total_bytes, 0),
    F(tml_proc_rank, "host_ram_total_bytes", host_ram_total_bytes, 0),
};
#undef F
#define NF(a) (sizeof(a) / sizeof((a)[0]))
_Static_assert(NF(mem_fields) <= TML_REPORT_MAX_FIELDS && NF(sys_fields) <= TML_REPORT_MAX_FIELDS &&
               NF(proc_fields) <= TML_REPORT_MAX_FIELDS, "tml_report_rows.field[] too short");

void tml__report_rows(const tml_report_model *m, tml_report_rows out[TML_REPORT_ROWS])
{
#define ROWS(sec, w, f, r, n, type, id) (tml_report_rows){ .section = sec, .who = w, \
        .fields = f, .nfields = NF(f), .rows = r, .nrows = n, .row_size = sizeof(type), \
        .id_off = offsetof(type, id), .pick = { -1, -1 } }
    out[0] = ROWS("step_memory", "rank", mem_fields, m->mem_rows, m->win.nranks, tml_mem_row, rank);
    out[1] = ROWS("system", "node", sys_fields, m->nodes, m->nnodes, tml_sys_node, node);
    out[2] = ROWS("process", "rank", proc_fields, m->procs, m->nprocs, tml_proc_rank, rank);
#undef ROWS
}

/* ---- derived -------------------------------------------------------- */

typedef struct ranked {
    double v;
    int i;
} ranked;

static const void *row_at(const tml_report_rows *r, size_t i)
{
    return (const char *)r->rows + i * r->row_size;
}

/* By value, NAN last, then by row. */
static int cmp_ranked(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (isnan(x->v) != isnan(y->v))
        return isnan(x->v) ? 1 : -1;
    if (!isnan(x->v) && x->v != y->v)
        return x->v < y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Mean over the rows of each field (NAN fields skipped) into `avg`, a row. */
static void rows_average(const tml_report_rows *r, void *avg)
{
    memset(avg, 0, r->row_size);
    for (size_t k = 0; k < r->nfields; k++) {
        double sum = 0, v;
        size_t n = 0;
        for (size_t i = 0; i < r->nrows; i++) {
            v = tml__report_field(row_at(r, i), &r->fields[k]);
            if (!isnan(v)) {
                sum += v;
                n++;
            }
        }
        v = n ? sum / (double)n : NAN;
        memcpy((char *)avg + r->fields[k].off, &v, sizeof(v));
    }
}

/* The box's columns of a system or process field: the upper median and the
 * largest of the rows that have it (`tmp`: nrows entries). */
static tml_report_pick field_pick(const tml_report_rows *r, size_t k, ranked *tmp)
{
    size_t n = 0;
    for (size_t i = 0; i < r->nrows; i++) {
        double v = tml__report_field(row_at(r, i), &r->fields[k]);
        if (!isnan(v))
            tmp[n++] = (ranked){ v, (int)i };
    }
    if (n == 0)
        return (tml_report_pick){ -1, -1 };
    qsort(tmp, n, sizeof(*tmp), cmp_ranked);
    return (tml_report_pick){ tmp[n / 2].i, tmp[n - 1].i };
}

/* Step memory: the worst rank by peak reserved, else by RSS on CPU-only
 * ranks; the median is the window's median rank (when there is a worst).
 * Per field, the median rank and the largest. */
static void mem_picks(tml_report_model *m, tml_report_rows *r)
{
    const tml_mem_row *rows = m->mem_rows;
    double wv = 0;
    r->pick = (tml_report_pick){ -1, -1 };
    for (size_t i = 0; i < r->nrows; i++) {
        double v = !isnan(rows[i].peak_reserved_bytes) ? rows[i].peak_reserved_bytes
                                                        : rows[i].rss_bytes;
        if (!isnan(v) && (r->pick.worst < 0 || v > wv)) {
            r->pick.worst = (int)i;
            wv = v;
        }
    }
    if (r->pick.worst >= 0)
        r->pick.median = m->win.median_rank;
    for (size_t k = 0; k < r->nfields; k++)
        r->field[k] = (tml_report_pick){
            m->win.median_rank,
            tml__rows_argmax(rows, r->nrows, r->row_size, r->fields[k].off, TML_ROWS_PLAIN, NULL)
        };
}

/* System: the median and worst node by host CPU % (upper median; a node
 * without a CPU figure sorts above every other) over the nodes with
 * samples; the worst is the node a finding names when there is one. */
static void sys_picks(tml_report_model *m, tml_report_rows *r, ranked *tmp)
{
    size_t n = 0;
    r->pick = (tml_report_pick){ -1, -1 };
    for (size_t i = 0; i < m->nnodes; i++)
        if (m->nodes[i].samples)
            tmp[n++] = (ranked){ m->nodes[i].cpu_percent, (int)i };
    if (n == 0)
        return;
    qsort(tmp, n, sizeof(*tmp), cmp_ranked);
    r->pick = (tml_report_pick){ tmp[n / 2].i, tmp[n - 1].i };
    if (m->sys.res.valid && m->sys.res.node >= 0)
        for (size_t i = 0; i < m->nnodes; i++)
            if (m->nodes[i].node == m->sys.res.node)
                r->pick.worst = (int)i;
}

/* Process: the worst rank by RSS; the median is the window's median rank
 * when it has an RSS. */
static void proc_picks(tml_report_model *m, tml_report_rows *r)
{
    int med = m->win.median_rank;
    r->pick.worst = tml__rows_argmax(m->procs, m->nprocs, sizeof(*m->procs),
                                     offsetof(tml_proc_rank, rss_bytes), TML_ROWS_PLAIN, NULL);
    r->pick.median = med >= 0 && (size_t)med < m->nprocs && !isnan(m->procs[med].rss_bytes)
                     ? med : -1;
}

/* The window's mean of each metric over the ranks that sent steps. */
static void step_means(tml_report_model *m)
{
    const tml_window *win = &m->win;
    for (int k = 0; k < TML_M_COUNT; k++) {
        double s = 0;
        size_t n = 0;
        for (size_t i = 0; i < win->nranks; i++)
            if (win->ranks[i].nsteps && !isnan(win->ranks[i].avg_ns[k])) {
                s += win->ranks[i].avg_ns[k];
                n++;
            }
        m->step_mean_ns[k] = n ? s / (double)n : NAN;
    }
}

static void name_rank(tml_report_model *m, int32_t rank)
{
    for (size_t i = 0; i < m->nnamed; i++)
        if (m->named[i] == rank)
            return;
    if (m->nnamed < TML_REPORT_NAMED_RANKS)
        m->named[m->nnamed++] = rank;
}

static void name_issues(tml_report_model *m, const tml_section_diag *s)
{
    for (size_t i = 0; i < s->nissues; i++)
        if (s->issues[i].res.valid && s->issues[i].res.rank >= 0)
            name_rank(m, s->issues[i].res.rank);
}

/* The ranks a compact summary's per_rank lists keep (model.h). */
static void named_ranks(tml_report_model *m)
{
    const tml_window *w = &m->win;
    size_t ranks = w->nranks > m->nprocs ? w->nranks : m->nprocs;
    ranks = ranks > m->nnodes ? ranks : m->nnodes;
    m->compact = m->compact && ranks > TML_REPORT_ALL_RANKS;
    if (!m->compact)
        return;
    const int idx[3] = { w->median_rank, w->worst_rank, tml__report_straggler(m) };
    for (int k = 0; k < 3; k++)
        if (idx[k] >= 0)
            name_rank(m, w->ranks[idx[k]].rank);
    for (int s = 0; s < TML_REPORT_ROWS; s += 2) {   /* step memory, process */
        const tml_report_rows *r = &m->rows[s];
        const int pick[2] = { r->pick.median, r->pick.worst };
        for (int k = 0; k < 2; k++) {
            int32_t rank;
            if (pick[k] < 0 || (size_t)pick[k] >= r->nrows)
                continue;
            memcpy(&rank, (const char *)row_at(r, (size_t)pick[k]) + r->id_off, sizeof(rank));
            name_rank(m, rank);
        }
    }
    name_issues(m, &m->mem_s);
    name_issues(m, &m->proc_s);
    for (size_t i = 0; i < m->sys_s.nissues; i++) {
        const tml_res_evidence *e = &m->sys_s.issues[i].res;
        if (e->valid && e->node >= 0 && m->nnamed_nodes < TML_REPORT_NAMED_RANKS)
            m->named_nodes[m->nnamed_nodes++] = e->node;
    }
}

/* m->machine, from the window's contention (model.h). */
static void machine_sentence(tml_report_model *m)
{
    const tml_contention *c = &m->win.contention;
    char cores[32] = "the cores";
    m->machine[0] = '\0';
    if (!tml__contended(c))
        return;
    if (c->cores > 0)
        snprintf(cores, sizeof(cores), "the %d cores", (int)c->cores);
    snprintf(m->machine, sizeof(m->machine), "other processes used %.0f%% of %s; the training "
             "waited for a core %.0f%% of its time.", c->other_cpu_percent, cores,
             c->runq_wait_percent);
}

int tml__report_derive(tml_report_model *m)
{
    tml_report_rows *r = m->rows;
    size_t most = m->nnodes > m->nprocs ? m->nnodes : m->nprocs;
    ranked *tmp = malloc((most ? most : 1) * sizeof(*tmp));
    if (!tmp)
        return TML_ENOMEM;

    step_means(m);
    m->mem_analysed = 0;
    for (size_t i = 0; i < m->mem_nranks; i++)
        m->mem_analysed += m->mem_ranks[i].n;
    tml__report_rows(m, r);
    for (size_t i = 0; i < m->nnodes; i++)
        r[1].samples += m->nodes[i].samples;
    for (size_t i = 0; i < m->nprocs; i++)
        r[2].samples += m->procs[i].samples;
    rows_average(&r[0], &m->mem_avg);
    rows_average(&r[1], &m->sys_avg);
    rows_average(&r[2], &m->proc_avg);
    r[0].average = &m->mem_avg;
    r[1].average = r[1].samples ? &m->sys_avg : NULL;
    r[2].average = &m->proc_avg;
    mem_picks(m, &r[0]);
    sys_picks(m, &r[1], tmp);
    proc_picks(m, &r[2]);
    for (int s = 1; s < TML_REPORT_ROWS; s++)
        for (size_t k = 0; k < r[s].nfields; k++)
            r[s].field[k] = field_pick(&r[s], k, tmp);
    free(tmp);
    named_ranks(m);
    machine_sentence(m);
    return 0;
}
