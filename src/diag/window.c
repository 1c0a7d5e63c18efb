/*
 * window.c - the analysed window: which steps count and what they average.
 *
 * A verdict is only as good as the steps it is computed over, so this file
 * decides three things before any rule runs.
 *
 * Which steps. Ranks run in lock-step in data-parallel training, so a step
 * is compared across ranks by its id: the common steps are the ids every
 * rank (that sent steps at all) reported. A step aborted on any rank (an
 * exception left the bracket) is left out on all of them: its timings stop
 * half-way. The window is then the last N common steps after the warm-up.
 * A long run's records between its first and its last steps are no longer
 * in memory (model/run.h): they are counted as common when every rank
 * dropped some (the fewest dropped, less aborted ones), not compared.
 *
 * Warm-up. The first steps of a run pay for compilation, autotuning, lazy
 * allocation and worker start-up; averaging them in would blame the input
 * pipeline for cuDNN autotuning. We leave out the longest leading run of
 * steps that are clearly slower than the run's typical step: slower than
 * median + max(0.5 * median, 4 * MAD) of the whole series (the slowest rank
 * per step id), and at most ceil(10%) of the steps, never more than 50 (and
 * none when fewer than 3 steps exist). A contiguous prefix, not every
 * outlier: a periodically slow step later in the run (a worker's batch
 * arriving late) is the run's behaviour, not warm-up, and must be seen.
 *
 * Which clock. CUDA-event durations are what the GPU actually did; CPU
 * durations can hide asynchronous kernels. We diagnose on the GPU clock only
 * when every window step of every rank carries GPU figures; a mix would
 * compare numbers of different kinds. (A few leading steps taken before GPU
 * timing was set up count as warm-up: see gpu_late_start.) The DataLoader fetch and the untraced
 * gap stay on the CPU clock either way.
 *
 * Missing versus zero: what a step is made of, and which phases count as
 * not measured, is the one step breakdown of model/breakdown.h, applied
 * with the phases never observed over the window.
 */
#include "diag/window.h"
#include "base/stats.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* A rank's record as the passes across ranks need it: its step id, where
 * it is and the few figures they compare. One pass in order over a rank's
 * records builds its keys; the passes across ranks then read keys (a
 * column at a time, in order), not the records. */
typedef struct step_key {
    uint64_t step;
    uint32_t idx;            /* in the rank's records */
    uint32_t flags;          /* the record's, KEY_GPU when it has GPU timing */
    double warm;             /* Fetch + traced, CPU clock: the warm-up series */
    double wait;             /* an epoch start's wait: Fetch, + the Untraced gap
                              * unless the loader's start was timed */
    double between;          /* the gap before a timed loader start: the script's */
    double culprit[2];       /* Backward + exposed communication, per clock */
} step_key;

#define KEY_GPU 0x80000000u

static int cmp_key(const void *a, const void *b)
{
    const step_key *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

size_t tml__warmup_count(const double *step_ns, size_t n)
{
    if (n < 3)
        return 0;
    double *tmp = malloc(n * sizeof(*tmp));
    if (!tmp)
        return 0;
    memcpy(tmp, step_ns, n * sizeof(*tmp));
    double med = tml__median(tmp, n);
    for (size_t i = 0; i < n; i++)
        tmp[i] = fabs(step_ns[i] - med);
    double mad = tml__median(tmp, n);
    free(tmp);

    double margin = 0.5 * med > 4.0 * mad ? 0.5 * med : 4.0 * mad;
    double limit = med + margin;
    size_t cap = (n + 9) / 10;
    if (cap > 50)
        cap = 50;
    size_t k = 0;
    while (k < cap && step_ns[k] > limit)
        k++;
    return k;
}

static int64_t nonneg(int64_t v)
{
    return v > 0 ? v : 0;
}

/* Duration of phase p in record s on the chosen clock (never negative). */
static double phase_on(const tml_step_record *s, int p, tml_clock clock)
{
    return (double)nonneg(clock == TML_CLOCK_GPU ? s->gpu_phase_ns[p] : s->phase_ns[p]);
}

static int has_gpu_figures(const tml_step_record *s)
{
    return s->gpu_traced_ns >= 0 || s->cuda_allocated_peak_bytes >= 0 ||
           s->cuda_reserved_peak_bytes >= 0;
}

/* The records of r a window of max_steps can use: all of them, or, past
 * its first lim.head and its last max_steps + a quarter + 64 (ranks a few
 * steps apart), the records between are left out (*skipped): counted as
 * common like a long run's dropped middle, not compared. */
static size_t usable(const tml_rank *r, size_t max_steps, size_t *skipped)
{
    size_t head = r->lim.head, tail = max_steps + max_steps / 4 + 64;
    *skipped = r->nsteps > head + tail ? r->nsteps - head - tail : 0;
    return head;
}

/* A rank's keys sorted by step id, the first record of each id kept
 * (records arrive in step order, so usually no sort); *gpu |= any record
 * with GPU figures. Records [head, head + skipped) are left out. */
static step_key *sorted_keys(const tml_rank *r, size_t head, size_t skipped, size_t *out_n,
                             int *gpu)
{
    size_t n = r->nsteps - skipped;
    *out_n = 0;
    step_key *keys = malloc((n ? n : 1) * sizeof(*keys));
    if (!keys)
        return NULL;
    int sorted = 1;
    for (size_t j = 0; j < n; j++) {
        size_t i = j < head || !skipped ? j : j + skipped;
        const tml_step_record *s = &r->steps[i];
        step_key *k = &keys[j];
        k->step = s->step;
        k->idx = (uint32_t)i;
        k->flags = s->flags | (s->gpu_traced_ns >= 0 ? KEY_GPU : 0);
        /* in double: two int64 durations from a wire may overflow */
        k->warm = (double)nonneg(s->phase_ns[TML_PHASE_INPUT]) + (double)nonneg(s->traced_ns);
        double gap = s->gap_ns > 0 ? (double)s->gap_ns : 0;
        int timed = (s->flags & TML_STEP_LOADER_START) != 0;
        k->wait = (double)s->phase_ns[TML_PHASE_INPUT] + (timed ? 0 : gap);
        k->between = timed ? gap : 0;
        for (int c = 0; c < 2; c++)
            k->culprit[c] = phase_on(s, TML_PHASE_BACKWARD, (tml_clock)c) +
                            phase_on(s, TML_PHASE_COMM, (tml_clock)c);
        *gpu |= has_gpu_figures(s);
        sorted = sorted && (j == 0 || keys[j - 1].step < k->step);
    }
    if (!sorted)
        qsort(keys, n, sizeof(*keys), cmp_key);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || keys[m - 1].step != keys[i].step)
            keys[m++] = keys[i];
    *out_n = m;
    return keys;
}

static void rank_empty(tml_rank_window *rw, const tml_rank *r)
{
    memset(rw, 0, sizeof(*rw));
    rw->rank = r->info.rank;
    rw->node = r->info.node_rank;
    rw->local_rank = r->info.local_rank;
    rw->loader_known = r->info.loader_known != 0;
    rw->loader_workers = r->info.loader_workers;
    rw->loader_pin_memory = r->info.loader_pin_memory;
    rw->cpu_count = r->info.cpu_count;
    for (int m = 0; m < TML_M_COUNT; m++)
        rw->avg_ns[m] = NAN;
    rw->step_median_ns = rw->step_p90_ns = NAN;
    rw->step_stddev_ns = rw->step_mad_ns = NAN;
    rw->rss_bytes = rw->cuda_allocated_bytes = rw->cuda_reserved_bytes = NAN;
    rw->comm_bytes_per_step = rw->comm_bytes_per_s = rw->comm_collectives_per_step = NAN;
    rw->samples_per_step = rw->samples_per_s = rw->tokens_per_step = rw->tokens_per_s = NAN;
    rw->flops_per_step = rw->flops_per_s = rw->peak_flops = NAN;
    rw->cpu_percent = rw->runq_wait_percent = NAN;
    rw->missing = TML_PHASES_ALL;
    rw->overhead_ns_per_step = r->stats.overhead_ns_per_step;
    rw->records_dropped = r->stats.records_dropped;
    rw->events_dropped = r->stats.events_dropped;
    rw->has_gpu = r->past_gpu;
}

/* Block medians of the window's Step Times st (window order), into rw;
 * tmp has room for nwin values. */
static void block_medians(tml_rank_window *rw, const double *st, size_t nwin, double *tmp)
{
    size_t nb = nwin / TML_STEP_BLOCK_MIN;
    if (nb > TML_STEP_BLOCKS)
        nb = TML_STEP_BLOCKS;
    for (size_t b = 0; b < nb; b++) {
        size_t from = b * nwin / nb, to = (b + 1) * nwin / nb;
        memcpy(tmp, st + from, (to - from) * sizeof(*tmp));
        rw->block_ns[b] = tml__median(tmp, to - from);
    }
    rw->nblocks = nb;
}

/* Averages of one rank over the window rows (idx[j * stride + col]): the
 * step breakdown (model/breakdown.h) summed over the steps, then the
 * phases never observed in the window marked missing (one pass over the
 * records). idx: the window's records of r, in order. */
/* What a rank's window steps counted of one figure (samples, tokens or
 * FLOPs): the total, how many steps and their wall time. */
typedef struct counted {
    double total, steps, wall_ns;
} counted;

static void count(counted *c, int64_t v, double wall_ns)
{
    if (v <= 0)
        return;
    c->total += (double)v;
    c->steps++;
    c->wall_ns += wall_ns;
}

static void rate(const counted *c, double *per_step, double *per_s)
{
    if (c->steps > 0 && c->wall_ns > 0) {
        *per_step = c->total / c->steps;
        *per_s = c->total / (c->wall_ns / 1e9);
    }
}

static int rank_fill(tml_rank_window *rw, const tml_rank *r, const uint32_t *idx,
                     size_t nwin, tml_clock clock)
{
    counted samples = {0}, tokens = {0}, flops = {0};
    double sum[TML_M_COUNT] = {0}, v[TML_M_COUNT];
    double rss = 0, alloc = 0, resv = 0, comm_bytes = 0, comm_ns = 0, comm_count = 0;
    size_t n_gap = 0, n_rss = 0, n_alloc = 0, n_resv = 0;
    uint32_t observed = 0;
    double *st = NULL;

    if (nwin == 0)
        return 0;
    st = malloc(2 * nwin * sizeof(*st));     /* the step times, and room to sort */
    if (!st)
        return TML_ENOMEM;
    for (size_t j = 0; j < nwin; j++) {
        const tml_step_record *s = &r->steps[idx[j]];
        observed |= s->observed;
        tml__step_breakdown_all(s, clock, v);
        st[j] = v[TML_M_STEP];
        for (int m = 0; m < TML_M_COUNT; m++)
            if (m != TML_M_UNTRACED)
                sum[m] += v[m];
        if (!isnan(v[TML_M_UNTRACED])) {
            sum[TML_M_UNTRACED] += v[TML_M_UNTRACED];
            n_gap++;
        }
        double wall = v[TML_M_STEP] + (isnan(v[TML_M_UNTRACED]) ? 0 : v[TML_M_UNTRACED]);
        count(&samples, s->samples, wall);
        count(&tokens, s->tokens, wall);
        count(&flops, s->flops, wall);
        if (s->flops > 0) {
            rw->flops_how = s->flops_how;
            rw->peak_flops = s->peak_flops > 0 ? (double)s->peak_flops : NAN;
        }
        if (s->observed & TML_PHASE_BIT(TML_PHASE_COMM)) {
            comm_bytes += (double)s->comm_bytes;
            comm_ns += (double)s->comm_ns;
            comm_count += s->comm_count;
        }
        if (s->rss_bytes >= 0) {
            rss += (double)s->rss_bytes;
            n_rss++;
        }
        if (s->cuda_allocated_peak_bytes >= 0) {
            alloc += (double)s->cuda_allocated_peak_bytes;
            n_alloc++;
        }
        if (s->cuda_reserved_peak_bytes >= 0) {
            resv += (double)s->cuda_reserved_peak_bytes;
            n_resv++;
        }
    }

    /* the phases never observed in the window are missing, not zero */
    rw->missing = tml__phases_missing(observed, r->info.instrumented);
    tml__breakdown_mask(sum, rw->missing);
    rw->nsteps = nwin;
    for (int m = 0; m < TML_M_COUNT; m++)
        rw->avg_ns[m] = sum[m] / (double)nwin;
    rw->avg_ns[TML_M_UNTRACED] = n_gap ? sum[TML_M_UNTRACED] / (double)n_gap : NAN;
    rw->rss_bytes = n_rss ? rss / (double)n_rss : NAN;
    rw->cuda_allocated_bytes = n_alloc ? alloc / (double)n_alloc : NAN;
    rw->cuda_reserved_bytes = n_resv ? resv / (double)n_resv : NAN;
    if (!(rw->missing & TML_PHASE_BIT(TML_PHASE_COMM))) {
        rw->comm_bytes_per_step = comm_bytes / (double)nwin;
        rw->comm_collectives_per_step = comm_count / (double)nwin;
        rw->comm_bytes_per_s = comm_ns > 0 && comm_bytes > 0 ? comm_bytes / (comm_ns / 1e9) : NAN;
    }

    rate(&samples, &rw->samples_per_step, &rw->samples_per_s);
    rate(&tokens, &rw->tokens_per_step, &rw->tokens_per_s);
    rate(&flops, &rw->flops_per_step, &rw->flops_per_s);

    block_medians(rw, st, nwin, st + nwin);
    rw->step_median_ns = tml__median(st, nwin);
    rw->step_p90_ns = tml__percentile(st, nwin, 0.90);
    /* Noise: what `traceml compare` holds a change against. */
    double mean = sum[TML_M_STEP] / (double)nwin, var = 0;
    for (size_t j = 0; j < nwin; j++)
        var += (st[j] - mean) * (st[j] - mean);
    rw->step_stddev_ns = nwin > 1 ? sqrt(var / (double)(nwin - 1)) : 0;
    for (size_t j = 0; j < nwin; j++)
        st[j] = fabs(st[j] - rw->step_median_ns);
    rw->step_mad_ns = tml__median(st, nwin);
    free(st);
    return 0;
}

/* Median rank (nearest the median Step Time; ties to the upper median),
 * worst rank and skew. */
static void across_ranks(tml_window *w)
{
    double *v = NULL;
    size_t n = 0;

    w->median_rank = w->worst_rank = -1;
    w->skew = NAN;
    if (w->nranks == 0)
        return;
    v = malloc(w->nranks * sizeof(*v));
    if (!v)
        return;
    for (size_t i = 0; i < w->nranks; i++) {
        double s = w->ranks[i].avg_ns[TML_M_STEP];
        if (!isnan(s))
            v[n++] = s;
    }
    double med = tml__median(v, n);
    free(v);
    if (n == 0)
        return;
    for (size_t i = 0; i < w->nranks; i++) {
        double s = w->ranks[i].avg_ns[TML_M_STEP];
        if (isnan(s))
            continue;
        if (w->median_rank < 0) {
            w->median_rank = (int)i;
        } else {
            double cur = w->ranks[w->median_rank].avg_ns[TML_M_STEP];
            double d = fabs(s - med), dc = fabs(cur - med);
            /* Ties go to the upper median (the larger Step Time, then the
             * higher rank), as the straggler's victim does. */
            if (d < dc || (d == dc && s >= cur))
                w->median_rank = (int)i;
        }
        if (w->worst_rank < 0 || s > w->ranks[w->worst_rank].avg_ns[TML_M_STEP])
            w->worst_rank = (int)i;
    }
    double m = w->ranks[w->median_rank].avg_ns[TML_M_STEP];
    double worst = w->ranks[w->worst_rank].avg_ns[TML_M_STEP];
    if (m > 0)
        w->skew = (worst - m) / m;
}

/* The sum over ranks of a rate (the field at `off` of tml_rank_window),
 * NAN when no rank has it. */
static double sum_over_ranks(const tml_window *w, size_t off)
{
    double sum = NAN;
    for (size_t i = 0; i < w->nranks; i++) {
        double v = *(const double *)((const char *)&w->ranks[i] + off);
        if (!isnan(v))
            sum = isnan(sum) ? v : sum + v;
    }
    return sum;
}

/* The run's throughput: the sums over ranks, the median rank's per step,
 * and MFU over the ranks whose device has a peak (what they achieved over
 * the sum of their peaks). */
static void throughput(tml_window *w)
{
    w->samples_per_s = sum_over_ranks(w, offsetof(tml_rank_window, samples_per_s));
    w->tokens_per_s = sum_over_ranks(w, offsetof(tml_rank_window, tokens_per_s));
    w->flops_per_s = sum_over_ranks(w, offsetof(tml_rank_window, flops_per_s));
    if (w->median_rank >= 0) {
        const tml_rank_window *m = &w->ranks[w->median_rank];
        w->samples_per_step = m->samples_per_step;
        w->tokens_per_step = m->tokens_per_step;
        w->flops_per_step = m->flops_per_step;
        w->flops_how = m->flops_how;
    }
    double done = 0, peak = 0;
    for (size_t i = 0; i < w->nranks; i++) {
        const tml_rank_window *r = &w->ranks[i];
        if (!isnan(r->flops_per_s) && r->peak_flops > 0) {
            done += r->flops_per_s;
            peak += r->peak_flops;
        }
    }
    w->peak_flops = peak > 0 ? peak : NAN;
    w->mfu = peak > 0 ? done / peak : NAN;
}

void tml__window_release(tml_window *w)
{
    free(w->ranks);
    memset(w, 0, sizeof(*w));
    w->median_rank = w->worst_rank = -1;
    w->skew = NAN;
    w->host_cpu_percent = NAN;
    w->samples_per_s = w->tokens_per_s = w->flops_per_s = w->peak_flops = w->mfu = NAN;
    w->samples_per_step = w->tokens_per_step = w->flops_per_step = NAN;
    tml__contention_init(&w->contention);
}

static int window_compute(const tml_run *run, size_t max_steps, int allow_gpu,
                          tml_window *w);

int tml__window_compute(const tml_run *run, size_t max_steps, tml_window *w)
{
    return window_compute(run, max_steps, 1, w);
}

int tml__window_compute_cpu(const tml_run *run, size_t max_steps, tml_window *w)
{
    return window_compute(run, max_steps, 0, w);
}

/* An empty window over the run: no steps, CPU clock, no median or worst rank. */
static void window_reset(tml_window *w, size_t max_steps)
{
    memset(w, 0, sizeof(*w));
    w->median_rank = w->worst_rank = -1;
    w->skew = NAN;
    w->host_cpu_percent = NAN;
    w->samples_per_s = w->tokens_per_s = w->flops_per_s = w->peak_flops = w->mfu = NAN;
    w->samples_per_step = w->tokens_per_step = w->flops_per_step = NAN;
    tml__contention_init(&w->contention);
    w->max_steps = max_steps ? max_steps : TML_WINDOW_DEFAULT_STEPS;
    w->clock = TML_CLOCK_CPU;
    w->epoch_start_wait_ns = NAN;
    w->between_epochs_ns = NAN;
}

/*
 * The common steps as a table: a row per step id, a column per active
 * rank (one that sent steps), each cell the index of that rank's key.
 * Columns are stored one after the other, so every pass across ranks
 * walks one rank's keys at a time and in order: at a thousand ranks a row
 * at a time would touch a thousand arrays per step.
 */
typedef struct table {
    size_t ncols;
    size_t *rank;            /* column k -> index in run->ranks */
    step_key **keys;         /* column k's keys, sorted by step id */
    size_t *nkeys;
    size_t *skipped;         /* column k's records left out between head and tail */
    uint32_t *cell;          /* cell[k * cap + j]: row j of column k */
    size_t cap, rows;
} table;

static uint32_t *column(const table *t, size_t k)
{
    return t->cell + k * t->cap;
}

static const step_key *key_at(const table *t, size_t k, size_t j)
{
    return &t->keys[k][column(t, k)[j]];
}

/* Keeps the rows listed in keep[0..n) (ascending), in every column. */
static void keep_rows(table *t, const size_t *keep, size_t n)
{
    for (size_t k = 0; k < t->ncols; k++) {
        uint32_t *c = column(t, k);
        for (size_t i = 0; i < n; i++)
            c[i] = c[keep[i]];
    }
    t->rows = n;
}

/* The window's cap for n active ranks (TML_WINDOW_CELLS). */
static void cap_for_ranks(tml_window *w, size_t n)
{
    if (n == 0 || w->max_steps * n <= TML_WINDOW_CELLS)
        return;
    size_t cap = TML_WINDOW_CELLS / n;
    w->max_steps = cap > TML_WINDOW_MIN_STEPS ? cap : TML_WINDOW_MIN_STEPS;
    w->limited_by = "ranks";
}

/* Every rank's empty window; the ranks that sent steps become the
 * columns, each with its keys. */
static int collect_ranks(const tml_run *run, tml_window *w, table *t)
{
    size_t active = 0;
    for (size_t i = 0; i < run->nranks; i++)
        active += run->ranks[i].nsteps > 0;
    cap_for_ranks(w, active);
    for (size_t i = 0; i < run->nranks; i++) {
        const tml_rank *r = &run->ranks[i];
        rank_empty(&w->ranks[i], r);
        if (r->nsteps == 0)
            continue;
        size_t k = t->ncols, head = usable(r, w->max_steps, &t->skipped[k]);
        t->keys[k] = sorted_keys(r, head, t->skipped[k], &t->nkeys[k], &w->ranks[i].has_gpu);
        if (!t->keys[k])
            return TML_ENOMEM;
        t->rank[t->ncols++] = i;
    }
    return 0;
}

/* The common steps: the ids every column reported, none aborted, as the
 * table's rows (the first column's ids are the candidates, each column
 * then strikes out those it lacks). Counts aborted ids. */
static int common_steps(table *t, tml_window *w)
{
    size_t n = t->nkeys[0], m = 0;
    t->cap = n;
    t->cell = malloc(n * t->ncols * sizeof(*t->cell));
    uint8_t *state = calloc(n, 1);       /* 1 missing somewhere, 2 aborted somewhere */
    size_t *keep = malloc(n * sizeof(*keep));
    if (!t->cell || !state || !keep) {
        free(state);
        free(keep);
        return TML_ENOMEM;
    }
    for (size_t k = 0; k < t->ncols; k++) {
        const step_key *f = t->keys[k];
        uint32_t *c = column(t, k);
        size_t at = 0;                    /* ids ascend in both lists */
        for (size_t j = 0; j < n; j++) {
            if (state[j] & 1)
                continue;
            uint64_t id = t->keys[0][j].step;
            while (at < t->nkeys[k] && f[at].step < id)
                at++;
            if (at == t->nkeys[k] || f[at].step != id) {
                state[j] |= 1;
                continue;
            }
            c[j] = (uint32_t)at;
            if (f[at].flags & TML_STEP_ABORTED)
                state[j] |= 2;
        }
    }
    for (size_t j = 0; j < n; j++) {
        if (state[j] == 2)
            w->aborted_steps++;
        else if (state[j] == 0)
            keep[m++] = j;
    }
    keep_rows(t, keep, m);
    free(state);
    free(keep);
    w->common_steps = m;
    return 0;
}

/* 1 when every column's record of rows from..to has GPU timing. */
static int rows_on_gpu(const table *t, size_t from, size_t to)
{
    for (size_t k = 0; k < t->ncols; k++)
        for (size_t j = from; j < to; j++)
            if (!(key_at(t, k, j)->flags & KEY_GPU))
                return 0;
    return 1;
}

/* GPU timing is often set up during the first step (CUDA initialises
 * lazily), so the first few steps may lack GPU figures while every later
 * one has them. Those few (at most GPU_LATE_MAX, and only when all later
 * common steps have GPU figures) count as warm-up rather than sending the
 * whole run to the CPU clock. */
#define GPU_LATE_MAX 5

static size_t gpu_late_start(const table *t, size_t from)
{
    size_t k = 0;
    while (from + k < t->rows && !rows_on_gpu(t, from + k, from + k + 1))
        k++;
    if (k == 0 || k > GPU_LATE_MAX || from + k >= t->rows)
        return 0;
    return rows_on_gpu(t, from + k, t->rows) ? k : 0;
}

/* Warm-up over the slowest rank's CPU step time per common step, plus the
 * leading steps that lack GPU figures when the GPU clock is allowed. */
static int warmup_steps(const table *t, int allow_gpu, tml_window *w)
{
    double *series = calloc(t->rows, sizeof(*series));
    if (!series)
        return TML_ENOMEM;
    for (size_t k = 0; k < t->ncols; k++)
        for (size_t j = 0; j < t->rows; j++) {
            double v = key_at(t, k, j)->warm;
            if (v > series[j])
                series[j] = v;
        }
    w->warmup_steps = tml__warmup_count(series, t->rows);
    free(series);
    if (allow_gpu)
        w->warmup_steps += gpu_late_start(t, w->warmup_steps);
    return 0;
}

/* Epoch starts after warm-up leave the table; their wait (the longest of
 * the row) and the script's time before them (the longest too) are
 * averaged into the window: the wait over every epoch start, the time
 * before over those that follow a step (the run's first epoch follows no
 * step, so no validation or checkpoint of the script came before it). */
static int drop_epoch_starts(table *t, tml_window *w)
{
    size_t n = t->rows, from = w->warmup_steps, m = 0;
    double *wait = calloc(n ? 2 * n : 1, sizeof(*wait)), sum = 0, between = 0;
    size_t nbetween = 0;
    double *pre = wait + n;     /* the row's longest time before its loader started */
    uint8_t *start = calloc(n ? n : 1, 1);
    size_t *keep = calloc(n ? n : 1, sizeof(*keep));
    if (!wait || !start || !keep) {
        free(wait);
        free(start);
        free(keep);
        return TML_ENOMEM;
    }
    for (size_t k = 0; k < t->ncols; k++)
        for (size_t j = from; j < n; j++) {
            const step_key *s = key_at(t, k, j);
            start[j] |= (s->flags & TML_STEP_EPOCH_START) != 0;
            if (s->wait > wait[j])
                wait[j] = s->wait;
            if (s->between > pre[j])
                pre[j] = s->between;
        }
    for (size_t j = 0; j < n; j++) {
        if (!start[j]) {
            keep[m++] = j;
            continue;
        }
        w->epoch_start_steps++;
        sum += wait[j];
        if (j > 0) {
            between += pre[j];
            nbetween++;
        }
    }
    keep_rows(t, keep, m);
    if (w->epoch_start_steps) {
        w->epoch_start_wait_ns = sum / (double)w->epoch_start_steps;
        w->between_epochs_ns = nbetween ? between / (double)nbetween : 0;
    }
    free(wait);
    free(start);
    free(keep);
    return 0;
}

/* Steps the deep dive profiled (TML_STEP_DEEP_DIVE on any rank) leave the
 * table before warm-up is found: the profiler's cost is the window's, not
 * the run's, and a slow profiled step must not look like warm-up. */
static int drop_deep_dive(table *t, tml_window *w)
{
    size_t n = t->rows, m = 0;
    uint8_t *hit = calloc(n ? n : 1, 1);
    size_t *keep = calloc(n ? n : 1, sizeof(*keep));
    if (!hit || !keep) {
        free(hit);
        free(keep);
        return TML_ENOMEM;
    }
    for (size_t k = 0; k < t->ncols; k++)
        for (size_t j = 0; j < n; j++)
            hit[j] |= (key_at(t, k, j)->flags & TML_STEP_DEEP_DIVE) != 0;
    for (size_t j = 0; j < n; j++) {
        if (!hit[j]) {
            keep[m++] = j;
            continue;
        }
        uint64_t id = key_at(t, 0, j)->step;
        if (!w->deep_dive_steps++ || id < w->deep_dive_first)
            w->deep_dive_first = id;
        if (id > w->deep_dive_last)
            w->deep_dive_last = id;
    }
    if (m < n)
        keep_rows(t, keep, m);
    free(hit);
    free(keep);
    return 0;
}

/* The dropped middle of a long run (model/run.h), and the records left
 * out between head and tail (usable): counted as common when every active
 * rank dropped some (the fewest, less aborted ones), not compared. When
 * the ranks keep fewer records than the window asks, the memory budget
 * limited it. */
static void count_dropped(const tml_run *run, const table *t, tml_window *w)
{
    uint64_t past = UINT64_MAX, past_aborted = 0;
    for (size_t k = 0; k < t->ncols; k++) {
        const tml_rank *r = &run->ranks[t->rank[k]];
        uint64_t clean = r->past_steps - r->past_aborted + t->skipped[k];
        if (r->past_steps && r->lim.keep < w->max_steps && w->window_steps < w->max_steps)
            w->limited_by = "memory";
        if (clean < past)
            past = clean;
        if (r->past_aborted > past_aborted)
            past_aborted = r->past_aborted;
    }
    if (t->ncols > 0 && past > 0) {
        w->common_steps += (size_t)past;
        w->aborted_steps += (size_t)past_aborted;
    }
}

/* Per-step straggler culprit: the rank that waited least in Backward and
 * its exposed communication (the all-reduce); ties to the lowest rank. */
static int count_culprits(const table *t, size_t start, tml_window *w)
{
    size_t n = t->rows - start;
    double *bv = malloc(n * sizeof(*bv));
    size_t *best = calloc(n, sizeof(*best));
    if (!bv || !best) {
        free(bv);
        free(best);
        return TML_ENOMEM;
    }
    for (size_t j = 0; j < n; j++)
        bv[j] = INFINITY;
    for (size_t k = 0; k < t->ncols; k++)
        for (size_t j = 0; j < n; j++) {
            double b = key_at(t, k, start + j)->culprit[w->clock];
            if (b < bv[j]) {
                bv[j] = b;
                best[j] = k;
            }
        }
    for (size_t j = 0; j < n; j++)
        w->ranks[t->rank[best[j]]].culprit_steps++;
    free(bv);
    free(best);
    return 0;
}

/* The first row the window may take: after the warm-up and, when records
 * between a rank's first ones and its last are gone (dropped or left out,
 * model/run.h), after every rank's first ones: the window is the run's
 * last steps, never its start joined to its end. */
static size_t after_head(const tml_run *run, const table *t, size_t from)
{
    uint64_t bound = 0;
    int gap = 0;
    for (size_t k = 0; k < t->ncols; k++) {
        const tml_rank *r = &run->ranks[t->rank[k]];
        if ((r->past_steps || t->skipped[k]) && r->lim.head > 0 && r->nsteps > r->lim.head) {
            uint64_t last = r->steps[r->lim.head - 1].step;
            bound = !gap || last > bound ? last : bound;
            gap = 1;
        }
    }
    while (gap && from < t->rows && key_at(t, 0, from)->step <= bound)
        from++;
    return from;
}

/* The table's rows, then the window: the last max_steps rows after the
 * warm-up and without epoch starts, its step ids and its clock (GPU only
 * when allowed and every window step of every rank has GPU timing). */
static int window_rows(const tml_run *run, table *t, int allow_gpu, tml_window *w,
                       size_t *start)
{
    *start = 0;
    if (t->ncols == 0)
        return 0;
    if (common_steps(t, w) < 0 || drop_deep_dive(t, w) < 0 ||
        (t->rows > 0 && warmup_steps(t, allow_gpu, w) < 0) ||
        drop_epoch_starts(t, w) < 0)
        return TML_ENOMEM;
    size_t from = after_head(run, t, w->warmup_steps);
    size_t avail = t->rows - from;
    w->window_steps = avail < w->max_steps ? avail : w->max_steps;
    *start = t->rows - w->window_steps;
    if (w->window_steps == 0)
        return 0;
    w->first_step = key_at(t, 0, *start)->step;
    w->last_step = key_at(t, 0, t->rows - 1)->step;
    w->clock = allow_gpu && rows_on_gpu(t, *start, t->rows) ? TML_CLOCK_GPU : TML_CLOCK_CPU;
    return 0;
}

/* Column k's window records, by index into the rank's records (into idx). */
static void window_records(const table *t, size_t k, size_t start, uint32_t *idx)
{
    for (size_t j = start; j < t->rows; j++)
        idx[j - start] = key_at(t, k, j)->idx;
}

static void table_release(table *t, size_t nranks)
{
    if (t->keys)
        for (size_t i = 0; i < nranks; i++)
            free(t->keys[i]);
    free(t->keys);
    free(t->nkeys);
    free(t->skipped);
    free(t->rank);
    free(t->cell);
}

/* num_workers=N of `traceml run --apply`'s settings ("num_workers=2,
 * prefetch_factor=4"), -1 when it sets none. */
static int32_t applied_workers(const char *s)
{
    for (const char *p = s; p && *p; p += strcspn(p, ","), p += *p == ',') {
        if (strncmp(p, "num_workers=", 12) != 0)
            continue;
        char *end;
        long v = strtol(p + 12, &end, 10);
        if (end != p + 12 && (*end == ',' || *end == '\0') && v >= 0 && v < 4096)
            return (int32_t)v;
    }
    return -1;
}

static int window_compute(const tml_run *run, size_t max_steps, int allow_gpu,
                          tml_window *w)
{
    table t = {0};
    uint32_t *idx = NULL;
    size_t start;

    window_reset(w, max_steps);
    w->launch = run->launch;
    w->applied_workers = applied_workers(run->applied);
    w->applied = w->applied_workers >= 0;
    if (run->nranks == 0)
        return 0;

    w->ranks = calloc(run->nranks, sizeof(*w->ranks));
    t.keys = calloc(run->nranks, sizeof(*t.keys));
    t.nkeys = calloc(run->nranks, sizeof(*t.nkeys));
    t.skipped = calloc(run->nranks, sizeof(*t.skipped));
    t.rank = calloc(run->nranks, sizeof(*t.rank));
    if (!w->ranks || !t.keys || !t.nkeys || !t.skipped || !t.rank)
        goto fail;
    w->nranks = run->nranks;
    if (collect_ranks(run, w, &t) < 0 || window_rows(run, &t, allow_gpu, w, &start) < 0)
        goto fail;
    if (w->window_steps < w->max_steps)   /* the run had fewer: not limited */
        w->limited_by = NULL;

    size_t nwin = w->window_steps;
    idx = malloc((nwin ? nwin : 1) * sizeof(*idx));
    if (!idx)
        goto fail;
    for (size_t k = 0; k < t.ncols; k++) {
        window_records(&t, k, start, idx);
        if (rank_fill(&w->ranks[t.rank[k]], &run->ranks[t.rank[k]], idx, nwin, w->clock) < 0)
            goto fail;
    }
    for (size_t i = 0; i < w->nranks; i++)
        w->missing |= w->ranks[i].nsteps ? w->ranks[i].missing : 0;
    if (nwin == 0)
        w->missing = 0;

    if (t.ncols >= 2 && nwin > 0 && !(w->missing & TML_PHASE_BIT(TML_PHASE_BACKWARD)) &&
        count_culprits(&t, start, w) < 0)
        goto fail;
    across_ranks(w);
    throughput(w);
    count_dropped(run, &t, w);
    free(idx);
    table_release(&t, run->nranks);
    return 0;

fail:
    free(w->ranks);
    w->ranks = NULL;
    w->nranks = 0;
    free(idx);
    table_release(&t, run->nranks);
    return TML_ENOMEM;
}
