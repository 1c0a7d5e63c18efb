/*
 * report.c - from a run to the report model (model.h), and the summary:
 * the one entry point the aggregator calls at the end of a run (and
 * `traceml view` never calls: it re-prints the stored "text").
 *
 * The box, the JSON and the live views must never disagree, so none of
 * them computes anything: this file computes one model (window, step-time
 * diagnosis, run verdict, resource sections and their rows, header
 * counts; resources.c the resource rows, derive.c their averages, median
 * and worst rows) and box.c, json.c and live/snapshot.c only read it. The
 * model calls its printers (tml__report_print), they never call back. The JSON
 * then embeds the box as "text", which is exactly what final_summary.txt
 * holds.
 */
#include "report/model.h"
#include "diag/window.h"
#include "base/utf8.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

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

/* step_memory.per_rank[]: each window rank's peaks and what the memory
 * rules analysed of it. */
static int mem_rows(tml_report_model *m)
{
    const tml_window *win = &m->win;
    m->mem_rows = calloc(win->nranks ? win->nranks : 1, sizeof(*m->mem_rows));
    if (!m->mem_rows)
        return TML_ENOMEM;
    for (size_t i = 0; i < win->nranks; i++) {
        const tml_rank_window *r = &win->ranks[i];
        const tml_mem_rank *mr = i < m->mem_nranks ? &m->mem_ranks[i] : NULL;
        tml_mem_row *row = &m->mem_rows[i];
        double pk = NAN;
        for (size_t k = 0; mr && k < mr->n; k++)
            if (isnan(pk) || mr->series[k] > pk)
                pk = mr->series[k];
        *row = (tml_mem_row){ r->rank, r->node, r->cuda_allocated_bytes,
                              r->cuda_reserved_bytes, r->rss_bytes,
                              mr ? (double)mr->n : 0, pk, mr ? mr->capacity_bytes : NAN };
    }
    return 0;
}

/* ---- the model -------------------------------------------------------- */

/* What the step-time rules need from the resource sections: whether the
 * host CPU is saturated, and how much of it each rank used (procs[i] is
 * win.ranks[i]'s). */
static void step_rule_inputs(tml_report_model *m)
{
    for (size_t i = 0; i < m->sys_s.nissues; i++)
        if (strcmp(m->sys_s.issues[i].kind, "HIGH_CPU") == 0)
            m->win.host_cpu_busy = m->sys_s.issues[i].res.value;
    /* the busiest node's, as HIGH CPU takes it, fired or not */
    tml__rows_argmax(m->nodes, m->nnodes, sizeof(*m->nodes), offsetof(tml_sys_node, cpu_percent),
                     TML_ROWS_PLAIN, &m->win.host_cpu_percent);
    for (size_t i = 0; i < m->win.nranks && i < m->nprocs; i++) {
        m->win.ranks[i].cpu_percent = m->procs[i].cpu_percent;
        m->win.ranks[i].runq_wait_percent = m->procs[i].runq_wait_percent;
    }
}

/* A training that failed or was stopped before any step: NO DATA is then
 * no instrumentation problem, and wrapping the step is not the advice. */
static void ended_early(tml_report_model *m)
{
    tml_diagnosis *d = &m->st.primary;
    int failed = strcmp(m->status, "failed") == 0;
    if (strcmp(d->kind, "NO_DATA") != 0 || m->active_ranks > 0 ||
        (!failed && strcmp(m->status, "interrupted") != 0))
        return;
    /* steps traced that never arrived (a crash between two shipper
     * passes) are not "no step" */
    char when[96] = "was traced";
    if (m->run->steps_traced_here > 0)
        snprintf(when, sizeof(when), "reached the aggregator (%llu %s traced)",
                 (unsigned long long)m->run->steps_traced_here,
                 m->run->steps_traced_here == 1 ? "was" : "were");
    if (failed) {
        snprintf(d->why, sizeof(d->why), "The training exited with code %d before any step "
                 "%s.", m->exit_code, when);
        snprintf(d->next, sizeof(d->next), "Fix the error the training printed above (its "
                 "traceback or message), then run again; %s",
                 m->run->steps_traced_here > 0 ? "its steps ended with it before they were "
                 "sent." : "TraceML had nothing to measure yet.");
    } else {
        snprintf(d->why, sizeof(d->why), "The run was interrupted before any step %s.", when);
        snprintf(d->next, sizeof(d->next), "Let the training run past its first steps.");
    }
}

/* The ranks' own counters: what TraceML cost (in the step, and in the
 * background: every rank's shipper and sampler threads and the aggregator
 * process, as a share of one core over the run) and what was dropped. */
static void rank_counters(tml_report_model *m, const tml_run *run)
{
    double ov = 0, bg = 0, steps = 0;
    size_t nov = 0;
    for (size_t i = 0; i < run->nranks; i++) {
        const tml_rank_stats *st = &run->ranks[i].stats;
        steps += (double)tml__rank_received(&run->ranks[i]);
        if (st->overhead_ns_per_step >= 0) {
            ov += (double)st->overhead_ns_per_step;
            nov++;
        }
        if (st->shipper_cpu_ns > 0)
            bg += (double)st->shipper_cpu_ns;
        m->records_dropped += st->records_dropped;
        m->events_dropped += st->events_dropped;
    }
    m->overhead_us = nov ? ov / (double)nov / 1000.0 : NAN;
    bg += run->aggregator_cpu_ns > 0 ? (double)run->aggregator_cpu_ns : 0;
    m->background_cpu_percent = bg > 0 && m->duration_s > 0
                                ? 100.0 * bg / (m->duration_s * 1e9) : NAN;
    /* per step, the background too: on a machine without idle cores it
     * slows the training as much as it takes */
    m->overhead_total_us = !isnan(m->overhead_us) && bg > 0 && steps > 0
                           ? m->overhead_us + bg / steps / 1000.0 : m->overhead_us;
}

void tml__report_add_models(char *dst, size_t cap, const char *list)
{
    while (list && *list) {
        while (*list == ' ' || *list == ',')
            list++;
        size_t n = strcspn(list, ",");
        while (n > 0 && list[n - 1] == ' ')
            n--;
        int have = 0;
        for (const char *p = dst; n > 0 && !have && *p; p += strcspn(p, ","), p += *p ? 2 : 0)
            have = strncmp(p, list, n) == 0 && (p[n] == ',' || p[n] == '\0');
        size_t len = strlen(dst);
        if (n > 0 && !have && len + n + 3 <= cap)
            snprintf(dst + len, cap - len, "%s%.*s", len ? ", " : "", (int)n, list);
        list += n;
        list += strcspn(list, ",");
    }
}

int tml__report_term_width(int fd, long columns)
{
    struct winsize ws;
    if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return columns > 0 && columns < 10000 ? (int)columns : TML_REPORT_LOG_WIDTH;
}

int tml__report_width(int width)
{
    if (width <= 0)
        return TML_REPORT_DEFAULT_WIDTH;
    return width < TML_REPORT_MIN_WIDTH ? TML_REPORT_MIN_WIDTH : width > 400 ? 400 : width;
}

void tml__report_also(tml_report_model *m)
{
    const tml_section_diag *sections[3] = { &m->mem_s, &m->sys_s, &m->proc_s };
    m->nalso = m->watch ? 0 : tml__diag_also(&m->verdict, sections, 3, m->also, TML_ALSO_MAX);
    /* the straggler a COMMUNICATION-BOUND (CPU CONTENTION) verdict's Why
     * names, whose WARNING follows it in the step time's issues, is named
     * under it too (nanoGPT's rank-0-only evaluation) */
    const char *v = m->verdict.kind;
    if (m->watch || !v || (strcmp(v, "COMMUNICATION_BOUND") != 0 && strcmp(v, "CPU_CONTENTION")))
        return;
    for (size_t i = 0; i < m->st.nissues && m->nalso < TML_ALSO_MAX; i++) {
        const tml_diagnosis *d = &m->st.issues[i];
        if (d->kind && strstr(d->kind, "STRAGGLER") && d->severity >= TML_SEV_WARNING) {
            m->also[m->nalso++] = d;
            break;
        }
    }
}

/* What the caller says of the run (NULL: defaults). */
static void model_opts(tml_report_model *m, const tml_report_opts *o)
{
    m->status = o && o->status ? o->status : "completed";
    m->exit_code = o ? o->exit_code : 0;
    m->duration_s = o && o->duration_s >= 0 ? o->duration_s : NAN;
    m->json_path = o ? o->json_path : NULL;
    m->not_saved = o && o->not_saved && o->not_saved[0] ? o->not_saved : NULL;
    m->width = tml__report_width(o ? o->width : 0);
    m->compact = o && o->compact_ranks;
    if (o && o->workload_json)
        m->workload_json = o->workload_json;
    if (o && o->run_context_json)
        m->run_context_json = o->run_context_json;
    if (o && o->generated_at)
        snprintf(m->generated_at, sizeof(m->generated_at), "%s", o->generated_at);
    else
        now_iso(m->generated_at, sizeof(m->generated_at));
    if (o && o->th)
        m->th = *o->th;
    else
        tml__thresholds_default(&m->th);
}

int tml__report_model_init(tml_report_model *m, const tml_run *run, const tml_report_opts *o)
{
    static const tml_run empty;   /* a NULL run reads as an empty one */
    int32_t *nodes = NULL;

    memset(m, 0, sizeof(*m));
    m->win.median_rank = m->win.worst_rank = -1;
    if (!run)
        run = &empty;
    m->run = run;
    m->step_detection = tml__run_step_detection(run);
    for (size_t i = 0; i < run->nranks; i++)   /* every rank's, once */
        tml__report_add_models(m->also_timed, sizeof(m->also_timed), run->ranks[i].info.auto_models);
    m->watch = run->watch;
    model_opts(m, o);

    if (tml__window_compute(run, o ? o->window_steps : 0, &m->win) < 0)
        return TML_ENOMEM;
    m->series = o ? o->series : 0;
    if (m->win.clock == TML_CLOCK_GPU) {
        if (tml__window_compute_cpu(run, o ? o->window_steps : 0, &m->cpu_win) < 0)
            return TML_ENOMEM;
        m->has_cpu_win = 1;
    }

    /* Header counts. */
    m->ranks_reported = (int32_t)run->nranks;
    int32_t ws = run->world_size, nn = run->nnodes;
    nodes = calloc(run->nranks ? run->nranks : 1, sizeof(*nodes));
    if (!nodes)
        return TML_ENOMEM;
    size_t ndistinct = 0;
    for (size_t i = 0; i < run->nranks; i++) {
        const tml_rank *r = &run->ranks[i];
        if (run->world_size <= 0 && r->info.world_size > ws &&
            r->info.world_size <= TML_MAX_WORLD_SIZE)
            ws = r->info.world_size;
        if (run->nnodes <= 0 && r->info.nnodes > nn && r->info.nnodes <= TML_MAX_WORLD_SIZE)
            nn = r->info.nnodes;
        if (!has_node(nodes, ndistinct, r->info.node_rank))
            nodes[ndistinct++] = r->info.node_rank;
    }
    if (ws < (int32_t)run->nranks)
        ws = (int32_t)run->nranks;
    if (nn < (int32_t)ndistinct)
        nn = (int32_t)ndistinct;
    m->world_size = ws;
    m->nodes_reported = (int32_t)ndistinct;
    m->nodes_expected = nn;
    rank_counters(m, run);
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

    /* Resource sections: samples, per-step memory, their rules. Without
     * ranks, node 0's host as the launcher sampled it. */
    if (ndistinct == 0 &&
        tml__series_find(&run->samples, 0, -1, -1, TML_S_HOST_CPU_PERCENT))
        nodes[ndistinct++] = 0;
    if (tml__report_resources(m, nodes, ndistinct) < 0 || mem_rows(m) < 0)
        goto fail;
    /* the step-time rules, knowing what the resource sections found */
    step_rule_inputs(m);
    tml__diag_step_time(&m->win, &m->th, &m->st);
    ended_early(m);
    tml__diag_run_verdict(&m->st, m->gpu_util_percent, &m->th, &m->verdict);
    if (m->watch)
        tml__diag_watch(&m->st.primary, &m->verdict);
    tml__report_also(m);
    tml__report_deep_dive(m);
    free(nodes);
    return tml__report_derive(m);

fail:
    free(nodes);
    return TML_ENOMEM;
}

void tml__report_model_release(tml_report_model *m)
{
    free(m->mem_rows);
    tml__window_release(&m->win);
    if (m->has_cpu_win)
        tml__window_release(&m->cpu_win);
    free(m->missing_ranks);
    free(m->nodes);
    free(m->procs);
    tml__report_resources_release(m);
}

int tml__report_print(const tml_report_model *m, tml_strbuf *text, tml_strbuf *json)
{
    tml_strbuf box = TML_STRBUF_INIT;
    int err = 0;

    tml__report_box(m, &box);
    if (box.failed) {
        err = TML_ENOMEM;
        goto done;
    }
    /* the box shows names the user's code chose (a model's class): no
     * control sequence of them in final_summary.txt, the JSON's "text" or
     * on the terminal */
    box.len = tml__utf8_printable(box.buf, box.len);
    if (text)
        tml__sb_add(text, box.buf, box.len);
    if (json)
        tml__report_json(m, box.buf, json);
    if ((text && text->failed) || (json && json->failed))
        err = TML_ENOMEM;
done:
    tml__sb_release(&box);
    return err;
}

int tml__report_build(const tml_run *run, const tml_report_opts *o,
                      tml_strbuf *text, tml_strbuf *json)
{
    tml_report_model m;
    int err = tml__report_model_init(&m, run, o);
    if (err == 0)
        err = tml__report_print(&m, text, json);
    tml__report_model_release(&m);
    return err;
}
