/*
 * reload.c - a final_summary.json back into the report model (reload.h).
 *
 * `traceml view` prints the stored box; `view --re-render` prints it again
 * from the stored data in today's layout, and a summary written by
 * TraceML 0.5.0 can only be shown that way. Both need the one thing the
 * printers read, a tml_report_model, built from a file instead of a run.
 * The rule is the same as everywhere else: the printers only print. So
 * this file only copies: every verdict with its Why and Next, every window
 * and per-rank figure comes from the file; nothing is diagnosed again
 * (thresholds may have changed since, and a re-rendered box must say what
 * the run's own box said). The one thing derived is where a named rank
 * sits in the window (an index), and a reference that does not resolve is
 * dropped rather than followed.
 *
 * Files are input: a number outside its range (a hand-edited summary, 1e300
 * steps) is missing, never cast; arrays are bounded; strings are copied
 * into fixed fields or the loaded summary's pool.
 */
#include "report/reload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag/window.h"
#include "traceml/traceml.h"
#include "base/jsonw.h"

#define MAX_RANKS TML_MAX_WORLD_SIZE
#define SCHEMA_MAJOR 1

/* ---- shared helpers ------------------------------------------------- */

double tml__rl_num(const tml_json *v, const char *path, double lo, double hi)
{
    double d;
    if (path)
        v = tml__json_path(v, path);
    if (!tml__json_num(v, &d) || !isfinite(d) || d < lo || d > hi)
        return NAN;
    return d;
}

const char *tml__rl_keep(tml_report_loaded *l, const char *s, const char *dflt)
{
    if (!s)
        return dflt;
    size_t n = strnlen(s, 256);
    if (l->pool_used + n + 1 > sizeof(l->pool))
        return dflt;
    char *p = l->pool + l->pool_used;
    memcpy(p, s, n);
    p[n] = '\0';
    l->pool_used += n + 1;
    return p;
}

/* Every double of a row NAN, through the printers' own field table. */
static void row_missing(void *row, const tml_report_field *f, size_t nf)
{
    double nan = NAN;
    for (size_t k = 0; k < nf; k++)
        memcpy((char *)row + f[k].off, &nan, sizeof(nan));
}

static void rank_missing(tml_rank_window *r)
{
    memset(r, 0, sizeof(*r));
    for (int k = 0; k < TML_M_COUNT; k++)
        r->avg_ns[k] = NAN;
    r->step_median_ns = r->step_p90_ns = r->step_stddev_ns = r->step_mad_ns = NAN;
    r->rss_bytes = r->cuda_allocated_bytes = r->cuda_reserved_bytes = NAN;
    r->comm_bytes_per_step = r->comm_bytes_per_s = r->comm_collectives_per_step = NAN;
    r->samples_per_step = r->samples_per_s = r->tokens_per_step = r->tokens_per_s = NAN;
    r->flops_per_step = r->flops_per_s = r->peak_flops = NAN;
    r->overhead_ns_per_step = -1;
}

int tml__rl_ranks(tml_report_loaded *l, size_t n)
{
    tml_window *w = &l->m.win;
    w->ranks = calloc(n ? n : 1, sizeof(*w->ranks));
    l->m.mem_rows = calloc(n ? n : 1, sizeof(*l->m.mem_rows));
    if (!w->ranks || !l->m.mem_rows)
        return TML_ENOMEM;
    w->nranks = n;
    tml_report_rows rows[TML_REPORT_ROWS];
    tml__report_rows(&l->m, rows);
    for (size_t i = 0; i < n; i++) {
        rank_missing(&w->ranks[i]);
        row_missing(&l->m.mem_rows[i], rows[0].fields, rows[0].nfields);
    }
    return 0;
}

int tml__rl_nodes(tml_report_loaded *l, size_t n)
{
    tml_report_rows rows[TML_REPORT_ROWS];
    l->m.nodes = calloc(n ? n : 1, sizeof(*l->m.nodes));
    if (!l->m.nodes)
        return TML_ENOMEM;
    l->m.nnodes = n;
    tml__report_rows(&l->m, rows);
    for (size_t i = 0; i < n; i++) {
        row_missing(&l->m.nodes[i], rows[1].fields, rows[1].nfields);
        l->m.nodes[i].worst_gpu = -1;
    }
    return 0;
}

int tml__rl_procs(tml_report_loaded *l, size_t n)
{
    tml_report_rows rows[TML_REPORT_ROWS];
    l->m.procs = calloc(n ? n : 1, sizeof(*l->m.procs));
    if (!l->m.procs)
        return TML_ENOMEM;
    l->m.nprocs = n;
    tml__report_rows(&l->m, rows);
    for (size_t i = 0; i < n; i++) {
        row_missing(&l->m.procs[i], rows[2].fields, rows[2].nfields);
        l->m.procs[i].gpu = -1;
    }
    return 0;
}

int tml__rl_rank_index(const tml_window *w, double rank)
{
    if (isnan(rank))
        return -1;
    for (size_t i = 0; i < w->nranks; i++)
        if ((double)w->ranks[i].rank == rank)
            return (int)i;
    return -1;
}

static int has_rank(const tml_report_model *m, int32_t r)
{
    for (size_t i = 0; i < m->win.nranks; i++)
        if (m->win.ranks[i].rank == r)
            return 1;
    for (size_t i = 0; i < m->nprocs; i++)
        if (m->procs[i].rank == r)
            return 1;
    return 0;
}

int tml__rl_finish(tml_report_loaded *l)
{
    tml_report_model *m = &l->m;
    tml__report_also(m);
    for (size_t i = 0; i < m->win.nranks; i++) {
        const tml_rank_window *r = &m->win.ranks[i];
        tml_mem_row *row = &m->mem_rows[i];   /* the window's peaks, as report.c */
        if (r->nsteps)
            m->active_ranks++;
        row->rank = r->rank;
        row->node = r->node;
        row->peak_allocated_bytes = r->cuda_allocated_bytes;
        row->peak_reserved_bytes = r->cuda_reserved_bytes;
        row->rss_bytes = r->rss_bytes;
    }
    if (tml__report_derive(m) < 0)
        return TML_ENOMEM;
    if (m->missing_ranks || m->world_size <= 0)
        return 0;
    m->missing_ranks = calloc((size_t)m->world_size, sizeof(*m->missing_ranks));
    if (!m->missing_ranks)
        return TML_ENOMEM;
    for (int32_t r = 0; r < m->world_size; r++)
        if (!has_rank(m, r))
            m->missing_ranks[m->nmissing++] = r;
    return 0;
}

/* ---- this TraceML's summary: diagnoses -------------------------------- */

static tml_severity severity_of(const char *s)
{
    if (s && (strcmp(s, "CRITICAL") == 0 || strcmp(s, "crit") == 0))
        return TML_SEV_CRITICAL;
    if (s && (strcmp(s, "WARNING") == 0 || strcmp(s, "warn") == 0))
        return TML_SEV_WARNING;
    return TML_SEV_INFO;
}

static const char *section_of(const char *s, const char *dflt)
{
    static const char *const known[] = { "step_time", "step_memory", "system", "process" };
    for (size_t i = 0; s && i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(s, known[i]) == 0)
            return known[i];
    return dflt;
}

static int metric_of(const char *name)
{
    for (int k = 0; name && k < TML_M_COUNT; k++)
        if (strcmp(name, tml__metric_name((tml_metric)k)) == 0)
            return k;
    return -1;
}

static uint32_t phases_of(const tml_json *arr)
{
    static const char *const names[] = { "input_wait", "h2d", "forward", "backward", "optimizer" };
    uint32_t mask = 0;
    for (size_t i = 0; arr && arr->type == TML_JSON_ARRAY && i < arr->n; i++) {
        const char *s = tml__json_str(tml__json_at(arr, i));
        for (int p = 0; s && p < 5; p++)
            if (strcmp(s, names[p]) == 0)
                mask |= TML_PHASE_BIT(p);
    }
    return mask;
}

static void straggler_ours(const tml_json *o, const tml_window *w, tml_straggler *s)
{
    static const char *const comp[4] = { "input_wait", "h2d", "compute", "outside_step" };
    static const char *const cov[4] = { "input_wait", "h2d", "compute", "outside_step" };
    memset(s, 0, sizeof(*s));
    s->culprit = s->victim = s->component = -1;
    for (int k = 0; k < 4; k++)
        s->coverage[k] = NAN;
    s->forward_coverage = s->optimizer_coverage = s->residual_coverage = NAN;
    if (!o || o->type != TML_JSON_OBJECT)
        return;
    s->culprit = tml__rl_rank_index(w, tml__rl_num(o, "culprit.rank", 0, MAX_RANKS));
    s->victim = tml__rl_rank_index(w, tml__rl_num(o, "victim.rank", 0, MAX_RANKS));
    s->score = tml__rl_num(o, "score", 0, 1e6);
    s->cost_ns = tml__rl_num(o, "visible_cost_ms", 0, TML_RL_MAX_MS) * 1e6;
    const tml_json *c = tml__json_get(o, "coverage_percent");
    for (int k = 0; k < 4; k++)
        s->coverage[k] = tml__rl_num(c, cov[k], -1e6, 1e6) / 100.0;
    s->forward_coverage = tml__rl_num(c, "forward", -1e6, 1e6) / 100.0;
    s->optimizer_coverage = tml__rl_num(c, "optimizer", -1e6, 1e6) / 100.0;
    s->residual_coverage = tml__rl_num(c, "residual", -1e6, 1e6) / 100.0;
    if (isnan(s->coverage[2]))   /* written before compute was forward + optimizer */
        s->coverage[2] = s->forward_coverage;
    const tml_json *cc = tml__json_get(o, "cpu_contention");
    s->cpu_contention = cc && cc->type == TML_JSON_BOOL && cc->boolean;
    const char *cs = tml__json_str(tml__json_get(o, "component"));
    for (int k = 0; cs && k < 4; k++)
        if (strcmp(cs, comp[k]) == 0)
            s->component = k;
    double steps = tml__rl_num(o, "culprit_steps", 0, TML_RL_MAX_COUNT);
    s->culprit_steps = isnan(steps) ? 0 : (size_t)steps;
    s->valid = s->culprit >= 0 && s->victim >= 0 && !isnan(s->score) && !isnan(s->cost_ns);
}

static double opt_index(const tml_json *o, const char *key)
{
    double v = tml__rl_num(o, key, 0, MAX_RANKS);
    return isnan(v) ? -1 : v;
}

static void resource_ours(tml_report_loaded *l, const tml_json *o, tml_res_evidence *r)
{
    memset(r, 0, sizeof(*r));
    r->rank = r->node = r->gpu = -1;
    r->value = r->threshold = r->growth_bytes_per_step = r->growth_bytes = NAN;
    r->projected_full_step = r->capacity_bytes = NAN;
    if (!o || o->type != TML_JSON_OBJECT)
        return;
    r->valid = 1;
    r->metric = tml__rl_keep(l, tml__json_str(tml__json_get(o, "metric")), "value");
    r->value = tml__rl_num(o, "value", -1e18, 1e18);
    r->threshold = tml__rl_num(o, "threshold", -1e18, 1e18);
    r->rank = (int32_t)opt_index(o, "rank");
    r->node = (int32_t)opt_index(o, "node");
    r->gpu = (int32_t)opt_index(o, "gpu");
    r->growth_bytes_per_step = tml__rl_num(o, "growth_bytes_per_step", -1e18, 1e18);
    r->growth_bytes = tml__rl_num(o, "growth_bytes", -1e18, 1e18);
    r->projected_full_step = tml__rl_num(o, "projected_full_step", 0, 1e18);
    r->capacity_bytes = tml__rl_num(o, "capacity_bytes", 0, TML_RL_MAX_BYTES);
}

static void diag_ours(tml_report_loaded *l, const tml_json *o, const char *section,
                      tml_diagnosis *d)
{
    const char *kind = tml__json_str(tml__json_get(o, "kind"));
    const char *label = tml__json_str(tml__json_get(o, "label"));
    tml__diag_init(d, tml__rl_keep(l, kind, "NO_DATA"), tml__rl_keep(l, label, "n/a"),
                   section_of(tml__json_str(tml__json_get(o, "section")), section),
                   severity_of(tml__json_str(tml__json_get(o, "severity"))));
    const char *why = tml__json_str(tml__json_get(o, "why"));
    const char *next = tml__json_str(tml__json_get(o, "next"));
    snprintf(d->why, sizeof(d->why), "%s", why ? why : "");
    snprintf(d->next, sizeof(d->next), "%s", next ? next : "");
    const tml_json *ev = tml__json_get(o, "evidence");
    d->cause = metric_of(tml__json_str(tml__json_get(ev, "cause")));
    d->share = tml__rl_num(ev, "share_percent", -1e6, 1e6) / 100.0;
    d->threshold = tml__rl_num(ev, "threshold_percent", -1e6, 1e6) / 100.0;
    d->missing = phases_of(tml__json_get(ev, "missing_phases"));
    straggler_ours(tml__json_get(ev, "straggler"), &l->m.win, &d->straggler);
    resource_ours(l, tml__json_get(ev, "resource"), &d->res);
}

static void issues_ours(tml_report_loaded *l, const tml_json *sec, const char *section,
                        tml_diagnosis *issues, size_t *n)
{
    const tml_json *arr = tml__json_get(sec, "issues");
    *n = 0;
    for (size_t i = 0; arr && arr->type == TML_JSON_ARRAY && i < arr->n &&
                       *n < TML_DIAG_MAX_ISSUES; i++)
        diag_ours(l, tml__json_at(arr, i), section, &issues[(*n)++]);
}

/* ---- this TraceML's summary: sections --------------------------------- */

static void window_ours(const tml_json *wo, tml_window *w)
{
    const char *clk = tml__json_str(tml__json_get(wo, "clock"));
    double v;
    w->clock = clk && strcmp(clk, "gpu") == 0 ? TML_CLOCK_GPU : TML_CLOCK_CPU;
#define COUNT(field, key) do { v = tml__rl_num(wo, key, 0, TML_RL_MAX_COUNT); \
        w->field = isnan(v) ? 0 : (size_t)v; } while (0)
    COUNT(max_steps, "max_steps");
    COUNT(common_steps, "common_steps");
    COUNT(window_steps, "window_steps");
    COUNT(warmup_steps, "warmup_steps_excluded");
    COUNT(aborted_steps, "aborted_steps_excluded");
    COUNT(epoch_start_steps, "epoch_start_steps_excluded");
#undef COUNT
    w->epoch_start_wait_ns = tml__rl_num(wo, "epoch_start_wait_ms", 0, TML_RL_MAX_MS) * 1e6;
    w->between_epochs_ns = tml__rl_num(wo, "between_epochs_ms", 0, TML_RL_MAX_MS) * 1e6;
    v = tml__rl_num(wo, "first_step", 0, 1e18);
    w->first_step = isnan(v) ? 0 : (uint64_t)v;
    v = tml__rl_num(wo, "last_step", 0, 1e18);
    w->last_step = isnan(v) ? 0 : (uint64_t)v;
}

static void rank_ours(const tml_json *o, tml_rank_window *r, int gpu)
{
    char k[64];
    r->rank = (int32_t)opt_index(o, "rank");
    r->node = (int32_t)opt_index(o, "node");
    r->local_rank = (int32_t)opt_index(o, "local_rank");
    double v = tml__rl_num(o, "steps", 0, TML_RL_MAX_COUNT);
    r->nsteps = isnan(v) ? 0 : (size_t)v;
    for (int m = 0; m < TML_M_COUNT; m++) {
        snprintf(k, sizeof(k), "%s_ms", tml__metric_name((tml_metric)m));
        r->avg_ns[m] = tml__rl_num(o, k, 0, TML_RL_MAX_MS) * 1e6;
    }
    r->comm_bytes_per_step = tml__rl_num(o, "communication_bytes_per_step", 0, TML_RL_MAX_BYTES);
    r->comm_bytes_per_s = tml__rl_num(o, "communication_bytes_per_s", 0, TML_RL_MAX_BYTES);
    r->comm_collectives_per_step = tml__rl_num(o, "collectives_per_step", 0, TML_RL_MAX_COUNT);
    r->samples_per_s = tml__rl_num(o, "samples_per_s", 0, TML_RL_MAX_COUNT);
    r->tokens_per_s = tml__rl_num(o, "tokens_per_s", 0, TML_RL_MAX_COUNT);
    r->flops_per_s = tml__rl_num(o, "achieved_flops_per_s", 0, TML_RL_MAX_FLOPS);
    double mfu = tml__rl_num(o, "mfu_percent", 0, 1e4);
    r->peak_flops = mfu > 0 ? r->flops_per_s / (mfu / 100.0) : NAN;
    r->step_median_ns = tml__rl_num(o, "step_time_p50_ms", 0, TML_RL_MAX_MS) * 1e6;
    r->step_p90_ns = tml__rl_num(o, "step_time_p90_ms", 0, TML_RL_MAX_MS) * 1e6;
    r->step_stddev_ns = tml__rl_num(o, "step_time_stddev_ms", 0, TML_RL_MAX_MS) * 1e6;
    r->step_mad_ns = tml__rl_num(o, "step_time_mad_ms", 0, TML_RL_MAX_MS) * 1e6;
    r->missing = phases_of(tml__json_get(o, "missing_phases"));
    v = tml__rl_num(o, "culprit_steps", 0, TML_RL_MAX_COUNT);
    r->culprit_steps = isnan(v) ? 0 : (size_t)v;
    v = tml__rl_num(o, "traceml_overhead_us_per_step", 0, 1e9);
    r->overhead_ns_per_step = isnan(v) ? -1 : (int64_t)(v * 1000.0);
    v = tml__rl_num(o, "records_dropped", 0, 1e18);
    r->records_dropped = isnan(v) ? 0 : (uint64_t)v;
    v = tml__rl_num(o, "events_dropped", 0, 1e18);
    r->events_dropped = isnan(v) ? 0 : (uint64_t)v;
    r->has_gpu = gpu;
}

static int step_time_ours(tml_report_loaded *l, const tml_json *st)
{
    tml_window *w = &l->m.win;
    const tml_json *pr = tml__json_get(st, "per_rank");
    size_t n = pr && pr->type == TML_JSON_ARRAY ? pr->n : 0;
    if (n > MAX_RANKS)
        n = MAX_RANKS;
    window_ours(tml__json_get(st, "window"), w);
    if (tml__rl_ranks(l, n) < 0)
        return TML_ENOMEM;
    for (size_t i = 0; i < n; i++)
        rank_ours(tml__json_at(pr, i), &w->ranks[i], w->clock == TML_CLOCK_GPU);
    w->median_rank = tml__rl_rank_index(w, tml__rl_num(st, "median.rank", 0, MAX_RANKS));
    w->worst_rank = tml__rl_rank_index(w, tml__rl_num(st, "worst.rank", 0, MAX_RANKS));
    w->skew = tml__rl_num(st, "skew_percent", -1e6, 1e6) / 100.0;
    const tml_json *sh = tml__json_get(st, "shares_percent");
    l->m.st.share[TML_M_STEP] = NAN;
    for (int k = 1; k < TML_M_COUNT; k++)
        l->m.st.share[k] = tml__rl_num(sh, tml__metric_name((tml_metric)k), -1e6, 1e6) / 100.0;
    l->m.st.untraced_wall = tml__rl_num(st, "untraced_wall_percent", 0, 100) / 100.0;
    l->m.st.between_epochs_wall = tml__rl_num(st, "between_epochs_wall_percent", 0, 100) / 100.0;
    straggler_ours(tml__json_get(st, "straggler"), w, &l->m.st.straggler);
    diag_ours(l, tml__json_get(st, "diagnosis"), "step_time", &l->m.st.primary);
    issues_ours(l, st, "step_time", l->m.st.issues, &l->m.st.nissues);
    /* the median rank's block medians, which compare tests */
    const tml_json *bl = tml__json_path(st, w->clock == TML_CLOCK_GPU
                                        ? "by_clock.gpu.step_time_blocks_ms"
                                        : "by_clock.cpu.step_time_blocks_ms");
    if (w->median_rank >= 0) {
        tml_rank_window *r = &w->ranks[w->median_rank];
        for (size_t b = 0; bl && bl->type == TML_JSON_ARRAY && b < bl->n &&
                           r->nblocks < TML_STEP_BLOCKS; b++) {
            double v = tml__rl_num(tml__json_at(bl, b), NULL, 0, TML_RL_MAX_MS);
            if (!isnan(v))
                r->block_ns[r->nblocks++] = v * 1e6;
        }
    }
    return 0;
}

/* Reads the rows of a resource section through the printers' field table:
 * the keys the JSON was written with are the keys read back. */
static void fields_in(const tml_json *o, const tml_report_rows *t, void *row)
{
    for (size_t k = 0; k < t->nfields; k++) {
        double v = tml__rl_num(o, t->fields[k].key, -1e18, 1e18);
        memcpy((char *)row + t->fields[k].off, &v, sizeof(v));
    }
}

static int resources_ours(tml_report_loaded *l, const tml_json *doc)
{
    tml_report_model *m = &l->m;
    const tml_json *mem = tml__json_get(doc, "step_memory");
    const tml_json *sys = tml__json_get(doc, "system");
    const tml_json *proc = tml__json_get(doc, "process");
    const tml_json *nodes = tml__json_get(sys, "per_node");
    const tml_json *procs = tml__json_get(proc, "per_rank");
    const tml_json *mrows = tml__json_get(mem, "per_rank");
    size_t nn = nodes && nodes->type == TML_JSON_ARRAY ? nodes->n : 0;
    size_t np = procs && procs->type == TML_JSON_ARRAY ? procs->n : 0;
    if (tml__rl_nodes(l, nn < MAX_RANKS ? nn : MAX_RANKS) < 0 ||
        tml__rl_procs(l, np < MAX_RANKS ? np : MAX_RANKS) < 0)
        return TML_ENOMEM;
    tml_report_rows t[TML_REPORT_ROWS];
    tml__report_rows(m, t);
    for (size_t i = 0; i < m->nnodes; i++) {
        const tml_json *o = tml__json_at(nodes, i);
        fields_in(o, &t[1], &m->nodes[i]);
        m->nodes[i].node = (int32_t)opt_index(o, "node");
        double s = tml__rl_num(o, "samples", 0, TML_RL_MAX_COUNT);
        m->nodes[i].samples = isnan(s) ? 0 : (size_t)s;
    }
    for (size_t i = 0; i < m->nprocs; i++) {
        const tml_json *o = tml__json_at(procs, i);
        fields_in(o, &t[2], &m->procs[i]);
        m->procs[i].rank = (int32_t)opt_index(o, "rank");
        m->procs[i].node = (int32_t)opt_index(o, "node");
        double s = tml__rl_num(o, "samples", 0, TML_RL_MAX_COUNT);
        m->procs[i].samples = isnan(s) ? 0 : (size_t)s;
    }
    for (size_t i = 0; mrows && mrows->type == TML_JSON_ARRAY && i < mrows->n; i++) {
        const tml_json *o = tml__json_at(mrows, i);
        int k = tml__rl_rank_index(&m->win, tml__rl_num(o, "rank", 0, MAX_RANKS));
        if (k < 0)
            continue;
        tml_mem_row *row = &m->mem_rows[k];
        fields_in(o, &t[0], row);
        m->win.ranks[k].cuda_allocated_bytes = row->peak_allocated_bytes;
        m->win.ranks[k].cuda_reserved_bytes = row->peak_reserved_bytes;
        m->win.ranks[k].rss_bytes = row->rss_bytes;
    }
    const char *series = tml__json_str(tml__json_get(mem, "series"));
    m->mem_gpu = series && strcmp(series, "cuda_reserved") == 0;
    m->gpu_util_percent = tml__rl_num(sys, "average.gpu_util_percent", 0, 100);
    diag_ours(l, tml__json_get(mem, "diagnosis"), "step_memory", &m->mem_s.primary);
    diag_ours(l, tml__json_get(sys, "diagnosis"), "system", &m->sys_s.primary);
    diag_ours(l, tml__json_get(proc, "diagnosis"), "process", &m->proc_s.primary);
    issues_ours(l, mem, "step_memory", m->mem_s.issues, &m->mem_s.nissues);
    issues_ours(l, sys, "system", m->sys_s.issues, &m->sys_s.nissues);
    issues_ours(l, proc, "process", m->proc_s.issues, &m->proc_s.nissues);
    m->mem = m->mem_s.primary;
    m->sys = m->sys_s.primary;
    m->proc = m->proc_s.primary;
    return 0;
}

/* ---- this TraceML's summary: meta ------------------------------------ */

static int32_t count32(const tml_json *o, const char *key)
{
    double v = tml__rl_num(o, key, 0, MAX_RANKS);
    return isnan(v) ? 0 : (int32_t)v;
}

static uint64_t count64(const tml_json *o, const char *key)
{
    double v = tml__rl_num(o, key, 0, 1e18);
    return isnan(v) ? 0 : (uint64_t)v;
}

static void conflicts_ours(tml_run *run, const tml_json *arr)
{
    for (size_t i = 0; arr && arr->type == TML_JSON_ARRAY && i < arr->n; i++) {
        const tml_json *o = tml__json_at(arr, i);
        if (run->nconflicts >= TML_MAX_CONFLICTS)
            break;
        const char *kind = tml__json_str(tml__json_get(o, "kind"));
        tml_rank_conflict *c = tml__run_add_conflict(run, !kind ? TML_CONFLICT_CLAIMED
            : strcmp(kind, "restarted") == 0 ? TML_CONFLICT_RESTARTED
            : strcmp(kind, "second_connection") == 0 ? TML_CONFLICT_SECOND_CONNECTION
            : TML_CONFLICT_CLAIMED);
        const char *h = tml__json_str(tml__json_get(o, "host"));
        const char *fh = tml__json_str(tml__json_get(o, "first_host"));
        c->claimed = count32(o, "claimed_rank");
        c->reported_as = count32(o, "reported_as");
        c->pid = (int32_t)count64(o, "pid");
        c->first_pid = (int32_t)count64(o, "first_pid");
        snprintf(c->host, sizeof(c->host), "%s", h ? h : "?");
        snprintf(c->first_host, sizeof(c->first_host), "%s", fh ? fh : "?");
        c->incarnation = (uint32_t)count64(o, "incarnation");   /* absent before: 0 */
        c->first_step = count64(o, "first_step");
    }
}

/* The rank an entry of meta.lost_ranks / exit_signals names ({rank,
 * node}), added when the file had no row of it; NULL out of memory. */
static tml_rank *named_rank(tml_run *run, const tml_json *o)
{
    tml_rank_info info;
    memset(&info, 0, sizeof(info));
    info.rank = count32(o, "rank");
    info.node_rank = count32(o, "node");
    return tml__run_rank(run, &info);
}

/* meta.exit_signals: ranks that died of a signal at exit, after their
 * goodbye (absent before: none). */
static int exit_signals_ours(tml_run *run, const tml_json *arr)
{
    for (size_t i = 0; arr && arr->type == TML_JSON_ARRAY && i < arr->n && i < 4096; i++) {
        const tml_json *o = tml__json_at(arr, i);
        tml_rank *r = named_rank(run, o);
        if (!r)
            return TML_ENOMEM;
        r->exit_signal = count32(o, "signal");
    }
    return 0;
}

/* meta.lost_ranks: ranks whose connection ended without a goodbye; the
 * box names them with their last step, kept as a one-record rank. */
static int lost_ours(tml_run *run, const tml_json *arr)
{
    for (size_t i = 0; arr && arr->type == TML_JSON_ARRAY && i < arr->n && i < 4096; i++) {
        const tml_json *o = tml__json_at(arr, i);
        tml_rank *r = named_rank(run, o);
        if (!r)
            return TML_ENOMEM;
        r->lost = 1;
        double last = tml__rl_num(o, "last_step", 0, 1e18);
        if (!isnan(last) && r->nsteps == 0) {
            tml_step_record rec;
            memset(&rec, 0, sizeof(rec));
            rec.step = (uint64_t)last;
            if (tml__run_add_steps(r, &rec, 1) < 0)
                return TML_ENOMEM;
        }
    }
    return 0;
}

static void thresholds_ours(tml_thresholds *t, const tml_json *o)
{
    size_t n;
    const tml_threshold_key *k = tml__thresholds_keys(&n);
    tml__thresholds_default(t);
    for (size_t i = 0; i < n; i++) {
        double v = k[i].integer ? tml__rl_num(o, k[i].key, 1, 1e9) : tml__rl_num(o, k[i].key, 0, 1);
        if (!isnan(v))
            tml__threshold_put(t, &k[i], v);
    }
}

/* A JSON object kept whole (compact, malloc'd), NULL when v is not one. */
static char *kept_whole(const tml_json *v)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    if (!v || v->type != TML_JSON_OBJECT)
        return NULL;
    tml__json_add_canon(&sb, v);
    if (sb.failed) {
        tml__sb_release(&sb);
        return NULL;
    }
    return sb.buf;
}

static int meta_ours(tml_report_loaded *l, const tml_json *meta)
{
    tml_report_model *m = &l->m;
    const char *s;
    if ((s = tml__json_str(tml__json_get(meta, "run_id"))))
        snprintf(l->run.id, sizeof(l->run.id), "%s", s);
    if ((s = tml__json_str(tml__json_get(meta, "partial"))))
        snprintf(l->run.partial, sizeof(l->run.partial), "%s", s);
    if ((s = tml__json_str(tml__json_get(meta, "stopped_by"))) && strcmp(s, "tune") == 0)
        snprintf(l->run.stopped_by, sizeof(l->run.stopped_by), "tune");
    s = tml__json_str(tml__json_get(meta, "step_detection"));
    m->step_detection = s && strcmp(s, "automatic") == 0 ? "automatic"
                        : s && strcmp(s, "marked") == 0 ? "marked" : NULL;
    const tml_json *at = tml__json_get(meta, "also_timed_models");
    for (size_t i = 0; at && at->type == TML_JSON_ARRAY && i < at->n; i++)
        tml__report_add_models(m->also_timed, sizeof(m->also_timed),
                               tml__json_str(tml__json_at(at, i)));
    s = tml__json_str(tml__json_get(meta, "profile"));
    m->watch = s && strcmp(s, "watch") == 0;
    conflicts_ours(&l->run, tml__json_get(meta, "rank_conflicts"));
    l->workload = kept_whole(tml__json_get(meta, "workload"));   /* what ran */
    m->workload_json = l->workload;

    m->world_size = count32(meta, "world_size");
    m->ranks_reported = count32(meta, "ranks_reported");
    m->nodes_expected = count32(meta, "nodes");
    m->nodes_reported = count32(meta, "nodes_reported");
    m->gpus_observed = count32(meta, "gpus_observed");
    m->overhead_us = tml__rl_num(meta, "traceml_overhead_us_per_step", 0, 1e9);
    m->background_cpu_percent = tml__rl_num(meta, "traceml_background_cpu_percent", 0, 1e7);
    m->overhead_total_us = tml__rl_num(meta, "traceml_overhead_total_us_per_step", 0, 1e9);
    m->records_dropped = count64(meta, "records_dropped");
    m->events_dropped = count64(meta, "events_dropped");
    thresholds_ours(&m->th, tml__json_get(meta, "thresholds"));
    const tml_json *mr = tml__json_get(meta, "missing_ranks");
    size_t n = mr && mr->type == TML_JSON_ARRAY ? mr->n : 0;
    if (n > MAX_RANKS)
        n = MAX_RANKS;
    m->missing_ranks = calloc(n ? n : 1, sizeof(*m->missing_ranks));
    if (!m->missing_ranks)
        return TML_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        double v = tml__rl_num(tml__json_at(mr, i), NULL, 0, MAX_RANKS);
        if (!isnan(v))
            m->missing_ranks[m->nmissing++] = (int32_t)v;
    }
    int rc = lost_ours(&l->run, tml__json_get(meta, "lost_ranks"));
    return rc < 0 ? rc : exit_signals_ours(&l->run, tml__json_get(meta, "exit_signals"));
}

/* "contention" (absent before TraceML 0.6: everything unknown). */
static void contention_ours(tml_contention *c, const tml_json *o)
{
    tml__contention_init(c);
    if (!o || o->type != TML_JSON_OBJECT)
        return;
    double cores = tml__rl_num(o, "cores", 1, 1e6);
    c->cores = isnan(cores) ? 0 : (int32_t)cores;
    c->host_cpu_percent = tml__rl_num(o, "host_cpu_percent", 0, 100);
    c->training_cpu_percent = tml__rl_num(o, "training_cpu_percent", 0, 100);
    c->other_cpu_percent = tml__rl_num(o, "other_cpu_percent", 0, 100);
    c->runq_wait_percent = tml__rl_num(o, "runq_wait_percent", 0, 100);
    const tml_json *g = tml__json_get(o, "gpu_shared");
    if (g && g->type == TML_JSON_BOOL)
        c->gpu_shared = g->boolean ? 1 : 0;
}

/* "throughput" (absent before TraceML 0.7: nothing counted). */
static void throughput_ours(tml_window *w, const tml_json *o)
{
    w->samples_per_s = tml__rl_num(o, "samples_per_s", 0, TML_RL_MAX_COUNT);
    w->tokens_per_s = tml__rl_num(o, "tokens_per_s", 0, TML_RL_MAX_COUNT);
    w->samples_per_step = tml__rl_num(o, "samples_per_step", 0, TML_RL_MAX_COUNT);
    w->tokens_per_step = tml__rl_num(o, "tokens_per_step", 0, TML_RL_MAX_COUNT);
    w->flops_per_step = tml__rl_num(o, "flops_per_step", 0, TML_RL_MAX_FLOPS);
    w->flops_per_s = tml__rl_num(o, "achieved_flops_per_s", 0, TML_RL_MAX_FLOPS);
    w->peak_flops = tml__rl_num(o, "peak_flops_per_s", 0, TML_RL_MAX_FLOPS);
    w->mfu = tml__rl_num(o, "mfu_percent", 0, 1e4) / 100.0;
    const char *by = tml__json_str(tml__json_get(o, "flops_counted_by"));
    const char *dtype = tml__json_str(tml__json_get(o, "dtype"));
    w->flops_how = (by && strcmp(by, "flop_counter") == 0 ? TML_FLOPS_COUNTED : 0) |
                   (dtype && strcmp(dtype, "16-bit") == 0 ? TML_FLOPS_16BIT
                    : dtype && strcmp(dtype, "tf32") == 0 ? TML_FLOPS_TF32 : 0);
}

static int load_ours(const tml_json *doc, tml_report_loaded *l, char *why, size_t cap)
{
    tml_report_model *m = &l->m;
    const tml_json *st = tml__json_get(doc, "step_time");
    if (!st || st->type != TML_JSON_OBJECT || !tml__json_get(doc, "primary_diagnosis")) {
        snprintf(why, cap, "not a TraceML summary (no step_time or primary_diagnosis)");
        return TML_EPROTO;
    }
    const char *name = tml__json_str(tml__json_path(doc, "meta.run_name"));
    snprintf(l->run.name, sizeof(l->run.name), "%s", name ? name : "");
    const char *status = tml__json_str(tml__json_get(doc, "status"));
    snprintf(l->status, sizeof(l->status), "%s", status ? status : "completed");
    double code = tml__rl_num(doc, "exit_code", -1, 1e6);
    m->exit_code = isnan(code) ? -1 : (int)code;
    m->duration_s = tml__rl_num(doc, "duration_s", 0, 1e12);
    int rc = step_time_ours(l, st);
    if (rc == 0)
        rc = meta_ours(l, tml__json_get(doc, "meta"));
    l->run_context = kept_whole(tml__json_get(doc, "run_context"));
    m->run_context_json = l->run_context;
    if (rc == 0)
        rc = resources_ours(l, doc);
    if (rc < 0)
        return rc;
    contention_ours(&m->win.contention, tml__json_get(doc, "contention"));
    throughput_ours(&m->win, tml__json_get(doc, "throughput"));
    diag_ours(l, tml__json_get(doc, "primary_diagnosis"), "step_time", &m->verdict);
    tml__rl_deep_dive(&m->dd, tml__json_get(doc, "deep_dive"));
    return tml__rl_finish(l);
}

/* ---- entry points ---------------------------------------------------- */

int tml__summary_is_v05(const tml_json *doc)
{
    const tml_json *st = tml__json_get(doc, "step_time");
    return tml__json_get(st, "global") != NULL && tml__json_get(st, "per_rank") == NULL;
}

static void loaded_init(tml_report_loaded *l, const char *path, int width)
{
    tml_report_model *m = &l->m;
    tml__run_init(&l->run, "", "");
    m->run = &l->run;
    m->status = l->status;
    m->duration_s = NAN;
    m->exit_code = -1;
    snprintf(l->json_path, sizeof(l->json_path), "%s", path ? path : "");
    m->json_path = path ? l->json_path : NULL;
    m->width = tml__report_width(width);
    tml__thresholds_default(&m->th);
    m->win.median_rank = m->win.worst_rank = -1;
    m->win.skew = NAN;
    m->win.epoch_start_wait_ns = NAN;
    m->win.between_epochs_ns = NAN;
    tml__contention_init(&m->win.contention);
    m->overhead_us = m->background_cpu_percent = m->overhead_total_us = NAN;
    m->gpu_util_percent = NAN;
    for (int k = 0; k < TML_M_COUNT; k++)
        m->st.share[k] = NAN;
    m->st.untraced_wall = m->st.between_epochs_wall = NAN;
    tml__diag_init(&m->verdict, "NO_DATA", "NO DATA", "step_time", TML_SEV_INFO);
    m->st.primary = m->verdict;
}

static int schema_check(const tml_json *doc, tml_report_loaded *l, char *why, size_t cap)
{
    long major;
    const tml_json *sv = tml__json_get(doc, "schema_version");
    if (!doc || doc->type != TML_JSON_OBJECT) {
        snprintf(why, cap, "not a TraceML summary (not a JSON object)");
        return TML_EPROTO;
    }
    if (!sv) {
        snprintf(why, cap, "not a TraceML summary (no schema_version)");
        return TML_EPROTO;
    }
    if (!tml__json_version_major(sv, &major) && sv->type == TML_JSON_NUMBER &&
        isfinite(sv->number) && sv->number >= 1 && sv->number < 2)
        major = 1;                       /* 0.5.0 writes 1.9, a number */
    else if (!tml__json_version_major(sv, &major))
        major = -1;
    if (major != SCHEMA_MAJOR) {
        snprintf(why, cap, "unsupported schema_version (this traceml reads version 1 and "
                 "TraceML 0.5.0's 1.x)");
        return TML_EPROTO;
    }
    if (sv->type == TML_JSON_NUMBER)
        snprintf(l->schema, sizeof(l->schema), "%g", sv->number);
    else
        snprintf(l->schema, sizeof(l->schema), "%.20s", tml__json_str(sv));
    return 0;
}

int tml__report_load(const tml_json *doc, const char *path, int width,
                     tml_report_loaded **out, char *why, size_t cap)
{
    *out = NULL;
    tml_report_loaded *l = calloc(1, sizeof(*l));
    if (!l)
        return TML_ENOMEM;
    loaded_init(l, path, width);
    int rc = schema_check(doc, l, why, cap);
    if (rc == 0 && tml__summary_is_v05(doc)) {
        l->kind = TML_SUMMARY_V05;
        rc = tml__report_load_v05(doc, l, why, cap);
    } else if (rc == 0) {
        l->kind = TML_SUMMARY_OURS;
        rc = load_ours(doc, l, why, cap);
    }
    if (rc == 0) {
        const char *g = tml__json_str(tml__json_get(doc, "generated_at"));
        snprintf(l->m.generated_at, sizeof(l->m.generated_at), "%s", g ? g : "");
        if (strcmp(l->status, "completed") != 0 && strcmp(l->status, "failed") != 0 &&
            strcmp(l->status, "interrupted") != 0 && strcmp(l->status, "running") != 0)
            snprintf(l->status, sizeof(l->status), "completed");
        *out = l;
        return 0;
    }
    if (rc == TML_ENOMEM)
        snprintf(why, cap, "out of memory");
    tml__report_loaded_free(l);
    return rc;
}

void tml__report_loaded_free(tml_report_loaded *l)
{
    if (!l)
        return;
    tml__report_model_release(&l->m);
    tml__run_release(&l->run);
    free(l->workload);
    free(l->run_context);
    free(l);
}
