/*
 * reload_v05.c - a final_summary.json written by TraceML 0.5.0 (the
 * `traceml-ai` package on the registry, its schema 1.x) into this
 * TraceML's report model, so that `traceml view` and `traceml compare`
 * read last month's runs beside today's.
 *
 * 0.5.0 shapes each section as metadata / diagnosis / issues / global
 * (average, median and worst with an `idx` into the rows) / groups.rows
 * (keyed by global rank, or node rank for system), with its metrics under
 * names of its own. The facts map one to one where both tools measure the
 * same thing:
 *
 *     0.5.0                                   here
 *     step_time rows *_ms (selected clock)    the window's per-rank averages
 *     global.window.diagnosis_clock           the window's clock
 *     global.window.steps_analyzed            window (and common) steps
 *     global.median/worst.step_time_ms.idx    median / worst rank
 *     step_memory rows peak_*_bytes           per-rank CUDA peaks
 *     system rows (node)                      per-node samples; RAM and GPU
 *                                             totals from bytes / percent
 *     process rows                            per-rank CPU, RSS, CUDA memory
 *     diagnosis kind/status/summary/action    kind/label/why/next
 *     STRAGGLER evidence culprit/victim       the straggler (score, cost)
 *     run_context.run.status / .profile       status / watch
 *
 * and what 0.5.0 never measured stays missing: warm-up exclusion, Untraced
 * time, communication, step-to-step noise and percentiles, per-step RSS,
 * TraceML's own overhead, the training's exit code. The box says so on its
 * Source line. Kinds 0.5.0 names differently (HIGH_HOST_MEMORY, CREEP_*)
 * take this TraceML's names; labels, Why and Next stay 0.5.0's words.
 */
#include "report/reload.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag/window.h"
#include "traceml/traceml.h"

#define MAX_ROWS TML_MAX_WORLD_SIZE

static const char lacked[] = "warm-up exclusion, Untraced time, communication, step-to-step "
    "noise and percentiles, per-step RSS, TraceML's overhead, the exit code";

/* ---- rows ------------------------------------------------------------ */

/* A row key ("0", "12") as a number in [0, MAX_ROWS), else -1. */
static long row_key(const char *k)
{
    char *end;
    errno = 0;
    long v = k && *k ? strtol(k, &end, 10) : -1;
    if (!k || !*k || errno || *end || v < 0 || v >= MAX_ROWS)
        return -1;
    return v;
}

static const tml_json *rows_of(const tml_json *sec)
{
    const tml_json *r = tml__json_path(sec, "groups.rows");
    return r && r->type == TML_JSON_OBJECT ? r : NULL;
}

/* The global rank (or node rank for `by_node`) of row i: its identity,
 * else its key. -1 when neither is a number in range. */
static long row_id(const tml_json *rows, size_t i, int by_node)
{
    const tml_json *id = tml__json_get(&rows->items[i], "identity");
    double v = tml__rl_num(id, by_node ? "node_rank" : "global_rank", 0, MAX_ROWS - 1);
    return isnan(v) ? row_key(rows->keys[i]) : (long)v;
}

/* The rank number a global point names ("global.median.step_time_ms"),
 * NAN when it names no row. */
static double point_rank(const tml_json *sec, const char *path)
{
    const tml_json *rows = rows_of(sec);
    const char *idx = tml__json_str(tml__json_get(tml__json_path(sec, path), "idx"));
    for (size_t i = 0; rows && idx && i < rows->n; i++)
        if (strcmp(rows->keys[i], idx) == 0) {
            long r = row_id(rows, i, 0);
            return r < 0 ? NAN : (double)r;
        }
    return NAN;
}

static double metric(const tml_json *row, const char *key, double lo, double hi)
{
    return tml__rl_num(tml__json_get(row, "metrics"), key, lo, hi);
}

/* bytes / (percent / 100): the total a percentage was taken of. */
static double total_of(double bytes, double percent)
{
    double t = bytes * 100.0 / percent;
    return percent > 0 && isfinite(t) && t <= TML_RL_MAX_BYTES ? t : NAN;
}

/* ---- diagnoses ------------------------------------------------------- */

/* 0.5.0's kinds that this TraceML names otherwise, by section. */
static const char *kind_here(const char *kind, const char *section)
{
    static const struct { const char *theirs, *section, *ours; } map[] = {
        { "LOW_GPU_UTILIZATION_UNEXPLAINED", NULL, "LOW_GPU_UTILIZATION" },
        { "LOW_GPU_UTILIZATION", "system", "LOW_GPU_UTIL" },
        { "MODERATE_GPU_UTILIZATION", "system", "MODERATE_GPU_UTIL" },
        { "VERY_HIGH_GPU_MEMORY", NULL, "VERY_HIGH_GPU_MEM" },
        { "HIGH_GPU_MEMORY", NULL, "HIGH_GPU_MEM" },
        { "HIGH_GPU_TEMPERATURE", NULL, "HIGH_GPU_TEMP" },
        { "HIGH_GPU_POWER", NULL, "HIGH_GPU_PWR" },
        { "HIGH_HOST_MEMORY", NULL, "HIGH_RAM" },
        { "CREEP_EARLY", NULL, "MEMORY_RISING" },
        { "CREEP_CONFIRMED", NULL, "MEMORY_CREEP" },
        { "GPU_MEMORY_RESERVED_OVERHANG", NULL, "HIGH_CUDA_RESERVED_ALLOCATED_RATIO" },
    };
    for (size_t i = 0; kind && i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(kind, map[i].theirs) == 0 &&
            (!map[i].section || strcmp(map[i].section, section) == 0))
            return map[i].ours;
    return kind;
}

/* The step-time metric a bound or straggler kind blames (the box's
 * "◀ cause"), -1 none. */
static int cause_of(const char *kind)
{
    static const struct { const char *kind; tml_metric m; } map[] = {
        { "INPUT_BOUND", TML_M_INPUT }, { "H2D_BOUND", TML_M_H2D },
        { "RESIDUAL_HEAVY", TML_M_RESIDUAL }, { "COMPUTE_BOUND", TML_M_COMPUTE },
        { "INPUT_STRAGGLER", TML_M_INPUT }, { "H2D_STRAGGLER", TML_M_H2D },
        { "COMPUTE_STRAGGLER", TML_M_COMPUTE },
    };
    for (size_t i = 0; kind && i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(kind, map[i].kind) == 0)
            return (int)map[i].m;
    return -1;
}

static tml_severity severity_v05(const char *s)
{
    if (s && (strcmp(s, "crit") == 0 || strcmp(s, "CRITICAL") == 0))
        return TML_SEV_CRITICAL;
    if (s && (strcmp(s, "warn") == 0 || strcmp(s, "WARNING") == 0))
        return TML_SEV_WARNING;
    return TML_SEV_INFO;
}

/* A straggler diagnosis's evidence: culprit and victim ranks, the visible
 * cost and its score; 0.5.0 does not count the culprit's steps (0). */
static void straggler_v05(const tml_json *d, const tml_window *w, tml_straggler *s)
{
    static const char *const comp[] = { "input", "h2d", "compute" };
    const tml_json *ev = tml__json_get(d, "evidence");
    memset(s, 0, sizeof(*s));
    s->culprit = tml__rl_rank_index(w, tml__rl_num(ev, "culprit_rank", 0, MAX_ROWS));
    s->victim = tml__rl_rank_index(w, tml__rl_num(ev, "victim_rank", 0, MAX_ROWS));
    s->cost_ns = tml__rl_num(ev, "visible_cost_ms", 0, TML_RL_MAX_MS) * 1e6;
    s->score = tml__rl_num(d, "score", 0, 1e6);
    s->component = -1;
    const char *c = tml__json_str(tml__json_get(ev, "component"));
    for (int k = 0; c && k < 3; k++)
        if (strcmp(c, comp[k]) == 0)
            s->component = k;
    const tml_json *cov = tml__json_get(ev, "component_coverage");
    s->coverage[0] = tml__rl_num(cov, "input", -1e6, 1e6);
    s->coverage[1] = tml__rl_num(cov, "h2d", -1e6, 1e6);
    s->coverage[2] = tml__rl_num(cov, "compute", -1e6, 1e6);
    s->coverage[3] = NAN;
    s->forward_coverage = s->optimizer_coverage = s->residual_coverage = NAN;
    s->valid = s->culprit >= 0 && s->victim >= 0 && !isnan(s->score) && !isnan(s->cost_ns);
}

static void diag_v05(tml_report_loaded *l, const tml_json *o, const char *section,
                     tml_diagnosis *d)
{
    const char *kind = kind_here(tml__json_str(tml__json_get(o, "kind")), section);
    const char *label = tml__json_str(tml__json_get(o, "status"));
    tml__diag_init(d, tml__rl_keep(l, kind, "NO_DATA"), tml__rl_keep(l, label, "n/a"), section,
                   severity_v05(tml__json_str(tml__json_get(o, "severity"))));
    const char *why = tml__json_str(tml__json_get(o, "summary"));
    const char *next = tml__json_str(tml__json_get(o, "action"));
    snprintf(d->why, sizeof(d->why), "%s", why ? why : "");
    snprintf(d->next, sizeof(d->next), "%s", next ? next : "");
    if (strcmp(section, "step_time") != 0)
        return;
    d->cause = cause_of(d->kind);
    if (strstr(d->kind, "STRAGGLER"))
        straggler_v05(o, &l->m.win, &d->straggler);
    else if (isnan(d->share = tml__rl_num(o, "score", 0, 1)))   /* the median per-rank */
        d->share = tml__rl_num(o, "evidence.score", 0, 1);     /* share of a bound verdict */
}

static void issues_v05(tml_report_loaded *l, const tml_json *sec, const char *section,
                       tml_section_diag *out)
{
    const tml_json *arr = tml__json_get(sec, "issues");
    diag_v05(l, tml__json_get(sec, "diagnosis"), section, &out->primary);
    out->nissues = 0;
    for (size_t i = 0; arr && arr->type == TML_JSON_ARRAY && i < arr->n &&
                       out->nissues < TML_DIAG_MAX_ISSUES; i++)
        diag_v05(l, tml__json_at(arr, i), section, &out->issues[out->nissues++]);
}

/* ---- step time ------------------------------------------------------- */

static const struct { const char *key; tml_metric m; } step_keys[] = {
    { "step_time_ms", TML_M_STEP }, { "input_wait_ms", TML_M_INPUT },
    { "h2d_ms", TML_M_H2D }, { "forward_ms", TML_M_FORWARD },
    { "backward_ms", TML_M_BACKWARD }, { "optimizer_ms", TML_M_OPTIMIZER },
    { "compute_ms", TML_M_COMPUTE }, { "residual_ms", TML_M_RESIDUAL },
    { "dataloader_fetch_cpu_ms", TML_M_FETCH_CPU },
};

static int cmp_rank(const void *a, const void *b)
{
    const tml_rank_window *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static void rank_v05(const tml_json *rows, size_t i, size_t steps, int gpu,
                     tml_rank_window *r)
{
    static const int phase_of[] = { -1, TML_PHASE_INPUT, TML_PHASE_H2D, TML_PHASE_FORWARD,
                                    TML_PHASE_BACKWARD, TML_PHASE_OPTIMIZER };
    const tml_json *row = &rows->items[i];
    const tml_json *id = tml__json_get(row, "identity");
    double v;
    r->rank = (int32_t)row_id(rows, i, 0);
    r->node = isnan(v = tml__rl_num(id, "node_rank", 0, MAX_ROWS - 1)) ? 0 : (int32_t)v;
    r->local_rank = isnan(v = tml__rl_num(id, "local_rank", 0, MAX_ROWS - 1)) ? 0 : (int32_t)v;
    for (size_t k = 0; k < sizeof(step_keys) / sizeof(step_keys[0]); k++) {
        r->avg_ns[step_keys[k].m] = metric(row, step_keys[k].key, 0, TML_RL_MAX_MS) * 1e6;
        if (k >= 1 && k <= 5 && isnan(r->avg_ns[step_keys[k].m]))
            r->missing |= TML_PHASE_BIT(phase_of[k]);
    }
    r->nsteps = isnan(r->avg_ns[TML_M_STEP]) ? 0 : steps;
    r->has_gpu = gpu;
}

/* A GPU-clock window's CPU twin (compare picks a clock both runs have):
 * 0.5.0 keeps the CPU Step Time of every rank beside the selected clock's. */
static int cpu_twin(tml_report_loaded *l, const tml_json *rows)
{
    tml_window *w = &l->m.win, *c = &l->m.cpu_win;
    *c = *w;
    c->clock = TML_CLOCK_CPU;
    c->ranks = calloc(w->nranks ? w->nranks : 1, sizeof(*c->ranks));
    if (!c->ranks)
        return TML_ENOMEM;
    l->m.has_cpu_win = 1;
    for (size_t i = 0; i < w->nranks; i++) {
        c->ranks[i] = w->ranks[i];
        for (int k = 0; k < TML_M_COUNT; k++)
            c->ranks[i].avg_ns[k] = NAN;
        c->ranks[i].has_gpu = 0;
    }
    for (size_t i = 0; i < rows->n; i++) {
        int k = tml__rl_rank_index(c, (double)row_id(rows, i, 0));
        if (k >= 0)
            c->ranks[k].avg_ns[TML_M_STEP] =
                metric(&rows->items[i], "step_time_cpu_ms", 0, TML_RL_MAX_MS) * 1e6;
    }
    return 0;
}

static int step_time_v05(tml_report_loaded *l, const tml_json *st)
{
    tml_window *w = &l->m.win;
    const tml_json *rows = rows_of(st), *win = tml__json_path(st, "global.window");
    size_t n = rows ? (rows->n < MAX_ROWS ? rows->n : MAX_ROWS) : 0;
    const char *clk = tml__json_str(tml__json_get(win, "diagnosis_clock"));
    double steps = tml__rl_num(win, "steps_analyzed", 0, TML_RL_MAX_COUNT);
    double first = tml__rl_num(win, "start_step", 0, 1e18);
    double last = tml__rl_num(win, "end_step", 0, 1e18);

    w->clock = clk && strcmp(clk, "gpu") == 0 ? TML_CLOCK_GPU : TML_CLOCK_CPU;
    w->window_steps = w->common_steps = isnan(steps) ? 0 : (size_t)steps;
    w->max_steps = TML_WINDOW_DEFAULT_STEPS;
    w->first_step = isnan(first) ? 0 : (uint64_t)first;
    w->last_step = isnan(last) ? 0 : (uint64_t)last;
    if (tml__rl_ranks(l, n) < 0)
        return TML_ENOMEM;
    for (size_t i = 0; i < n; i++)
        rank_v05(rows, i, w->window_steps, w->clock == TML_CLOCK_GPU, &w->ranks[i]);
    qsort(w->ranks, n, sizeof(*w->ranks), cmp_rank);
    for (size_t i = 0; i < n; i++)
        w->missing |= w->ranks[i].missing;
    w->median_rank = tml__rl_rank_index(w, point_rank(st, "global.median.step_time_ms"));
    w->worst_rank = tml__rl_rank_index(w, point_rank(st, "global.worst.step_time_ms"));
    if (w->median_rank >= 0 && w->worst_rank >= 0) {
        double med = w->ranks[w->median_rank].avg_ns[TML_M_STEP];
        double worst = w->ranks[w->worst_rank].avg_ns[TML_M_STEP];
        w->skew = med > 0 ? (worst - med) / med : NAN;
    }
    for (int k = 1; k < TML_M_COUNT; k++)
        l->m.st.share[k] = tml__diag_share(w, (tml_metric)k);
    tml_section_diag *d = calloc(1, sizeof(*d));
    if (!d)
        return TML_ENOMEM;
    issues_v05(l, st, "step_time", d);
    l->m.st.primary = d->primary;
    memcpy(l->m.st.issues, d->issues, sizeof(d->issues));
    l->m.st.nissues = d->nissues;
    l->m.st.straggler = d->primary.straggler;
    free(d);
    if (w->clock == TML_CLOCK_GPU && rows)
        return cpu_twin(l, rows);
    return 0;
}

/* ---- resources ------------------------------------------------------- */

static void memory_v05(tml_report_loaded *l, const tml_json *sec)
{
    const tml_json *rows = rows_of(sec);
    tml_window *w = &l->m.win;
    for (size_t i = 0; rows && i < rows->n; i++) {
        int k = tml__rl_rank_index(w, (double)row_id(rows, i, 0));
        if (k < 0)
            continue;
        const tml_json *row = &rows->items[i];
        w->ranks[k].cuda_allocated_bytes = metric(row, "peak_allocated_bytes", 0,
                                                  TML_RL_MAX_BYTES);
        w->ranks[k].cuda_reserved_bytes = metric(row, "peak_reserved_bytes", 0,
                                                 TML_RL_MAX_BYTES);
        if (!isnan(w->ranks[k].cuda_reserved_bytes))
            l->m.mem_gpu = 1;
    }
    issues_v05(l, sec, "step_memory", &l->m.mem_s);
}

static int system_v05(tml_report_loaded *l, const tml_json *sec)
{
    const tml_json *rows = rows_of(sec);
    size_t n = rows ? (rows->n < MAX_ROWS ? rows->n : MAX_ROWS) : 0;
    double samples = tml__rl_num(sec, "global.window.samples", 0, TML_RL_MAX_COUNT);
    if (tml__rl_nodes(l, n) < 0)
        return TML_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const tml_json *row = &rows->items[i];
        tml_sys_node *nd = &l->m.nodes[i];
        long id = row_id(rows, i, 1);
        nd->node = id < 0 ? 0 : (int32_t)id;
        nd->samples = isnan(samples) ? 1 : (size_t)samples;
        nd->cpu_percent = metric(row, "cpu_percent", 0, TML_RL_MAX_PERCENT);
        nd->ram_used_bytes = metric(row, "ram_bytes", 0, TML_RL_MAX_BYTES);
        nd->ram_total_bytes = total_of(nd->ram_used_bytes, metric(row, "ram_percent", 0, 100));
        nd->gpu_util_percent = metric(row, "gpu_util_percent", 0, 100);
        nd->gpu_mem_used_bytes = metric(row, "gpu_mem_bytes", 0, TML_RL_MAX_BYTES);
        nd->gpu_mem_total_bytes = total_of(nd->gpu_mem_used_bytes,
                                           metric(row, "gpu_mem_percent", 0, 100));
        nd->gpu_temp_c = metric(row, "gpu_temp_c", -273, 1000);
        nd->gpu_power_w = metric(row, "gpu_power_w", 0, 1e6);
    }
    l->m.gpu_util_percent = tml__rl_num(sec, "global.average.gpu_util_percent", 0, 100);
    issues_v05(l, sec, "system", &l->m.sys_s);
    return 0;
}

static int process_v05(tml_report_loaded *l, const tml_json *sec)
{
    const tml_json *rows = rows_of(sec);
    size_t n = rows ? (rows->n < MAX_ROWS ? rows->n : MAX_ROWS) : 0;
    double samples = tml__rl_num(sec, "global.window.samples", 0, TML_RL_MAX_COUNT);
    if (tml__rl_procs(l, n) < 0)
        return TML_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const tml_json *row = &rows->items[i];
        tml_proc_rank *p = &l->m.procs[i];
        long id = row_id(rows, i, 0);
        double node = tml__rl_num(tml__json_get(row, "identity"), "node_rank", 0, MAX_ROWS - 1);
        p->rank = id < 0 ? 0 : (int32_t)id;
        p->node = isnan(node) ? 0 : (int32_t)node;
        p->samples = isnan(samples) ? 1 : (size_t)samples;
        p->cpu_percent = metric(row, "cpu_percent", 0, TML_RL_MAX_PERCENT);
        p->cpu_capacity_percent = metric(row, "cpu_capacity_percent", 0, TML_RL_MAX_PERCENT);
        p->rss_bytes = metric(row, "ram_bytes", 0, TML_RL_MAX_BYTES);
        p->host_ram_total_bytes = total_of(p->rss_bytes, metric(row, "ram_percent", 0, 100));
        p->cuda_allocated_bytes = metric(row, "gpu_mem_used_bytes", 0, TML_RL_MAX_BYTES);
        p->cuda_reserved_bytes = metric(row, "gpu_mem_reserved_bytes", 0, TML_RL_MAX_BYTES);
        p->device_total_bytes = total_of(p->cuda_reserved_bytes,
                                         metric(row, "gpu_mem_reserved_percent", 0, 100));
    }
    issues_v05(l, sec, "process", &l->m.proc_s);
    return 0;
}

/* ---- the run --------------------------------------------------------- */

static int32_t first_count(const tml_json *doc, const char *const *paths, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = tml__rl_num(doc, paths[i], 0, MAX_ROWS);
        if (!isnan(v))
            return (int32_t)v;
    }
    return -1;
}

static int32_t max_count(const tml_json *doc, const char *const *paths, size_t n)
{
    int32_t best = -1;
    for (size_t i = 0; i < n; i++) {
        double v = tml__rl_num(doc, paths[i], 0, MAX_ROWS);
        if (!isnan(v) && (int32_t)v > best)
            best = (int32_t)v;
    }
    return best;
}

static void identity_v05(const tml_json *doc, tml_report_loaded *l)
{
    static const char *const world[] = { "run_context.execution.expected_world_size",
                                         "meta.world_size" };
    static const char *const seen[] = { "step_time.metadata.global_ranks_seen",
                                        "process.metadata.global_ranks_seen" };
    static const char *const nodes[] = { "run_context.execution.expected_nodes",
                                         "system.metadata.nodes_expected" };
    static const char *const nodes_seen[] = { "system.metadata.nodes_observed",
                                              "meta.nodes_observed" };
    static const char *const gpus[] = { "meta.gpus_observed", "system.metadata.gpus_observed" };
    tml_report_model *m = &l->m;
    const char *s = tml__json_str(tml__json_path(doc, "meta.run_name"));
    snprintf(l->run.name, sizeof(l->run.name), "%s", s ? s : "");
    s = tml__json_str(tml__json_path(doc, "run_context.run.status"));
    snprintf(l->status, sizeof(l->status), "%s", s ? s : "completed");
    s = tml__json_str(tml__json_path(doc, "run_context.run.profile"));
    m->watch = s && strcmp(s, "watch") == 0;
    m->duration_s = tml__rl_num(doc, "duration_s", 0, 1e12);
    m->exit_code = -1;                       /* 0.5.0 does not record it */
    int32_t ws = first_count(doc, world, 2), rr = max_count(doc, seen, 2);
    int32_t rows = (int32_t)(m->win.nranks > m->nprocs ? m->win.nranks : m->nprocs);
    m->ranks_reported = rr > rows ? rr : rows;   /* a watch run's step section saw none */
    m->world_size = ws > m->ranks_reported ? ws : m->ranks_reported;
    int32_t ne = first_count(doc, nodes, 2), no = first_count(doc, nodes_seen, 2);
    m->nodes_reported = no >= 0 ? no : (int32_t)m->nnodes;
    m->nodes_expected = ne > m->nodes_reported ? ne : m->nodes_reported;
    int32_t g = first_count(doc, gpus, 2);
    m->gpus_observed = g > 0 ? g : 0;
}

int tml__report_load_v05(const tml_json *doc, tml_report_loaded *l, char *why, size_t cap)
{
    tml_report_model *m = &l->m;
    const tml_json *st = tml__json_get(doc, "step_time");
    if (!st || st->type != TML_JSON_OBJECT || !tml__json_get(doc, "primary_diagnosis")) {
        snprintf(why, cap, "not a TraceML summary (no step_time or primary_diagnosis)");
        return TML_EPROTO;
    }
    int rc = step_time_v05(l, st);
    if (rc == 0)
        rc = system_v05(l, tml__json_get(doc, "system"));
    if (rc == 0)
        rc = process_v05(l, tml__json_get(doc, "process"));
    if (rc < 0)
        return rc;
    memory_v05(l, tml__json_get(doc, "step_memory"));
    m->mem = m->mem_s.primary;
    m->sys = m->sys_s.primary;
    m->proc = m->proc_s.primary;
    diag_v05(l, tml__json_get(doc, "primary_diagnosis"), "step_time", &m->verdict);
    if (!m->verdict.straggler.valid && strstr(m->verdict.kind, "STRAGGLER"))
        m->verdict.straggler = m->st.straggler;   /* its evidence is in step_time */
    identity_v05(doc, l);
    if (m->watch)
        tml__diag_watch(&m->st.primary, &m->verdict);
    snprintf(l->source, sizeof(l->source), "a TraceML 0.5.0 summary (schema %s), shown in "
             "this TraceML's layout; it lacks %s (n/a here)", l->schema, lacked);
    m->source = l->source;
    m->warmup_unknown = 1;
    return tml__rl_finish(l);
}
