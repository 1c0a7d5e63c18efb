/*
 * series.c - the per-step series embedded in final_summary.json ("series"),
 * from which the HTML report draws its charts.
 *
 * Why in the JSON and not read from telemetry.sqlite: `traceml view X.json
 * --html` must work from the summary file alone (mailed, attached to a CI
 * job, copied off a cluster without the database). So the summary carries
 * what the charts show, and nothing more: per rank, per step, the phases on
 * the diagnosis clock and the per-step memory.
 *
 * Size is bounded whatever the run length. Steps are grouped into buckets
 * of `bucket_steps` consecutive step ids, the same buckets for every rank,
 * and each bucket holds the mean of that rank's steps in it; the bucket
 * width is chosen so that a rank has at most SERIES_POINTS_MAX points and
 * all ranks together at most SERIES_POINTS_TOTAL. At most SERIES_RANKS_MAX
 * ranks are included (the median and worst rank always), the count of the
 * others is in "ranks_omitted". A 10,000-step, 8-rank run thus embeds 8 x
 * 500 points per array (docs/performance.md has the size).
 *
 * The rules of the window hold here too: a phase missing on a rank is a
 * null array, never zeros; on the GPU clock a step without GPU figures is
 * left out of its bucket's timing (its memory still counts); aborted steps
 * are left out. Unlike the window, the series covers the whole run (warm-up
 * included, the steps of a long run no longer in memory from the ranks'
 * step histories, model/history.h), and says where the window starts so a
 * chart can shade it.
 */
#include "report/model.h"
#include "base/jsonw.h"
#include "model/timeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SERIES_RANKS_MAX 64
#define SERIES_POINTS_MAX 600
#define SERIES_POINTS_MIN 60
#define SERIES_POINTS_TOTAL 4000

enum {
    S_STEP, S_INPUT, S_H2D, S_FWD, S_BWD, S_OPT, S_RESIDUAL, S_COMM, S_UNTRACED,
    S_RSS, S_ALLOC, S_RESV, S_COUNT
};

static const char *const s_names[S_COUNT] = {
    "step_time_ms", "input_wait_ms", "h2d_ms", "forward_ms", "backward_ms",
    "optimizer_ms", "residual_ms", "communication_ms", "untraced_ms", "rss_bytes",
    "peak_allocated_bytes", "peak_reserved_bytes"
};

/* Which of the window's ranks go into the series (indices, by rank). */
static size_t pick_ranks(const tml_window *w, size_t *out)
{
    size_t n = 0;
    if (w->nranks <= SERIES_RANKS_MAX) {
        for (size_t i = 0; i < w->nranks; i++)
            out[n++] = i;
        return n;
    }
    char *take = calloc(w->nranks, 1);
    if (!take)
        return 0;
    size_t want = SERIES_RANKS_MAX;
    if (w->median_rank >= 0) {
        take[w->median_rank] = 1;
        want--;
    }
    if (w->worst_rank >= 0 && !take[w->worst_rank]) {
        take[w->worst_rank] = 1;
        want--;
    }
    for (size_t i = 0; i < w->nranks && want > 0; i++)
        if (!take[i]) {
            take[i] = 1;
            want--;
        }
    for (size_t i = 0; i < w->nranks; i++)
        if (take[i])
            out[n++] = i;
    free(take);
    return n;
}

/* One rank's bucket means: vals[k * nb + b], NAN for empty buckets. The
 * steps dropped from memory come from the rank's step history (each of its
 * buckets joins the output bucket its first id falls in: the output bucket
 * is never narrower), the kept records are added one by one. */
static int fill_rank(const tml_rank *r, const tml_rank_window *rw, tml_clock clock,
                     uint64_t first, uint64_t bucket, size_t nb, double *vals)
{
    static const int of_series[S_COMM + 1] = {
        TML_M_STEP, TML_M_INPUT, TML_M_H2D, TML_M_FORWARD, TML_M_BACKWARD,
        TML_M_OPTIMIZER, TML_M_RESIDUAL, TML_M_COMM
    };
    tml_step_bucket *acc = calloc(nb, sizeof(*acc));
    if (!acc)
        return TML_ENOMEM;
    const tml_step_history *h = &r->past;
    for (size_t i = 0; i < h->nb; i++) {
        uint64_t at = (h->base + i * h->width - first) / bucket;
        tml__step_bucket_merge(&acc[at < nb ? at : nb - 1], &h->b[i]);
    }
    for (size_t i = 0; i < r->nsteps; i++) {
        const tml_step_record *s = &r->steps[i];
        if (s->step >= first && (s->step - first) / bucket < nb)
            tml__step_bucket_add(&acc[(s->step - first) / bucket], s);
    }
    for (size_t b = 0; b < nb; b++) {
        const tml_step_bucket *x = &acc[b];
        double v[TML_M_COUNT];
        for (int m = 0; m < TML_M_COUNT; m++)
            v[m] = x->n[clock] ? x->t[clock][m] / (double)x->n[clock] : NAN;
        /* missing phases are NAN in every bucket: null arrays */
        tml__breakdown_mask(v, rw->missing);
        for (int k = 0; k <= S_COMM; k++)
            vals[k * nb + b] = v[of_series[k]] / 1e6;
        vals[S_UNTRACED * nb + b] = x->n_gap ? x->gap / (double)x->n_gap / 1e6 : NAN;
        for (int k = 0; k < 3; k++)
            vals[(S_RSS + k) * nb + b] = x->n_mem[k] ? x->mem[k] / (double)x->n_mem[k] : NAN;
    }
    free(acc);
    return 0;
}

/* The step ids the picked ranks' series span (aborted steps left out),
 * and the widest history bucket among them. */
static void series_span(const tml_run *run, const size_t *pick, size_t np, uint64_t *first,
                        uint64_t *last, uint64_t *width)
{
    *first = UINT64_MAX;
    *last = 0;
    *width = 1;
    for (size_t k = 0; k < np; k++) {
        const tml_rank *r = &run->ranks[pick[k]];
        if (r->past.steps) {
            if (r->past.first < *first)
                *first = r->past.first;
            if (r->past.last > *last)
                *last = r->past.last;
            if (r->past.width > *width)
                *width = r->past.width;
        }
        for (size_t i = 0; i < r->nsteps; i++) {
            if (r->steps[i].flags & TML_STEP_ABORTED)
                continue;
            if (r->steps[i].step < *first)
                *first = r->steps[i].step;
            if (r->steps[i].step > *last)
                *last = r->steps[i].step;
        }
    }
}

static int all_nan(const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i]))
            return 0;
    return 1;
}

void tml__report_series(const tml_report_model *m, tml_strbuf *out)
{
    const tml_window *w = &m->win;
    const tml_run *run = m->run;
    size_t *pick = NULL;
    double *vals = NULL;
    uint64_t first, last, width;

    pick = calloc(w->nranks ? w->nranks : 1, sizeof(*pick));
    size_t np = pick ? pick_ranks(w, pick) : 0;
    series_span(run, pick, np, &first, &last, &width);
    if (np == 0 || first > last) {
        tml__sb_adds(out, "null");
        free(pick);
        return;
    }
    size_t per_rank = SERIES_POINTS_TOTAL / np;
    if (per_rank > SERIES_POINTS_MAX)
        per_rank = SERIES_POINTS_MAX;
    if (per_rank < SERIES_POINTS_MIN)
        per_rank = SERIES_POINTS_MIN;
    /* ceil((d + 1) / p) is d / p + 1: no overflow, whatever the step ids
     * (a span of 2^64 steps once wrapped to 0 and failed the report) */
    uint64_t d = last - first;
    uint64_t bucket = d / per_rank + 1;
    if (bucket < width)
        bucket = width;
    size_t nb = (size_t)(d / bucket + 1);
    vals = malloc(S_COUNT * nb * sizeof(*vals));
    if (!vals) {
        out->failed = 1;
        goto done;
    }

    tml__sb_addf(out, "{\"clock\": \"%s\", \"bucket_steps\": %llu, \"first_step\": %llu, "
                 "\"last_step\": %llu, ",
                 w->clock == TML_CLOCK_GPU ? "gpu" : "cpu", (unsigned long long)bucket,
                 (unsigned long long)first, (unsigned long long)last);
    if (w->window_steps)
        tml__sb_addf(out, "\"window_first_step\": %llu, \"window_last_step\": %llu, ",
                     (unsigned long long)w->first_step, (unsigned long long)w->last_step);
    else
        tml__sb_adds(out, "\"window_first_step\": null, \"window_last_step\": null, ");
    tml__sb_addf(out, "\"ranks_omitted\": %zu,\n    \"step\": [", w->nranks - np);
    for (size_t b = 0; b < nb; b++)
        tml__sb_addf(out, "%s%llu", b ? "," : "", (unsigned long long)(first + b * bucket));
    tml__sb_adds(out, "],\n    \"ranks\": [");
    for (size_t k = 0; k < np; k++) {
        const tml_rank_window *rw = &w->ranks[pick[k]];
        if (fill_rank(&run->ranks[pick[k]], rw, w->clock, first, bucket, nb, vals) < 0) {
            out->failed = 1;
            goto done;
        }
        tml__sb_addf(out, "%s\n      {\"rank\": %d, \"node\": %d, \"label\": \"R%d/N%d\"",
                     k ? "," : "", (int)rw->rank, (int)rw->node, (int)rw->rank, (int)rw->node);
        for (int s = 0; s < S_COUNT; s++) {
            const double *v = vals + (size_t)s * nb;
            tml__sb_addf(out, ",\n       \"%s\": ", s_names[s]);
            if (all_nan(v, nb)) {
                tml__sb_adds(out, "null");
                continue;
            }
            tml__sb_addc(out, '[');
            for (size_t b = 0; b < nb; b++) {
                if (b)
                    tml__sb_addc(out, ',');
                tml__json_add_num(out, v[b], s >= S_RSS ? 0 : 3, 1);
            }
            tml__sb_addc(out, ']');
        }
        tml__sb_addc(out, '}');
    }
    tml__sb_adds(out, "\n    ],\n    \"system\": ");
    tml__timeline_json(run->timeline, out);
    tml__sb_addc(out, '}');
done:
    free(pick);
    free(vals);
}
