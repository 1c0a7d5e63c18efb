/*
 * report.c - from a run to the summary: the one entry point the aggregator
 * calls at the end of a run (and `traceml view` never calls: it re-prints
 * the stored "text").
 *
 * The box and the JSON must never disagree, so neither computes anything:
 * this file computes one model (window, step-time diagnosis, run verdict,
 * resource sections, header counts) and box.c and json.c only print it.
 * The JSON then embeds the box as "text", which is exactly what
 * final_summary.txt holds.
 */
#include "report/model.h"
#include "diag/window.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int has_node(const int32_t *v, size_t n, int32_t x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

static void now_iso(char *out, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(out, cap, "1970-01-01T00:00:00Z");
}

static int model_init(tml_report_model *m, const tml_run *run, const tml_report_opts *o)
{
    static const tml_run empty;   /* a NULL run reads as an empty one */
    int32_t *nodes = NULL;

    memset(m, 0, sizeof(*m));
    m->win.median_rank = m->win.worst_rank = -1;
    if (!run)
        run = &empty;
    m->run = run;
    m->status = o && o->status ? o->status : "completed";
    m->exit_code = o ? o->exit_code : 0;
    m->duration_s = o && o->duration_s >= 0 ? o->duration_s : NAN;
    m->json_path = o ? o->json_path : NULL;
    m->width = o && o->width > 0 ? o->width : TML_REPORT_DEFAULT_WIDTH;
    if (m->width < TML_REPORT_MIN_WIDTH)
        m->width = TML_REPORT_MIN_WIDTH;
    if (m->width > 400)
        m->width = 400;
    if (o && o->generated_at)
        snprintf(m->generated_at, sizeof(m->generated_at), "%s", o->generated_at);
    else
        now_iso(m->generated_at, sizeof(m->generated_at));
    if (o && o->th)
        m->th = *o->th;
    else
        tml__thresholds_default(&m->th);

    if (tml__window_compute(run, o ? o->window_steps : 0, &m->win) < 0)
        return TML_ENOMEM;
    m->series = o ? o->series : 0;
    if (m->win.clock == TML_CLOCK_GPU) {
        if (tml__window_compute_cpu(run, o ? o->window_steps : 0, &m->cpu_win) < 0)
            return TML_ENOMEM;
        m->has_cpu_win = 1;
    }
    tml__diag_step_time(&m->win, &m->th, &m->st);

    /* Header counts. */
    m->ranks_reported = (int32_t)run->nranks;
    int32_t ws = run->world_size, nn = run->nnodes;
    nodes = calloc(run->nranks ? run->nranks : 1, sizeof(*nodes));
    if (!nodes)
        return TML_ENOMEM;
    size_t ndistinct = 0;
    double ov = 0;
    size_t nov = 0;
    for (size_t i = 0; i < run->nranks; i++) {
        const tml_rank *r = &run->ranks[i];
        if (run->world_size <= 0 && r->info.world_size > ws)
            ws = r->info.world_size;
        if (run->nnodes <= 0 && r->info.nnodes > nn)
            nn = r->info.nnodes;
        if (!has_node(nodes, ndistinct, r->info.node_rank))
            nodes[ndistinct++] = r->info.node_rank;
        if (r->stats.overhead_ns_per_step >= 0) {
            ov += (double)r->stats.overhead_ns_per_step;
            nov++;
        }
        m->records_dropped += r->stats.records_dropped;
        m->events_dropped += r->stats.events_dropped;
    }
    if (ws < (int32_t)run->nranks)
        ws = (int32_t)run->nranks;
    if (nn < (int32_t)ndistinct)
        nn = (int32_t)ndistinct;
    m->world_size = ws;
    m->nodes_reported = (int32_t)ndistinct;
    m->nodes_expected = nn;
    m->overhead_us = nov ? ov / (double)nov / 1000.0 : NAN;
    for (size_t i = 0; i < m->win.nranks; i++) {
        if (m->win.ranks[i].nsteps)
            m->active_ranks++;
        if (m->win.ranks[i].has_gpu)
            m->gpus_observed++;
    }

    if (ws > 0) {
        m->missing_ranks = calloc((size_t)ws, sizeof(*m->missing_ranks));
        if (!m->missing_ranks)
            goto fail;
        for (int32_t r = 0; r < ws; r++)
            if (!tml__run_find((tml_run *)run, r))
                m->missing_ranks[m->nmissing++] = r;
    }

    /* Resource sections: samples, per-step memory, their rules. */
    if (tml__report_resources(m, nodes, ndistinct) < 0)
        goto fail;
    tml__diag_run_verdict(&m->st, m->gpu_util_percent, &m->verdict);
    free(nodes);
    return 0;

fail:
    free(nodes);
    return TML_ENOMEM;
}

static void model_release(tml_report_model *m)
{
    tml__window_release(&m->win);
    if (m->has_cpu_win)
        tml__window_release(&m->cpu_win);
    free(m->missing_ranks);
    free(m->nodes);
    free(m->procs);
    tml__report_resources_release(m);
}

int tml__report_build(const tml_run *run, const tml_report_opts *o,
                      tml_strbuf *text, tml_strbuf *json)
{
    tml_report_model m;
    tml_strbuf box = TML_STRBUF_INIT;
    int err = model_init(&m, run, o);

    if (err < 0)
        goto done;
    tml__report_box(&m, &box);
    if (box.failed) {
        err = TML_ENOMEM;
        goto done;
    }
    if (text)
        tml__sb_add(text, box.buf, box.len);
    if (json)
        tml__report_json(&m, box.buf, json);
    if ((text && text->failed) || (json && json->failed))
        err = TML_ENOMEM;
done:
    tml__sb_release(&box);
    model_release(&m);
    return err;
}
