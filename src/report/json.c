/*
 * json.c - final_summary.json (schema: docs/summary-json.md and
 * docs/summary.schema.json).
 *
 * The JSON is the contract other tools build on (compare, view, W&B/MLflow
 * export, CI gates), so it is regular on purpose: every key is always
 * present, missing values are null (never 0, never omitted), units are in
 * the key names, and every section has the same shape (diagnosis, issues,
 * window, average, median, worst, per_rank or per_node). A small writer
 * below keeps commas and indentation right so that the emitting code reads
 * like the document it writes.
 */
#include "report/model.h"
#include "base/jsonw.h"
#include "gpu/peak.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

typedef tml_jsonw jw;

static void jw_ms(jw *w, const char *key, double ns)
{
    tml__jw_num(w, key, ns / 1e6, 3);
}

static void jw_pct(jw *w, const char *key, double fraction)
{
    tml__jw_num(w, key, fraction * 100.0, 2);
}

static void jw_bytes(jw *w, const char *key, double b)
{
    tml__jw_num(w, key, b, 0);
}

/* ---- pieces --------------------------------------------------------- */

static void rank_label(const tml_rank_window *r, char *out, size_t cap)
{
    snprintf(out, cap, "R%d/N%d", (int)r->rank, (int)r->node);
}

static void rank_ref(jw *w, const char *key, const tml_window *win, int idx)
{
    char l[32];
    if (idx < 0 || (size_t)idx >= win->nranks) {
        tml__jw_null(w, key);
        return;
    }
    const tml_rank_window *r = &win->ranks[idx];
    tml__jw_open(w, key, '{');
    tml__jw_int(w, "rank", r->rank);
    tml__jw_int(w, "node", r->node);
    rank_label(r, l, sizeof(l));
    tml__jw_str(w, "label", l);
    tml__jw_close(w, '}');
}

/* The phases missing (communication is not: a run of one process never
 * communicates, and nothing is left unexplained by that). */
static void phase_array(jw *w, const char *key, uint32_t mask)
{
    static const char *names[TML_PHASE_COUNT] = {
        "input_wait", "h2d", "forward", "backward", "optimizer", "communication"
    };
    mask &= ~TML_PHASE_BIT(TML_PHASE_COMM);
    tml__jw_open(w, key, '[');
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        if (mask & TML_PHASE_BIT(p))
            tml__jw_str(w, NULL, names[p]);
    tml__jw_close(w, ']');
}

static void straggler_obj(jw *w, const char *key, const tml_window *win, const tml_straggler *s)
{
    static const char *comp[4] = { "input_wait", "h2d", "compute", "outside_step" };
    if (!s->valid) {
        tml__jw_null(w, key);
        return;
    }
    tml__jw_open(w, key, '{');
    tml__jw_num(w, "score", s->score, 4);
    rank_ref(w, "culprit", win, s->culprit);
    rank_ref(w, "victim", win, s->victim);
    jw_ms(w, "visible_cost_ms", s->cost_ns);
    tml__jw_open(w, "coverage_percent", '{');
    jw_pct(w, "input_wait", s->coverage[0]);
    jw_pct(w, "h2d", s->coverage[1]);
    jw_pct(w, "compute", s->coverage[2]);
    jw_pct(w, "forward", s->forward_coverage);
    jw_pct(w, "optimizer", s->optimizer_coverage);
    jw_pct(w, "residual", s->residual_coverage);
    jw_pct(w, "outside_step", s->coverage[3]);
    tml__jw_close(w, '}');
    tml__jw_str(w, "component", s->component >= 0 ? comp[s->component] : NULL);
    tml__jw_bool(w, "cpu_contention", s->cpu_contention);
    tml__jw_int(w, "culprit_steps", (long long)s->culprit_steps);
    tml__jw_int(w, "window_steps", (long long)win->window_steps);
    tml__jw_close(w, '}');
}

/* Evidence of a resource finding (step memory, system, process). */
static void resource_obj(jw *w, const char *key, const tml_res_evidence *r)
{
    if (!r->valid) {
        tml__jw_null(w, key);
        return;
    }
    tml__jw_open(w, key, '{');
    tml__jw_str(w, "metric", r->metric);
    tml__jw_num(w, "value", r->value, 3);
    tml__jw_num(w, "threshold", r->threshold, 3);
    if (r->rank >= 0)
        tml__jw_int(w, "rank", r->rank);
    else
        tml__jw_null(w, "rank");
    if (r->node >= 0)
        tml__jw_int(w, "node", r->node);
    else
        tml__jw_null(w, "node");
    if (r->gpu >= 0)
        tml__jw_int(w, "gpu", r->gpu);
    else
        tml__jw_null(w, "gpu");
    jw_bytes(w, "growth_bytes_per_step", r->growth_bytes_per_step);
    jw_bytes(w, "growth_bytes", r->growth_bytes);
    tml__jw_num(w, "projected_full_step", r->projected_full_step, 0);
    jw_bytes(w, "capacity_bytes", r->capacity_bytes);
    tml__jw_close(w, '}');
}

static void diagnosis_obj(jw *w, const char *key, const tml_diagnosis *d,
                          const tml_window *win)
{
    tml__jw_open(w, key, '{');
    tml__jw_str(w, "kind", d->kind);
    tml__jw_str(w, "label", d->label);
    tml__jw_str(w, "severity", tml__severity_name(d->severity));
    tml__jw_str(w, "section", d->section);
    tml__jw_str(w, "why", d->why);
    tml__jw_str(w, "next", d->next[0] ? d->next : NULL);
    tml__jw_open(w, "evidence", '{');
    tml__jw_str(w, "cause", d->cause >= 0 ? tml__metric_name((tml_metric)d->cause) : NULL);
    jw_pct(w, "share_percent", d->share);
    jw_pct(w, "threshold_percent", d->threshold);
    phase_array(w, "missing_phases", d->missing);
    straggler_obj(w, "straggler", win, &d->straggler);
    resource_obj(w, "resource", &d->res);
    tml__jw_close(w, '}');
    tml__jw_close(w, '}');
}

/* Communication beside the breakdown: bytes, the bandwidth they imply,
 * collectives per step (null in runs that never communicated). */
static void comm_fields(jw *w, const tml_rank_window *r)
{
    jw_bytes(w, "communication_bytes_per_step", r ? r->comm_bytes_per_step : NAN);
    jw_bytes(w, "communication_bytes_per_s", r ? r->comm_bytes_per_s : NAN);
    tml__jw_num(w, "collectives_per_step", r ? r->comm_collectives_per_step : NAN, 2);
}

/* A rank's throughput beside its breakdown (null where nothing counted). */
static void rank_throughput(jw *w, const tml_rank_window *r)
{
    tml__jw_num(w, "samples_per_s", r->samples_per_s, 3);
    tml__jw_num(w, "tokens_per_s", r->tokens_per_s, 1);
    tml__jw_num(w, "achieved_flops_per_s", r->flops_per_s, 0);
    jw_pct(w, "mfu_percent", r->flops_per_s / r->peak_flops);
}

/* "throughput": the run's samples, tokens and FLOPs per second (the sum
 * over ranks), what a rank's step consumed, and MFU where the device's
 * peak is known (docs/summary-json.md). */
static void throughput_obj(jw *w, const tml_window *win)
{
    const uint32_t how = win->flops_how;
    int flops = !isnan(win->flops_per_step);
    tml__jw_open(w, "throughput", '{');
    tml__jw_num(w, "samples_per_s", win->samples_per_s, 3);
    tml__jw_num(w, "tokens_per_s", win->tokens_per_s, 1);
    tml__jw_num(w, "samples_per_step", win->samples_per_step, 3);
    tml__jw_num(w, "tokens_per_step", win->tokens_per_step, 1);
    tml__jw_num(w, "flops_per_step", win->flops_per_step, 0);
    tml__jw_num(w, "achieved_flops_per_s", win->flops_per_s, 0);
    tml__jw_num(w, "peak_flops_per_s", win->peak_flops, 0);
    jw_pct(w, "mfu_percent", win->mfu);
    tml__jw_str(w, "flops_counted_by", !flops ? NULL : how & TML_FLOPS_COUNTED ? "flop_counter"
                                                                               : "given");
    tml__jw_str(w, "dtype", !flops ? NULL : tml__flops_dtype(how));
    tml__jw_close(w, '}');
}

static void step_metrics(jw *w, const double *avg)
{
    char k[64];
    for (int m = 0; m < TML_M_COUNT; m++) {
        snprintf(k, sizeof(k), "%s_ms", tml__metric_name((tml_metric)m));
        jw_ms(w, k, avg[m]);
    }
}

/* A rank's own shares of its Step Time: what the box prints beside its
 * figures (the HTML report and the live views read them too). */
static void rank_shares(jw *w, const double avg[TML_M_COUNT])
{
    tml__jw_open(w, "shares_percent", '{');
    for (int k = 1; k < TML_M_COUNT; k++)
        if (!tml__metric_supplemental(k))
            jw_pct(w, tml__metric_name((tml_metric)k),
                   avg[TML_M_STEP] > 0 ? avg[k] / avg[TML_M_STEP] : NAN);
    tml__jw_close(w, '}');
}

static void step_rank_obj(jw *w, const char *key, const tml_window *win, int idx)
{
    if (idx < 0) {
        tml__jw_open(w, key, '{');
        tml__jw_null(w, "rank");
        tml__jw_null(w, "node");
        tml__jw_null(w, "label");
        double nan[TML_M_COUNT];
        for (int m = 0; m < TML_M_COUNT; m++)
            nan[m] = NAN;
        step_metrics(w, nan);
        comm_fields(w, NULL);
        rank_shares(w, nan);
        tml__jw_null(w, "step_time_p50_ms");
        tml__jw_null(w, "step_time_p90_ms");
        tml__jw_null(w, "step_time_stddev_ms");
        tml__jw_null(w, "step_time_mad_ms");
        tml__jw_close(w, '}');
        return;
    }
    const tml_rank_window *r = &win->ranks[idx];
    char l[32];
    tml__jw_open(w, key, '{');
    tml__jw_int(w, "rank", r->rank);
    tml__jw_int(w, "node", r->node);
    rank_label(r, l, sizeof(l));
    tml__jw_str(w, "label", l);
    step_metrics(w, r->avg_ns);
    comm_fields(w, r);
    rank_shares(w, r->avg_ns);
    jw_ms(w, "step_time_p50_ms", r->step_median_ns);
    jw_ms(w, "step_time_p90_ms", r->step_p90_ns);
    jw_ms(w, "step_time_stddev_ms", r->step_stddev_ns);
    jw_ms(w, "step_time_mad_ms", r->step_mad_ns);
    tml__jw_close(w, '}');
}

static void issues_arr(jw *w, const tml_diagnosis *d, size_t n, const tml_window *win)
{
    tml__jw_open(w, "issues", '[');
    for (size_t i = 0; i < n; i++)
        diagnosis_obj(w, NULL, &d[i], win);
    tml__jw_close(w, ']');
}

static void window_obj(jw *w, const tml_window *win, const char *clock)
{
    tml__jw_open(w, "window", '{');
    tml__jw_str(w, "clock", clock);
    tml__jw_int(w, "max_steps", (long long)win->max_steps);
    tml__jw_int(w, "common_steps", (long long)win->common_steps);
    tml__jw_int(w, "window_steps", (long long)win->window_steps);
    tml__jw_int(w, "warmup_steps_excluded", (long long)win->warmup_steps);
    tml__jw_int(w, "aborted_steps_excluded", (long long)win->aborted_steps);
    tml__jw_int(w, "epoch_start_steps_excluded", (long long)win->epoch_start_steps);
    if (win->limited_by) {   /* only then: the file's shape is unchanged otherwise */
        tml__jw_str(w, "limited_by", win->limited_by);
    }
    tml__jw_num(w, "epoch_start_wait_ms", win->epoch_start_wait_ns / 1e6, 3);
    tml__jw_num(w, "between_epochs_ms", win->between_epochs_ns / 1e6, 3);
    if (win->window_steps) {
        tml__jw_int(w, "first_step", (long long)win->first_step);
        tml__jw_int(w, "last_step", (long long)win->last_step);
    } else {
        tml__jw_null(w, "first_step");
        tml__jw_null(w, "last_step");
    }
    tml__jw_close(w, '}');
}

static const char *clock_str(const tml_window *win)
{
    return win->clock == TML_CLOCK_GPU ? "gpu" : "cpu";
}

/* The step-to-step noise compare holds a change against: the standard
 * deviation of the median rank's Step Time over the window. (A robust
 * sigma from the MAD was tried first: it ignores the occasional slow step,
 * and two runs of the same script on a busy machine then differed by more
 * than their "noise".) */
static double step_noise_ns(const tml_window *win)
{
    if (win->median_rank < 0)
        return NAN;
    return win->ranks[win->median_rank].step_stddev_ns;
}

/* step_time.by_clock.<clock>: the median rank's figures on one clock. */
static void clock_figures(jw *w, const char *key, const tml_window *win)
{
    static const tml_metric keys[] = {
        TML_M_STEP, TML_M_INPUT, TML_M_H2D, TML_M_FORWARD, TML_M_BACKWARD,
        TML_M_OPTIMIZER, TML_M_COMPUTE, TML_M_RESIDUAL
    };
    const tml_rank_window *r = win->median_rank >= 0 ? &win->ranks[win->median_rank] : NULL;
    char k[64];
    tml__jw_open(w, key, '{');
    if (r) {
        char l[32];
        rank_label(r, l, sizeof(l));
        tml__jw_str(w, "label", l);
    } else {
        tml__jw_null(w, "label");
    }
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        snprintf(k, sizeof(k), "%s_ms", tml__metric_name(keys[i]));
        jw_ms(w, k, r ? r->avg_ns[keys[i]] : NAN);
    }
    jw_ms(w, "noise_ms", step_noise_ns(win));
    tml__jw_int(w, "window_steps", (long long)win->window_steps);
    tml__jw_open(w, "step_time_blocks_ms", '[');   /* what compare tests (docs/compare.md) */
    for (size_t b = 0; r && b < r->nblocks; b++)
        jw_ms(w, NULL, r->block_ns[b]);
    tml__jw_close(w, ']');
    tml__jw_close(w, '}');
}

/* After a compact per_rank list: how many ranks it left out. */
static void per_rank_omitted(jw *w, const tml_report_model *m, size_t n)
{
    if (m->compact)
        tml__jw_int(w, "per_rank_omitted", (long long)n);
}

/* ---- TraceML 0.5.0's step_time blocks (docs/summary-json.md) -------- */

/* 0.5.0's metric names, in its order. Its "traced" step is Step Time less
 * Input Wait, and its residual what the traced step leaves after H2D and
 * Compute: ours plus the exposed Communication. The *_cpu_ms / *_gpu_ms
 * pairs are the step on either clock (null on a clock the run lacks). */
enum {
    V05_INPUT, V05_STEP, V05_TRACED, V05_STEP_CPU, V05_STEP_GPU, V05_TRACED_CPU,
    V05_TRACED_GPU, V05_FETCH, V05_H2D, V05_COMPUTE, V05_RESIDUAL, V05_FORWARD,
    V05_BACKWARD, V05_OPTIMIZER, V05_COUNT
};
static const char *const v05_names[V05_COUNT] = {
    "input_wait_ms", "step_time_ms", "traced_step_time_ms", "step_time_cpu_ms",
    "step_time_gpu_ms", "traced_step_time_cpu_ms", "traced_step_time_gpu_ms",
    "dataloader_fetch_cpu_ms", "h2d_ms", "compute_ms", "residual_ms", "forward_ms",
    "backward_ms", "optimizer_ms",
};

static double traced_ns(const double *a)
{
    return a ? a[TML_M_STEP] - (isnan(a[TML_M_INPUT]) ? 0 : a[TML_M_INPUT]) : NAN;
}

/* Rank i's figures in 0.5.0's names, in ns. */
static void v05_rank(const tml_report_model *m, size_t i, double out[V05_COUNT])
{
    const tml_window *win = &m->win;
    const double *a = win->ranks[i].avg_ns, *cpu = NULL, *gpu = NULL;
    if (win->clock == TML_CLOCK_GPU) {
        gpu = a;
        for (size_t k = 0; m->has_cpu_win && k < m->cpu_win.nranks; k++)
            if (m->cpu_win.ranks[k].rank == win->ranks[i].rank)
                cpu = m->cpu_win.ranks[k].avg_ns;
    } else {
        cpu = a;
    }
    double comm = isnan(a[TML_M_COMM]) ? 0 : a[TML_M_COMM];
    out[V05_INPUT] = a[TML_M_INPUT];
    out[V05_STEP] = a[TML_M_STEP];
    out[V05_TRACED] = traced_ns(a);
    out[V05_STEP_CPU] = cpu ? cpu[TML_M_STEP] : NAN;
    out[V05_STEP_GPU] = gpu ? gpu[TML_M_STEP] : NAN;
    out[V05_TRACED_CPU] = traced_ns(cpu);
    out[V05_TRACED_GPU] = traced_ns(gpu);
    out[V05_FETCH] = a[TML_M_FETCH_CPU];
    out[V05_H2D] = a[TML_M_H2D];
    out[V05_COMPUTE] = a[TML_M_COMPUTE];
    out[V05_RESIDUAL] = a[TML_M_RESIDUAL] + comm;
    out[V05_FORWARD] = a[TML_M_FORWARD];
    out[V05_BACKWARD] = a[TML_M_BACKWARD];
    out[V05_OPTIMIZER] = a[TML_M_OPTIMIZER];
}

static void v05_metrics(jw *w, const char *key, const double v[V05_COUNT])
{
    tml__jw_open(w, key, '{');
    for (int k = 0; k < V05_COUNT; k++)
        tml__jw_num(w, v05_names[k], v[k] / 1e6, 6);
    tml__jw_close(w, '}');
}

/* global.median / global.worst: per metric, the ranks' lower median or
 * largest value and the rank that has it ("idx", a string as in 0.5.0). */
static void v05_pick(jw *w, const char *key, const tml_report_model *m, double (*v)[V05_COUNT],
                     int worst)
{
    size_t n = m->win.nranks;
    tml__jw_open(w, key, '{');
    for (int k = 0; k < V05_COUNT; k++) {
        size_t seen = 0, pick = 0;
        for (size_t i = 0; i < n; i++)
            seen += !isnan(v[i][k]);
        /* the rank whose value has (seen-1)/2 values below it, ties by index */
        size_t want = worst ? seen - 1 : (seen - 1) / 2;
        for (size_t i = 0; seen && i < n; i++) {
            if (isnan(v[i][k]))
                continue;
            size_t below = 0;
            for (size_t j = 0; j < n; j++)
                below += !isnan(v[j][k]) && (v[j][k] < v[i][k] || (v[j][k] == v[i][k] && j < i));
            if (below == want)
                pick = i;
        }
        tml__jw_open(w, v05_names[k], '{');
        tml__jw_num(w, "value", seen ? v[pick][k] / 1e6 : NAN, 6);
        if (seen) {
            char idx[16];
            snprintf(idx, sizeof(idx), "%d", (int)m->win.ranks[pick].rank);
            tml__jw_str(w, "idx", idx);
        } else {
            tml__jw_null(w, "idx");
        }
        tml__jw_close(w, '}');
    }
    tml__jw_close(w, '}');
}

static void v05_step_time(jw *w, const tml_report_model *m, double (*v)[V05_COUNT])
{
    const tml_window *win = &m->win;
    size_t n = win->nranks;
    tml__jw_open(w, "metadata", '{');
    tml__jw_str(w, "mode", m->nodes_expected > 1 ? "multi_node" : "single_node");
    tml__jw_int(w, "nodes_expected", m->nodes_expected);
    tml__jw_int(w, "nodes_observed", m->nodes_reported);
    tml__jw_int(w, "global_ranks_seen", m->ranks_reported);
    tml__jw_int(w, "global_ranks_used", (long long)n);
    tml__jw_int(w, "training_total_steps", (long long)win->common_steps);
    tml__jw_open(w, "section_metric_names", '[');
    for (int k = 0; k < V05_COUNT; k++)
        tml__jw_str(w, NULL, v05_names[k]);
    tml__jw_close(w, ']');
    tml__jw_close(w, '}');

    tml__jw_open(w, "global", '{');
    tml__jw_str(w, "index_by", "global_rank");
    tml__jw_open(w, "window", '{');
    tml__jw_str(w, "kind", "step_window");
    tml__jw_str(w, "alignment", "common_steps");
    tml__jw_int(w, "steps_analyzed", (long long)win->window_steps);
    if (win->window_steps) {
        tml__jw_int(w, "start_step", (long long)win->first_step);
        tml__jw_int(w, "end_step", (long long)win->last_step);
    } else {
        tml__jw_null(w, "start_step");
        tml__jw_null(w, "end_step");
    }
    tml__jw_int(w, "completed_step", (long long)win->common_steps);
    tml__jw_str(w, "diagnosis_clock", clock_str(win));
    tml__jw_close(w, '}');
    double avg[V05_COUNT];
    for (int k = 0; k < V05_COUNT; k++) {   /* the mean over the ranks that have it */
        double sum = 0;
        size_t c = 0;
        for (size_t i = 0; i < n; i++)
            if (!isnan(v[i][k])) {
                sum += v[i][k];
                c++;
            }
        avg[k] = c ? sum / (double)c : NAN;
    }
    v05_metrics(w, "average", avg);
    v05_pick(w, "median", m, v, 0);
    v05_pick(w, "worst", m, v, 1);
    tml__jw_close(w, '}');

    tml__jw_open(w, "groups", '{');
    tml__jw_str(w, "by", "global_rank");
    tml__jw_open(w, "rows", '{');
    for (size_t i = 0; i < n; i++) {
        const tml_rank_window *r = &win->ranks[i];
        char key[16];
        if (!tml__report_named(m, r->rank))
            continue;
        size_t local = 0;
        for (size_t j = 0; j < n; j++)
            local += win->ranks[j].node == r->node;
        snprintf(key, sizeof(key), "%d", (int)r->rank);
        tml__jw_open(w, key, '{');
        tml__jw_open(w, "identity", '{');
        tml__jw_int(w, "global_rank", r->rank);
        tml__jw_int(w, "local_rank", r->local_rank);
        tml__jw_int(w, "node_rank", r->node);
        tml__jw_int(w, "local_world_size", (long long)local);
        tml__jw_int(w, "world_size", m->world_size);
        tml__jw_close(w, '}');
        v05_metrics(w, "metrics", v[i]);
        tml__jw_close(w, '}');
    }
    tml__jw_close(w, '}');
    tml__jw_close(w, '}');
}

static void step_time_section(jw *w, const tml_report_model *m)
{
    const tml_window *win = &m->win;

    tml__jw_open(w, "step_time", '{');
    diagnosis_obj(w, "diagnosis", &m->st.primary, win);
    issues_arr(w, m->st.issues, m->st.nissues, win);
    window_obj(w, win, clock_str(win));
    tml__jw_open(w, "shares_percent", '{');
    for (int k = 1; k < TML_M_COUNT; k++)
        jw_pct(w, tml__metric_name((tml_metric)k), m->st.share[k]);
    tml__jw_close(w, '}');
    jw_pct(w, "untraced_wall_percent", m->st.untraced_wall);
    jw_pct(w, "between_epochs_wall_percent", m->st.between_epochs_wall);
    tml__jw_open(w, "average", '{');
    step_metrics(w, m->step_mean_ns);
    tml__jw_close(w, '}');
    step_rank_obj(w, "median", win, win->median_rank);
    step_rank_obj(w, "worst", win, win->worst_rank);
    jw_pct(w, "skew_percent", win->skew);
    straggler_obj(w, "straggler", win, &m->st.straggler);
    jw_ms(w, "noise_ms", step_noise_ns(win));
    tml__jw_open(w, "by_clock", '{');
    clock_figures(w, "cpu", m->has_cpu_win ? &m->cpu_win : win);
    if (win->clock == TML_CLOCK_GPU)
        clock_figures(w, "gpu", win);
    else
        tml__jw_null(w, "gpu");
    tml__jw_close(w, '}');
    tml__jw_open(w, "per_rank", '[');
    size_t omitted = 0;
    for (size_t i = 0; i < win->nranks; i++) {
        const tml_rank_window *r = &win->ranks[i];
        char l[32];
        if (!tml__report_named(m, r->rank)) {
            omitted++;
            continue;
        }
        tml__jw_open(w, NULL, '{');
        tml__jw_int(w, "rank", r->rank);
        tml__jw_int(w, "node", r->node);
        tml__jw_int(w, "local_rank", r->local_rank);
        rank_label(r, l, sizeof(l));
        tml__jw_str(w, "label", l);
        tml__jw_int(w, "steps", (long long)r->nsteps);
        step_metrics(w, r->avg_ns);
        comm_fields(w, r);
        rank_throughput(w, r);
        jw_ms(w, "step_time_p50_ms", r->step_median_ns);
        jw_ms(w, "step_time_p90_ms", r->step_p90_ns);
        jw_ms(w, "step_time_stddev_ms", r->step_stddev_ns);
        jw_ms(w, "step_time_mad_ms", r->step_mad_ns);
        phase_array(w, "missing_phases", r->nsteps ? r->missing : 0);
        tml__jw_int(w, "culprit_steps", (long long)r->culprit_steps);
        if (r->overhead_ns_per_step >= 0)
            tml__jw_num(w, "traceml_overhead_us_per_step", (double)r->overhead_ns_per_step / 1000.0, 3);
        else
            tml__jw_null(w, "traceml_overhead_us_per_step");
        tml__jw_int(w, "records_dropped", (long long)r->records_dropped);
        tml__jw_int(w, "events_dropped", (long long)r->events_dropped);
        tml__jw_close(w, '}');
    }
    tml__jw_close(w, ']');
    per_rank_omitted(w, m, omitted);
    double (*v05)[V05_COUNT] = calloc(win->nranks ? win->nranks : 1, sizeof(*v05));
    for (size_t i = 0; v05 && i < win->nranks; i++)
        v05_rank(m, i, v05[i]);
    if (v05)
        v05_step_time(w, m, v05);
    else
        w->sb->failed = 1;
    free(v05);
    tml__jw_close(w, '}');
}

/* ---- resource sections: rows printed through their field tables ------ */

static const void *row_at(const tml_report_rows *r, int i)
{
    return i >= 0 && (size_t)i < r->nrows ? (const char *)r->rows + (size_t)i * r->row_size
                                          : NULL;
}

/* The first n fields of a row (NULL: all null). */
static void row_fields(jw *w, const tml_report_rows *r, const void *row, size_t n)
{
    for (size_t k = 0; k < n; k++)
        tml__jw_num(w, r->fields[k].key, row ? tml__report_field(row, &r->fields[k]) : NAN,
                    r->fields[k].decimals);
}

/* "rank", "node", "label" of a rank (all null when !has). */
static void rank_ident(jw *w, int has, int32_t rank, int32_t node)
{
    if (has) {
        char l[32];
        snprintf(l, sizeof(l), "R%d/N%d", (int)rank, (int)node);
        tml__jw_int(w, "rank", rank);
        tml__jw_int(w, "node", node);
        tml__jw_str(w, "label", l);
    } else {
        tml__jw_null(w, "rank");
        tml__jw_null(w, "node");
        tml__jw_null(w, "label");
    }
}

/* The step memory section's summary objects show the window's peaks only
 * (the first three fields); per_rank shows every field. */
enum { MEM_PEAK_FIELDS = 3 };

static void step_memory_section(jw *w, const tml_report_model *m, const tml_report_rows *r)
{
    const tml_window *win = &m->win;

    tml__jw_open(w, "step_memory", '{');
    diagnosis_obj(w, "diagnosis", &m->mem, win);
    issues_arr(w, m->mem_s.issues, m->mem_s.nissues, win);
    /* what the memory rules analysed: CUDA reserved per-step peaks, or
     * per-step RSS on a CPU-only run; null when neither was recorded */
    tml__jw_str(w, "series", m->mem_analysed ? (m->mem_gpu ? "cuda_reserved" : "rss") : NULL);
    window_obj(w, win, clock_str(win));
    tml__jw_open(w, "average", '{');
    row_fields(w, r, r->average, MEM_PEAK_FIELDS);
    tml__jw_close(w, '}');
    const int pick[2] = { r->pick.median, r->pick.worst };
    const char *keys[2] = { "median", "worst" };
    for (int k = 0; k < 2; k++) {
        const tml_mem_row *row = row_at(r, pick[k]);
        tml__jw_open(w, keys[k], '{');
        rank_ident(w, row != NULL, row ? row->rank : 0, row ? row->node : 0);
        row_fields(w, r, row, MEM_PEAK_FIELDS);
        tml__jw_close(w, '}');
    }
    tml__jw_open(w, "per_rank", '[');
    size_t omitted = 0;
    for (size_t i = 0; i < r->nrows; i++) {
        const tml_mem_row *row = row_at(r, (int)i);
        if (!tml__report_named(m, row->rank)) {
            omitted++;
            continue;
        }
        tml__jw_open(w, NULL, '{');
        rank_ident(w, 1, row->rank, row->node);
        row_fields(w, r, row, r->nfields);
        tml__jw_close(w, '}');
    }
    tml__jw_close(w, ']');
    per_rank_omitted(w, m, omitted);
    tml__jw_close(w, '}');
}

static void system_section(jw *w, const tml_report_model *m, const tml_report_rows *r)
{
    tml__jw_open(w, "system", '{');
    diagnosis_obj(w, "diagnosis", &m->sys, &m->win);
    issues_arr(w, m->sys_s.issues, m->sys_s.nissues, &m->win);
    tml__jw_open(w, "window", '{');
    tml__jw_int(w, "samples", (long long)r->samples);
    tml__jw_close(w, '}');
    tml__jw_open(w, "average", '{');
    row_fields(w, r, r->average, r->nfields);
    tml__jw_close(w, '}');
    const int pick[2] = { r->pick.median, r->pick.worst };
    const char *keys[2] = { "median", "worst" };
    for (int k = 0; k < 2; k++) {
        tml__jw_open(w, keys[k], '{');
        if (pick[k] >= 0)
            tml__jw_int(w, "node", m->nodes[pick[k]].node);
        else
            tml__jw_null(w, "node");
        row_fields(w, r, row_at(r, pick[k]), r->nfields);
        tml__jw_close(w, '}');
    }
    tml__jw_open(w, "per_node", '[');
    size_t omitted = 0;
    for (size_t i = 0; i < m->nnodes; i++) {
        if (m->compact && (int)i != pick[0] && (int)i != pick[1] &&
            !tml__report_named_node(m, m->nodes[i].node)) {
            omitted++;
            continue;
        }
        tml__jw_open(w, NULL, '{');
        tml__jw_int(w, "node", m->nodes[i].node);
        tml__jw_int(w, "samples", (long long)m->nodes[i].samples);
        row_fields(w, r, &m->nodes[i], r->nfields);
        tml__jw_close(w, '}');
    }
    tml__jw_close(w, ']');
    if (m->compact)
        tml__jw_int(w, "per_node_omitted", (long long)omitted);
    tml__jw_close(w, '}');
}

static void process_section(jw *w, const tml_report_model *m, const tml_report_rows *r)
{
    const tml_proc_rank *pick[2] = { row_at(r, r->pick.median), row_at(r, r->pick.worst) };

    tml__jw_open(w, "process", '{');
    diagnosis_obj(w, "diagnosis", &m->proc, &m->win);
    issues_arr(w, m->proc_s.issues, m->proc_s.nissues, &m->win);
    tml__jw_open(w, "window", '{');
    tml__jw_int(w, "samples", (long long)r->samples);
    tml__jw_close(w, '}');
    tml__jw_open(w, "average", '{');
    row_fields(w, r, r->average, r->nfields);
    tml__jw_close(w, '}');
    const char *keys[2] = { "median", "worst" };
    for (int k = 0; k < 2; k++) {
        tml__jw_open(w, keys[k], '{');
        rank_ident(w, pick[k] != NULL, pick[k] ? pick[k]->rank : 0, pick[k] ? pick[k]->node : 0);
        row_fields(w, r, pick[k], r->nfields);
        tml__jw_close(w, '}');
    }
    tml__jw_open(w, "per_rank", '[');
    size_t omitted = 0;
    for (size_t i = 0; i < m->nprocs; i++) {
        if (!tml__report_named(m, m->procs[i].rank)) {
            omitted++;
            continue;
        }
        tml__jw_open(w, NULL, '{');
        rank_ident(w, 1, m->procs[i].rank, m->procs[i].node);
        tml__jw_int(w, "samples", (long long)m->procs[i].samples);
        row_fields(w, r, &m->procs[i], r->nfields);
        tml__jw_close(w, '}');
    }
    tml__jw_close(w, ']');
    per_rank_omitted(w, m, omitted);
    tml__jw_close(w, '}');
}

static void dd_items(jw *w, const char *key, const tml_dd_item *v, size_t n, int modules)
{
    tml__jw_open(w, key, '[');
    for (size_t i = 0; i < n; i++) {
        tml__jw_open(w, NULL, '{');
        tml__jw_str(w, "name", v[i].name);
        jw_ms(w, "ms", v[i].ns);
        tml__jw_num(w, "percent", v[i].pct, 1);
        if (modules)
            tml__jw_str(w, "top_operator", v[i].op);
        tml__jw_int(w, "calls", (long long)v[i].calls);
        tml__jw_close(w, '}');
    }
    tml__jw_close(w, ']');
}

/* "deep_dive" (docs/summary-json.md): only when a rank reported one, so
 * a run without it keeps the file's shape. */
static void deep_dive_obj(jw *w, const tml_report_dd *dd)
{
    if (!dd->present)
        return;
    tml__jw_open(w, "deep_dive", '{');
    tml__jw_str(w, "status", dd->ran ? "ran" : "skipped");
    tml__jw_str(w, "reason", dd->ran ? NULL : dd->skipped);
    tml__jw_int(w, "steps_excluded", (long long)dd->steps_left_out);
    if (dd->ran) {
        tml__jw_int(w, "rank", dd->rank);
        tml__jw_int(w, "ranks", (long long)dd->nranks);
        tml__jw_int(w, "first_step", (long long)dd->first_step);
        tml__jw_int(w, "last_step", (long long)dd->last_step);
        jw_ms(w, "window_ms", dd->wall_ns);
        jw_ms(w, "profiled_ms", dd->total_ns);
        tml__jw_str(w, "activities", dd->cuda ? "cpu,cuda" : "cpu");
        tml__jw_int(w, "module_level", dd->depth);
        dd_items(w, "modules", dd->modules, dd->nmodules, 1);
        dd_items(w, "operators", dd->ops, dd->nops, 0);
    }
    if (dd->spread.name[0]) {
        tml__jw_open(w, "spread", '{');
        tml__jw_str(w, "module", dd->spread.name);
        tml__jw_int(w, "slow_rank", dd->spread_slow_rank);
        jw_ms(w, "slow_ms", dd->spread_slow_ns);
        tml__jw_int(w, "fast_rank", dd->spread_fast_rank);
        jw_ms(w, "fast_ms", dd->spread_fast_ns);
        tml__jw_close(w, '}');
    } else {
        tml__jw_null(w, "spread");
    }
    tml__jw_close(w, '}');
}

static void thresholds_obj(jw *w, const tml_thresholds *t)
{
    size_t n;
    const tml_threshold_key *k = tml__thresholds_keys(&n);
    tml__jw_open(w, "thresholds", '{');
    for (size_t i = 0; i < n; i++) {
        double v = tml__threshold_get(t, &k[i]);
        if (k[i].integer)
            tml__jw_int(w, k[i].key, (long long)v);
        else
            tml__jw_num(w, k[i].key, v, 4);
    }
    tml__jw_close(w, '}');
}

/* meta.rank_conflicts: ranks claimed twice, and ranks that restarted. */
static void conflicts_json(jw *w, const tml_run *run)
{
    static const char *const kinds[] = {"claimed", "second_connection", "restarted"};
    tml__jw_open(w, "rank_conflicts", '[');
    for (size_t i = 0; i < run->nconflicts && i < TML_MAX_CONFLICTS; i++) {
        const tml_rank_conflict *c = &run->conflicts[i];
        tml__jw_open(w, NULL, '{');
        tml__jw_str(w, "kind", kinds[c->kind >= 0 && c->kind <= 2 ? c->kind : 0]);
        tml__jw_int(w, "claimed_rank", c->claimed);
        tml__jw_int(w, "reported_as", c->reported_as);
        tml__jw_int(w, "pid", c->pid);
        tml__jw_str(w, "host", c->host);
        tml__jw_int(w, "first_pid", c->first_pid);
        tml__jw_str(w, "first_host", c->first_host);
        tml__jw_int(w, "incarnation", c->incarnation);
        tml__jw_int(w, "first_step", (long long)c->first_step);
        tml__jw_close(w, '}');
    }
    tml__jw_close(w, ']');
}

/* The machine's contention (tml_contention): null where unknown. */
static void contention_obj(jw *w, const tml_contention *c, const char *machine)
{
    tml__jw_open(w, "contention", '{');
    if (c->cores > 0)
        tml__jw_int(w, "cores", c->cores);
    else
        tml__jw_null(w, "cores");
    tml__jw_num(w, "host_cpu_percent", c->host_cpu_percent, 2);
    tml__jw_num(w, "training_cpu_percent", c->training_cpu_percent, 2);
    tml__jw_num(w, "other_cpu_percent", c->other_cpu_percent, 2);
    tml__jw_num(w, "runq_wait_percent", c->runq_wait_percent, 2);
    if (c->gpu_shared >= 0)
        tml__jw_bool(w, "gpu_shared", c->gpu_shared);
    else
        tml__jw_null(w, "gpu_shared");
    tml__jw_str(w, "machine", machine[0] ? machine : NULL);
    tml__jw_close(w, '}');
}

/* Why the run is incomplete (meta.partial) and who stopped it on purpose
 * (meta.stopped_by: "tune" for a trial of traceml tune), else nulls. */
static void incomplete_json(jw *w, const tml_run *run)
{
    tml__jw_str(w, "partial", run->partial[0] ? run->partial : NULL);
    tml__jw_str(w, "stopped_by", run->stopped_by[0] ? run->stopped_by : NULL);
}

/* A value written as the JSON it already is; NULL or "": null. */
static void raw_json(jw *w, const char *key, const char *json)
{
    tml__jw_key(w, key);
    tml__sb_adds(w->sb, json && json[0] ? json : "null");
}

/* The models timed though the step did not name them: a comma-separated
 * list into an array. */
static void also_timed_json(jw *w, const char *list)
{
    tml__jw_open(w, "also_timed_models", '[');
    for (const char *p = list; *p; p += strspn(p, ", ")) {
        char name[TML_AUTO_MODELS_MAX];
        size_t n = strcspn(p, ",");
        snprintf(name, sizeof(name), "%.*s", (int)(n < sizeof(name) ? n : sizeof(name) - 1), p);
        tml__jw_str(w, NULL, name);
        p += n;
    }
    tml__jw_close(w, ']');
}

/* "series": the per-step charts' points, or null (opts.series). */
static void series_json(jw *w, const tml_report_model *m, tml_strbuf *out)
{
    tml__jw_key(w, "series");
    if (m->series)
        tml__report_series(m, out);
    else
        tml__sb_adds(out, "null");
}

void tml__report_json(const tml_report_model *m, const char *text, tml_strbuf *out)
{
    jw w;
    tml__jw_init(&w, out, 1);
    const tml_window *win = &m->win;

    tml__jw_open(&w, NULL, '{');
    tml__jw_int(&w, "schema_version", 1);
    tml__jw_str(&w, "generated_at", m->generated_at);
    tml__jw_num(&w, "duration_s", m->duration_s, 3);
    tml__jw_str(&w, "status", m->status);
    tml__jw_int(&w, "exit_code", m->exit_code);

    tml__jw_open(&w, "meta", '{');
    tml__jw_str(&w, "run_name", m->run->name);
    tml__jw_str(&w, "run_id", m->run->id[0] ? m->run->id : NULL);
    tml__jw_str(&w, "traceml_version", TML_VERSION_STRING);
    incomplete_json(&w, m->run);
    tml__jw_str(&w, "step_detection", m->step_detection);
    also_timed_json(&w, m->also_timed);
    tml__jw_str(&w, "profile", m->watch ? "watch" : "run");
    raw_json(&w, "workload", m->workload_json);   /* what ran (docs/summary-json.md) */
    conflicts_json(&w, m->run);
    tml__jw_int(&w, "world_size", m->world_size);
    tml__jw_int(&w, "ranks_reported", m->ranks_reported);
    tml__jw_open(&w, "missing_ranks", '[');
    for (size_t i = 0; i < m->nmissing; i++)
        tml__jw_int(&w, NULL, m->missing_ranks[i]);
    tml__jw_close(&w, ']');
    tml__jw_open(&w, "lost_ranks", '[');   /* connection ended without a goodbye */
    for (size_t i = 0; i < m->run->nranks; i++) {
        const tml_rank *r = &m->run->ranks[i];
        if (!r->lost)
            continue;
        tml__jw_open(&w, NULL, '{');
        tml__jw_int(&w, "rank", r->info.rank);
        tml__jw_int(&w, "node", r->info.node_rank);
        if (r->nsteps)
            tml__jw_int(&w, "last_step", (long long)r->steps[r->nsteps - 1].step);
        else
            tml__jw_null(&w, "last_step");
        tml__jw_close(&w, '}');
    }
    tml__jw_close(&w, ']');
    tml__jw_open(&w, "exit_signals", '[');   /* died of a signal after the goodbye */
    for (size_t i = 0; i < m->run->nranks; i++) {
        const tml_rank *r = &m->run->ranks[i];
        if (r->exit_signal <= 0)
            continue;
        tml__jw_open(&w, NULL, '{');
        tml__jw_int(&w, "rank", r->info.rank);
        tml__jw_int(&w, "node", r->info.node_rank);
        tml__jw_int(&w, "signal", r->exit_signal);
        tml__jw_close(&w, '}');
    }
    tml__jw_close(&w, ']');
    tml__jw_int(&w, "nodes", m->nodes_expected);
    tml__jw_int(&w, "nodes_reported", m->nodes_reported);
    tml__jw_int(&w, "gpus_observed", m->gpus_observed);
    tml__jw_int(&w, "common_steps", (long long)win->common_steps);
    tml__jw_int(&w, "window_steps", (long long)win->window_steps);
    tml__jw_int(&w, "warmup_steps_excluded", (long long)win->warmup_steps);
    tml__jw_int(&w, "aborted_steps_excluded", (long long)win->aborted_steps);
    tml__jw_str(&w, "clock", clock_str(win));
    tml__jw_num(&w, "traceml_overhead_us_per_step", m->overhead_us, 3);
    tml__jw_num(&w, "traceml_background_cpu_percent", m->background_cpu_percent, 3);
    tml__jw_num(&w, "traceml_overhead_total_us_per_step", m->overhead_total_us, 3);
    tml__jw_int(&w, "records_dropped", (long long)m->records_dropped);
    tml__jw_int(&w, "events_dropped", (long long)m->events_dropped);
    thresholds_obj(&w, &m->th);
    tml__jw_close(&w, '}');
    raw_json(&w, "run_context", m->run_context_json);   /* TraceML 0.5.0's */

    contention_obj(&w, &win->contention, m->machine);
    diagnosis_obj(&w, "primary_diagnosis", &m->verdict, win);
    tml__jw_open(&w, "also", '[');
    for (size_t i = 0; i < m->nalso; i++)
        diagnosis_obj(&w, NULL, m->also[i], win);
    tml__jw_close(&w, ']');
    throughput_obj(&w, win);
    step_time_section(&w, m);
    step_memory_section(&w, m, &m->rows[0]);
    system_section(&w, m, &m->rows[1]);
    process_section(&w, m, &m->rows[2]);
    deep_dive_obj(&w, &m->dd);
    series_json(&w, m, out);
    tml__jw_str(&w, "text", text);
    tml__jw_close(&w, '}');
    tml__sb_addc(out, '\n');
}
