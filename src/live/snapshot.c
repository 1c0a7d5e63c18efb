/*
 * snapshot.c - what the live views show, computed from the run the
 * aggregator holds, and its renderings (live JSON, Prometheus text, one
 * plain text line).
 *
 * A live view answers "why is it slow right now", so it diagnoses the last
 * 100 common steps, not the whole run, with exactly the functions the final
 * summary uses (diag/window.c, diag/diag.c, report/report.c). To keep the
 * cost flat however long the run is, the window is computed over a
 * borrowed tail of each rank's records (a tml_run whose ranks point into
 * the real arrays, nothing copied): the last TML_LIVE_TAIL records are far
 * more than 100 common steps even when ranks are out of step.
 *
 * The memory, system and process sections are taken from the summary JSON
 * over the same window (the final_summary.json shape, built by
 * report/report.c) instead of being recomputed here: whatever those
 * sections learn to carry reaches the dashboard and /metrics unchanged,
 * with metric names derived from the JSON keys (units already in them).
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
#include "report/report.h"
#include "base/json.h"

static int64_t unix_ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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
        TML_M_OPTIMIZER, TML_M_RESIDUAL
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

static void section_from(tml_live_section *sec, const tml_json *doc, const char *name)
{
    const tml_json *d = tml__json_get(tml__json_get(doc, name), "diagnosis");
    copy_str(sec->label, sizeof(sec->label), tml__json_str(tml__json_get(d, "label")));
    copy_str(sec->severity, sizeof(sec->severity),
             tml__json_str(tml__json_get(d, "severity")));
    copy_str(sec->why, sizeof(sec->why), tml__json_str(tml__json_get(d, "why")));
}

static int is_identity_key(const char *k)
{
    static const char *const ids[] = {"rank", "node", "local_rank", "samples", "steps",
                                      "label", NULL};
    for (const char *const *p = ids; *p; p++)
        if (strcmp(k, *p) == 0)
            return 1;
    return 0;
}

/* Gauges from every numeric field of section.<list>[] items. */
static int gauges_from(tml_live_snap *snap, const tml_json *doc, const char *section,
                       const char *list, const char *who)
{
    const tml_json *arr = tml__json_get(tml__json_get(doc, section), list);
    if (!arr || arr->type != TML_JSON_ARRAY)
        return 0;
    for (size_t i = 0; i < arr->n; i++) {
        const tml_json *row = &arr->items[i];
        double id;
        if (row->type != TML_JSON_OBJECT || !tml__json_num(tml__json_get(row, who), &id))
            continue;
        for (size_t k = 0; k < row->n; k++) {
            double v;
            const char *key = row->keys[k];
            if (is_identity_key(key) || !tml__json_num(&row->items[k], &v))
                continue;
            if (snap->ngauges >= TML_LIVE_MAX_GAUGES)
                return 0;
            tml_live_gauge *g = &snap->gauges[snap->ngauges];
            int n = snprintf(g->name, sizeof(g->name), "traceml_%s_%s", section, key);
            if (n < 0 || (size_t)n >= sizeof(g->name))
                continue;
            for (char *c = g->name; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                      (*c >= '0' && *c <= '9') || *c == '_'))
                    *c = '_';
            copy_str(g->who, sizeof(g->who), who);
            g->id = (int32_t)id;
            g->value = v;
            snap->ngauges++;
        }
    }
    return 0;
}

int tml__live_snap_sections(tml_live_snap *snap, const char *json, size_t len)
{
    tml_json *doc = NULL;
    if (tml__json_parse(json, len, &doc, NULL) < 0)
        return TML_EPROTO;
    section_from(&snap->mem, doc, "step_memory");
    section_from(&snap->sys, doc, "system");
    section_from(&snap->proc, doc, "process");
    double g;
    snap->gpu_util_percent =
        tml__json_num(tml__json_path(doc, "system.average.gpu_util_percent"), &g) ? g : NAN;
    if (!snap->gauges)
        snap->gauges = calloc(TML_LIVE_MAX_GAUGES, sizeof(*snap->gauges));
    if (snap->gauges) {
        snap->ngauges = 0;
        gauges_from(snap, doc, "step_memory", "per_rank", "rank");
        gauges_from(snap, doc, "system", "per_node", "node");
        gauges_from(snap, doc, "process", "per_rank", "rank");
    }
    tml__json_free(doc);
    return 0;
}

static const tml_rank_window *window_rank(const tml_window *w, int32_t rank)
{
    for (size_t i = 0; i < w->nranks; i++)
        if (w->ranks[i].rank == rank)
            return &w->ranks[i];
    return NULL;
}

int tml__live_snap_build(const tml_run *run, const tml_live_build_opts *o,
                         tml_live_snap *snap, tml_strbuf *summary)
{
    tml_live_build_opts dflt;
    tml_thresholds th;
    tml_window win;
    tml_step_diag st;
    tml_run tail;
    tml_strbuf sum = TML_STRBUF_INIT;
    int rc = TML_ENOMEM;

    memset(&dflt, 0, sizeof(dflt));
    if (!o)
        o = &dflt;
    memset(snap, 0, sizeof(*snap));
    memset(&win, 0, sizeof(win));
    memset(&tail, 0, sizeof(tail));
    if (o->th)
        th = *o->th;
    else
        tml__thresholds_default(&th);

    snap->seq = o->seq;
    copy_str(snap->run_name, sizeof(snap->run_name), run->name);
    copy_str(snap->run_id, sizeof(snap->run_id), run->id);
    copy_str(snap->status, sizeof(snap->status), o->status ? o->status : "running");
    snap->unix_ms = o->now_unix_ms ? o->now_unix_ms : unix_ms_now();
    int64_t start = o->start_unix_ms ? o->start_unix_ms : run->start_unix_ms;
    snap->elapsed_s = start > 0 ? (double)(snap->unix_ms - start) / 1000.0 : NAN;
    snap->gpu_util_percent = NAN;
    snap->median_rank = snap->worst_rank = snap->series_rank = -1;
    snap->first_step = snap->last_step = -1;
    snap->world_size = run->world_size;

    /* The borrowed tail: same ranks, last TML_LIVE_TAIL records each. */
    tail = *run;
    tail.cap = 0;
    tail.ranks = calloc(run->nranks ? run->nranks : 1, sizeof(*tail.ranks));
    if (!tail.ranks)
        goto fail;
    for (size_t i = 0; i < run->nranks; i++) {
        tail.ranks[i] = run->ranks[i];
        size_t n = run->ranks[i].nsteps;
        size_t k = n > TML_LIVE_TAIL ? TML_LIVE_TAIL : n;
        tail.ranks[i].steps = run->ranks[i].steps + (n - k);
        tail.ranks[i].nsteps = k;
        tail.ranks[i].cap = k;
    }

    if (tml__window_compute(&tail, TML_LIVE_WINDOW, &win) < 0)
        goto fail;
    tml__diag_step_time(&win, &th, &st);
    snap->clock = win.clock == TML_CLOCK_GPU ? "gpu" : "cpu";
    snap->common_steps = win.common_steps;
    snap->window_steps = win.window_steps;
    snap->warmup_steps = win.warmup_steps;
    if (win.window_steps) {
        snap->first_step = (int64_t)win.first_step;
        snap->last_step = (int64_t)win.last_step;
    }
    for (int m = 0; m < TML_M_COUNT; m++)
        snap->share[m] = st.share[m];
    snap->skew = win.skew;
    if (win.median_rank >= 0)
        snap->median_rank = win.ranks[win.median_rank].rank;
    if (win.worst_rank >= 0)
        snap->worst_rank = win.ranks[win.worst_rank].rank;

    /* The summary over the live window: memory, system, process. */
    tml_report_opts ro;
    memset(&ro, 0, sizeof(ro));
    ro.status = snap->status;
    ro.duration_s = isnan(snap->elapsed_s) ? -1 : snap->elapsed_s;
    ro.th = &th;
    ro.window_steps = TML_LIVE_WINDOW;
    if (tml__report_build(&tail, &ro, NULL, &sum) < 0)
        goto fail;
    tml__live_snap_sections(snap, sum.buf, sum.len);
    if (summary)
        tml__sb_add(summary, sum.buf, sum.len);
    tml__diag_run_verdict(&st, snap->gpu_util_percent, &snap->verdict);

    /* Ranks. */
    snap->nranks = run->nranks;
    snap->ranks = calloc(run->nranks ? run->nranks : 1, sizeof(*snap->ranks));
    if (!snap->ranks)
        goto fail;
    size_t with_series = 0;
    for (size_t i = 0; i < run->nranks; i++) {
        const tml_rank *r = &run->ranks[i];
        tml_live_rank *lr = &snap->ranks[i];
        const tml_rank_window *rw = window_rank(&win, r->info.rank);
        lr->rank = r->info.rank;
        lr->node = r->info.node_rank;
        lr->local_rank = r->info.local_rank;
        copy_str(lr->host, sizeof(lr->host), r->info.host);
        lr->steps_received = r->nsteps;
        lr->last_step = r->nsteps ? (int64_t)r->steps[r->nsteps - 1].step : -1;
        lr->ended = r->ended;
        lr->window_steps = rw ? rw->nsteps : 0;
        for (int m = 0; m < TML_M_COUNT; m++)
            lr->avg_ms[m] = rw ? rw->avg_ns[m] / 1e6 : NAN;
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
        snap->records_dropped += r->stats.records_dropped;
        snap->events_dropped += r->stats.events_dropped;
        if (r->nsteps && with_series < TML_LIVE_SERIES_RANKS) {
            size_t k = r->nsteps > TML_LIVE_HISTORY ? TML_LIVE_HISTORY : r->nsteps;
            lr->step_ms = malloc(k * sizeof(*lr->step_ms));
            lr->step_ids = malloc(k * sizeof(*lr->step_ids));
            if (!lr->step_ms || !lr->step_ids)
                goto fail;
            uint32_t missing = missing_in_last(r, k);
            for (size_t j = 0; j < k; j++) {
                tml_live_point pt;
                const tml_step_record *s = &r->steps[r->nsteps - k + j];
                point_fill(&pt, s, missing, win.clock == TML_CLOCK_GPU);
                lr->step_ms[j] = pt.ms[TML_LS_STEP];
                lr->step_ids[j] = s->step;
            }
            lr->nstep_ms = k;
            with_series++;
        }
    }

    /* The per-step series: the lowest rank that sent steps. */
    for (size_t i = 0; i < run->nranks; i++) {
        const tml_rank *r = &run->ranks[i];
        if (!r->nsteps)
            continue;
        size_t k = r->nsteps > TML_LIVE_HISTORY ? TML_LIVE_HISTORY : r->nsteps;
        snap->points = calloc(k, sizeof(*snap->points));
        if (!snap->points)
            goto fail;
        uint32_t missing = missing_in_last(r, k);
        for (size_t j = 0; j < k; j++)
            point_fill(&snap->points[j], &r->steps[r->nsteps - k + j], missing,
                       win.clock == TML_CLOCK_GPU);
        snap->npoints = k;
        snap->series_rank = r->info.rank;
        break;
    }
    rc = 0;
fail:
    tml__window_release(&win);
    free(tail.ranks);
    tml__sb_release(&sum);
    if (rc < 0)
        tml__live_snap_release(snap);
    return rc;
}

/* ---- live JSON ----------------------------------------------------- */

static void j_key(tml_strbuf *o, const char *k, int *first)
{
    if (!*first)
        tml__sb_addc(o, ',');
    *first = 0;
    tml__sb_add_json_str(o, k);
    tml__sb_addc(o, ':');
}

static void j_section(tml_strbuf *o, const char *key, const tml_live_section *s, int *first)
{
    j_key(o, key, first);
    tml__sb_adds(o, "{\"label\":");
    tml__json_add_str_or_null(o, s->label);
    tml__sb_adds(o, ",\"severity\":");
    tml__json_add_str_or_null(o, s->severity);
    tml__sb_adds(o, ",\"why\":");
    tml__json_add_str_or_null(o, s->why);
    tml__sb_addc(o, '}');
}

static const char *const series_names[TML_LS_COUNT] = {
    "step_time_ms", "input_wait_ms", "h2d_ms", "forward_ms", "backward_ms",
    "optimizer_ms", "residual_ms",
};

void tml__live_json(const tml_live_snap *s, tml_strbuf *o)
{
    int f = 1;
    tml__sb_addc(o, '{');
    j_key(o, "schema", &f);
    tml__sb_adds(o, "\"traceml.live/1\"");
    j_key(o, "seq", &f);
    tml__sb_addf(o, "%llu", (unsigned long long)s->seq);
    j_key(o, "run_name", &f);
    tml__sb_add_json_str(o, s->run_name);
    j_key(o, "run_id", &f);
    tml__json_add_str_or_null(o, s->run_id);
    j_key(o, "status", &f);
    tml__sb_add_json_str(o, s->status);
    j_key(o, "unix_ms", &f);
    tml__sb_addf(o, "%lld", (long long)s->unix_ms);
    j_key(o, "elapsed_s", &f);
    tml__json_add_num(o, s->elapsed_s, 1, 0);

    j_key(o, "window", &f);
    tml__sb_addf(o, "{\"max_steps\":%d,\"clock\":\"%s\",\"common_steps\":%zu,"
                    "\"window_steps\":%zu,\"warmup_steps_excluded\":%zu,",
                 TML_LIVE_WINDOW, s->clock ? s->clock : "cpu", s->common_steps,
                 s->window_steps, s->warmup_steps);
    if (s->first_step >= 0)
        tml__sb_addf(o, "\"first_step\":%lld,\"last_step\":%lld}", (long long)s->first_step,
                     (long long)s->last_step);
    else
        tml__sb_adds(o, "\"first_step\":null,\"last_step\":null}");

    const tml_diagnosis *d = &s->verdict;
    j_key(o, "verdict", &f);
    tml__sb_adds(o, "{\"kind\":");
    tml__json_add_str_or_null(o, d->kind);
    tml__sb_adds(o, ",\"label\":");
    tml__json_add_str_or_null(o, d->label);
    tml__sb_adds(o, ",\"severity\":");
    tml__sb_add_json_str(o, tml__severity_name(d->severity));
    tml__sb_adds(o, ",\"why\":");
    tml__json_add_str_or_null(o, d->why);
    tml__sb_adds(o, ",\"next\":");
    tml__json_add_str_or_null(o, d->next);
    tml__sb_adds(o, ",\"cause\":");
    tml__json_add_str_or_null(o, d->cause >= 0 ? tml__metric_name((tml_metric)d->cause) : NULL);
    tml__sb_addc(o, '}');

    j_key(o, "shares_percent", &f);
    tml__sb_addc(o, '{');
    for (int m = 1; m < TML_M_COUNT; m++) {
        if (m == TML_M_UNTRACED || m == TML_M_FETCH_CPU)
            continue;
        if (m > 1)
            tml__sb_addc(o, ',');
        tml__sb_add_json_str(o, tml__metric_name((tml_metric)m));
        tml__sb_addc(o, ':');
        tml__json_add_num(o, s->share[m] * 100.0, 2, 0);
    }
    tml__sb_addc(o, '}');
    j_key(o, "skew_percent", &f);
    tml__json_add_num(o, s->skew * 100.0, 2, 0);
    j_key(o, "median_rank", &f);
    tml__sb_addf(o, "%d", (int)s->median_rank);
    j_key(o, "worst_rank", &f);
    tml__sb_addf(o, "%d", (int)s->worst_rank);
    j_section(o, "step_memory", &s->mem, &f);
    j_section(o, "system", &s->sys, &f);
    j_section(o, "process", &s->proc, &f);
    j_key(o, "gpu_util_percent", &f);
    tml__json_add_num(o, s->gpu_util_percent, 2, 0);
    j_key(o, "world_size", &f);
    tml__sb_addf(o, "%d", (int)(s->world_size > (int32_t)s->nranks ? s->world_size
                                                                  : (int32_t)s->nranks));
    j_key(o, "records_dropped", &f);
    tml__sb_addf(o, "%llu", (unsigned long long)s->records_dropped);
    j_key(o, "events_dropped", &f);
    tml__sb_addf(o, "%llu", (unsigned long long)s->events_dropped);

    j_key(o, "ranks", &f);
    tml__sb_addc(o, '[');
    for (size_t i = 0; i < s->nranks; i++) {
        const tml_live_rank *r = &s->ranks[i];
        if (i)
            tml__sb_addc(o, ',');
        tml__sb_addf(o, "{\"rank\":%d,\"node\":%d,\"local_rank\":%d,\"label\":\"R%d/N%d\","
                        "\"host\":",
                     (int)r->rank, (int)r->node, (int)r->local_rank, (int)r->rank,
                     (int)r->node);
        tml__sb_add_json_str(o, r->host);
        tml__sb_addf(o, ",\"steps_received\":%llu,\"last_step\":",
                     (unsigned long long)r->steps_received);
        if (r->last_step >= 0)
            tml__sb_addf(o, "%lld", (long long)r->last_step);
        else
            tml__sb_adds(o, "null");
        tml__sb_addf(o, ",\"ended\":%s,\"window_steps\":%zu", r->ended ? "true" : "false",
                     r->window_steps);
        for (int m = 0; m < TML_M_COUNT; m++) {
            tml__sb_addf(o, ",\"%s_ms\":", tml__metric_name((tml_metric)m));
            tml__json_add_num(o, r->avg_ms[m], 3, 0);
        }
        tml__sb_adds(o, ",\"step_time_p50_ms\":");
        tml__json_add_num(o, r->step_p50_ms, 3, 0);
        tml__sb_adds(o, ",\"step_time_p90_ms\":");
        tml__json_add_num(o, r->step_p90_ms, 3, 0);
        tml__sb_adds(o, ",\"rss_bytes\":");
        tml__json_add_num(o, r->rss_bytes, 0, 0);
        tml__sb_adds(o, ",\"cuda_allocated_bytes\":");
        tml__json_add_num(o, r->cuda_allocated_bytes, 0, 0);
        tml__sb_adds(o, ",\"cuda_reserved_bytes\":");
        tml__json_add_num(o, r->cuda_reserved_bytes, 0, 0);
        tml__sb_adds(o, ",\"traceml_overhead_us_per_step\":");
        tml__json_add_num(o, r->overhead_us, 3, 0);
        tml__sb_addf(o, ",\"records_dropped\":%llu,\"events_dropped\":%llu",
                     (unsigned long long)r->records_dropped,
                     (unsigned long long)r->events_dropped);
        tml__sb_adds(o, ",\"recent_steps\":[");
        for (size_t j = 0; j < r->nstep_ms; j++)
            tml__sb_addf(o, "%s%llu", j ? "," : "", (unsigned long long)r->step_ids[j]);
        tml__sb_adds(o, "],\"recent_step_time_ms\":[");
        for (size_t j = 0; j < r->nstep_ms; j++) {
            if (j)
                tml__sb_addc(o, ',');
            tml__json_add_num(o, r->step_ms[j], 3, 0);
        }
        tml__sb_adds(o, "]}");
    }
    tml__sb_addc(o, ']');

    j_key(o, "series", &f);
    tml__sb_addf(o, "{\"rank\":%d,\"step\":[", (int)s->series_rank);
    for (size_t j = 0; j < s->npoints; j++)
        tml__sb_addf(o, "%s%llu", j ? "," : "", (unsigned long long)s->points[j].step);
    tml__sb_addc(o, ']');
    for (int k = 0; k < TML_LS_COUNT; k++) {
        tml__sb_addf(o, ",\"%s\":[", series_names[k]);
        for (size_t j = 0; j < s->npoints; j++) {
            if (j)
                tml__sb_addc(o, ',');
            tml__json_add_num(o, s->points[j].ms[k], 3, 0);
        }
        tml__sb_addc(o, ']');
    }
    static const char *const mem_names[3] = {"rss_bytes", "cuda_allocated_bytes",
                                             "cuda_reserved_bytes"};
    for (int k = 0; k < 3; k++) {
        tml__sb_addf(o, ",\"%s\":[", mem_names[k]);
        for (size_t j = 0; j < s->npoints; j++) {
            const tml_live_point *p = &s->points[j];
            double v = k == 0 ? p->rss_bytes : k == 1 ? p->cuda_allocated_bytes
                                                      : p->cuda_reserved_bytes;
            if (j)
                tml__sb_addc(o, ',');
            tml__json_add_num(o, v, 0, 0);
        }
        tml__sb_addc(o, ']');
    }
    tml__sb_addc(o, '}');

    j_key(o, "gauges", &f);
    tml__sb_addc(o, '[');
    for (size_t i = 0; i < s->ngauges; i++) {
        const tml_live_gauge *g = &s->gauges[i];
        tml__sb_addf(o, "%s{\"name\":\"%s\",\"%s\":%d,\"value\":", i ? "," : "", g->name,
                     g->who, (int)g->id);
        tml__json_add_num(o, g->value, 2, 0);
        tml__sb_addc(o, '}');
    }
    tml__sb_addc(o, ']');
    tml_strbuf line = TML_STRBUF_INIT;
    tml__live_text_line(s, &line);
    if (line.len && line.buf[line.len - 1] == '\n')
        line.buf[--line.len] = '\0';
    j_key(o, "line", &f);
    tml__json_add_str_or_null(o, line.buf);
    tml__sb_release(&line);
    tml__sb_addc(o, '}');
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

void tml__live_prometheus(const tml_live_snap *s, tml_strbuf *o)
{
    tml_strbuf run = TML_STRBUF_INIT;   /* {run="..."} */
    tml__sb_adds(&run, "run=\"");
    p_label(&run, s->run_name);
    tml__sb_addc(&run, '"');
    const char *rl = run.buf ? run.buf : "";

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
        if (m == TML_M_UNTRACED || m == TML_M_FETCH_CPU || isnan(s->share[m]))
            continue;
        tml__sb_addf(o, "traceml_phase_share_ratio{%s,phase=\"%s\"}", rl,
                     tml__metric_name((tml_metric)m));
        p_value(o, s->share[m]);
    }
    p_meta(o, "traceml_rank_skew_ratio", "gauge",
           "(worst - median) / median rank Step Time, live window.");
    if (!isnan(s->skew)) {
        tml__sb_addf(o, "traceml_rank_skew_ratio{%s}", rl);
        p_value(o, s->skew);
    }

    p_meta(o, "traceml_step_time_seconds", "gauge",
           "Average Step Time per rank over the live window.");
    for (size_t i = 0; i < s->nranks; i++) {
        if (isnan(s->ranks[i].avg_ms[TML_M_STEP]))
            continue;
        tml__sb_addf(o, "traceml_step_time_seconds");
        p_rank_labels(o, s, &s->ranks[i]);
        tml__sb_addc(o, '}');
        p_value(o, s->ranks[i].avg_ms[TML_M_STEP] / 1000.0);
    }
    p_meta(o, "traceml_step_time_p90_seconds", "gauge",
           "90th percentile Step Time per rank over the live window.");
    for (size_t i = 0; i < s->nranks; i++) {
        if (isnan(s->ranks[i].step_p90_ms))
            continue;
        tml__sb_addf(o, "traceml_step_time_p90_seconds");
        p_rank_labels(o, s, &s->ranks[i]);
        tml__sb_addc(o, '}');
        p_value(o, s->ranks[i].step_p90_ms / 1000.0);
    }
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
    p_meta(o, "traceml_steps_received_total", "counter", "Step records received per rank.");
    for (size_t i = 0; i < s->nranks; i++) {
        tml__sb_addf(o, "traceml_steps_received_total");
        p_rank_labels(o, s, &s->ranks[i]);
        tml__sb_addf(o, "} %llu\n", (unsigned long long)s->ranks[i].steps_received);
    }
    p_meta(o, "traceml_records_dropped_total", "counter",
           "Step records a rank could not deliver.");
    for (size_t i = 0; i < s->nranks; i++) {
        tml__sb_addf(o, "traceml_records_dropped_total");
        p_rank_labels(o, s, &s->ranks[i]);
        tml__sb_addf(o, "} %llu\n", (unsigned long long)s->ranks[i].records_dropped);
    }
    static const struct {
        const char *name, *help;
        size_t off;
    } mem[] = {
        {"traceml_rank_rss_bytes", "Per-step process RSS, live-window average.",
         offsetof(tml_live_rank, rss_bytes)},
        {"traceml_rank_cuda_allocated_bytes",
         "Per-step peak CUDA allocated bytes, live-window average.",
         offsetof(tml_live_rank, cuda_allocated_bytes)},
        {"traceml_rank_cuda_reserved_bytes",
         "Per-step peak CUDA reserved bytes, live-window average.",
         offsetof(tml_live_rank, cuda_reserved_bytes)},
    };
    for (size_t k = 0; k < sizeof(mem) / sizeof(mem[0]); k++) {
        p_meta(o, mem[k].name, "gauge", mem[k].help);
        for (size_t i = 0; i < s->nranks; i++) {
            double v = *(const double *)((const char *)&s->ranks[i] + mem[k].off);
            if (isnan(v))
                continue;
            tml__sb_adds(o, mem[k].name);
            p_rank_labels(o, s, &s->ranks[i]);
            tml__sb_addc(o, '}');
            p_value(o, v);
        }
    }
    /* Section numbers (memory, system incl. GPU, process): one family per
     * name, in first-seen order. */
    for (size_t i = 0; i < s->ngauges; i++) {
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(s->gauges[j].name, s->gauges[i].name) == 0;
        if (seen)
            continue;
        tml__sb_addf(o, "# TYPE %s gauge\n", s->gauges[i].name);
        for (size_t j = i; j < s->ngauges; j++) {
            const tml_live_gauge *g = &s->gauges[j];
            if (strcmp(g->name, s->gauges[i].name) != 0)
                continue;
            tml__sb_addf(o, "%s{%s,%s=\"%d\"}", g->name, rl, g->who, (int)g->id);
            p_value(o, g->value);
        }
    }
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
    uint64_t steps = 0;
    for (size_t i = 0; i < s->nranks; i++)
        if (s->ranks[i].steps_received > steps)
            steps = s->ranks[i].steps_received;
    tml__sb_addf(o, "[traceml] %llu steps", (unsigned long long)steps);
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
    if (s->nranks > 1)
        tml__sb_addf(o, " | %zu ranks, skew %s", s->nranks, isnan(s->skew) ? "n/a" : "");
    if (s->nranks > 1 && !isnan(s->skew))
        tml__sb_addf(o, "%.0f%%", s->skew * 100.0);
    tml__sb_addc(o, '\n');
}
