/*
 * snapshot.c - what the live views show, computed from the run the
 * aggregator holds, and its renderings (live JSON, Prometheus text, one
 * plain text line).
 *
 * A live view answers "why is it slow right now", so it diagnoses the last
 * 100 common steps, not the whole run: it computes the report model
 * (report/model.h, what the final summary prints) over that window and
 * reads the window, the verdict and the resource sections from it. To
 * keep the cost flat however long the run is, the model is computed over a
 * borrowed tail of each rank's records (a tml_run whose ranks point into
 * the real arrays, nothing copied): the last TML_LIVE_TAIL records are far
 * more than 100 common steps even when ranks are out of step.
 *
 * The gauges (every number of the memory, system and process rows) are
 * named by the report's field tables, so whatever those sections learn to
 * carry reaches the dashboard and /metrics under its final_summary.json
 * key (units already in it).
 *
 * Rendering is pure: a snapshot in, text out. Missing values are null in
 * JSON, absent in Prometheus (a scraper must not read "not measured" as 0)
 * and "n/a" in text.
 */
#include "live/live.h"
#include "base/fmt.h"
#include "base/jsonw.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diag/window.h"
#include "report/model.h"
#include "base/clock.h"

void tml__live_snap_release(tml_live_snap *snap)
{
    if (!snap)
        return;
    for (size_t i = 0; i < snap->nranks; i++) {
        free(snap->ranks[i].step_ms);
        free(snap->ranks[i].step_ids);
    }
    free(snap->ranks);
    free(snap->points);
    free(snap->gauges);
    memset(snap, 0, sizeof(*snap));
}

/* ---- building ------------------------------------------------------ */

/* The last k steps of r: which phases were never observed in them. */
static uint32_t missing_in_last(const tml_rank *r, size_t k)
{
    uint32_t observed = 0;
    for (size_t j = r->nsteps - k; j < r->nsteps; j++)
        observed |= r->steps[j].observed;
    return tml__phases_missing(observed, r->info.instrumented);
}

/* One step of the live series: the step breakdown (model/breakdown.h). */
static void point_fill(tml_live_point *pt, const tml_step_record *s, uint32_t missing,
                       int gpu_clock)
{
    static const int of_point[TML_LS_COUNT] = {
        TML_M_STEP, TML_M_INPUT, TML_M_H2D, TML_M_FORWARD, TML_M_BACKWARD,
        TML_M_OPTIMIZER, TML_M_RESIDUAL, TML_M_COMM
    };
    double v[TML_M_COUNT];
    tml__step_breakdown(s, gpu_clock && s->gpu_traced_ns >= 0 ? TML_CLOCK_GPU : TML_CLOCK_CPU,
                        missing, v);
    pt->step = s->step;
    for (int k = 0; k < TML_LS_COUNT; k++)
        pt->ms[k] = v[of_point[k]] / 1e6;
    pt->rss_bytes = s->rss_bytes >= 0 ? (double)s->rss_bytes : NAN;
    pt->cuda_allocated_bytes =
        s->cuda_allocated_peak_bytes >= 0 ? (double)s->cuda_allocated_peak_bytes : NAN;
    pt->cuda_reserved_bytes =
        s->cuda_reserved_peak_bytes >= 0 ? (double)s->cuda_reserved_peak_bytes : NAN;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

static void section_from(tml_live_section *sec, const tml_diagnosis *d)
{
    copy_str(sec->label, sizeof(sec->label), d->label);
    copy_str(sec->severity, sizeof(sec->severity), tml__severity_name(d->severity));
    snprintf(sec->why, sizeof(sec->why), "%.*s", (int)sizeof(sec->why) - 1, d->why);
}

/* Every number of the resource sections' rows (step_memory.per_rank[],
 * system.per_node[], process.per_rank[]), named by the report's own field
 * tables, rounded as final_summary.json rounds it; missing ones are not
 * gauges. */
static int gauges_from(tml_live_snap *snap, const tml_report_model *m)
{
    const tml_report_rows *rows = m->rows;
    snap->gauges = calloc(TML_LIVE_MAX_GAUGES, sizeof(*snap->gauges));
    if (!snap->gauges)
        return TML_ENOMEM;
    for (int s = 0; s < TML_REPORT_ROWS; s++) {
        const tml_report_rows *r = &rows[s];
        for (size_t i = 0; i < r->nrows; i++) {
            const char *row = (const char *)r->rows + i * r->row_size;
            int32_t id;
            memcpy(&id, row + r->id_off, sizeof(id));
            for (size_t k = 0; k < r->nfields; k++) {
                double v = tml__report_field(row, &r->fields[k]);
                if (isnan(v) || snap->ngauges >= TML_LIVE_MAX_GAUGES)
                    continue;
                double scale = pow(10, r->fields[k].decimals);
                tml_live_gauge *g = &snap->gauges[snap->ngauges++];
                snprintf(g->name, sizeof(g->name), "traceml_%s_%s", r->section,
                         r->fields[k].key);
                copy_str(g->who, sizeof(g->who), r->who);
                g->id = id;
                g->value = round(v * scale) / scale;
            }
        }
    }
    return 0;
}

static const tml_rank_window *window_rank(const tml_window *w, int32_t rank)
{
    for (size_t i = 0; i < w->nranks; i++)
        if (w->ranks[i].rank == rank)
            return &w->ranks[i];
    return NULL;
}

/* The borrowed tail of `run`: same ranks, the last TML_LIVE_TAIL records
 * of each (nothing copied; free tail->ranks). */
static int tail_of(const tml_run *run, tml_run *tail)
{
    *tail = *run;
    tail->cap = 0;
    tail->ranks = calloc(run->nranks ? run->nranks : 1, sizeof(*tail->ranks));
    if (!tail->ranks)
        return TML_ENOMEM;
    for (size_t i = 0; i < run->nranks; i++) {
        tail->ranks[i] = run->ranks[i];
        size_t n = run->ranks[i].nsteps;
        size_t k = n > TML_LIVE_TAIL ? TML_LIVE_TAIL : n;
        tail->ranks[i].steps = n ? run->ranks[i].steps + (n - k) : NULL;   /* no NULL + 0 */
        tail->ranks[i].nsteps = k;
        tail->ranks[i].cap = k;
        /* the live window is the tail alone: nothing older is counted,
         * and its first records are no run's start */
        tail->ranks[i].past_steps = tail->ranks[i].past_aborted = 0;
        tail->ranks[i].lim.head = 0;
        memset(&tail->ranks[i].past, 0, sizeof(tail->ranks[i].past));
    }
    return 0;
}

/* The window, the verdict and the resource sections: the report model's. */
static int snap_model(tml_live_snap *snap, const tml_report_model *m)
{
    const tml_window *win = &m->win;
    snap->clock = win->clock == TML_CLOCK_GPU ? "gpu" : "cpu";
    snap->common_steps = win->common_steps;
    snap->window_steps = win->window_steps;
    snap->warmup_steps = win->warmup_steps;
    if (win->window_steps) {
        snap->first_step = (int64_t)win->first_step;
        snap->last_step = (int64_t)win->last_step;
    }
    for (int k = 0; k < TML_M_COUNT; k++)
        snap->share[k] = m->st.share[k];
    snap->skew = win->skew;
    if (win->median_rank >= 0)
        snap->median_rank = win->ranks[win->median_rank].rank;
    if (win->worst_rank >= 0)
        snap->worst_rank = win->ranks[win->worst_rank].rank;
    int s = tml__report_straggler(m);
    snap->straggler_rank = s >= 0 ? win->ranks[s].rank : -1;
    snap->verdict = m->verdict;
    for (snap->nalso = 0; snap->nalso < m->nalso; snap->nalso++)
        snap->also[snap->nalso] = *m->also[snap->nalso];
    section_from(&snap->mem, &m->mem);
    section_from(&snap->sys, &m->sys);
    section_from(&snap->proc, &m->proc);
    snap->gpu_util_percent = m->gpu_util_percent;
    snap->samples_per_s = win->samples_per_s;
    snap->tokens_per_s = win->tokens_per_s;
    snap->flops_per_s = win->flops_per_s;
    snap->mfu = win->mfu;
    snap->dd = m->dd;
    return gauges_from(snap, m);
}

/* Rank r's last (at most TML_LIVE_HISTORY) Step Times. */
static int rank_history(tml_live_rank *lr, const tml_rank *r, int gpu_clock)
{
    size_t k = r->nsteps > TML_LIVE_HISTORY ? TML_LIVE_HISTORY : r->nsteps;
    lr->step_ms = malloc(k * sizeof(*lr->step_ms));
    lr->step_ids = malloc(k * sizeof(*lr->step_ids));
    if (!lr->step_ms || !lr->step_ids)
        return TML_ENOMEM;
    uint32_t missing = missing_in_last(r, k);
    for (size_t j = 0; j < k; j++) {
        tml_live_point pt;
        const tml_step_record *s = &r->steps[r->nsteps - k + j];
        point_fill(&pt, s, missing, gpu_clock);
        lr->step_ms[j] = pt.ms[TML_LS_STEP];
        lr->step_ids[j] = s->step;
    }
    lr->nstep_ms = k;
    return 0;
}

static void rank_fill(tml_live_rank *lr, const tml_rank *r, const tml_rank_window *rw)
{
    lr->rank = r->info.rank;
    lr->node = r->info.node_rank;
    lr->local_rank = r->info.local_rank;
    copy_str(lr->host, sizeof(lr->host), r->info.host);
    lr->steps_received = tml__rank_received(r);
    lr->last_step = r->nsteps ? (int64_t)r->steps[r->nsteps - 1].step : -1;
    lr->ended = r->ended;
    lr->window_steps = rw ? rw->nsteps : 0;
    for (int k = 0; k < TML_M_COUNT; k++)
        lr->avg_ms[k] = rw ? rw->avg_ns[k] / 1e6 : NAN;
    lr->step_p50_ms = rw ? rw->step_median_ns / 1e6 : NAN;
    lr->step_p90_ms = rw ? rw->step_p90_ns / 1e6 : NAN;
    lr->rss_bytes = rw ? rw->rss_bytes : NAN;
    lr->cuda_allocated_bytes = rw ? rw->cuda_allocated_bytes : NAN;
    lr->cuda_reserved_bytes = rw ? rw->cuda_reserved_bytes : NAN;
    lr->overhead_us = r->stats.overhead_ns_per_step >= 0
                          ? (double)r->stats.overhead_ns_per_step / 1000.0
                          : NAN;
    lr->records_dropped = r->stats.records_dropped;
    lr->events_dropped = r->stats.events_dropped;
}

/* Every rank, a Step Time history for the first TML_LIVE_SERIES_RANKS
 * that sent steps, and the per-step series of the lowest of them. */
static int snap_ranks(tml_live_snap *snap, const tml_run *run, const tml_window *win)
{
    int gpu_clock = win->clock == TML_CLOCK_GPU;
    size_t with_series = 0;
    snap->nranks = run->nranks;
    if (snap->world_size < (int32_t)run->nranks)
        snap->world_size = (int32_t)run->nranks;
    snap->ranks = calloc(run->nranks ? run->nranks : 1, sizeof(*snap->ranks));
    if (!snap->ranks)
        return TML_ENOMEM;
    for (size_t i = 0; i < run->nranks; i++) {
        const tml_rank *r = &run->ranks[i];
        tml_live_rank *lr = &snap->ranks[i];
        /* the window's ranks are the run's, in the same order */
        const tml_rank_window *rw = i < win->nranks && win->ranks[i].rank == r->info.rank
                                        ? &win->ranks[i] : window_rank(win, r->info.rank);
        rank_fill(lr, r, rw);
        snap->records_dropped += lr->records_dropped;
        snap->events_dropped += lr->events_dropped;
        if (lr->steps_received > snap->steps_received)
            snap->steps_received = lr->steps_received;
        if (r->nsteps && with_series < TML_LIVE_SERIES_RANKS) {
            if (rank_history(lr, r, gpu_clock) < 0)
                return TML_ENOMEM;
            with_series++;
        }
    }
    for (size_t i = 0; i < run->nranks; i++) {
        const tml_rank *r = &run->ranks[i];
        if (!r->nsteps)
            continue;
        size_t k = r->nsteps > TML_LIVE_HISTORY ? TML_LIVE_HISTORY : r->nsteps;
        snap->points = calloc(k, sizeof(*snap->points));
        if (!snap->points)
            return TML_ENOMEM;
        uint32_t missing = missing_in_last(r, k);
        for (size_t j = 0; j < k; j++)
            point_fill(&snap->points[j], &r->steps[r->nsteps - k + j], missing, gpu_clock);
        snap->npoints = k;
        snap->series_rank = r->info.rank;
        break;
    }
    return 0;
}

int tml__live_snap_build(const tml_run *run, const tml_live_build_opts *o,
                         tml_live_snap *snap, tml_strbuf *summary)
{
    static const tml_live_build_opts dflt;
    tml_report_model m;
    tml_run tail;
    int rc;

    if (!o)
        o = &dflt;
    memset(snap, 0, sizeof(*snap));
    memset(&m, 0, sizeof(m));
    snap->seq = o->seq;
    copy_str(snap->run_name, sizeof(snap->run_name), run->name);
    copy_str(snap->run_id, sizeof(snap->run_id), run->id);
    copy_str(snap->status, sizeof(snap->status), o->status ? o->status : "running");
    snap->unix_ms = o->now_unix_ms ? o->now_unix_ms : tml__unix_ms();
    int64_t start = o->start_mono_ns ? o->start_mono_ns : run->start_mono_ns;
    int64_t now = o->now_mono_ns ? o->now_mono_ns : tml__mono_ns();
    snap->elapsed_s = start > 0 && now >= start ? (double)(now - start) / 1e9 : NAN;
    snap->gpu_util_percent = NAN;
    snap->samples_per_s = snap->tokens_per_s = snap->flops_per_s = snap->mfu = NAN;
    snap->median_rank = snap->worst_rank = snap->series_rank = snap->straggler_rank = -1;
    snap->first_step = snap->last_step = -1;
    snap->world_size = run->world_size;

    /* The report model over the live window of the tail: what the final
     * summary would say about the last TML_LIVE_WINDOW common steps. */
    tml_report_opts ro = {
        .status = snap->status,
        .duration_s = isnan(snap->elapsed_s) ? -1 : snap->elapsed_s,
        .th = o->th,
        .window_steps = TML_LIVE_WINDOW,
    };
    rc = tail_of(run, &tail);
    if (rc == 0)
        rc = tml__report_model_init(&m, &tail, &ro);
    if (rc == 0)
        rc = snap_model(snap, &m);
    if (rc == 0 && summary)
        rc = tml__report_print(&m, NULL, summary);
    if (rc == 0)
        rc = snap_ranks(snap, run, &m.win);
    tml__report_model_release(&m);
    free(tail.ranks);
    if (rc < 0)
        tml__live_snap_release(snap);
    return rc;
}

/* ---- live JSON ----------------------------------------------------- */

typedef tml_jsonw jw;

/* A string, null when NULL or empty. */
static void jw_text(jw *w, const char *key, const char *s)
{
    tml__jw_str(w, key, s && *s ? s : NULL);
}

static void j_section(jw *w, const char *key, const tml_live_section *s)
{
    tml__jw_open(w, key, '{');
    jw_text(w, "label", s->label);
    jw_text(w, "severity", s->severity);
    jw_text(w, "why", s->why);
    tml__jw_close(w, '}');
}

static void j_window(jw *w, const tml_live_snap *s)
{
    tml__jw_open(w, "window", '{');
    tml__jw_int(w, "max_steps", TML_LIVE_WINDOW);
    tml__jw_str(w, "clock", s->clock ? s->clock : "cpu");
    tml__jw_int(w, "common_steps", (long long)s->common_steps);
    tml__jw_int(w, "window_steps", (long long)s->window_steps);
    tml__jw_int(w, "warmup_steps_excluded", (long long)s->warmup_steps);
    if (s->first_step >= 0) {
        tml__jw_int(w, "first_step", s->first_step);
        tml__jw_int(w, "last_step", s->last_step);
    } else {
        tml__jw_null(w, "first_step");
        tml__jw_null(w, "last_step");
    }
    tml__jw_close(w, '}');
}

static void j_throughput(jw *w, const tml_live_snap *s)
{
    tml__jw_open(w, "throughput", '{');
    tml__jw_num(w, "samples_per_s", s->samples_per_s, 3);
    tml__jw_num(w, "tokens_per_s", s->tokens_per_s, 1);
    tml__jw_num(w, "achieved_flops_per_s", s->flops_per_s, 0);
    tml__jw_num(w, "mfu_percent", s->mfu * 100.0, 2);
    tml__jw_close(w, '}');
}

static void j_verdict(jw *w, const tml_live_snap *s)
{
    const tml_diagnosis *d = &s->verdict;
    tml__jw_open(w, "verdict", '{');
    jw_text(w, "kind", d->kind);
    jw_text(w, "label", d->label);
    tml__jw_str(w, "severity", tml__severity_name(d->severity));
    jw_text(w, "why", d->why);
    jw_text(w, "next", d->next);
    tml__jw_str(w, "cause", d->cause >= 0 ? tml__metric_name((tml_metric)d->cause) : NULL);
    tml__jw_open(w, "also", '[');
    for (size_t i = 0; i < s->nalso; i++) {
        tml__jw_open(w, NULL, '{');
        jw_text(w, "kind", s->also[i].kind);
        jw_text(w, "label", s->also[i].label);
        tml__jw_str(w, "severity", tml__severity_name(s->also[i].severity));
        jw_text(w, "why", s->also[i].why);
        tml__jw_close(w, '}');
    }
    tml__jw_close(w, ']');
    tml__jw_close(w, '}');
    tml__jw_open(w, "shares_percent", '{');
    for (int m = 1; m < TML_M_COUNT; m++)
        if (!tml__metric_supplemental(m))
            tml__jw_num(w, tml__metric_name((tml_metric)m), s->share[m] * 100.0, 2);
    tml__jw_close(w, '}');
    tml__jw_num(w, "skew_percent", s->skew * 100.0, 2);
    tml__jw_int(w, "median_rank", s->median_rank);
    tml__jw_int(w, "worst_rank", s->worst_rank);
    tml__jw_int(w, "straggler_rank", s->straggler_rank);
}

static void j_rank(jw *w, const tml_live_rank *r)
{
    char k[64];
    tml__jw_open(w, NULL, '{');
    tml__jw_int(w, "rank", r->rank);
    tml__jw_int(w, "node", r->node);
    tml__jw_int(w, "local_rank", r->local_rank);
    snprintf(k, sizeof(k), "R%d/N%d", (int)r->rank, (int)r->node);
    tml__jw_str(w, "label", k);
    tml__jw_str(w, "host", r->host);
    tml__jw_int(w, "steps_received", (long long)r->steps_received);
    if (r->last_step >= 0)
        tml__jw_int(w, "last_step", r->last_step);
    else
        tml__jw_null(w, "last_step");
    tml__jw_bool(w, "ended", r->ended);
    tml__jw_int(w, "window_steps", (long long)r->window_steps);
    for (int m = 0; m < TML_M_COUNT; m++) {
        snprintf(k, sizeof(k), "%s_ms", tml__metric_name((tml_metric)m));
        tml__jw_num(w, k, r->avg_ms[m], 3);
    }
    tml__jw_num(w, "step_time_p50_ms", r->step_p50_ms, 3);
    tml__jw_num(w, "step_time_p90_ms", r->step_p90_ms, 3);
    tml__jw_num(w, "rss_bytes", r->rss_bytes, 0);
    tml__jw_num(w, "cuda_allocated_bytes", r->cuda_allocated_bytes, 0);
    tml__jw_num(w, "cuda_reserved_bytes", r->cuda_reserved_bytes, 0);
    tml__jw_num(w, "traceml_overhead_us_per_step", r->overhead_us, 3);
    tml__jw_int(w, "records_dropped", (long long)r->records_dropped);
    tml__jw_int(w, "events_dropped", (long long)r->events_dropped);
    tml__jw_open(w, "recent_steps", '[');
    for (size_t j = 0; j < r->nstep_ms; j++)
        tml__jw_int(w, NULL, (long long)r->step_ids[j]);
    tml__jw_close(w, ']');
    tml__jw_open(w, "recent_step_time_ms", '[');
    for (size_t j = 0; j < r->nstep_ms; j++)
        tml__jw_num(w, NULL, r->step_ms[j], 3);
    tml__jw_close(w, ']');
    tml__jw_close(w, '}');
}

static const char *const series_names[TML_LS_COUNT] = {
    "step_time_ms", "input_wait_ms", "h2d_ms", "forward_ms", "backward_ms",
    "optimizer_ms", "residual_ms", "communication_ms",
};

static void j_series(jw *w, const tml_live_snap *s)
{
    static const struct { const char *name; size_t off; } mem[] = {
        {"rss_bytes", offsetof(tml_live_point, rss_bytes)},
        {"cuda_allocated_bytes", offsetof(tml_live_point, cuda_allocated_bytes)},
        {"cuda_reserved_bytes", offsetof(tml_live_point, cuda_reserved_bytes)},
    };
    tml__jw_open(w, "series", '{');
    tml__jw_int(w, "rank", s->series_rank);
    tml__jw_open(w, "step", '[');
    for (size_t j = 0; j < s->npoints; j++)
        tml__jw_int(w, NULL, (long long)s->points[j].step);
    tml__jw_close(w, ']');
    for (int k = 0; k < TML_LS_COUNT; k++) {
        tml__jw_open(w, series_names[k], '[');
        for (size_t j = 0; j < s->npoints; j++)
            tml__jw_num(w, NULL, s->points[j].ms[k], 3);
        tml__jw_close(w, ']');
    }
    for (size_t k = 0; k < sizeof(mem) / sizeof(mem[0]); k++) {
        tml__jw_open(w, mem[k].name, '[');
        for (size_t j = 0; j < s->npoints; j++) {
            double v;
            memcpy(&v, (const char *)&s->points[j] + mem[k].off, sizeof(v));
            tml__jw_num(w, NULL, v, 0);
        }
        tml__jw_close(w, ']');
    }
    tml__jw_close(w, '}');
}

/* "deep_dive": the latest window, its modules (at most 8), only once a
 * rank reported one (docs/live.md). */
static void j_deep_dive(jw *w, const tml_report_dd *dd)
{
    if (!dd->present)
        return;
    tml__jw_open(w, "deep_dive", '{');
    tml__jw_str(w, "status", dd->ran ? "ran" : "skipped");
    jw_text(w, "reason", dd->ran ? NULL : dd->skipped);
    if (dd->ran) {
        tml__jw_int(w, "first_step", (long long)dd->first_step);
        tml__jw_int(w, "last_step", (long long)dd->last_step);
        tml__jw_open(w, "modules", '[');
        for (size_t i = 0; i < dd->nmodules; i++) {
            tml__jw_open(w, NULL, '{');
            tml__jw_str(w, "name", dd->modules[i].name);
            tml__jw_num(w, "ms", dd->modules[i].ns / 1e6, 3);
            tml__jw_num(w, "percent", dd->modules[i].pct, 1);
            tml__jw_str(w, "top_operator", dd->modules[i].op);
            tml__jw_close(w, '}');
        }
        tml__jw_close(w, ']');
    }
    tml__jw_close(w, '}');
}

void tml__live_json(const tml_live_snap *s, tml_strbuf *o)
{
    jw w;
    tml__jw_init(&w, o, 0);
    tml__jw_open(&w, NULL, '{');
    tml__jw_str(&w, "schema", "traceml.live/1");
    tml__jw_int(&w, "seq", (long long)s->seq);
    tml__jw_str(&w, "run_name", s->run_name);
    jw_text(&w, "run_id", s->run_id);
    tml__jw_str(&w, "status", s->status);
    tml__jw_int(&w, "unix_ms", s->unix_ms);
    tml__jw_num(&w, "elapsed_s", s->elapsed_s, 1);
    j_window(&w, s);
    j_verdict(&w, s);
    j_section(&w, "step_memory", &s->mem);
    j_section(&w, "system", &s->sys);
    j_section(&w, "process", &s->proc);
    tml__jw_num(&w, "gpu_util_percent", s->gpu_util_percent, 2);
    j_throughput(&w, s);
    tml__jw_int(&w, "world_size", s->world_size);
    tml__jw_int(&w, "records_dropped", (long long)s->records_dropped);
    tml__jw_int(&w, "events_dropped", (long long)s->events_dropped);
    tml__jw_open(&w, "ranks", '[');
    for (size_t i = 0; i < s->nranks; i++)
        j_rank(&w, &s->ranks[i]);
    tml__jw_close(&w, ']');
    j_series(&w, s);
    j_deep_dive(&w, &s->dd);
    tml__jw_open(&w, "gauges", '[');
    for (size_t i = 0; i < s->ngauges; i++) {
        const tml_live_gauge *g = &s->gauges[i];
        tml__jw_open(&w, NULL, '{');
        tml__jw_str(&w, "name", g->name);
        tml__jw_int(&w, g->who, g->id);
        tml__jw_num(&w, "value", g->value, 2);
        tml__jw_close(&w, '}');
    }
    tml__jw_close(&w, ']');
    tml_strbuf line = TML_STRBUF_INIT;
    tml__live_text_line(s, &line);
    if (line.len && line.buf[line.len - 1] == '\n')
        line.buf[--line.len] = '\0';
    jw_text(&w, "line", line.buf);
    tml__sb_release(&line);
    tml__jw_close(&w, '}');
}

/* ---- Prometheus ---------------------------------------------------- */

/* A label value: backslash, double quote and newline escaped. */
static void p_label(tml_strbuf *o, const char *v)
{
    for (const char *c = v; *c; c++) {
        if (*c == '\\')
            tml__sb_adds(o, "\\\\");
        else if (*c == '"')
            tml__sb_adds(o, "\\\"");
        else if (*c == '\n')
            tml__sb_adds(o, "\\n");
        else
            tml__sb_addc(o, *c);
    }
}

static void p_meta(tml_strbuf *o, const char *name, const char *type, const char *help)
{
    tml__sb_addf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void p_value(tml_strbuf *o, double v)
{
    if (v == floor(v) && fabs(v) < 1e15)
        tml__sb_addf(o, " %.0f\n", v);
    else
        tml__sb_addf(o, " %.9g\n", v);
}

static void p_rank_labels(tml_strbuf *o, const tml_live_snap *s, const tml_live_rank *r)
{
    tml__sb_adds(o, "{run=\"");
    p_label(o, s->run_name);
    tml__sb_addf(o, "\",rank=\"%d\",node=\"%d\"", (int)r->rank, (int)r->node);
}

/* One gauge per rank from the double at `off` of tml_live_rank, divided
 * by `div`; NAN ranks have none. */
static void p_rank_gauge(tml_strbuf *o, const tml_live_snap *s, const char *name,
                         const char *help, size_t off, double div)
{
    p_meta(o, name, "gauge", help);
    for (size_t i = 0; i < s->nranks; i++) {
        double v;
        memcpy(&v, (const char *)&s->ranks[i] + off, sizeof(v));
        if (isnan(v))
            continue;
        tml__sb_adds(o, name);
        p_rank_labels(o, s, &s->ranks[i]);
        tml__sb_addc(o, '}');
        p_value(o, v / div);
    }
}

/* One counter per rank from the uint64_t at `off` of tml_live_rank. */
static void p_rank_counter(tml_strbuf *o, const tml_live_snap *s, const char *name,
                           const char *help, size_t off)
{
    p_meta(o, name, "counter", help);
    for (size_t i = 0; i < s->nranks; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&s->ranks[i] + off, sizeof(v));
        tml__sb_adds(o, name);
        p_rank_labels(o, s, &s->ranks[i]);
        tml__sb_addf(o, "} %llu\n", (unsigned long long)v);
    }
}

/* The run: liveness, identity, window, verdict, shares, skew. */
static void p_run(tml_strbuf *o, const tml_live_snap *s, const char *rl)
{
    p_meta(o, "traceml_up", "gauge", "1 while the run's aggregator serves live data.");
    tml__sb_addf(o, "traceml_up{%s} 1\n", rl);
    p_meta(o, "traceml_info", "gauge", "Run identity; always 1.");
    tml__sb_addf(o, "traceml_info{%s,run_id=\"", rl);
    p_label(o, s->run_id);
    tml__sb_addf(o, "\",status=\"%s\",clock=\"%s\",version=\"%s\"} 1\n", s->status,
                 s->clock ? s->clock : "cpu", TML_VERSION_STRING);
    p_meta(o, "traceml_elapsed_seconds", "gauge", "Seconds since the run started.");
    if (!isnan(s->elapsed_s)) {
        tml__sb_addf(o, "traceml_elapsed_seconds{%s}", rl);
        p_value(o, s->elapsed_s);
    }
    p_meta(o, "traceml_common_steps", "gauge", "Step ids every rank reported (live tail).");
    tml__sb_addf(o, "traceml_common_steps{%s} %zu\n", rl, s->common_steps);
    p_meta(o, "traceml_window_steps", "gauge", "Steps in the live window (at most 100).");
    tml__sb_addf(o, "traceml_window_steps{%s} %zu\n", rl, s->window_steps);

    const tml_diagnosis *d = &s->verdict;
    p_meta(o, "traceml_verdict", "gauge",
           "The run's verdict over the live window; 1 on the current verdict.");
    tml__sb_addf(o, "traceml_verdict{%s,kind=\"%s\",label=\"%s\",severity=\"%s\"} 1\n", rl,
                 d->kind ? d->kind : "NO_DATA", d->label ? d->label : "NO DATA",
                 tml__severity_name(d->severity));
    p_meta(o, "traceml_verdict_severity", "gauge",
           "Severity of the current verdict: 0 INFO, 1 WARNING, 2 CRITICAL.");
    tml__sb_addf(o, "traceml_verdict_severity{%s} %d\n", rl, (int)d->severity);

    p_meta(o, "traceml_phase_share_ratio", "gauge",
           "Median over ranks of phase / Step Time, live window.");
    for (int m = 1; m < TML_M_COUNT; m++) {
        if (tml__metric_supplemental(m) || isnan(s->share[m]))
            continue;
        tml__sb_addf(o, "traceml_phase_share_ratio{%s,phase=\"%s\"}", rl,
                     tml__metric_name((tml_metric)m));
        p_value(o, s->share[m]);
    }
    static const struct { const char *name, *help; size_t off; } rates[] = {
        {"traceml_samples_per_second", "Samples per second, all ranks, live window.",
         offsetof(tml_live_snap, samples_per_s)},
        {"traceml_tokens_per_second", "Tokens per second, all ranks, live window.",
         offsetof(tml_live_snap, tokens_per_s)},
        {"traceml_flops_per_second", "Achieved FLOP/s (FlopCounterMode), all ranks.",
         offsetof(tml_live_snap, flops_per_s)},
        {"traceml_mfu_ratio", "Achieved FLOP/s over the devices' peak (MFU).",
         offsetof(tml_live_snap, mfu)},
    };
    for (size_t k = 0; k < sizeof(rates) / sizeof(rates[0]); k++) {
        double v = *(const double *)((const char *)s + rates[k].off);
        p_meta(o, rates[k].name, "gauge", rates[k].help);
        if (!isnan(v)) {
            tml__sb_addf(o, "%s{%s}", rates[k].name, rl);
            p_value(o, v);
        }
    }
    p_meta(o, "traceml_rank_skew_ratio", "gauge",
           "(worst - median) / median rank Step Time, live window.");
    if (!isnan(s->skew)) {
        tml__sb_addf(o, "traceml_rank_skew_ratio{%s}", rl);
        p_value(o, s->skew);
    }
}

/* The # HELP of the section gauges, by metric name: what each number of
 * the summary's step_memory.per_rank[], system.per_node[] and
 * process.per_rank[] is (docs/summary-json.md). A field added there
 * without a line here still gets a HELP naming its summary key
 * (gauge_help); tests/unit/test_live.c checks that none needs it. */
static const struct {
    const char *name, *help;
} gauge_helps[] = {
    {"traceml_step_memory_peak_allocated_bytes",
     "Per-step peak CUDA allocated bytes, window average, per rank."},
    {"traceml_step_memory_peak_reserved_bytes",
     "Per-step peak CUDA reserved bytes, window average, per rank."},
    {"traceml_step_memory_rss_bytes", "Process RSS at each step's end, window average, per rank."},
    {"traceml_step_memory_steps_analysed", "Steps the memory rules analysed, per rank."},
    {"traceml_step_memory_series_peak_bytes",
     "Largest per-step figure of the series the memory rules analysed, per rank."},
    {"traceml_step_memory_capacity_bytes",
     "Device memory (host RAM on a CPU-only run) the memory rules compare with, per rank."},
    {"traceml_system_cpu_percent", "Host CPU utilisation, percent of all cores, per node."},
    {"traceml_system_ram_used_bytes", "Host RAM in use, average of samples, per node."},
    {"traceml_system_ram_total_bytes", "Host RAM, per node."},
    {"traceml_system_gpu_util_percent", "GPU utilisation, mean over the node's GPUs, per node."},
    {"traceml_system_gpu_memory_used_bytes",
     "GPU memory in use, mean over the node's GPUs, per node."},
    {"traceml_system_gpu_memory_total_bytes", "GPU memory, mean over the node's GPUs, per node."},
    {"traceml_system_gpu_temperature_c",
     "GPU temperature in degrees Celsius, mean over the node's GPUs, per node."},
    {"traceml_system_gpu_power_w", "GPU power draw in watts, mean over the node's GPUs, per node."},
    {"traceml_system_gpu_power_limit_w",
     "GPU power limit in watts, mean over the node's GPUs, per node."},
    {"traceml_system_ram_used_peak_bytes", "Largest sampled host RAM in use, per node."},
    {"traceml_system_gpu_memory_peak_percent",
     "The worst GPU's peak memory in use, percent of its memory, per node."},
    {"traceml_system_gpu_temperature_peak_c",
     "The hottest GPU's peak temperature in degrees Celsius, per node."},
    {"traceml_system_gpu_power_percent",
     "The worst GPU's average power draw, percent of its limit, per node."},
    {"traceml_process_cpu_capacity_percent",
     "Training process CPU, percent of the host's logical cores, per rank."},
    {"traceml_process_rss_bytes", "Training process RSS, average, per rank."},
    {"traceml_process_cuda_allocated_bytes",
     "CUDA allocated bytes, average of the per-step peaks, per rank."},
    {"traceml_process_cuda_reserved_bytes",
     "CUDA reserved bytes, average of the per-step peaks, per rank."},
    {"traceml_process_cpu_percent", "Training process CPU, percent of one core, per rank."},
    {"traceml_process_runqueue_wait_percent",
     "Percent of wall time the main thread was runnable but waited for a core, per rank."},
    {"traceml_process_rss_peak_bytes", "Training process peak RSS, per rank."},
    {"traceml_process_cuda_reserved_peak_bytes",
     "Largest per-step peak of CUDA reserved bytes, per rank."},
    {"traceml_process_device_total_bytes", "Memory of the rank's device, per rank."},
    {"traceml_process_host_ram_total_bytes", "RAM of the rank's host, per rank."},
};

const char *tml__live_gauge_help(const char *name)
{
    for (size_t i = 0; i < sizeof(gauge_helps) / sizeof(gauge_helps[0]); i++)
        if (strcmp(gauge_helps[i].name, name) == 0)
            return gauge_helps[i].help;
    return NULL;
}

/* The gauge's # HELP: its line above, else the summary key it comes from. */
static void gauge_help(tml_strbuf *o, const tml_live_gauge *g)
{
    const char *help = tml__live_gauge_help(g->name);
    if (help) {
        tml__sb_addf(o, "# HELP %s %s\n", g->name, help);
        return;
    }
    static const char *const sections[] = {"step_memory", "system", "process"};
    const char *key = g->name + strlen("traceml_");
    const char *sec = "";
    for (size_t k = 0; k < sizeof(sections) / sizeof(sections[0]); k++)
        if (strncmp(key, sections[k], strlen(sections[k])) == 0 &&
            key[strlen(sections[k])] == '_') {
            sec = sections[k];
            key += strlen(sections[k]) + 1;
        }
    tml__sb_addf(o, "# HELP %s %s.per_%s[].%s of the live summary.\n", g->name, sec, g->who,
                 key);
}

/* The section gauges (memory, system incl. GPU, process): one family per
 * name, in first-seen order. */
static void p_gauges(tml_strbuf *o, const tml_live_snap *s, const char *rl)
{
    for (size_t i = 0; i < s->ngauges; i++) {
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(s->gauges[j].name, s->gauges[i].name) == 0;
        if (seen)
            continue;
        gauge_help(o, &s->gauges[i]);
        tml__sb_addf(o, "# TYPE %s gauge\n", s->gauges[i].name);
        for (size_t j = i; j < s->ngauges; j++) {
            const tml_live_gauge *g = &s->gauges[j];
            if (strcmp(g->name, s->gauges[i].name) != 0)
                continue;
            tml__sb_addf(o, "%s{%s,%s=\"%d\"}", g->name, rl, g->who, (int)g->id);
            p_value(o, g->value);
        }
    }
}

void tml__live_prometheus(const tml_live_snap *s, tml_strbuf *o)
{
    tml_strbuf run = TML_STRBUF_INIT;   /* run="..." */
    tml__sb_adds(&run, "run=\"");
    p_label(&run, s->run_name);
    tml__sb_addc(&run, '"');
    const char *rl = run.buf ? run.buf : "";

    p_run(o, s, rl);
    p_rank_gauge(o, s, "traceml_step_time_seconds",
                 "Average Step Time per rank over the live window.",
                 offsetof(tml_live_rank, avg_ms) + TML_M_STEP * sizeof(double), 1000.0);
    p_rank_gauge(o, s, "traceml_step_time_p90_seconds",
                 "90th percentile Step Time per rank over the live window.",
                 offsetof(tml_live_rank, step_p90_ms), 1000.0);
    p_meta(o, "traceml_phase_seconds", "gauge",
           "Average time per step in each phase, per rank, live window.");
    for (size_t i = 0; i < s->nranks; i++) {
        for (int m = 1; m < TML_M_COUNT; m++) {
            if (isnan(s->ranks[i].avg_ms[m]))
                continue;
            tml__sb_addf(o, "traceml_phase_seconds");
            p_rank_labels(o, s, &s->ranks[i]);
            tml__sb_addf(o, ",phase=\"%s\"}", tml__metric_name((tml_metric)m));
            p_value(o, s->ranks[i].avg_ms[m] / 1000.0);
        }
    }
    p_rank_counter(o, s, "traceml_steps_received_total", "Step records received per rank.",
                   offsetof(tml_live_rank, steps_received));
    p_rank_counter(o, s, "traceml_records_dropped_total",
                   "Step records a rank could not deliver.",
                   offsetof(tml_live_rank, records_dropped));
    p_rank_gauge(o, s, "traceml_rank_rss_bytes", "Per-step process RSS, live-window average.",
                 offsetof(tml_live_rank, rss_bytes), 1);
    p_rank_gauge(o, s, "traceml_rank_cuda_allocated_bytes",
                 "Per-step peak CUDA allocated bytes, live-window average.",
                 offsetof(tml_live_rank, cuda_allocated_bytes), 1);
    p_rank_gauge(o, s, "traceml_rank_cuda_reserved_bytes",
                 "Per-step peak CUDA reserved bytes, live-window average.",
                 offsetof(tml_live_rank, cuda_reserved_bytes), 1);
    p_gauges(o, s, rl);
    tml__sb_release(&run);
}

/* ---- plain text ---------------------------------------------------- */

static void t_ms(tml_strbuf *o, double ms)
{
    if (isnan(ms))
        tml__sb_adds(o, "n/a");
    else if (ms >= 1000)
        tml__sb_addf(o, "%.2fs", ms / 1000.0);
    else
        tml__sb_addf(o, "%.1fms", ms);
}

void tml__live_text_line(const tml_live_snap *s, tml_strbuf *o)
{
    const tml_live_rank *r = NULL;
    for (size_t i = 0; i < s->nranks && !r; i++)
        if (s->ranks[i].rank == (s->median_rank >= 0 ? s->median_rank : s->ranks[i].rank))
            r = &s->ranks[i];
    tml__sb_addf(o, "[traceml] %llu steps", (unsigned long long)s->steps_received);
    if (!isnan(s->elapsed_s))
        tml__sb_addf(o, " | %.0fs", s->elapsed_s);
    tml__sb_addf(o, " | %s (%s)", s->verdict.label ? s->verdict.label : "NO DATA",
                 tml__severity_name(s->verdict.severity));
    if (r && r->window_steps) {
        tml__sb_adds(o, " | step ");
        t_ms(o, r->avg_ms[TML_M_STEP]);
        static const int shown[] = {TML_M_INPUT, TML_M_H2D, TML_M_FORWARD, TML_M_BACKWARD,
                                    TML_M_OPTIMIZER, TML_M_RESIDUAL};
        static const char *const names[] = {"input", "h2d", "fwd", "bwd", "opt", "resid"};
        for (size_t k = 0; k < 6; k++) {
            double sh = s->share[shown[k]];
            if (isnan(sh))
                tml__sb_addf(o, " %s n/a", names[k]);
            else
                tml__sb_addf(o, " %s %.0f%%", names[k], sh * 100.0);
        }
        if (!isnan(r->rss_bytes)) {
            char rss[32];
            tml__fmt_bytes(r->rss_bytes, rss, sizeof(rss));
            tml__sb_addf(o, " | rss %s", rss);
        }
    }
    if (!isnan(s->samples_per_s)) {
        char rate[48];
        tml__fmt_si(s->samples_per_s, "", " samples/s", rate, sizeof(rate));
        tml__sb_addf(o, " | %s", rate);
    }
    if (s->nranks > 1)
        tml__sb_addf(o, " | %zu ranks, skew %s", s->nranks, isnan(s->skew) ? "n/a" : "");
    if (s->nranks > 1 && !isnan(s->skew))
        tml__sb_addf(o, "%.0f%%", s->skew * 100.0);
    tml__sb_addc(o, '\n');
}
